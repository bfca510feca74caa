// Entry point: the Adam update.
#include "api/guard.h"
#include "ops/optimizer.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_adam_update_on_gpu(int gpu_index, void* param_buffer, void* grad_buffer,
                                            void* m_buffer, void* v_buffer, int num_elements,
                                            int t, float lr, float beta1, float beta2, float eps,
                                            float weight_decay) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::adam_update(call, param_buffer, grad_buffer, m_buffer, v_buffer, num_elements,
                     ops::AdamHyper{t, lr, beta1, beta2, eps, weight_decay});
  });
}

}  // extern "C"
