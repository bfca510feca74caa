// Entry points: elementwise ops (add, mul, mul_backward, gelu, gelu_backward).
#include "api/guard.h"
#include "ops/elementwise.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_add_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c,
                                    int num_elements) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::add(call, buffer_a, buffer_b, buffer_c, num_elements);
  });
}

AETHERCL_API int execute_mul_on_gpu(int gpu_index, void* buffer_a, void* buffer_b, void* buffer_c,
                                    int num_elements) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::mul(call, buffer_a, buffer_b, buffer_c, num_elements);
  });
}

AETHERCL_API int execute_mul_backward_on_gpu(int gpu_index, void* buffer_dC, void* buffer_A,
                                             void* buffer_B, void* buffer_dA, void* buffer_dB,
                                             int num_elements) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::mul_backward(call, buffer_dC, buffer_A, buffer_B, buffer_dA, buffer_dB, num_elements);
  });
}

AETHERCL_API int execute_gelu_on_gpu(int gpu_index, void* buffer_input, void* buffer_output,
                                     int num_elements) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::gelu(call, buffer_input, buffer_output, num_elements);
  });
}

AETHERCL_API int execute_gelu_backward_on_gpu(int gpu_index, void* buffer_input,
                                              void* buffer_grad_output, void* buffer_grad_input,
                                              int num_elements) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::gelu_backward(call, buffer_input, buffer_grad_output, buffer_grad_input, num_elements);
  });
}

}  // extern "C"
