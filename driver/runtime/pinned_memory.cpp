// Pinned host memory and the staging ring over it.
#include "runtime/pinned_memory.h"

#include "cl/cl_error.h"
#include "support/error.h"

namespace aethercl {

PinnedMemory::PinnedMemory(cl_context context, cl_command_queue map_queue, std::uint64_t size)
    : size_(size) {
  cl::check(clRetainCommandQueue(map_queue), "clRetainCommandQueue");
  queue_.reset(map_queue);
  cl_int status = CL_SUCCESS;
  mem_.reset(clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr,
                            &status));
  if (status != CL_SUCCESS) {
    fail(cl::status_of(status) == Status::kOutOfMemory ? Status::kOutOfMemory
                                                        : Status::kDeviceError,
         "page-locked host memory of {} bytes is not available: {} ({})", size,
         cl::error_name(status), status);
  }
  data_ = clEnqueueMapBuffer(queue_.get(), mem_.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                             size, 0, nullptr, nullptr, &status);
  if (status != CL_SUCCESS || data_ == nullptr) {
    fail(cl::status_of(status) == Status::kOutOfMemory ? Status::kOutOfMemory
                                                        : Status::kDeviceError,
         "mapping {} bytes of page-locked host memory failed: {} ({})", size,
         cl::error_name(status), status);
  }
}

PinnedMemory::~PinnedMemory() {
  if (data_ != nullptr) {
    cl_event event = nullptr;
    if (clEnqueueUnmapMemObject(queue_.get(), mem_.get(), data_, 0, nullptr, &event) ==
        CL_SUCCESS) {
      clWaitForEvents(1, &event);
      clReleaseEvent(event);
    }
  }
}

void* PinnedRing::reserve(std::uint64_t size) {
  std::uint64_t start = (used_ + 63) / 64 * 64;
  if (start > capacity() || size > capacity() - start) return nullptr;
  used_ = start + size;
  return static_cast<unsigned char*>(memory_.data()) + start;
}

}  // namespace aethercl
