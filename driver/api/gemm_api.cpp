// Entry points: the general matrix product and the matmul precision (ABI version 3).
#include "api/guard.h"
#include "gemm/compute_mode.h"
#include "gemm/general_gemm.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

// Streams are not part of this build yet: only the default stream (NULL) exists.
void require_default_stream(const void* stream) {
  if (stream != nullptr) {
    fail(Status::kInvalidHandle, "stream ({}) is not a stream of this device: only NULL (the "
         "default stream) exists in this build", stream);
  }
}

}  // namespace

extern "C" {

AETHERCL_API int aethercl_gemm(int gpu_index, const aethercl_gemm_desc* desc, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    require_default_stream(stream);
    gemm::general_gemm(call, desc);
  });
}

AETHERCL_API int aethercl_set_matmul_precision(int gpu_index, int compute) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    gemm::set_matmul_precision(call, gemm::compute_mode_from_code(compute, "compute"));
  });
}

}  // extern "C"
