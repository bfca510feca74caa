// Entry points of the sim family: exported, refusing with "not implemented" until the family lands.
#include "api/guard.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

[[noreturn]] void not_implemented() { fail(Status::kNotImplemented, "not implemented"); }

}  // namespace

extern "C" {

AETHERCL_API unsigned long long simulated_kernel_allocate(int gpu_index, size_t size) {
  (void)gpu_index; (void)size;
  return api::guarded(__func__, 0ULL, []() -> unsigned long long { not_implemented(); });
}

AETHERCL_API void simulated_kernel_free(int gpu_index, unsigned long long address, size_t size) {
  (void)gpu_index; (void)address; (void)size;
  api::guarded_void(__func__, [] { not_implemented(); });
}

AETHERCL_API void simulated_kernel_write(int gpu_index, unsigned long long address, size_t size, const void* source) {
  (void)gpu_index; (void)address; (void)size; (void)source;
  api::guarded_void(__func__, [] { not_implemented(); });
}

AETHERCL_API void simulated_kernel_read(int gpu_index, unsigned long long address, size_t size, void* destination) {
  (void)gpu_index; (void)address; (void)size; (void)destination;
  api::guarded_void(__func__, [] { not_implemented(); });
}

AETHERCL_API unsigned long long simulated_matrix_multiply(int gpu_index, unsigned long long address_a, unsigned long long address_b, size_t size_a, size_t size_b, int* shape_a, int* shape_b) {
  (void)gpu_index; (void)address_a; (void)address_b; (void)size_a; (void)size_b; (void)shape_a; (void)shape_b;
  return api::guarded(__func__, 0ULL, []() -> unsigned long long { not_implemented(); });
}

}  // extern "C"
