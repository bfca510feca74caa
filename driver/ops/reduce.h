// Reductions and broadcasts (docs/ABI.md section 4.8): reduce_sum, broadcast_add, add_broadcast_pe.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void reduce_sum(DeviceCall& call, void* in, void* out, int b, int m, int n);
void broadcast_add(DeviceCall& call, void* a, void* bias, void* c, int b, int m, int n);
void add_broadcast_pe(DeviceCall& call, void* x, void* pe, void* y, int b, int s, int e);

}  // namespace aethercl::ops
