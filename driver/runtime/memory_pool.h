// Per-device caching allocator: device buffers in size classes, reused after free.
//
// Contract: the owning Device's mutex is held for every call. Reuse is stream-ordered because the
// device has one in-order queue: a block freed while kernels still use it is handed out again only
// to commands enqueued after those kernels.
#pragma once

#include "cl/opencl.h"

#include <cstdint>
#include <map>
#include <string>

namespace aethercl {

struct PoolBlock {
  cl_mem mem = nullptr;
  std::uint64_t capacity = 0;  // bytes actually allocated on the device (the size class)
};

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

  // Throws Error(kOutOfMemory) after releasing the cache and retrying once.
  PoolBlock acquire(std::uint64_t size);
  void release(PoolBlock block) noexcept;
  void trim() noexcept;  // releases every cached block
  void reset_peak() noexcept { stats_.peak_bytes_reserved = stats_.bytes_reserved; }
  // Releases every cached block; blocks still handed out must have been released first.
  void release_all() noexcept;

  const PoolStats& stats() const { return stats_; }
  std::uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  cl_mem create(std::uint64_t capacity, cl_int* status);

  cl_context context_;
  std::uint64_t limit_bytes_;
  std::uint64_t max_alloc_bytes_;
  bool caching_;
  std::multimap<std::uint64_t, cl_mem> free_blocks_;  // capacity -> buffer
  PoolStats stats_;
};

}  // namespace aethercl
