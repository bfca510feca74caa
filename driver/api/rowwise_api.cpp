// Entry points of the rowwise family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_layernorm_on_gpu(int gpu_index, void* buffer_input, void* buffer_output, int num_rows, int row_size, float eps) {
  (void)gpu_index; (void)buffer_input; (void)buffer_output; (void)num_rows; (void)row_size; (void)eps;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_layernorm_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_x, void* buffer_dx, int num_rows, int row_size, float eps) {
  (void)gpu_index; (void)buffer_dy; (void)buffer_x; (void)buffer_dx; (void)num_rows; (void)row_size; (void)eps;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_softmax_on_gpu(int gpu_index, void* buffer_input, void* buffer_output, int num_rows, int row_size) {
  (void)gpu_index; (void)buffer_input; (void)buffer_output; (void)num_rows; (void)row_size;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_softmax_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_y, void* buffer_dx, int num_rows, int row_size) {
  (void)gpu_index; (void)buffer_dy; (void)buffer_y; (void)buffer_dx; (void)num_rows; (void)row_size;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
