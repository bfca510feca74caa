// Entry points: layout ops (transpose, transpose_backward, transpose_batched, transpose_12).
#include "api/guard.h"
#include "ops/layout.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_transpose_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                          int rows, int cols) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::transpose(call, buffer_input, buffer_output, rows, cols);
  });
}

AETHERCL_API int execute_transpose_backward_on_gpu(int gpu_index, void* buffer_dC,
                                                   void* buffer_dA, int rows_A, int cols_A) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::transpose_backward(call, buffer_dC, buffer_dA, rows_A, cols_A);
  });
}

AETHERCL_API int execute_transpose_batched_gpu(int gpu_index, void* in, void* out, int B_flat,
                                               int d1, int d2) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::transpose_batched(call, in, out, B_flat, d1, d2);
  });
}

AETHERCL_API int execute_transpose_12_batched_gpu(int gpu_index, void* buffer_in,
                                                  void* buffer_out, int B, int D1, int D2,
                                                  int D3) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::transpose_12_batched(call, buffer_in, buffer_out, B, D1, D2, D3);
  });
}

}  // extern "C"
