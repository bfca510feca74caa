// Philox4x32-10 random fills and dropout (kernels/rng.cl).
#pragma once

#include "runtime/device_call.h"

#include <cstddef>
#include <cstdint>

namespace aethercl::ops::train {

void rng_fill(DeviceCall& call, void* buffer, std::size_t count, int distribution, float a,
              float b, std::uint64_t seed, std::uint64_t offset);
void dropout(DeviceCall& call, void* x, void* y, void* mask, std::size_t count, float p,
             std::uint64_t seed, std::uint64_t offset);
void dropout_backward(DeviceCall& call, void* dy, void* mask, void* dx, std::size_t count,
                      float p);

}  // namespace aethercl::ops::train
