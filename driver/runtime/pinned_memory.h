// Page-locked host memory: a CL_MEM_ALLOC_HOST_PTR buffer mapped once for its whole life. The
// mapped pointer is what vendors (NVIDIA in particular) transfer from and to by DMA without a
// bounce copy. Used for aethercl_host_alloc and for the device's staging ring.
#pragma once

#include "cl/handle.h"

#include <cstdint>

namespace aethercl {

class PinnedMemory {
 public:
  // Throws Error(kOutOfMemory) when the runtime cannot provide size bytes. map_queue is retained
  // for the unmap at destruction.
  PinnedMemory(cl_context context, cl_command_queue map_queue, std::uint64_t size);
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  // Unmaps (waiting for the unmap) and releases; callers make sure no transfer still uses it.
  ~PinnedMemory();

  void* data() const { return data_; }
  std::uint64_t size() const { return size_; }
  cl_mem mem() const { return mem_.get(); }

 private:
  cl::Queue queue_;
  cl::Mem mem_;
  void* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// A bump allocator over pinned memory for staged host-to-device writes (one memcpy into pinned
// memory, then a DMA) and pinned reads. Space is handed out front to back and all of it comes
// back at reset(), which the device calls when no transfer can still use the ring (every queue
// that ring transfers went to has finished).
class PinnedRing {
 public:
  PinnedRing(cl_context context, cl_command_queue map_queue, std::uint64_t capacity)
      : memory_(context, map_queue, capacity) {}

  // size bytes (at a 64-byte boundary), or nullptr when the rest of the ring is too small.
  void* reserve(std::uint64_t size);
  void reset() { used_ = 0; }
  std::uint64_t used() const { return used_; }
  std::uint64_t capacity() const { return memory_.size(); }

 private:
  PinnedMemory memory_;
  std::uint64_t used_ = 0;
};

}  // namespace aethercl
