// Optimiser op family (docs/ABI.md section 4.9): the Adam update.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

struct AdamHyper {
  int t;
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
};

void adam_update(DeviceCall& call, void* p, void* g, void* m, void* v, int n, const AdamHyper& h);

}  // namespace aethercl::ops
