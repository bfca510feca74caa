// Entry points of the reduce family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_reduce_sum_gpu(int gpu_index, void* in, void* out, int B, int M, int N) {
  (void)gpu_index; (void)in; (void)out; (void)B; (void)M; (void)N;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_broadcast_add_gpu(int gpu_index, void* a, void* b, void* c, int B, int M, int N) {
  (void)gpu_index; (void)a; (void)b; (void)c; (void)B; (void)M; (void)N;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_add_broadcast_pe_gpu(int gpu_index, void* input, void* pe_slice, void* output, int B, int S, int E) {
  (void)gpu_index; (void)input; (void)pe_slice; (void)output; (void)B; (void)S; (void)E;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
