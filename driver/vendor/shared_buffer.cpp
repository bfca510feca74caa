// VMM allocations exported to OpenCL.
#include "vendor/shared_buffer.h"

#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

#include <algorithm>

namespace aethercl::vendor {

std::uint64_t import_piece_bytes() {
  return env::count(env::kEngineImportBytes, 1, 1ull << 40).value_or(256ull << 20);
}

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
    const std::uint64_t wanted = bytes == 0 ? 1 : bytes;
    bytes_ = (wanted + granularity - 1) / granularity * granularity;
    const std::uint64_t piece =
        std::max<std::uint64_t>(granularity, import_piece_bytes() / granularity * granularity);
    cuda_check(cuda, cuda.cuMemAddressReserve(&pointer_, bytes_, 0, 0, 0), "cuMemAddressReserve",
               "collective staging");
    for (std::uint64_t offset = 0; offset < bytes_; offset += piece) {
      Allocation& allocation = allocations_.emplace_back();
      allocation.offset = offset;
      allocation.bytes = std::min(piece, bytes_ - offset);
      cuda_check(cuda, cuda.cuMemCreate(&allocation.handle, allocation.bytes, &prop, 0),
                 "cuMemCreate", "collective staging");
      cuda_check(cuda, cuda.cuMemMap(pointer_ + offset, allocation.bytes, 0, allocation.handle, 0),
                 "cuMemMap", "collective staging");
      allocation.mapped = true;
    }
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
    for (Allocation& allocation : allocations_) {
      int fd = -1;
      cuda_check(cuda, cuda.cuMemExportToShareableHandle(&fd, allocation.handle,
                                                         kMemHandleTypePosixFd, 0),
                 "cuMemExportToShareableHandle", "collective staging");
      allocation.imported = ImportedBuffer(cuda, context, device, fd, allocation.bytes);
    }
  } catch (...) {
    release();
    throw;
  }
}

SharedBuffer::~SharedBuffer() { release(); }

std::vector<SharedBuffer::Piece> SharedBuffer::pieces(std::uint64_t offset,
                                                      std::uint64_t bytes) const {
  std::vector<Piece> found;
  for (const Allocation& allocation : allocations_) {
    const std::uint64_t begin = std::max(offset, allocation.offset);
    const std::uint64_t end = std::min(offset + bytes, allocation.offset + allocation.bytes);
    if (begin < end) found.push_back({allocation.imported.mem(), begin - allocation.offset,
                                      end - begin});
  }
  return found;
}

void SharedBuffer::release() noexcept {
  for (Allocation& allocation : allocations_) {
    allocation.imported = ImportedBuffer();  // the buffer goes before the memory it wraps
    if (allocation.mapped) cuda_.cuMemUnmap(pointer_ + allocation.offset, allocation.bytes);
    if (allocation.handle != 0) cuda_.cuMemRelease(allocation.handle);
  }
  allocations_.clear();
  if (pointer_ != 0) cuda_.cuMemAddressFree(pointer_, bytes_);
  pointer_ = 0;
}

}  // namespace aethercl::vendor
