// A built kernel as the program cache hands it out: the OpenCL object plus what launching it needs
// to know, queried once when the kernel is created.
#pragma once

#include "cl/handle.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aethercl {

// What was last bound to one argument of a kernel (small values only), so that binding the same
// value again can be skipped (runtime/launch.cpp).
struct BoundArg {
  static constexpr std::size_t kMaxBytes = 16;
  bool known = false;
  bool local = false;
  std::uint32_t size = 0;
  unsigned char bytes[kMaxBytes] = {};
};

struct Kernel {
  cl::Kernel handle;
  std::string name;                       // the kernel function's name
  std::size_t max_work_group_size = 1;    // CL_KERNEL_WORK_GROUP_SIZE on the cache's device
  // Argument values bound so far; touched only by whoever submits launches of the kernel's device
  // (the submission thread, or callers holding the device's lock when there is none).
  std::vector<BoundArg> bound;

  cl_kernel get() const { return handle.get(); }
};

}  // namespace aethercl
