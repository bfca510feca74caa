// Entry points: device memory allocation, free, transfers and clone.
#include "api/guard.h"
#include "ops/memory_ops.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API void* allocate_gpu_memory(int gpu_index, size_t size) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::allocate(call, size);
  });
}

AETHERCL_API void free_gpu_memory(int gpu_index, void* buffer_handle) {
  if (buffer_handle == nullptr) {
    api::begin_call(__func__);
    return;
  }
  api::guarded_void(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::free_buffer(call, buffer_handle);
  });
}

AETHERCL_API int write_host_to_gpu_blocking(int gpu_index, void* gpu_buffer_handle, size_t offset,
                                            size_t size, const void* host_source_ptr) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::write(call, gpu_buffer_handle, offset, size, host_source_ptr);
  });
}

AETHERCL_API int read_gpu_to_host_blocking(int gpu_index, void* gpu_buffer_handle, size_t offset,
                                           size_t size, void* host_destination_ptr) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::read(call, gpu_buffer_handle, offset, size, host_destination_ptr);
  });
}

AETHERCL_API int execute_clone_on_gpu(int gpu_index, void* src_buffer, void* dst_buffer,
                                      size_t size) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::clone(call, src_buffer, dst_buffer, size);
  });
}

}  // extern "C"
