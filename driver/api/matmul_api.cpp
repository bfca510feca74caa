// Entry points: matrix products (docs/ABI.md section 4.4) on the GEMM engine.
#include "api/guard.h"
#include "ops/matmul.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_matmul_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                       void* buffer_c, int B, int M, int N, int K) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::matmul(call, buffer_a, buffer_b, buffer_c, B, M, N, K);
  });
}

AETHERCL_API int execute_matmul_backward_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                                void* buffer_dc, void* buffer_da, void* buffer_db,
                                                int B, int M, int N, int K) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::matmul_backward(call, buffer_a, buffer_b, buffer_dc, buffer_da, buffer_db, B, M, N, K);
  });
}

AETHERCL_API int execute_matmul_batched_on_gpu(int gpu_index, void* buffer_a, void* buffer_b,
                                               void* buffer_c, int B, int M, int N, int K) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::matmul_batched(call, buffer_a, buffer_b, buffer_c, B, M, N, K);
  });
}

AETHERCL_API int execute_matmul_batched_backward_on_gpu(int gpu_index, void* buffer_a,
                                                        void* buffer_b, void* buffer_dc,
                                                        void* buffer_da, void* buffer_db, int B,
                                                        int M, int N, int K) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::matmul_batched_backward(call, buffer_a, buffer_b, buffer_dc, buffer_da, buffer_db, B, M,
                                 N, K);
  });
}

}  // extern "C"
