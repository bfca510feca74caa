// The CUDA driver API types and constants the vendor layer uses, declared here with the layout
// of the driver's ABI (cuda.h is not needed to build: the library never links CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace aethercl::vendor {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;

struct CUuuid {
  unsigned char bytes[16];
};

// CUmemLocation, CUmemAllocationProp and CUmemAccessDesc of cuda.h (CUDA 10.2 and later).
struct CUmemLocation {
  int type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;    // device ordinal
};
struct CUmemAllocationProp {
  int type;                  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requestedHandleTypes;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
};

inline constexpr int kMemAllocationTypePinned = 1;
inline constexpr int kMemHandleTypePosixFd = 1;
inline constexpr int kMemLocationTypeDevice = 1;
inline constexpr int kMemAccessReadWrite = 3;
inline constexpr int kMemGranularityMinimum = 0;
inline constexpr int kDeviceAttributePciBusId = 33;
inline constexpr int kDeviceAttributePciDeviceId = 34;
inline constexpr int kDeviceAttributePciDomainId = 50;

}  // namespace aethercl::vendor
