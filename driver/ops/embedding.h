// Embedding op family (docs/ABI.md section 4.8): row lookup and the accumulating scatter-add.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void embedding_lookup(DeviceCall& call, void* idx, void* w, void* out, int b, int s, int d, int v);
void embedding_backward(DeviceCall& call, void* d_out, void* idx, void* d_w, int b, int s, int d,
                        int v);

}  // namespace aethercl::ops
