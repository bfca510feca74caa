// Entry point: the general matrix product with a fused bias/activation epilogue (ABI version 4).
#include "api/guard.h"
#include "gemm/fused_gemm.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_gemm_fused(int gpu_index, const aethercl_gemm_desc* desc,
                                     const aethercl_gemm_epilogue* epilogue, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    gemm::fused_gemm(call, desc, epilogue);
  });
}

}  // extern "C"
