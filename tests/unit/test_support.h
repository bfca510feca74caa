// Shared fixtures for the unit tests: the first visible device, initialised once.
#pragma once

#include "runtime/device_list.h"
#include "runtime/runtime.h"

#include <doctest/doctest.h>

namespace aethercl::testing {

// A Device of its own on visible device 0 (independent of the Runtime singleton).
inline Device& test_device() {
  static Device* device = [] {
    REQUIRE_MESSAGE(!visible_devices().empty(), "no OpenCL device: install pocl-opencl-icd");
    return new Device(0, visible_devices().front());
  }();
  return *device;
}

}  // namespace aethercl::testing
