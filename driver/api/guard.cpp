// Failure recording for the entry-point guard.
#include "api/guard.h"

#include "runtime/tracer.h"
#include "support/last_error.h"
#include "support/log.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <iterator>

namespace aethercl::api {

void begin_call(const char* function) noexcept {
  clear_last_error();
  set_current_entry_point(function);
}

void record_failure(const char* function, Status status, const char* message) noexcept {
  try {
    std::string text = fmt::format("{}: {}", function, message);
    if (forked_after_opencl_use()) {  // the logger's lock may be held by a thread that is gone
      set_last_error(status, std::move(text));
      return;
    }
    // Refused arguments are a normal API result (debug); device and driver faults are not. A
    // user program that does not compile is the caller's result too.
    bool user_build = std::strncmp(function, "aethercl_program_create", 23) == 0;
    if (status == Status::kDeviceError || status == Status::kInternal ||
        (status == Status::kBuildFailed && !user_build)) {
      log().warn("{}", text);
    } else {
      log().debug("{}", text);
    }
    set_last_error(status, std::move(text));
  } catch (...) {
    set_last_error(status, std::string());
  }
}

void record_forked_refusal(const char* function) noexcept {
  // No allocation here: a parent thread may have held the allocator's locks at fork time.
  char pid[24];
  const char* pid_end = std::to_chars(std::begin(pid), std::end(pid), opencl_user_pid()).ptr;
  set_last_error_fixed(
      Status::kNotInitialized,
      {function, ": this process was forked from process ",
       std::string_view(pid, static_cast<std::size_t>(pid_end - pid)),
       " after that process had started using OpenCL; OpenCL state (contexts, queues, the OpenCL "
       "runtime's threads) cannot cross fork(), so no device call works in this process. Start "
       "workers with the 'spawn' or 'forkserver' start method, exec a new program after fork(), "
       "or fork before the first device call (simulated_kernel_* host-memory calls still work "
       "here)"});
}

void record_unknown_failure(const char* function) noexcept {
  record_failure(function, Status::kInternal, "unknown exception");
}

}  // namespace aethercl::api
