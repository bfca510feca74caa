// Symbol resolution and error text of NCCL.
#include "vendor/nccl.h"

#include "support/error.h"

#include <fmt/format.h>

namespace aethercl::vendor {
namespace {

template <typename Function>
void resolve(const SharedLibrary& library, Function& out, const char* name, std::string& missing) {
  out = reinterpret_cast<Function>(library.symbol(name));
  if (out == nullptr && missing.empty()) missing = name;
}

}  // namespace

std::string load_nccl(const SharedLibrary& library, Nccl& out) {
  std::string missing;
  resolve(library, out.ncclGetVersion, "ncclGetVersion", missing);
  resolve(library, out.ncclGetErrorString, "ncclGetErrorString", missing);
  resolve(library, out.ncclCommInitAll, "ncclCommInitAll", missing);
  resolve(library, out.ncclCommDestroy, "ncclCommDestroy", missing);
  resolve(library, out.ncclAllReduce, "ncclAllReduce", missing);
  resolve(library, out.ncclBroadcast, "ncclBroadcast", missing);
  resolve(library, out.ncclAllGather, "ncclAllGather", missing);
  resolve(library, out.ncclReduceScatter, "ncclReduceScatter", missing);
  resolve(library, out.ncclGroupStart, "ncclGroupStart", missing);
  resolve(library, out.ncclGroupEnd, "ncclGroupEnd", missing);
  if (!missing.empty()) return fmt::format("it does not export {}", missing);
  std::string optional;
  resolve(library, out.ncclCommAbort, "ncclCommAbort", optional);
  resolve(library, out.ncclGetUniqueId, "ncclGetUniqueId", optional);
  resolve(library, out.ncclCommInitRank, "ncclCommInitRank", optional);
  ncclResult_t status = out.ncclGetVersion(&out.version);
  if (status != kNcclSuccess) {
    return fmt::format("ncclGetVersion failed: {}", nccl_error_text(out, status));
  }
  if (out.version < kNcclMinimumVersion) {
    return fmt::format("its version {} is older than 2.10 (no ncclAvg, no bfloat16)",
                       out.version);
  }
  return {};
}

std::string nccl_error_text(const Nccl& nccl, ncclResult_t result) {
  const char* text = nccl.ncclGetErrorString != nullptr ? nccl.ncclGetErrorString(result) : nullptr;
  return fmt::format("{} (ncclResult_t {})", text != nullptr ? text : "no description", result);
}

void nccl_check(const Nccl& nccl, ncclResult_t result, const char* function) {
  if (result == kNcclSuccess) return;
  fail(Status::kDeviceError, "{} failed: {}", function, nccl_error_text(nccl, result));
}

}  // namespace aethercl::vendor
