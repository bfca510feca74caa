// User buffers in vendor-engine memory and the registry of their CUDA addresses.
#include "vendor/engine_memory.h"

#include "support/error.h"
#include "vendor/current_context.h"
#include "vendor/shared_buffer.h"

#include <mutex>
#include <unordered_map>

namespace aethercl::vendor {
namespace {

std::mutex registry_mutex;
std::unordered_map<cl_mem, EngineAddress>& registry() {
  static auto* addresses = new std::unordered_map<cl_mem, EngineAddress>();  // outlives exit
  return *addresses;
}

// One allocation: the device's primary context held for as long as the memory lives.
class EngineMemory {
 public:
  EngineMemory(const CudaDriver& cuda, int ordinal, const std::vector<int>& peers,
               cl_context context, cl_device_id device, std::uint64_t bytes)
      : cuda_(cuda) {
    cuda_check(cuda, cuda.cuDeviceGet(&device_, ordinal), "cuDeviceGet", "engine buffer");
    cuda_check(cuda, cuda.cuDevicePrimaryCtxRetain(&context_, device_),
               "cuDevicePrimaryCtxRetain", "engine buffer");
    try {
      CurrentContext current(cuda);
      current.set(context_);
      buffer_ = std::make_unique<SharedBuffer>(cuda, ordinal, peers, context, device, bytes);
    } catch (...) {
      cuda.cuDevicePrimaryCtxRelease(device_);
      throw;
    }
    auto pieces = buffer_->pieces(0, buffer_->bytes());
    mem_ = pieces.front().mem;
    std::lock_guard lock(registry_mutex);
    registry()[mem_] = EngineAddress{buffer_->device_pointer(), ordinal};
  }
  EngineMemory(const EngineMemory&) = delete;
  EngineMemory& operator=(const EngineMemory&) = delete;
  ~EngineMemory() {
    {
      std::lock_guard lock(registry_mutex);
      registry().erase(mem_);
    }
    CurrentContext current(cuda_);
    cuda_.cuCtxSetCurrent(context_);
    buffer_.reset();
    cuda_.cuDevicePrimaryCtxRelease(device_);
  }

  cl_mem mem() const { return mem_; }
  std::size_t pieces() const { return buffer_->pieces(0, buffer_->bytes()).size(); }

 private:
  const CudaDriver& cuda_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::unique_ptr<SharedBuffer> buffer_;
  cl_mem mem_ = nullptr;
};

}  // namespace

std::shared_ptr<void> allocate_engine_memory(const CudaDriver& cuda, int ordinal,
                                             const std::vector<int>& peers, cl_context context,
                                             cl_device_id device, std::uint64_t bytes,
                                             cl_mem* mem) {
  if (bytes == 0 || bytes > import_piece_bytes()) {
    fail(Status::kInternal, "an engine buffer of {} bytes is not one imported piece (at most {})",
         bytes, import_piece_bytes());
  }
  auto memory = std::make_shared<EngineMemory>(cuda, ordinal, peers, context, device, bytes);
  if (memory->pieces() != 1) {
    fail(Status::kInternal, "an engine buffer of {} bytes was imported in {} pieces", bytes,
         memory->pieces());
  }
  *mem = memory->mem();
  return memory;
}

std::optional<EngineAddress> engine_address(cl_mem mem) {
  std::lock_guard lock(registry_mutex);
  auto found = registry().find(mem);
  if (found == registry().end()) return std::nullopt;
  return found->second;
}

}  // namespace aethercl::vendor
