// The boundary guard every extern "C" entry point runs its body in: it clears the thread's last
// error, and turns every exception into the documented failure value plus a last-error message
// prefixed with the function name. Nothing crosses the C boundary.
#pragma once

#include "support/error.h"

#include <string>
#include <type_traits>

namespace aethercl::api {

void record_failure(const char* function, Status status, const char* message) noexcept;
void record_unknown_failure(const char* function) noexcept;
// Clears the thread's last error and names the running entry point for traces.
void begin_call(const char* function) noexcept;

template <typename Result, typename Body>
Result guarded(const char* function, Result failure, Body&& body) noexcept {
  begin_call(function);
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
int guarded_status(const char* function, Body&& body) noexcept {
  return guarded(function, 0, [&] {
    body();
    return 1;
  });
}

// For void entry points: failures leave only the message.
template <typename Body>
void guarded_void(const char* function, Body&& body) noexcept {
  guarded(function, 0, [&] {
    body();
    return 0;
  });
}

}  // namespace aethercl::api
