// Scratch device memory: a pool block on the call's stream for the scope of an op.
#include "runtime/scratch.h"

#include "support/error.h"
#include "support/log.h"

#include <algorithm>

namespace aethercl {

Scratch::Scratch(DeviceCall& call, std::uint64_t bytes)
    : device_(call.device()),
      block_(call.device().allocate(call.stream(), std::max<std::uint64_t>(bytes, 4))),
      bytes_(std::max<std::uint64_t>(bytes, 4)) {}

namespace {

PoolBlock acquire_intrinsic(DeviceCall& call, std::uint64_t bytes, std::string_view purpose) {
  try {
    return call.device().allocate(call.stream(), bytes);
  } catch (const Error& error) {
    if (error.status() != Status::kOutOfMemory) throw;
    fail(Status::kOutOfMemory, "{} needs {} bytes of device memory, which no path does without: "
         "{}", purpose, bytes, error.what());
  }
}

}  // namespace

Scratch::Scratch(DeviceCall& call, std::uint64_t bytes, std::string_view purpose)
    : device_(call.device()),
      block_(acquire_intrinsic(call, std::max<std::uint64_t>(bytes, 4), purpose)),
      bytes_(std::max<std::uint64_t>(bytes, 4)) {}

Scratch::~Scratch() { device_.release_scratch(block_); }

PoolBlock ScratchBlocks::add(std::uint64_t bytes) {
  blocks_.push_back(call_.device().allocate(call_.stream(), std::max<std::uint64_t>(bytes, 4)));
  return blocks_.back();
}

void ScratchBlocks::release() noexcept {
  for (const PoolBlock& block : blocks_) {
    try {
      call_.device().release_scratch(block);
    } catch (const std::exception& error) {
      log().warn("device {}: a workspace block was not returned to the pool: {}",
                 call_.device().index(), error.what());
    }
  }
  blocks_.clear();
}

bool optional_scratch(std::optional<Scratch>& slot, DeviceCall& call, std::uint64_t bytes,
                      std::string_view purpose) {
  slot.reset();
  try {
    slot.emplace(call, bytes);
    return true;
  } catch (const Error& error) {
    if (error.status() != Status::kOutOfMemory) throw;
    log().debug("device {}: no room for {} bytes of {}; a path that needs less memory takes "
                "over ({})", call.device().index(), bytes, purpose, error.what());
    return false;
  }
}

bool out_of_memory(const std::exception& error) noexcept {
  const auto* ours = dynamic_cast<const Error*>(&error);
  return ours != nullptr && ours->status() == Status::kOutOfMemory;
}

}  // namespace aethercl
