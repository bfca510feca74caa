// Host blocks of the host-memory ("simulated") API: real, 64-byte aligned host allocations whose
// start addresses are handed to clients and registered, so a client may treat an address as a
// pointer while every address it passes back is validated, never blindly dereferenced.
//
// Contract: thread-safe and process-wide, independent of device initialisation (blocks survive
// shutdown_driver). Only a block's start address is valid; an address inside a block is refused.
// Lookups hand out shared ownership, so a block freed by one thread while another copies from it
// stays allocated until that copy is done. Freed addresses may be handed out again by the C++
// allocator (they are real pointers), so a stale address can alias a newer block.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace aethercl {

class HostBlock {
 public:
  static constexpr std::size_t kAlignment = 64;

  // Throws Error(kOutOfMemory) when the host cannot provide the bytes. Contents are undefined.
  explicit HostBlock(std::uint64_t size);
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock();

  unsigned char* data() const { return data_; }
  std::uint64_t size() const { return size_; }  // bytes the client asked for
  std::uint64_t address() const { return reinterpret_cast<std::uintptr_t>(data_); }

 private:
  unsigned char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

class HostBlocks {
 public:
  // The registry the entry points use; never destroyed (blocks may outlive static destruction).
  static HostBlocks& instance();

  HostBlocks() = default;
  HostBlocks(const HostBlocks&) = delete;
  HostBlocks& operator=(const HostBlocks&) = delete;

  // A new registered block; throws Error(kInvalidArgument) for size 0, kOutOfMemory on failure.
  std::shared_ptr<HostBlock> allocate(std::uint64_t size);
  // The live block that starts at address. Throws Error naming `argument`: kInvalidArgument for 0,
  // kInvalidHandle for an address inside a block, an already freed or a never issued address.
  std::shared_ptr<HostBlock> find(std::uint64_t address, const char* argument) const;
  // Unregisters the block (its memory goes with the last user); throws like find().
  void free(std::uint64_t address, const char* argument);

  std::size_t live_count() const;
  std::uint64_t live_bytes() const;

  // How many freed addresses are remembered to tell "already freed" from "never issued".
  static constexpr std::size_t kRememberedFrees = 4096;

 private:
  [[noreturn]] void refuse(std::uint64_t address, const char* argument) const;  // mutex_ held

  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::shared_ptr<HostBlock>> blocks_;  // start address -> block
  std::deque<std::uint64_t> freed_order_;                        // oldest first
  std::unordered_map<std::uint64_t, std::size_t> freed_;         // address -> times in order_
};

}  // namespace aethercl
