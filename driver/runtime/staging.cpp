// Staged host-to-device writes with recycled host chunks.
#include "runtime/staging.h"

#include "cl/cl_error.h"
#include "runtime/memory_pool.h"

#include <cstring>

namespace aethercl {
namespace {

constexpr std::uint64_t kMaxCachedBytes = 64ull << 20;

}  // namespace

Staging::Chunk Staging::take_chunk(std::uint64_t size) {
  for (auto it = free_chunks_.begin(); it != free_chunks_.end(); ++it) {
    if (it->capacity >= size && it->capacity <= 2 * size + 4096) {
      Chunk chunk = std::move(*it);
      free_chunks_.erase(it);
      cached_bytes_ -= chunk.capacity;
      return chunk;
    }
  }
  std::uint64_t capacity = MemoryPool::size_class(size);
  return Chunk{std::make_unique<unsigned char[]>(capacity), capacity};
}

void Staging::give_back(Chunk chunk) noexcept {
  if (cached_bytes_ + chunk.capacity > kMaxCachedBytes) return;  // freed by the unique_ptr
  cached_bytes_ += chunk.capacity;
  free_chunks_.push_back(std::move(chunk));
}

cl_event Staging::write(cl_command_queue queue, cl_mem mem, std::uint64_t offset,
                        std::uint64_t size, const void* source) {
  cl_event event = nullptr;
  if (size >= kMaxStagedWrite) {
    cl::check(clEnqueueWriteBuffer(queue, mem, CL_TRUE, offset, size, source, 0, nullptr, &event),
              "clEnqueueWriteBuffer");
    return event;
  }
  reclaim();
  if (pending_bytes_ + size > kMaxPendingBytes) {
    cl::check(clFinish(queue), "clFinish");
    reclaim();
  }
  Chunk chunk = take_chunk(size);
  std::memcpy(chunk.data.get(), source, size);
  cl::check(clEnqueueWriteBuffer(queue, mem, CL_FALSE, offset, size, chunk.data.get(), 0, nullptr,
                                 &event),
            "clEnqueueWriteBuffer");
  clRetainEvent(event);
  pending_bytes_ += chunk.capacity;
  pending_.push_back(Pending{cl::Event(event), std::move(chunk)});
  return event;
}

void Staging::reclaim() {
  while (!pending_.empty()) {
    cl_int status = CL_QUEUED;
    cl::check(clGetEventInfo(pending_.front().done.get(), CL_EVENT_COMMAND_EXECUTION_STATUS,
                             sizeof(status), &status, nullptr),
              "clGetEventInfo");
    if (status > CL_COMPLETE) return;  // in-order queue: later copies are not done either
    Pending done = std::move(pending_.front());
    pending_.pop_front();
    pending_bytes_ -= done.chunk.capacity;
    give_back(std::move(done.chunk));
    if (status < 0) {
      fail(cl::status_of(status), "an earlier staged host-to-device copy failed: {} ({})",
           cl::error_name(status), status);
    }
  }
}

void Staging::reclaim_all() noexcept {
  while (!pending_.empty()) {
    pending_bytes_ -= pending_.front().chunk.capacity;
    give_back(std::move(pending_.front().chunk));
    pending_.pop_front();
  }
}

}  // namespace aethercl
