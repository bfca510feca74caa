// Entry points: Philox random fills and dropout (version 3 training ops).
#include "api/guard.h"
#include "ops/train/common.h"
#include "ops/train/rng.h"

#include <aethercl/driver.h>

using namespace aethercl;
namespace train = aethercl::ops::train;

extern "C" {

AETHERCL_API int aethercl_rng_fill(int gpu_index, void* buffer, size_t count, int distribution,
                                   float a, float b, unsigned long long seed,
                                   unsigned long long offset, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::rng_fill(call, buffer, count, distribution, a, b, seed, offset);
  });
}

AETHERCL_API int aethercl_dropout(int gpu_index, void* x, void* y, void* mask, size_t count,
                                  float p, unsigned long long seed, unsigned long long offset,
                                  void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::dropout(call, x, y, mask, count, p, seed, offset);
  });
}

AETHERCL_API int aethercl_dropout_backward(int gpu_index, void* dy, void* mask, void* dx,
                                           size_t count, float p, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::dropout_backward(call, dy, mask, dx, count, p);
  });
}

}  // extern "C"
