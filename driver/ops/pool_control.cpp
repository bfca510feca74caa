// aethercl_empty_cache and aethercl_reset_peak_memory_stats on the device's pool.
#include "ops/pool_control.h"

namespace aethercl::ops {

void empty_cache(DeviceCall& call) { call.device().pool().trim(); }

void reset_peak_memory_stats(DeviceCall& call) { call.device().pool().reset_peak(); }

}  // namespace aethercl::ops
