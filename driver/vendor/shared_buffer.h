// Device memory both APIs use: allocated with CUDA's virtual memory API (cuMemCreate with an
// exportable POSIX descriptor, mapped and made accessible on its device) and imported into the
// device's OpenCL context (vendor/cl_import.h), in pieces of at most import_piece_bytes().
#pragma once

#include "vendor/cl_import.h"
#include "vendor/cuda_driver.h"

#include <cstdint>
#include <vector>

namespace aethercl::vendor {

// The largest piece imported into OpenCL as one buffer: AETHERCL_ENGINE_IMPORT_BYTES, default
// 256 MiB (NVIDIA's OpenCL driver 580 crashes in clCreateBufferWithProperties importing 512 MiB).
std::uint64_t import_piece_bytes();

class SharedBuffer {
 public:
  // One OpenCL buffer over bytes [offset, offset + bytes) of the memory.
  struct Piece {
    cl_mem mem;
    std::uint64_t offset;  // of the piece in the memory
    std::uint64_t bytes;
  };

  // At least bytes (rounded up to the allocation granularity) on CUDA device ordinal, whose
  // primary context is current, readable and writable there and, where the hardware allows
  // (NVLink/PCIe peer access; refusals are logged at debug level), from the devices in peers:
  // one range of device addresses for CUDA and NCCL, mapped from allocations of at most
  // import_piece_bytes() each, every one imported into OpenCL as a buffer of its own.
  // Throws Error naming the CUDA or OpenCL call that failed (kOutOfMemory when the device has no
  // room); nothing is left allocated then.
  SharedBuffer(const CudaDriver& cuda, int ordinal, const std::vector<int>& peers,
               cl_context context, cl_device_id device, std::uint64_t bytes);
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  // The caller has finished every use on both sides.
  ~SharedBuffer();

  CUdeviceptr device_pointer() const { return pointer_; }
  std::uint64_t bytes() const { return bytes_; }
  // The OpenCL buffers covering [offset, offset + bytes), in order, each cut to that range
  // (Piece::offset is then the offset inside its buffer).
  std::vector<Piece> pieces(std::uint64_t offset, std::uint64_t bytes) const;

 private:
  struct Allocation {
    CUmemGenericAllocationHandle handle = 0;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    bool mapped = false;
    ImportedBuffer imported;
  };
  void release() noexcept;

  const CudaDriver& cuda_;
  CUdeviceptr pointer_ = 0;
  std::uint64_t bytes_ = 0;
  std::vector<Allocation> allocations_;
};

}  // namespace aethercl::vendor
