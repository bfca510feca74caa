// Per-kernel launch limits: the work-group size a built kernel allows on its device.
#pragma once

#include "ops/launch_geometry.h"
#include "runtime/device.h"

#include <cstddef>

namespace aethercl::ops {

// CL_KERNEL_WORK_GROUP_SIZE: the largest work-group the built kernel accepts on the device.
std::size_t kernel_max_work_group_size(const Device& device, cl_kernel kernel);

// min(CL_KERNEL_WORK_GROUP_SIZE, device max work-group size, cap, AETHERCL_WG_LIMIT if set), at
// least 1. Kernels that use this must work with any local size it returns (no power-of-two or
// fixed-size assumption).
std::size_t kernel_work_group_limit(const Device& device, cl_kernel kernel, std::size_t cap);

// linear_geometry() for a grid-stride kernel, with the local size also bounded by the kernel's
// own limit.
Geometry1D kernel_linear_geometry(const Device& device, cl_kernel kernel, std::uint64_t n);

}  // namespace aethercl::ops
