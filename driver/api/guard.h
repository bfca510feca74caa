// The boundary guard every extern "C" entry point runs its body in: it clears the thread's last
// error, and turns every exception into the documented failure value plus a last-error message
// prefixed with the function name. Nothing crosses the C boundary. In a child forked after the
// process used OpenCL it refuses device calls before running them (see support/fork_state.h).
#pragma once

#include "support/error.h"
#include "support/fork_state.h"

#include <string>
#include <type_traits>

namespace aethercl::api {

void record_failure(const char* function, Status status, const char* message) noexcept;
void record_unknown_failure(const char* function) noexcept;
// The refusal of a device call in a forked child: no logging and no allocation (a parent thread
// may have held the logger's or the allocator's lock at fork time).
void record_forked_refusal(const char* function) noexcept;
// Clears the thread's last error and names the running entry point for traces.
void begin_call(const char* function) noexcept;

// What an entry point touches: kHostOnly functions (host blocks of the simulated_* API) keep
// working in a forked child; kDevice functions are refused there.
enum class Scope { kDevice, kHostOnly };

template <typename Result, typename Body>
Result guarded(const char* function, Result failure, Body&& body,
               Scope scope = Scope::kDevice) noexcept {
  begin_call(function);
  if (scope == Scope::kDevice && forked_after_opencl_use()) {
    record_forked_refusal(function);
    return failure;
  }
  try {
    return body();
  } catch (const Error& error) {
    record_failure(function, error.status(), error.what());
  } catch (const std::bad_alloc&) {
    record_failure(function, Status::kOutOfMemory, "host memory exhausted");
  } catch (const std::exception& error) {
    record_failure(function, Status::kInternal, error.what());
  } catch (...) {
    record_unknown_failure(function);
  }
  return failure;
}

// For int entry points: the body returns nothing; success is 1, failure 0.
template <typename Body>
int guarded_status(const char* function, Body&& body, Scope scope = Scope::kDevice) noexcept {
  return guarded(
      function, 0,
      [&] {
        body();
        return 1;
      },
      scope);
}

// For void entry points: failures leave only the message.
template <typename Body>
void guarded_void(const char* function, Body&& body, Scope scope = Scope::kDevice) noexcept {
  guarded(
      function, 0,
      [&] {
        body();
        return 0;
      },
      scope);
}

}  // namespace aethercl::api
