// SGD / AdamW updates and global gradient-norm clipping on the device (kernels/optim.cl).
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

#include <cstddef>

namespace aethercl::ops::train {

void optimizer_step(DeviceCall& call, const aethercl_optimizer_desc& desc);
void clip_grad_norm(DeviceCall& call, int num_tensors, void* const* grads,
                    const std::size_t* counts, float max_norm, void* total_norm);

// Chunking of a sum over n elements into fixed chunks (independent of the launch size, so the
// result is the same whatever the device's group count): chunk elements each, `chunks` of them.
struct Chunks {
  std::uint64_t chunk, chunks;
};
Chunks chunks_of(std::uint64_t n);

}  // namespace aethercl::ops::train
