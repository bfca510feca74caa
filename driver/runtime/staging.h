// Host staging for writes: the client's bytes are copied into driver-owned memory and the device
// copy is enqueued without waiting, so a write never drains the queue and the client's pointer
// is free to go when the call returns.
//
// Contract: the owning Device's mutex is held for every call.
#pragma once

#include "cl/handle.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace aethercl {

class Staging {
 public:
  // Writes at or above this size go straight through a blocking write (nothing to gain).
  static constexpr std::uint64_t kMaxStagedWrite = 32ull << 20;
  // Pending staged bytes beyond this make the next write wait for the oldest ones.
  static constexpr std::uint64_t kMaxPendingBytes = 128ull << 20;

  Staging() = default;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Enqueues the copy and returns its event (owned by the caller).
  cl_event write(cl_command_queue queue, cl_mem mem, std::uint64_t offset, std::uint64_t size,
                 const void* source);
  // Returns completed chunks to the free list; reports an execution error of a finished copy.
  void reclaim();
  // After the queue has finished: every chunk is free again.
  void reclaim_all() noexcept;

  std::uint64_t pending_bytes() const { return pending_bytes_; }
  std::uint64_t cached_bytes() const { return cached_bytes_; }

 private:
  struct Chunk {
    std::unique_ptr<unsigned char[]> data;
    std::uint64_t capacity = 0;
  };
  struct Pending {
    cl::Event done;
    Chunk chunk;
  };
  Chunk take_chunk(std::uint64_t size);
  void give_back(Chunk chunk) noexcept;

  std::deque<Pending> pending_;
  std::vector<Chunk> free_chunks_;
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t cached_bytes_ = 0;
};

}  // namespace aethercl
