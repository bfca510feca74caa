// Broadcasting binary ops over up to 4 dimensions and their reduced gradients
// (kernels/broadcast.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void binary(DeviceCall& call, int op, const aethercl_broadcast_desc& desc);
void binary_backward(DeviceCall& call, int op, const aethercl_broadcast_desc& desc, void* dc,
                     void* da, void* db);

}  // namespace aethercl::ops::train
