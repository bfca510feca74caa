// Batch normalisation, training and evaluation, forward and backward (kernels/batchnorm.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void batchnorm_forward(DeviceCall& call, const aethercl_batchnorm_desc& desc);
void batchnorm_backward(DeviceCall& call, const aethercl_batchnorm_desc& desc);

}  // namespace aethercl::ops::train
