// Entry points of the embedding family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API int execute_embedding_lookup_gpu(int gpu_index, void* idx, void* w, void* o, int b, int s, int d, int v) {
  (void)gpu_index; (void)idx; (void)w; (void)o; (void)b; (void)s; (void)d; (void)v;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

AETHERCL_API int execute_embedding_backward_gpu(int gpu_index, void* d_o, void* idx, void* d_w, int b, int s, int d, int v) {
  (void)gpu_index; (void)d_o; (void)idx; (void)d_w; (void)b; (void)s; (void)d; (void)v;
  return api::guarded_status(__func__, [] { not_implemented(); });
}

}  // extern "C"
