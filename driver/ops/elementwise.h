// Elementwise op family (docs/ABI.md section 4.5).
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void add(DeviceCall& call, void* a, void* b, void* c, int n);
void mul(DeviceCall& call, void* a, void* b, void* c, int n);
void mul_backward(DeviceCall& call, void* dc, void* a, void* b, void* da, void* db, int n);
void gelu(DeviceCall& call, void* x, void* y, int n);
void gelu_backward(DeviceCall& call, void* x, void* dy, void* dx, int n);

}  // namespace aethercl::ops
