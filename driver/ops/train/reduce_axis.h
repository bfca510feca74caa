// Reductions over any one axis of a tensor of up to 4 dimensions, and their backward
// (kernels/reduce_axis.cl).
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops::train {

void reduce_axis(DeviceCall& call, int op, void* x, void* y, int ndim, const int* shape, int axis);
void reduce_axis_backward(DeviceCall& call, int op, void* x, void* dy, void* dx, int ndim,
                          const int* shape, int axis);

}  // namespace aethercl::ops::train
