// Failure recording for the entry-point guard.
#include "api/guard.h"

#include "runtime/tracer.h"
#include "support/last_error.h"
#include "support/log.h"

#include <fmt/format.h>

namespace aethercl::api {

void begin_call(const char* function) noexcept {
  clear_last_error();
  set_current_entry_point(function);
}

void record_failure(const char* function, Status status, const char* message) noexcept {
  try {
    std::string text = fmt::format("{}: {}", function, message);
    // Refused arguments are a normal API result (debug); device and driver faults are not.
    if (status == Status::kDeviceError || status == Status::kInternal ||
        status == Status::kBuildFailed) {
      log().warn("{}", text);
    } else {
      log().debug("{}", text);
    }
    set_last_error(status, std::move(text));
  } catch (...) {
    set_last_error(status, std::string());
  }
}

void record_unknown_failure(const char* function) noexcept {
  record_failure(function, Status::kInternal, "unknown exception");
}

}  // namespace aethercl::api
