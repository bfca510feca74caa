// LayerNorm / RMSNorm with optional affine parameters (kernels/norm.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void norm_forward(DeviceCall& call, const aethercl_norm_desc& desc);
void norm_backward(DeviceCall& call, const aethercl_norm_desc& desc);

}  // namespace aethercl::ops::train
