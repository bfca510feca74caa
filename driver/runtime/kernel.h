// A built kernel as the program cache hands it out: the OpenCL object plus what launching it needs
// to know, queried once when the kernel is created.
#pragma once

#include "cl/handle.h"

#include <cstddef>
#include <string>

namespace aethercl {

struct Kernel {
  cl::Kernel handle;
  std::string name;                       // the kernel function's name
  std::size_t max_work_group_size = 1;    // CL_KERNEL_WORK_GROUP_SIZE on the cache's device

  cl_kernel get() const { return handle.get(); }
};

}  // namespace aethercl
