// Entry points: typed memory (dtype tags, conversions), the kernel log and OpenCL interop.
#include "api/guard.h"
#include "ops/interop.h"
#include "ops/introspection.h"
#include "ops/typed_memory.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_buffer_set_dtype(int gpu_index, void* buffer, int dtype) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::set_dtype(call, buffer, dtype);
  });
}

AETHERCL_API int aethercl_convert(int gpu_index, void* src, int src_dtype, void* dst, int dst_dtype,
                                  size_t count, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::convert(call, src, src_dtype, dst, dst_dtype, count, stream);
  });
}

AETHERCL_API size_t aethercl_kernel_log(int gpu_index, char* buffer, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    DeviceCall call(gpu_index);
    return ops::copy_out(ops::kernel_log_json(call), buffer, capacity);
  });
}

AETHERCL_API void* aethercl_cl_context(int gpu_index) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceScope scope(gpu_index);
    return static_cast<void*>(ops::cl_context_of(scope));
  });
}

AETHERCL_API void* aethercl_cl_queue(int gpu_index, void* stream) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return static_cast<void*>(ops::cl_queue_of(call, stream));
  });
}

AETHERCL_API void* aethercl_cl_mem(int gpu_index, void* buffer) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return static_cast<void*>(ops::cl_mem_of(call, buffer));
  });
}

}  // extern "C"
