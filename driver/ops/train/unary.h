// Elementwise unary ops with scalar forms, and their backward (kernels/activation.cl).
#pragma once

#include "runtime/device_call.h"

#include <cstddef>

namespace aethercl::ops::train {

void unary(DeviceCall& call, int op, void* x, void* y, std::size_t count, float alpha);
void unary_backward(DeviceCall& call, int op, void* x, void* dy, void* dx, std::size_t count,
                    float alpha);

}  // namespace aethercl::ops::train
