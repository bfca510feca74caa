// Entry points: optimiser steps (one or many per call), gradient clipping and losses (version 3
// training ops; the many-step call is version 4).
#include "api/guard.h"
#include "ops/train/common.h"
#include "ops/train/losses.h"
#include "ops/train/optim.h"

#include <aethercl/driver.h>

using namespace aethercl;
namespace train = aethercl::ops::train;

extern "C" {

AETHERCL_API int aethercl_optimizer_step(int gpu_index, const aethercl_optimizer_desc* desc,
                                         void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::optimizer_step(call, train::read_desc_from(desc, train::kOptimizerDescV3Size));
  });
}

AETHERCL_API int aethercl_optimizer_step_multi(int gpu_index, const aethercl_optimizer_desc* descs,
                                               int count, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::optimizer_step_multi(call, descs, count);
  });
}

AETHERCL_API int aethercl_clip_grad_norm(int gpu_index, int num_tensors, void* const* grads,
                                         const size_t* counts, float max_norm, void* total_norm,
                                         void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::clip_grad_norm(call, num_tensors, grads, counts, max_norm, total_norm);
  });
}

AETHERCL_API int aethercl_mse_loss(int gpu_index, void* pred, void* target, void* loss,
                                   void* grad, size_t count, int reduction, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::mse_loss(call, pred, target, loss, grad, count, reduction);
  });
}

AETHERCL_API int aethercl_cross_entropy(int gpu_index, const aethercl_cross_entropy_desc* desc,
                                        void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::cross_entropy(call, train::read_desc(desc));
  });
}

}  // extern "C"
