// Work-group size and group count for the row-wise kernels.
#include "ops/row_launch.h"

#include "cl/cl_error.h"

#include <algorithm>

namespace aethercl::ops {
namespace {

constexpr std::size_t kMaxRowGroup = 256;
constexpr std::uint64_t kGroupsPerComputeUnit = 64;

std::size_t floor_power_of_two(std::size_t value) {
  std::size_t power = 1;
  while (power <= value / 2) power *= 2;
  return power;
}

std::size_t kernel_max_group_size(const Device& device, cl_kernel kernel) {
  std::size_t size = 0;
  cl::check(clGetKernelWorkGroupInfo(kernel, device.info().id, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof(size), &size, nullptr),
            "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  return std::max<std::size_t>(1, size);
}

}  // namespace

RowGeometry row_geometry(const Device& device, cl_kernel kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes) {
  const DeviceInfo& info = device.info();
  std::size_t limit = std::min({kMaxRowGroup, std::max<std::size_t>(1, info.max_work_group_size),
                                kernel_max_group_size(device, kernel)});
  if (scratch_element_bytes > 0) {
    std::uint64_t fits = std::max<std::uint64_t>(1, info.local_mem_bytes / scratch_element_bytes);
    limit = static_cast<std::size_t>(std::min<std::uint64_t>(limit, fits));
  }
  std::size_t local = floor_power_of_two(limit);
  while (local > 1 && local / 2 >= cols) local /= 2;  // smallest power of two >= cols
  std::uint64_t group_cap =
      std::max<std::uint64_t>(1, info.compute_units) * kGroupsPerComputeUnit;
  std::uint64_t groups = std::max<std::uint64_t>(1, std::min(rows, group_cap));
  return RowGeometry{static_cast<std::size_t>(groups) * local, local};
}

}  // namespace aethercl::ops
