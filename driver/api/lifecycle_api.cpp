// Entry points: initialize_gpu, shutdown_driver.
#include "api/guard.h"
#include "runtime/runtime.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int initialize_gpu(int gpu_index) {
  return api::guarded_status(__func__, [&] { Runtime::instance().initialize(gpu_index); });
}

AETHERCL_API void shutdown_driver(void) {
  api::guarded_void(__func__, [] { Runtime::instance().shutdown(); });
}

}  // extern "C"
