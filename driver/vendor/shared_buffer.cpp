// VMM allocations exported to OpenCL.
#include "vendor/shared_buffer.h"

#include "support/error.h"
#include "support/log.h"

namespace aethercl::vendor {

SharedBuffer::SharedBuffer(const CudaDriver& cuda, int ordinal, const std::vector<int>& peers,
                           cl_context context, cl_device_id device, std::uint64_t bytes)
    : cuda_(cuda) {
  CUmemAllocationProp prop{};
  prop.type = kMemAllocationTypePinned;
  prop.requestedHandleTypes = kMemHandleTypePosixFd;
  prop.location.type = kMemLocationTypeDevice;
  prop.location.id = ordinal;
  try {
    std::size_t granularity = 0;
    cuda_check(cuda, cuda.cuMemGetAllocationGranularity(&granularity, &prop,
                                                        kMemGranularityMinimum),
               "cuMemGetAllocationGranularity", "collective staging");
    if (granularity == 0) granularity = 1;
    std::uint64_t wanted = bytes == 0 ? 1 : bytes;
    bytes_ = (wanted + granularity - 1) / granularity * granularity;
    cuda_check(cuda, cuda.cuMemCreate(&handle_, bytes_, &prop, 0), "cuMemCreate",
               "collective staging");
    created_ = true;
    cuda_check(cuda, cuda.cuMemAddressReserve(&pointer_, bytes_, 0, 0, 0), "cuMemAddressReserve",
               "collective staging");
    cuda_check(cuda, cuda.cuMemMap(pointer_, bytes_, 0, handle_, 0), "cuMemMap",
               "collective staging");
    mapped_ = true;
    CUmemAccessDesc access{};
    access.location.type = kMemLocationTypeDevice;
    access.location.id = ordinal;
    access.flags = kMemAccessReadWrite;
    cuda_check(cuda, cuda.cuMemSetAccess(pointer_, bytes_, &access, 1), "cuMemSetAccess",
               "collective staging");
    for (int peer : peers) {
      if (peer == ordinal) continue;
      access.location.id = peer;
      CUresult status = cuda.cuMemSetAccess(pointer_, bytes_, &access, 1);
      if (status != kCudaSuccess) {
        log().debug("vendor engines: CUDA device {} cannot access device {}'s staging: {}", peer,
                    ordinal, cuda_error_text(cuda, status));
      }
    }
    int fd = -1;
    cuda_check(cuda, cuda.cuMemExportToShareableHandle(&fd, handle_, kMemHandleTypePosixFd, 0),
               "cuMemExportToShareableHandle", "collective staging");
    imported_ = ImportedBuffer(cuda, context, device, fd, bytes_);
  } catch (...) {
    release();
    throw;
  }
}

SharedBuffer::~SharedBuffer() { release(); }

void SharedBuffer::release() noexcept {
  imported_ = ImportedBuffer();
  if (mapped_) cuda_.cuMemUnmap(pointer_, bytes_);
  if (pointer_ != 0) cuda_.cuMemAddressFree(pointer_, bytes_);
  if (created_) cuda_.cuMemRelease(handle_);
  mapped_ = created_ = false;
  pointer_ = 0;
}

}  // namespace aethercl::vendor
