// Gather and scatter-add along one axis of tensors of up to 4 dimensions (kernels/index.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops::train {

void gather(DeviceCall& call, const aethercl_index_desc& desc);
void scatter_add(DeviceCall& call, const aethercl_index_desc& desc);

}  // namespace aethercl::ops::train
