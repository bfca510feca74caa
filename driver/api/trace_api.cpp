// Entry points: aethercl_trace_start / _stop / _summary.
#include "api/guard.h"
#include "ops/introspection.h"
#include "runtime/runtime.h"
#include "runtime/tracer.h"
#include "support/log.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_trace_start(const char* path) {
  return api::guarded_status(__func__, [&] {
    if (path == nullptr) fail(Status::kInvalidArgument, "path is NULL");
    Tracer::instance().start(path);
    Runtime::instance().enable_profiling_all();
  });
}

AETHERCL_API int aethercl_trace_stop(void) {
  return api::guarded_status(__func__, [] {
    if (!Tracer::instance().active()) fail(Status::kInvalidArgument, "tracing is not on");
    Runtime::instance().finish_all();
    log().info("trace written; per-kernel device time:\n{}", Tracer::instance().stop());
    // Launches on profiling queues bypass the submission thread: tracing's cost ends here.
    Runtime::instance().disable_profiling_all();
  });
}

AETHERCL_API size_t aethercl_trace_summary(char* buffer, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    return ops::copy_out(Tracer::instance().summary_json(), buffer, capacity);
  });
}

}  // extern "C"
