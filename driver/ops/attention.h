// Fused attention, portable form (kernels/attention.cl): forward and backward of
// aethercl_attention_desc.
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops {

void attention_forward(DeviceCall& call, const aethercl_attention_desc* desc);
void attention_backward(DeviceCall& call, const aethercl_attention_desc* desc);

}  // namespace aethercl::ops
