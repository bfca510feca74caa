// Shared fixtures for the unit tests: the first visible device, initialised once.
#pragma once

#include "runtime/device_list.h"
#include "runtime/runtime.h"

#include <doctest/doctest.h>

#include <cstdlib>

namespace aethercl::testing {

// Sets an environment variable for one scope (POSIX setenv; _putenv_s on Windows).
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* variable, const char* value) : name(variable) {
#ifdef _WIN32
    _putenv_s(name, value);
#else
    setenv(name, value, 1);
#endif
  }
  ~ScopedEnv() {
#ifdef _WIN32
    _putenv_s(name, "");
#else
    unsetenv(name);
#endif
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// A Device of its own on visible device 0 (independent of the Runtime singleton).
inline Device& test_device() {
  static Device* device = [] {
    REQUIRE_MESSAGE(!visible_devices().empty(), "no OpenCL device: install pocl-opencl-icd");
    return new Device(0, visible_devices().front());
  }();
  return *device;
}

}  // namespace aethercl::testing
