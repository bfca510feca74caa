// Entry points of the loss family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_log_softmax_stable_gpu(int gpu_index, void* input_logits, void* output_log_probs, int B, int S, int V) {
  (void)gpu_index; (void)input_logits; (void)output_log_probs; (void)B; (void)S; (void)V;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_cross_entropy_loss_grad_gpu(int gpu_index, void* log_probs, void* target_indices, void* grad_input, void* loss_per_sample, int B, int S, int V) {
  (void)gpu_index; (void)log_probs; (void)target_indices; (void)grad_input; (void)loss_per_sample; (void)B; (void)S; (void)V;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
