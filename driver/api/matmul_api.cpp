// Entry points of the matmul family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_matmul_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c, int B, int M, int N, int K) {
  (void)gpu_index; (void)buffer_a; (void)buffer_b; (void)buffer_c; (void)B; (void)M; (void)N; (void)K;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_matmul_backward_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_dc, void* buffer_da, void* buffer_db, int B, int M, int N, int K) {
  (void)gpu_index; (void)buffer_a; (void)buffer_b; (void)buffer_dc; (void)buffer_da; (void)buffer_db; (void)B; (void)M; (void)N; (void)K;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_matmul_batched_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c, int B, int M, int N, int K) {
  (void)gpu_index; (void)buffer_a; (void)buffer_b; (void)buffer_c; (void)B; (void)M; (void)N; (void)K;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_matmul_batched_backward_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_dc, void* buffer_da, void* buffer_db, int B, int M, int N, int K) {
  (void)gpu_index; (void)buffer_a; (void)buffer_b; (void)buffer_dc; (void)buffer_da; (void)buffer_db; (void)B; (void)M; (void)N; (void)K;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
