// Buffers of vendor-engine memory handed to the user (aethercl_comm_alloc): CUDA memory imported
// into OpenCL as one buffer, and the lookup from that buffer to its CUDA address, so collectives
// can hand the user's own memory to NCCL.
#pragma once

#include "cl/handle.h"
#include "vendor/cuda_driver.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace aethercl::vendor {

struct EngineAddress {
  CUdeviceptr pointer = 0;
  int ordinal = -1;  // the CUDA device that holds it
};

// bytes (at most import_piece_bytes()) of CUDA device ordinal's memory, accessible from the
// devices in peers where the hardware allows, imported into context as one OpenCL buffer, which
// *mem receives. The returned owner keeps the device's primary context retained and frees the
// memory when its last reference goes: the caller must have finished every use on both sides by
// then. Throws Error naming the failing call (kOutOfMemory when the device has no room).
std::shared_ptr<void> allocate_engine_memory(const CudaDriver& cuda, int ordinal,
                                             const std::vector<int>& peers, cl_context context,
                                             cl_device_id device, std::uint64_t bytes,
                                             cl_mem* mem);

// Where a live buffer from allocate_engine_memory lives; nullopt for every other cl_mem.
// Thread-safe.
std::optional<EngineAddress> engine_address(cl_mem mem);

}  // namespace aethercl::vendor
