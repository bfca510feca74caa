// Queries CL_KERNEL_WORK_GROUP_SIZE for the op families that pick their own local sizes.
#include "ops/kernel_limits.h"

#include "cl/cl_error.h"
#include "support/env.h"

#include <algorithm>

namespace aethercl::ops {

std::size_t kernel_max_work_group_size(const Device& device, cl_kernel kernel) {
  std::size_t size = 0;
  cl::check(clGetKernelWorkGroupInfo(kernel, device.info().id, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof(size), &size, nullptr),
            "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  return size;
}

std::size_t kernel_work_group_limit(const Device& device, cl_kernel kernel, std::size_t cap) {
  std::size_t limit =
      std::min({kernel_max_work_group_size(device, kernel), device.info().max_work_group_size, cap});
  // Testing knob: lets the suites run these kernels with small and odd work-group sizes.
  if (auto forced = env::count(env::kWorkGroupLimit, 1, 1u << 20)) {
    limit = std::min<std::size_t>(limit, static_cast<std::size_t>(*forced));
  }
  return std::max<std::size_t>(1, limit);
}

Geometry1D kernel_linear_geometry(const Device& device, cl_kernel kernel, std::uint64_t n) {
  return linear_geometry(kernel_work_group_limit(device, kernel, 256), n);
}

}  // namespace aethercl::ops
