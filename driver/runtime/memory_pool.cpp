// Size-class caching allocator over clCreateBuffer, with stream-aware reuse.
#include "runtime/memory_pool.h"

#include "cl/cl_error.h"
#include "support/log.h"

#include <algorithm>
#include <bit>

namespace aethercl {
namespace {

bool complete(cl_event event) noexcept {
  cl_int status = CL_COMPLETE;
  if (clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                     nullptr) != CL_SUCCESS) {
    return true;  // an event that cannot be asked about can hold nothing up
  }
  return status <= CL_COMPLETE;  // negative: failed, which also ends the command
}

}  // namespace

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

void MemoryPool::release_mem(cl_mem mem) noexcept {
  clReleaseMemObject(mem);  // legal while commands still use it: OpenCL defers the release
  ++stats_.device_releases;
}

void MemoryPool::collect_waiting() noexcept {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    bool done = std::all_of(it->events.begin(), it->events.end(),
                            [](const cl::Event& event) { return complete(event.get()); });
    if (!done) {
      ++it;
      continue;
    }
    free_blocks_.emplace(std::make_pair(it->block.stream, it->block.capacity), it->block.mem);
    it = waiting_.erase(it);
  }
}

bool MemoryPool::take(std::uint64_t stream, std::uint64_t capacity, PoolBlock* block) {
  auto it = free_blocks_.find(std::make_pair(stream, capacity));
  if (it == free_blocks_.end()) return false;
  *block = PoolBlock{it->second, capacity, stream, nullptr};
  free_blocks_.erase(it);
  return true;
}

PoolBlock MemoryPool::acquire(std::uint64_t size, std::uint64_t stream) {
  if (size > max_alloc_bytes_) {
    fail(Status::kOutOfMemory,
         "{} bytes exceed the device's largest single allocation of {} bytes", size,
         max_alloc_bytes_);
  }
  std::uint64_t capacity = std::min(size_class(size), max_alloc_bytes_);
  if (caching_) {
    if (!waiting_.empty()) collect_waiting();
    PoolBlock block;
    if (take(stream, capacity, &block) || take(kAnyStream, capacity, &block)) {
      block.stream = stream;
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
  return PoolBlock{mem, capacity, stream, nullptr};
}

void MemoryPool::release(PoolBlock block, std::vector<cl::Event> events) noexcept {
  if (block.mem == nullptr) return;
  if (block.external) {
    for (cl::Event& event : events) {
      cl_event handle = event.get();
      if (clWaitForEvents(1, &handle) != CL_SUCCESS)
        log().warn("the last use of an engine buffer could not be waited for; freeing it anyway");
    }
    if (before_release_) before_release_();
    block.external.reset();
    return;
  }
  stats_.bytes_reserved -= block.capacity;
  if (caching_) {
    stats_.bytes_cached += block.capacity;
    if (events.empty()) {
      free_blocks_.emplace(std::make_pair(block.stream, block.capacity), block.mem);
    } else {
      waiting_.push_back(Waiting{block, std::move(events)});
    }
    return;
  }
  if (before_release_) before_release_();
  release_mem(block.mem);
}

// A new reference to retired, or (false) when the runtime refuses one, the wait for it done on the
// host now, so that what would have waited on it needs no event.
static bool hold_or_wait(cl_event retired) {
  if (clRetainEvent(retired) == CL_SUCCESS) return true;
  if (clWaitForEvents(1, &retired) != CL_SUCCESS)
    log().warn("a retired stream's work could not be waited for; its blocks are reused as is");
  return false;
}

void MemoryPool::retire_stream(std::uint64_t stream, cl_event retired) {
  for (auto it = free_blocks_.begin(); it != free_blocks_.end();) {
    if (it->first.first != stream) {
      ++it;
      continue;
    }
    PoolBlock block{it->second, it->first.second, kAnyStream, nullptr};
    if (!hold_or_wait(retired)) {
      free_blocks_.emplace(std::make_pair(kAnyStream, block.capacity), block.mem);
      it = free_blocks_.erase(it);
      continue;
    }
    std::vector<cl::Event> events;
    events.emplace_back(retired);
    waiting_.push_back(Waiting{block, std::move(events)});
    it = free_blocks_.erase(it);
  }
  for (Waiting& waiting : waiting_) {
    if (waiting.block.stream != stream) continue;
    if (hold_or_wait(retired)) waiting.events.emplace_back(retired);
    waiting.block.stream = kAnyStream;
  }
}

void MemoryPool::trim() noexcept {
  if (free_blocks_.empty() && waiting_.empty()) return;
  if (before_release_) before_release_();
  for (auto& [key, mem] : free_blocks_) release_mem(mem);
  for (Waiting& waiting : waiting_) release_mem(waiting.block.mem);
  free_blocks_.clear();
  waiting_.clear();
  stats_.bytes_cached = 0;
  ++stats_.trims;
}

void MemoryPool::release_all() noexcept { trim(); }

}  // namespace aethercl
