// Entry points: embedding_lookup and embedding_backward.
#include "api/guard.h"
#include "ops/embedding.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_embedding_lookup_gpu(int gpu_index, void* idx, void* w, void* o, int b,
                                              int s, int d, int v) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::embedding_lookup(call, idx, w, o, b, s, d, v);
  });
}

AETHERCL_API int execute_embedding_backward_gpu(int gpu_index, void* d_o, void* idx, void* d_w,
                                                int b, int s, int d, int v) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::embedding_backward(call, d_o, idx, d_w, b, s, d, v);
  });
}

}  // extern "C"
