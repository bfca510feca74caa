// Host block allocation (aligned operator new) and the address registry.
#include "runtime/host_blocks.h"

#include <vector>

#include "support/checked.h"
#include "support/error.h"

#include <pthread.h>

#include <cstddef>
#include <iterator>
#include <limits>
#include <new>

namespace aethercl {

HostBlock::HostBlock(std::uint64_t size) : size_(size) {
  // Whole cache lines, so the block's last line is not shared with another allocation.
  auto rounded = checked_add(size, kAlignment - 1);
  // No object may exceed PTRDIFF_MAX bytes; such sizes are refused without asking the allocator.
  constexpr auto kLargest = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max());
  if (!rounded || *rounded > kLargest) {
    fail(Status::kOutOfMemory, "{} bytes cannot be allocated on the host", size);
  }
  std::size_t bytes = static_cast<std::size_t>(*rounded / kAlignment * kAlignment);
  data_ = static_cast<unsigned char*>(
      ::operator new(bytes, std::align_val_t{kAlignment}, std::nothrow));
  if (data_ == nullptr) {
    fail(Status::kOutOfMemory, "host memory exhausted: {} bytes could not be allocated", size);
  }
}

HostBlock::~HostBlock() { ::operator delete(data_, std::align_val_t{kAlignment}); }

HostBlocks& HostBlocks::instance() {
  static HostBlocks* blocks = [] {
    static HostBlocks* created = new HostBlocks();
    // The registry lock is held across fork(), so a child never inherits it locked by a thread
    // that does not exist there: the host-block functions keep working in forked children.
    pthread_atfork([] { created->mutex_.lock(); }, [] { created->mutex_.unlock(); },
                   [] { created->mutex_.unlock(); });
    return created;
  }();
  return *blocks;
}

std::shared_ptr<HostBlock> HostBlocks::allocate(std::uint64_t size) {
  if (size == 0) fail(Status::kInvalidArgument, "size is 0 (blocks must be at least 1 byte)");
  auto block = std::make_shared<HostBlock>(size);
  std::lock_guard lock(mutex_);
  blocks_.emplace(block->address(), block);
  return block;
}

void HostBlocks::refuse(std::uint64_t address, const char* argument) const {
  if (address == 0) {
    fail(Status::kInvalidArgument, "{} is 0 (not an address from simulated_kernel_allocate)",
         argument);
  }
  auto after = blocks_.upper_bound(address);
  if (after != blocks_.begin()) {
    const HostBlock& block = *std::prev(after)->second;
    if (address - block.address() < block.size()) {
      fail(Status::kInvalidHandle,
           "{} 0x{:x} points {} bytes into the block at 0x{:x} ({} bytes); only a block's start "
           "address is valid",
           argument, address, address - block.address(), block.address(), block.size());
    }
  }
  if (freed_.count(address) != 0) {
    fail(Status::kInvalidHandle, "{} 0x{:x} was already freed", argument, address);
  }
  fail(Status::kInvalidHandle,
       "{} 0x{:x} was never returned by simulated_kernel_allocate or simulated_matrix_multiply",
       argument, address);
}

std::shared_ptr<HostBlock> HostBlocks::find(std::uint64_t address, const char* argument) const {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(address);
  if (it == blocks_.end()) refuse(address, argument);
  return it->second;
}

void HostBlocks::free(std::uint64_t address, const char* argument) {
  std::vector<std::shared_ptr<HostBlock>> evicted;  // destroyed after the lock is released
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(address);
  if (it == blocks_.end()) refuse(address, argument);
  // Quarantine: the memory stays allocated for a while, so the allocator cannot hand the same
  // address out again at once and a stale address keeps being recognised as freed.
  quarantine_bytes_ += it->second->size();
  quarantine_.push_back(std::move(it->second));
  blocks_.erase(it);
  while (quarantine_.size() > kQuarantineBlocks || quarantine_bytes_ > kQuarantineBytes) {
    quarantine_bytes_ -= quarantine_.front()->size();
    evicted.push_back(std::move(quarantine_.front()));
    quarantine_.pop_front();
  }
  ++freed_[address];
  freed_order_.push_back(address);
  if (freed_order_.size() > kRememberedFrees) {
    auto oldest = freed_.find(freed_order_.front());
    if (--oldest->second == 0) freed_.erase(oldest);
    freed_order_.pop_front();
  }
}

std::size_t HostBlocks::live_count() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

std::uint64_t HostBlocks::live_bytes() const {
  std::lock_guard lock(mutex_);
  std::uint64_t bytes = 0;
  for (const auto& [address, block] : blocks_) bytes += block->size();
  return bytes;
}

}  // namespace aethercl
