// Entry points: row-wise ops (softmax, softmax_backward, layernorm, layernorm_backward).
#include "api/guard.h"
#include "ops/rowwise.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_layernorm_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                          int num_rows, int row_size, float eps) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::layernorm(call, buffer_input, buffer_output, num_rows, row_size, eps);
  });
}

AETHERCL_API int execute_layernorm_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_x,
                                                   void* buffer_dx, int num_rows, int row_size,
                                                   float eps) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::layernorm_backward(call, buffer_dy, buffer_x, buffer_dx, num_rows, row_size, eps);
  });
}

AETHERCL_API int execute_softmax_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                        int num_rows, int row_size) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::softmax(call, buffer_input, buffer_output, num_rows, row_size);
  });
}

AETHERCL_API int execute_softmax_backward_on_gpu(int gpu_index, void* buffer_dy, void* buffer_y,
                                                 void* buffer_dx, int num_rows, int row_size) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::softmax_backward(call, buffer_dy, buffer_y, buffer_dx, num_rows, row_size);
  });
}

}  // extern "C"
