// Work-group size and group count for the row-wise kernels.
#include "ops/row_launch.h"

#include "ops/kernel_limits.h"
#include "support/env.h"

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

}  // namespace

RowGeometry row_geometry(const Device& device, cl_kernel kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes) {
  const DeviceInfo& info = device.info();
  std::size_t kernel_limit = std::max<std::size_t>(1, kernel_max_work_group_size(device, kernel));
  std::size_t limit = std::min(
      {kMaxRowGroup, std::max<std::size_t>(1, info.max_work_group_size), kernel_limit});
  if (scratch_element_bytes > 0) {
    std::uint64_t fits = std::max<std::uint64_t>(1, info.local_mem_bytes / scratch_element_bytes);
    limit = static_cast<std::size_t>(std::min<std::uint64_t>(limit, fits));
  }
  std::size_t local = floor_power_of_two(limit);
  while (local > 1 && local / 2 >= cols) local /= 2;  // smallest power of two >= cols
  if (auto forced = env::count(env::kRowGroup, 1, 1u << 20)) {
    // Testing knob: lets CPU test runs exercise the multi-item reductions GPUs use.
    local = std::min(local, floor_power_of_two(static_cast<std::size_t>(*forced)));
  } else if (info.kind == DeviceKind::kCpu) {
    // CPU runtimes run a group's items on one core and pay for every barrier; one item reducing
    // its row serially (still a fixed order) measured 3x faster on PoCL.
    local = 1;
  }
  std::uint64_t group_cap =
      std::max<std::uint64_t>(1, info.compute_units) * kGroupsPerComputeUnit;
  std::uint64_t groups = std::max<std::uint64_t>(1, std::min(rows, group_cap));
  return RowGeometry{static_cast<std::size_t>(groups) * local, local};
}

}  // namespace aethercl::ops
