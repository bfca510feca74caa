// Max and average 2-D pooling, forward and backward (kernels/pool.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void pool2d_forward(DeviceCall& call, const aethercl_pool2d_desc& desc);
void pool2d_backward(DeviceCall& call, const aethercl_pool2d_desc& desc);

}  // namespace aethercl::ops::train
