// Device memory both APIs use: allocated with CUDA's virtual memory API (cuMemCreate with an
// exportable POSIX descriptor, mapped and made accessible on its device) and imported into the
// device's OpenCL context (vendor/cl_import.h).
#pragma once

#include "vendor/cl_import.h"
#include "vendor/cuda_driver.h"

#include <cstdint>
#include <vector>

namespace aethercl::vendor {

class SharedBuffer {
 public:
  // At least bytes (rounded up to the allocation granularity) on CUDA device ordinal, whose
  // primary context is current, readable and writable there and, where the hardware allows
  // (NVLink/PCIe peer access; refusals are logged at debug level), from the devices in peers.
  // Throws Error naming the CUDA or OpenCL call that failed (kOutOfMemory when the device has no
  // room); nothing is left allocated then.
  SharedBuffer(const CudaDriver& cuda, int ordinal, const std::vector<int>& peers,
               cl_context context, cl_device_id device, std::uint64_t bytes);
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  // The caller has finished every use on both sides.
  ~SharedBuffer();

  CUdeviceptr device_pointer() const { return pointer_; }
  cl_mem mem() const { return imported_.mem(); }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void release() noexcept;

  const CudaDriver& cuda_;
  CUmemGenericAllocationHandle handle_ = 0;
  bool created_ = false;
  CUdeviceptr pointer_ = 0;
  bool mapped_ = false;
  std::uint64_t bytes_ = 0;
  ImportedBuffer imported_;
};

}  // namespace aethercl::vendor
