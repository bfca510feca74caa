// Entry points of the host-memory ("simulated") API (docs/ABI.md section 4.10). gpu_index is
// ignored by the host-block functions, which also keep working in a forked child
// (Scope::kHostOnly); the matrix product runs on the device gpu_index resolves to.
#include "api/guard.h"
#include "ops/sim_ops.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API unsigned long long simulated_kernel_allocate(int gpu_index, size_t size) {
  (void)gpu_index;
  return api::guarded(
      __func__, 0ULL, [&]() -> unsigned long long { return ops::sim_allocate(size); },
      api::Scope::kHostOnly);
}

AETHERCL_API void simulated_kernel_free(int gpu_index, unsigned long long address, size_t size) {
  (void)gpu_index;
  (void)size;  // docs/ABI.md section 4.10: the block's own size counts
  api::guarded_void(__func__, [&] { ops::sim_free(address); }, api::Scope::kHostOnly);
}

AETHERCL_API void simulated_kernel_write(int gpu_index, unsigned long long address, size_t size,
                                         const void* source) {
  (void)gpu_index;
  api::guarded_void(
      __func__, [&] { ops::sim_write(address, size, source); }, api::Scope::kHostOnly);
}

AETHERCL_API void simulated_kernel_read(int gpu_index, unsigned long long address, size_t size,
                                        void* destination) {
  (void)gpu_index;
  api::guarded_void(
      __func__, [&] { ops::sim_read(address, size, destination); }, api::Scope::kHostOnly);
}

AETHERCL_API unsigned long long simulated_matrix_multiply(int gpu_index,
                                                          unsigned long long address_a,
                                                          unsigned long long address_b,
                                                          size_t size_a, size_t size_b,
                                                          int* shape_a, int* shape_b) {
  return api::guarded(__func__, 0ULL, [&]() -> unsigned long long {
    DeviceCall call(gpu_index);
    return ops::sim_matrix_multiply(call, address_a, address_b, size_a, size_b, shape_a, shape_b);
  });
}

}  // extern "C"
