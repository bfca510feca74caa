// Mean squared error and cross-entropy with ignore_index / label smoothing (kernels/losses.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

#include <cstddef>

namespace aethercl::ops::train {

void mse_loss(DeviceCall& call, void* pred, void* target, void* loss, void* grad,
              std::size_t count, int reduction);
void cross_entropy(DeviceCall& call, const aethercl_cross_entropy_desc& desc);

}  // namespace aethercl::ops::train
