// Embedding op family (ABI.md 4.6): row lookup and the accumulating scatter-add backward.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void embedding_lookup(DeviceCall& call, void* idx, void* w, void* out, int b, int s, int d, int v);
void embedding_backward(DeviceCall& call, void* d_out, void* idx, void* d_w, int b, int s, int d,
                        int v);

}  // namespace aethercl::ops
