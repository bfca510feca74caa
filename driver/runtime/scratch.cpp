// Scratch device memory: a pool block on the call's stream for the scope of an op.
#include "runtime/scratch.h"

#include <algorithm>

namespace aethercl {

Scratch::Scratch(DeviceCall& call, std::uint64_t bytes)
    : device_(call.device()),
      block_(call.device().allocate(call.stream(), std::max<std::uint64_t>(bytes, 4))),
      bytes_(std::max<std::uint64_t>(bytes, 4)) {}

Scratch::~Scratch() { device_.release_scratch(block_); }

}  // namespace aethercl
