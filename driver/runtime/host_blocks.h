// Host blocks of the host-memory ("simulated") API: real, 64-byte aligned host allocations whose
// start addresses are handed to clients and registered, so a client may treat an address as a
// pointer while every address it passes back is validated, never blindly dereferenced.
//
// Contract: thread-safe and process-wide, independent of device initialisation (blocks survive
// shutdown_driver). Only a block's start address is valid; an address inside a block is refused.
// Lookups hand out shared ownership, so a block freed by one thread while another copies from it
// stays allocated until that copy is done. Freed blocks are quarantined (kept allocated) for the
// next kQuarantineBlocks frees or kQuarantineBytes, so their addresses are not reissued at once;
// after that the C++ allocator may hand an address out again and a stale one can alias a newer
// block (they are real pointers).
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
  static constexpr std::size_t kQuarantineBlocks = 256;
  static constexpr std::uint64_t kQuarantineBytes = 64ull << 20;

 private:
  [[noreturn]] void refuse(std::uint64_t address, const char* argument) const;  // mutex_ held

  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::shared_ptr<HostBlock>> blocks_;  // start address -> block
  std::deque<std::uint64_t> freed_order_;                        // oldest first
  std::unordered_map<std::uint64_t, std::size_t> freed_;         // address -> times in order_
  std::deque<std::shared_ptr<HostBlock>> quarantine_;            // freed, still allocated
  std::uint64_t quarantine_bytes_ = 0;
};

}  // namespace aethercl
