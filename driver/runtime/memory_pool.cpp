// Size-class caching allocator over clCreateBuffer.
#include "runtime/memory_pool.h"

#include "cl/cl_error.h"
#include "support/log.h"

#include <algorithm>
#include <bit>

namespace aethercl {

MemoryPool::MemoryPool(cl_context context, std::uint64_t limit_bytes,
                       std::uint64_t max_alloc_bytes, bool caching)
    : context_(context),
      limit_bytes_(limit_bytes),
      max_alloc_bytes_(max_alloc_bytes),
      caching_(caching) {}

MemoryPool::~MemoryPool() { release_all(); }

std::uint64_t MemoryPool::size_class(std::uint64_t size) {
  constexpr std::uint64_t kMinimum = 256;
  if (size <= kMinimum) return kMinimum;
  // Four classes per power of two: 1, 1.25, 1.5, 1.75 times 2^k.
  std::uint64_t power = std::bit_floor(size - 1);
  std::uint64_t step = power / 4;
  std::uint64_t rounded = (size + step - 1) / step * step;
  return rounded < size ? size : rounded;  // overflow near 2^64: no rounding
}

cl_mem MemoryPool::create(std::uint64_t capacity, cl_int* status) {
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, capacity, nullptr, status);
  if (*status == CL_SUCCESS) ++stats_.device_allocations;
  return mem;
}

PoolBlock MemoryPool::acquire(std::uint64_t size) {
  if (size > max_alloc_bytes_) {
    fail(Status::kOutOfMemory,
         "{} bytes exceed the device's largest single allocation of {} bytes", size,
         max_alloc_bytes_);
  }
  std::uint64_t capacity = std::min(size_class(size), max_alloc_bytes_);
  if (caching_) {
    auto it = free_blocks_.find(capacity);
    if (it != free_blocks_.end()) {
      PoolBlock block{it->second, capacity};
      free_blocks_.erase(it);
      stats_.bytes_cached -= capacity;
      stats_.bytes_reserved += capacity;
      stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
      ++stats_.hits;
      return block;
    }
  }
  ++stats_.misses;
  if (stats_.bytes_reserved + stats_.bytes_cached + capacity > limit_bytes_) trim();
  if (stats_.bytes_reserved + capacity > limit_bytes_) {
    fail(Status::kOutOfMemory,
         "device memory exhausted: {} bytes requested, {} of {} bytes already in use "
         "(the pool's cache was released first)",
         size, stats_.bytes_reserved, limit_bytes_);
  }
  cl_int status = CL_SUCCESS;
  cl_mem mem = create(capacity, &status);
  if (status != CL_SUCCESS) {
    log().info("clCreateBuffer({} bytes) failed with {}; releasing the pool cache and retrying",
               capacity, cl::error_name(status));
    trim();
    mem = create(capacity, &status);
  }
  if (status != CL_SUCCESS) {
    fail(cl::status_of(status) == Status::kOutOfMemory ? Status::kOutOfMemory
                                                        : Status::kDeviceError,
         "clCreateBuffer({} bytes) failed after releasing the pool cache: {} ({})", capacity,
         cl::error_name(status), status);
  }
  stats_.bytes_reserved += capacity;
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  return PoolBlock{mem, capacity};
}

void MemoryPool::release(PoolBlock block) noexcept {
  if (block.mem == nullptr) return;
  stats_.bytes_reserved -= block.capacity;
  if (caching_) {
    free_blocks_.emplace(block.capacity, block.mem);
    stats_.bytes_cached += block.capacity;
    return;
  }
  clReleaseMemObject(block.mem);
  ++stats_.device_releases;
}

void MemoryPool::trim() noexcept {
  if (free_blocks_.empty()) return;
  for (auto& [capacity, mem] : free_blocks_) {
    clReleaseMemObject(mem);  // legal while commands still use it: OpenCL defers the release
    ++stats_.device_releases;
  }
  free_blocks_.clear();
  stats_.bytes_cached = 0;
  ++stats_.trims;
}

void MemoryPool::release_all() noexcept { trim(); }

}  // namespace aethercl
