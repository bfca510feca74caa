// NCCL (libnccl.so.2) through dlopen: the functions the vendor engines use, resolved once, with
// NCCL's type codes declared here (nccl.h is not needed to build). Loaded by vendor/engines.cpp.
#pragma once

#include "vendor/cuda_types.h"
#include "vendor/shared_library.h"

#include <string>

namespace aethercl::vendor {

using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;
struct ncclUniqueId {
  char internal[128];
};

inline constexpr ncclResult_t kNcclSuccess = 0;
// ncclDataType_t and ncclRedOp_t values (NCCL 2.10 and later).
inline constexpr int kNcclFloat16 = 6;
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclBfloat16 = 9;
inline constexpr int kNcclSum = 0;
inline constexpr int kNcclAvg = 4;
// The oldest NCCL used (ncclAvg and ncclBfloat16 appeared in 2.10).
inline constexpr int kNcclMinimumVersion = 21000;

struct Nccl {
  int version = 0;  // ncclGetVersion: 10000 * major + 100 * minor + patch

  ncclResult_t (*ncclGetVersion)(int*) = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclAllReduce)(const void*, void*, std::size_t, int, int, ncclComm_t,
                                CUstream) = nullptr;
  ncclResult_t (*ncclBroadcast)(const void*, void*, std::size_t, int, int, ncclComm_t,
                                CUstream) = nullptr;
  ncclResult_t (*ncclAllGather)(const void*, void*, std::size_t, int, ncclComm_t,
                                CUstream) = nullptr;
  ncclResult_t (*ncclReduceScatter)(const void*, void*, std::size_t, int, int, ncclComm_t,
                                    CUstream) = nullptr;
  ncclResult_t (*ncclGroupStart)() = nullptr;
  ncclResult_t (*ncclGroupEnd)() = nullptr;
  // Optional: a communicator is aborted (not waited for) after a failure where NCCL has it.
  ncclResult_t (*ncclCommAbort)(ncclComm_t) = nullptr;
  // Optional, for communicators across processes (a later slice): nullptr where not exported.
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
};

// Resolves Nccl's functions from library and reads its version. Returns an empty string on
// success, else what is wrong (the first missing symbol, or a version older than 2.10).
std::string load_nccl(const SharedLibrary& library, Nccl& out);

// "unhandled cuda error (ncclResult_t 1)".
std::string nccl_error_text(const Nccl& nccl, ncclResult_t result);

// Throws Error(kDeviceError) naming function and NCCL's error unless result is ncclSuccess.
void nccl_check(const Nccl& nccl, ncclResult_t result, const char* function);

}  // namespace aethercl::vendor
