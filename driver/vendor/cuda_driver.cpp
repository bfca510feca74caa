// Symbol resolution and error text of the CUDA driver API.
#include "vendor/cuda_driver.h"

#include "support/error.h"

#include <fmt/format.h>

namespace aethercl::vendor {
namespace {

// The first of names the library exports (cuda.h maps some functions to _v2 entry points).
template <typename Function>
bool resolve(const SharedLibrary& library, Function& out, std::initializer_list<const char*> names,
             std::string& missing) {
  for (const char* name : names) {
    if (void* address = library.symbol(name)) {
      out = reinterpret_cast<Function>(address);
      return true;
    }
  }
  if (missing.empty()) missing = *names.begin();
  return false;
}

}  // namespace

std::string load_cuda_driver(const SharedLibrary& library, CudaDriver& out) {
  std::string missing;
  resolve(library, out.cuInit, {"cuInit"}, missing);
  resolve(library, out.cuDriverGetVersion, {"cuDriverGetVersion"}, missing);
  resolve(library, out.cuGetErrorString, {"cuGetErrorString"}, missing);
  resolve(library, out.cuGetErrorName, {"cuGetErrorName"}, missing);
  resolve(library, out.cuDeviceGetCount, {"cuDeviceGetCount"}, missing);
  resolve(library, out.cuDeviceGet, {"cuDeviceGet"}, missing);
  resolve(library, out.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing);
  resolve(library, out.cuDeviceGetUuid, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, missing);
  resolve(library, out.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing);
  resolve(library, out.cuDevicePrimaryCtxRelease,
          {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, missing);
  resolve(library, out.cuCtxGetCurrent, {"cuCtxGetCurrent"}, missing);
  resolve(library, out.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing);
  resolve(library, out.cuMemGetAllocationGranularity, {"cuMemGetAllocationGranularity"}, missing);
  resolve(library, out.cuMemCreate, {"cuMemCreate"}, missing);
  resolve(library, out.cuMemRelease, {"cuMemRelease"}, missing);
  resolve(library, out.cuMemAddressReserve, {"cuMemAddressReserve"}, missing);
  resolve(library, out.cuMemAddressFree, {"cuMemAddressFree"}, missing);
  resolve(library, out.cuMemMap, {"cuMemMap"}, missing);
  resolve(library, out.cuMemUnmap, {"cuMemUnmap"}, missing);
  resolve(library, out.cuMemSetAccess, {"cuMemSetAccess"}, missing);
  resolve(library, out.cuMemExportToShareableHandle, {"cuMemExportToShareableHandle"}, missing);
  resolve(library, out.cuStreamCreate, {"cuStreamCreate"}, missing);
  resolve(library, out.cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"}, missing);
  resolve(library, out.cuStreamSynchronize, {"cuStreamSynchronize"}, missing);
  resolve(library, out.cuMemcpyPeerAsync, {"cuMemcpyPeerAsync"}, missing);
  resolve(library, out.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync"}, missing);
  if (!missing.empty()) return fmt::format("it does not export {}", missing);
  out.host_memory = library.symbol("aethercl_engine_host_memory") != nullptr;
  CUresult status = out.cuInit(0);
  if (status != kCudaSuccess) return fmt::format("cuInit failed: {}", cuda_error_text(out, status));
  status = out.cuDriverGetVersion(&out.version);
  if (status != kCudaSuccess) {
    return fmt::format("cuDriverGetVersion failed: {}", cuda_error_text(out, status));
  }
  return {};
}

std::string cuda_error_text(const CudaDriver& cuda, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuda.cuGetErrorName == nullptr || cuda.cuGetErrorName(result, &name) != kCudaSuccess ||
      name == nullptr) {
    name = "CUDA error";
  }
  if (cuda.cuGetErrorString == nullptr || cuda.cuGetErrorString(result, &text) != kCudaSuccess ||
      text == nullptr) {
    text = "no description";
  }
  return fmt::format("{} {} ({})", name, result, text);
}

void cuda_check(const CudaDriver& cuda, CUresult result, const char* function, const char* what) {
  if (result == kCudaSuccess) return;
  fail(result == kCudaErrorOutOfMemory ? Status::kOutOfMemory : Status::kDeviceError,
       "{} failed ({}): {}", function, what, cuda_error_text(cuda, result));
}

}  // namespace aethercl::vendor
