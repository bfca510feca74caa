// The caller's controls over a device's memory pool: release the cache, restart the peak.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

void empty_cache(DeviceCall& call);
void reset_peak_memory_stats(DeviceCall& call);

}  // namespace aethercl::ops
