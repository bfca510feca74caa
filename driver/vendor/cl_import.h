// The OpenCL side of memory shared with the CUDA driver: one seam with two implementations.
//  - NVIDIA: the POSIX descriptor cuMemExportToShareableHandle gives is imported with
//    cl_khr_external_memory_opaque_fd (clCreateBufferWithProperties, CL_MEM_DEVICE_HANDLE_LIST_KHR
//    naming the device); OpenCL and CUDA then see the same device memory (probed on 2 x H100,
//    docs/ARCHITECTURE.md decision 26).
//  - Host memory (CudaDriver::host_memory: the test engine, whose "device memory" is a memfd
//    mapped into the process): the descriptor is mapped again and the mapping wrapped in a
//    CL_MEM_USE_HOST_PTR buffer of a CPU device, which works on that memory in place (PoCL).
#pragma once

#include "cl/handle.h"
#include "vendor/cuda_driver.h"

#include <cstdint>

namespace aethercl::vendor {

// Whether buffers of this OpenCL device can be imported (the extension, or a CPU device for a
// host-memory engine).
bool can_import(const CudaDriver& cuda, cl_device_id device);

// An imported buffer and, for host memory, its mapping.
class ImportedBuffer {
 public:
  ImportedBuffer() = default;
  // Takes ownership of fd (closed here, or handed to OpenCL by a successful NVIDIA import).
  // Throws Error naming the OpenCL call that failed.
  ImportedBuffer(const CudaDriver& cuda, cl_context context, cl_device_id device, int fd,
                 std::uint64_t bytes);
  ImportedBuffer(ImportedBuffer&& other) noexcept;
  ImportedBuffer& operator=(ImportedBuffer&& other) noexcept;
  ~ImportedBuffer();

  cl_mem mem() const { return mem_.get(); }

 private:
  void release() noexcept;

  cl::Mem mem_;
  void* mapping_ = nullptr;
  std::uint64_t mapping_bytes_ = 0;
};

}  // namespace aethercl::vendor
