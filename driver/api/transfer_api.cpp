// Entry points: pinned host memory and asynchronous transfers, copies, memset.
#include "api/guard.h"
#include "ops/transfer_ops.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API void* aethercl_host_alloc(int gpu_index, size_t size) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::host_alloc(call, size);
  });
}

AETHERCL_API int aethercl_host_free(void* host_ptr) {
  return api::guarded_status(__func__, [&] { ops::host_free(host_ptr); });
}

AETHERCL_API int aethercl_write_async(int gpu_index, void* buffer, size_t offset, size_t size,
                                      const void* source, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::write_async(call, buffer, offset, size, source, stream);
  });
}

AETHERCL_API int aethercl_read_async(int gpu_index, void* buffer, size_t offset, size_t size,
                                     void* destination, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::read_async(call, buffer, offset, size, destination, stream);
  });
}

AETHERCL_API int aethercl_copy(int gpu_index, void* dst, size_t dst_offset, void* src,
                               size_t src_offset, size_t size, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::copy(call, dst, dst_offset, src, src_offset, size, stream);
  });
}

AETHERCL_API int aethercl_memset(int gpu_index, void* buffer, size_t offset, size_t size,
                                 int value, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::memset(call, buffer, offset, size, value, stream);
  });
}

}  // extern "C"
