// Entry points: reduce_sum, broadcast_add, add_broadcast_pe.
#include "api/guard.h"
#include "ops/reduce.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int execute_reduce_sum_gpu(int gpu_index, void* in, void* out, int B, int M, int N) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::reduce_sum(call, in, out, B, M, N);
  });
}

AETHERCL_API int execute_broadcast_add_gpu(int gpu_index, void* a, void* b, void* c, int B, int M,
                                           int N) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::broadcast_add(call, a, b, c, B, M, N);
  });
}

AETHERCL_API int execute_add_broadcast_pe_gpu(int gpu_index, void* input, void* pe_slice,
                                              void* output, int B, int S, int E) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::add_broadcast_pe(call, input, pe_slice, output, B, S, E);
  });
}

}  // extern "C"
