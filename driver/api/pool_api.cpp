// Entry points: aethercl_empty_cache, aethercl_reset_peak_memory_stats.
#include "api/guard.h"
#include "ops/pool_control.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_empty_cache(int gpu_index) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::empty_cache(call);
  });
}

AETHERCL_API int aethercl_reset_peak_memory_stats(int gpu_index) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::reset_peak_memory_stats(call);
  });
}

}  // extern "C"
