// Entry points: loss ops (log_softmax_stable, cross_entropy_loss_grad).
#include "api/guard.h"
#include "ops/loss.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_log_softmax_stable_gpu(int gpu_index, void* input_logits,
                                                void* output_log_probs, int B, int S, int V) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::log_softmax(call, input_logits, output_log_probs, B, S, V);
  });
}

AETHERCL_API int execute_cross_entropy_loss_grad_gpu(int gpu_index, void* log_probs,
                                                     void* target_indices, void* grad_input,
                                                     void* loss_per_sample, int B, int S, int V) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::cross_entropy(call, log_probs, target_indices, grad_input, loss_per_sample, B, S, V);
  });
}

}  // extern "C"
