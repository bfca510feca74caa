// Entry points of the layout family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_transpose_on_gpu(int gpu_index, void* buffer_input, void* buffer_output, int rows, int cols) {
  (void)gpu_index; (void)buffer_input; (void)buffer_output; (void)rows; (void)cols;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_transpose_backward_on_gpu(int gpu_index, void* buffer_dC, void* buffer_dA, int rows_A, int cols_A) {
  (void)gpu_index; (void)buffer_dC; (void)buffer_dA; (void)rows_A; (void)cols_A;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_transpose_batched_gpu(int gpu_index, void* in, void* out, int B_flat, int d1, int d2) {
  (void)gpu_index; (void)in; (void)out; (void)B_flat; (void)d1; (void)d2;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_transpose_12_batched_gpu(int gpu_index, void* buffer_in, void* buffer_out, int B, int D1, int D2, int D3) {
  (void)gpu_index; (void)buffer_in; (void)buffer_out; (void)B; (void)D1; (void)D2; (void)D3;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
