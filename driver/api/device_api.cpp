// Entry point: simulated_get_compute_unit_count (a device query despite its name).
#include "api/guard.h"
#include "runtime/runtime.h"

#include <aethercl/driver.h>

#include <shared_mutex>

using namespace aethercl;

namespace {

// docs/ABI.md section 4.10: the OCL-LLM original's fallback when no device is initialised.
constexpr unsigned int kFallbackComputeUnits = 16;

}  // namespace

extern "C" {

AETHERCL_API unsigned int simulated_get_compute_unit_count(int gpu_index) {
  return api::guarded(__func__, kFallbackComputeUnits, [&] {
    Runtime& runtime = Runtime::instance();
    std::shared_lock lock(runtime.lifecycle_mutex());
    Device* device = runtime.try_resolve(gpu_index);
    return device ? device->info().compute_units : kFallbackComputeUnits;
  });
}

}  // extern "C"
