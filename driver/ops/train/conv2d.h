// 2-D convolution (NCHW, stride / padding / dilation / groups) through im2col, col2im and the
// GEMM engine (kernels/conv.cl, ops/gemm.h).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void conv2d_forward(DeviceCall& call, const aethercl_conv2d_desc& desc);
void conv2d_backward(DeviceCall& call, const aethercl_conv2d_desc& desc);

}  // namespace aethercl::ops::train
