// Row-wise op family (docs/ABI.md section 4.6): softmax, LayerNorm and their backward passes.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void softmax(DeviceCall& call, void* x, void* y, int num_rows, int row_size);
void softmax_backward(DeviceCall& call, void* dy, void* y, void* dx, int num_rows, int row_size);
// eps <= 0 is replaced by 1e-5 (docs/ABI.md section 3.6), in both directions.
void layernorm(DeviceCall& call, void* x, void* y, int num_rows, int row_size, float eps);
void layernorm_backward(DeviceCall& call, void* dy, void* x, void* dx, int num_rows, int row_size,
                        float eps);

}  // namespace aethercl::ops
