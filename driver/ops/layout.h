// Layout op family (docs/ABI.md section 4.7): 2-D, batched and axis-1/2 transposes.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void transpose(DeviceCall& call, void* in, void* out, int rows, int cols);
void transpose_backward(DeviceCall& call, void* dc, void* da, int rows_a, int cols_a);
void transpose_batched(DeviceCall& call, void* in, void* out, int batches, int d1, int d2);
void transpose_12_batched(DeviceCall& call, void* in, void* out, int b, int d1, int d2, int d3);

}  // namespace aethercl::ops
