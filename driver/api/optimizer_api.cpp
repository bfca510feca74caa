// Entry points of the optimizer family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_adam_update_on_gpu(int gpu_index, void* param_buffer, void* grad_buffer, void* m_buffer, void* v_buffer, int num_elements, int t, float lr, float beta1, float beta2, float eps, float weight_decay) {
  (void)gpu_index; (void)param_buffer; (void)grad_buffer; (void)m_buffer; (void)v_buffer; (void)num_elements; (void)t; (void)lr; (void)beta1; (void)beta2; (void)eps; (void)weight_decay;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
