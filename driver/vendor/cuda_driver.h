// The CUDA driver API (libcuda.so.1) through dlopen: the functions the vendor engines use, resolved
// once. Loaded by vendor/engines.cpp; nothing here links CUDA.
#pragma once

#include "vendor/cuda_types.h"
#include "vendor/shared_library.h"

#include <string>

namespace aethercl::vendor {

struct CudaDriver {
  int version = 0;  // cuDriverGetVersion: 1000 * major + 10 * minor
  // The loaded library declares that its "device memory" is host memory and its devices are the
  // process's CPU OpenCL devices, by exporting the symbol aethercl_engine_host_memory. Only the
  // test engine (tests/vendor/fake_cuda.c) does; libcuda never does. It selects the host-memory
  // side of the OpenCL seam (vendor/cl_import.h, vendor/device_match.h).
  bool host_memory = false;

  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuMemGetAllocationGranularity)(std::size_t*, const CUmemAllocationProp*, int) =
      nullptr;
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*,
                          unsigned long long) = nullptr;
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*cuMemAddressReserve)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr,
                                  unsigned long long) = nullptr;
  CUresult (*cuMemAddressFree)(CUdeviceptr, std::size_t) = nullptr;
  CUresult (*cuMemMap)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle,
                       unsigned long long) = nullptr;
  CUresult (*cuMemUnmap)(CUdeviceptr, std::size_t) = nullptr;
  CUresult (*cuMemSetAccess)(CUdeviceptr, std::size_t, const CUmemAccessDesc*, std::size_t) =
      nullptr;
  CUresult (*cuMemExportToShareableHandle)(void*, CUmemGenericAllocationHandle, int,
                                           unsigned long long) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t,
                                CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
};

// Resolves every function of CudaDriver from library and calls cuInit(0). Returns an empty string
// on success, else what is wrong (the first missing symbol, or cuInit's error).
std::string load_cuda_driver(const SharedLibrary& library, CudaDriver& out);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a CUresult.
std::string cuda_error_text(const CudaDriver& cuda, CUresult result);

// Throws Error naming function and the CUDA error unless result is CUDA_SUCCESS:
// kOutOfMemory for CUDA_ERROR_OUT_OF_MEMORY, kDeviceError otherwise. what says what it was for.
void cuda_check(const CudaDriver& cuda, CUresult result, const char* function, const char* what);

}  // namespace aethercl::vendor
