// Launch geometry of the op families: work-group limits, grid-stride grids, row groups.
#include "ops/launch.h"

#include "support/env.h"

#include <algorithm>

namespace aethercl::ops {
namespace {

constexpr std::size_t kMaxLinearGroup = 256;
constexpr std::size_t kMaxRowGroup = 256;
constexpr std::uint64_t kGroupsPerComputeUnit = 64;
constexpr std::uint64_t kMaxLinearGroups = 1ull << 24;

std::size_t floor_power_of_two(std::size_t value) {
  std::size_t power = 1;
  while (power <= value / 2) power *= 2;
  return power;
}

}  // namespace

std::size_t work_group_limit(const Device& device, const Kernel& kernel, std::size_t cap) {
  std::size_t limit =
      std::min({kernel.max_work_group_size, device.info().max_work_group_size, cap});
  // Testing knob: lets the suites run these kernels with small and odd work-group sizes.
  if (auto forced = env::count(env::kWorkGroupLimit, 1, 1u << 20)) {
    limit = static_cast<std::size_t>(std::min<std::uint64_t>(limit, *forced));
  }
  return std::max<std::size_t>(1, limit);
}

LaunchGeometry linear_geometry(const Device& device, const Kernel& kernel, std::uint64_t n) {
  std::size_t local = work_group_limit(device, kernel, kMaxLinearGroup);
  std::uint64_t groups = std::clamp<std::uint64_t>((n + local - 1) / local, 1, kMaxLinearGroups);
  return LaunchGeometry::linear(static_cast<std::size_t>(groups * local), local);
}

LaunchGeometry capped_groups(const Device& device, std::uint64_t work_groups, std::size_t local) {
  std::uint64_t cap =
      std::max<std::uint64_t>(1, device.info().compute_units) * kGroupsPerComputeUnit;
  std::uint64_t groups = std::max<std::uint64_t>(1, std::min(work_groups, cap));
  return LaunchGeometry::linear(static_cast<std::size_t>(groups) * local, local);
}

RowGeometry row_geometry(const Device& device, const Kernel& kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes) {
  const DeviceInfo& info = device.info();
  std::size_t kernel_limit = std::max<std::size_t>(1, kernel.max_work_group_size);
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
    local = std::min<std::size_t>(
        local, floor_power_of_two(static_cast<std::size_t>(
                   std::min<std::uint64_t>(*forced, kMaxRowGroup))));
  } else if (info.kind == DeviceKind::kCpu) {
    // CPU runtimes run a group's items on one core and pay for every barrier; one item reducing
    // its row serially (still a fixed order) measured 3x faster on PoCL.
    local = 1;
  }
  LaunchGeometry geometry = capped_groups(device, rows, local);
  return RowGeometry{geometry.global[0], local};
}

}  // namespace aethercl::ops
