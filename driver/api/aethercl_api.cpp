// Entry points: the aethercl_* extensions (versions, errors, devices, statistics, labels).
#include "api/guard.h"
#include "ops/introspection.h"
#include "runtime/device_list.h"
#include "support/last_error.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API const char* aethercl_version(void) { return AETHERCL_VERSION_STRING; }

AETHERCL_API int aethercl_abi_version(void) { return AETHERCL_ABI_VERSION; }

// These two read the last error and must not clear it.
AETHERCL_API const char* aethercl_last_error(void) { return last_error_message(); }

AETHERCL_API int aethercl_last_error_code(void) { return static_cast<int>(last_error_status()); }

AETHERCL_API const char* aethercl_status_name(int status) { return status_name(status); }

AETHERCL_API int aethercl_device_count(void) {
  return api::guarded(__func__, 0, [] { return static_cast<int>(enumerated_devices().size()); });
}

AETHERCL_API size_t aethercl_device_info(int gpu_index, char* buffer, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    return ops::copy_out(ops::device_json(gpu_index), buffer, capacity);
  });
}

AETHERCL_API int aethercl_synchronize(int gpu_index) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.device().refuse_during_any_capture("aethercl_synchronize waits for every stream of the "
                                            "device");
    call.device().synchronize();
  });
}

AETHERCL_API size_t aethercl_memory_stats(int gpu_index, char* buffer, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    DeviceCall call(gpu_index);
    return ops::copy_out(ops::memory_stats_json(call), buffer, capacity);
  });
}

AETHERCL_API int aethercl_set_buffer_label(int gpu_index, void* buffer_handle, const char* label) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::set_label(call, buffer_handle, label);
  });
}

}  // extern "C"
