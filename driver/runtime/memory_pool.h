// Per-device caching allocator: device buffers in size classes, reused after free.
//
// Contract: the owning Device's mutex is held for every call. Reuse is stream-ordered: every block
// has a home stream (the stream it was allocated on) and a freed block is handed out again at once
// only to allocations on that stream, whose later commands run after every earlier use. A block
// that other streams used as well comes back with events recorded on those streams at the free
// and is reused only once they have completed (PyTorch's record_stream rule). Blocks of a stream
// that was destroyed serve any stream once that stream's last work has completed.
#pragma once

#include "cl/handle.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace aethercl {

struct PoolBlock {
  cl_mem mem = nullptr;
  std::uint64_t capacity = 0;  // bytes actually allocated on the device (the size class)
  std::uint64_t stream = 0;    // home stream id (0: the default stream)
  // Memory the pool does not own (a vendor engine's, vendor/engine_memory.h; capacity 0): never
  // cached; release() waits for its events on the host, then drops this last reference.
  std::shared_ptr<void> external;
};

// Home of blocks whose stream was destroyed: any stream may take them.
inline constexpr std::uint64_t kAnyStream = ~std::uint64_t{0};

struct PoolStats {
  std::uint64_t bytes_reserved = 0;       // capacity of blocks handed out
  std::uint64_t bytes_cached = 0;         // capacity of free blocks kept for reuse
  std::uint64_t peak_bytes_reserved = 0;
  std::uint64_t hits = 0;                 // acquisitions served from the cache
  std::uint64_t misses = 0;               // acquisitions that created a device buffer
  std::uint64_t device_allocations = 0;   // clCreateBuffer successes
  std::uint64_t device_releases = 0;      // clReleaseMemObject calls
  std::uint64_t trims = 0;                // cache releases (explicit or on allocation failure)
};

class MemoryPool {
 public:
  // limit_bytes caps reserved + cached bytes; max_alloc_bytes caps a single block.
  MemoryPool(cl_context context, std::uint64_t limit_bytes, std::uint64_t max_alloc_bytes,
             bool caching);
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;
  ~MemoryPool();

  // Smallest class that holds size bytes: 256 B minimum, then at most 25 % rounding.
  static std::uint64_t size_class(std::uint64_t size);

  // A block for stream. Throws Error(kOutOfMemory) after releasing the cache and retrying once.
  PoolBlock acquire(std::uint64_t size, std::uint64_t stream = 0);
  // Back to the cache: reusable on block.stream at once, or (with events) once every event has
  // completed. block.stream may be kAnyStream.
  void release(PoolBlock block, std::vector<cl::Event> events = {}) noexcept;
  // The stream was destroyed: its cached blocks serve any stream once retired has completed.
  void retire_stream(std::uint64_t stream, cl_event retired);
  void trim() noexcept;  // releases every cached block
  void reset_peak() noexcept { stats_.peak_bytes_reserved = stats_.bytes_reserved; }
  // Releases every cached block; blocks still handed out must have been released first.
  void release_all() noexcept;
  // Called before any clReleaseMemObject: the device drains its submission thread there, so no
  // queued command still names a buffer when it is released.
  void set_before_release(std::function<void()> hook) { before_release_ = std::move(hook); }

  const PoolStats& stats() const { return stats_; }
  std::uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  struct Waiting {
    PoolBlock block;                 // block.stream: where it goes once the events completed
    std::vector<cl::Event> events;
  };
  cl_mem create(std::uint64_t capacity, cl_int* status);
  // Moves blocks whose events have all completed to the free lists.
  void collect_waiting() noexcept;
  bool take(std::uint64_t stream, std::uint64_t capacity, PoolBlock* block);
  void release_mem(cl_mem mem) noexcept;

  cl_context context_;
  std::uint64_t limit_bytes_;
  std::uint64_t max_alloc_bytes_;
  bool caching_;
  // (home stream, capacity) -> buffer
  std::multimap<std::pair<std::uint64_t, std::uint64_t>, cl_mem> free_blocks_;
  std::vector<Waiting> waiting_;
  std::function<void()> before_release_;
  PoolStats stats_;
};

}  // namespace aethercl
