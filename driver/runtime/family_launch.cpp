// Launch geometry of the op families: work-group limits, grid-stride grids, row groups.
#include "runtime/family_launch.h"

#include "support/env.h"

#include <algorithm>
#include <string_view>

namespace aethercl::ops {
namespace {

constexpr std::size_t kMaxLinearGroup = 256;
constexpr std::size_t kMaxRowGroup = 256;
// Elements per item a row kernel holds in registers (ROW_REGS in kernels/rowwise.cl), and the
// smallest group a longer row gets: rows of 64..1024 run as 64 items of up to 16 elements, so a
// GPU multiprocessor keeps many rows (groups) in flight instead of a few wide ones.
constexpr std::uint64_t kRowRegisters = 16;
constexpr std::uint64_t kMinRegisterGroup = 64;
constexpr std::uint64_t kGroupsPerComputeUnit = 64;
constexpr std::uint64_t kMaxLinearGroups = 1ull << 24;

std::size_t floor_power_of_two(std::size_t value) {
  std::size_t power = 1;
  while (power <= value / 2) power *= 2;
  return power;
}

}  // namespace

bool cpu_kernel_forms(const Device& device) {
  return device.info().kind == DeviceKind::kCpu && env::flag(env::kCpuKernels, true);
}

bool row_lanes_forms(const Device& device) {
  return cpu_kernel_forms(device) && !env::count(env::kRowGroup, 1, 1u << 20).has_value();
}

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

bool row_kernels_use_registers() {
  auto mode = env::get(env::kRowKernel);
  return !mode || *mode != "loop";
}

bool row_kernel_has_register_path(const char* kernel_name) {
  std::string_view name(kernel_name);
  return name == "rowwise_softmax" || name == "rowwise_log_softmax" ||
         name == "rowwise_softmax_backward" || name == "rowwise_layernorm" ||
         name == "rowwise_layernorm_backward";
}

RowGeometry row_geometry(const Device& device, const Kernel& kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes, bool registers) {
  const DeviceInfo& info = device.info();
  std::size_t kernel_limit = std::max<std::size_t>(1, kernel.max_work_group_size);
  std::size_t limit = std::min(
      {kMaxRowGroup, std::max<std::size_t>(1, info.max_work_group_size), kernel_limit});
  if (scratch_element_bytes > 0) {
    std::uint64_t fits = std::max<std::uint64_t>(1, info.local_mem_bytes / scratch_element_bytes);
    limit = static_cast<std::size_t>(std::min<std::uint64_t>(limit, fits));
  }
  // Items the row needs: one per element for short rows, and at least kMinRegisterGroup with up
  // to kRowRegisters elements each where the row fits the registers of a full group.
  // AETHERCL_ROW_GROUP_MIN (benchmarks) raises that minimum: fewer elements per item.
  const std::uint64_t min_group =
      env::count(env::kRowGroupMin, 1, kMaxRowGroup).value_or(kMinRegisterGroup);
  std::uint64_t wanted = cols;
  if (registers && cols > min_group && cols <= kMaxRowGroup * kRowRegisters) {
    wanted = std::max<std::uint64_t>(min_group, (cols + kRowRegisters - 1) / kRowRegisters);
  }
  std::size_t local = floor_power_of_two(limit);
  while (local > 1 && local / 2 >= wanted) local /= 2;  // smallest power of two >= wanted
  if (auto forced = env::count(env::kRowGroup, 1, 1u << 20)) {
    // Testing knob: lets CPU test runs exercise the multi-item reductions GPUs use.
    local = std::min<std::size_t>(
        local, floor_power_of_two(static_cast<std::size_t>(
                   std::min<std::uint64_t>(*forced, kMaxRowGroup))));
  } else if (info.kind == DeviceKind::kCpu) {
    // CPU runtimes run a group's items on one core and pay for every barrier; one item reducing
    // its row serially (still a fixed order) measured faster on PoCL (docs/PERFORMANCE.md).
    local = 1;
  }
  LaunchGeometry geometry = capped_groups(device, rows, local);
  return RowGeometry{geometry.global[0], local};
}

}  // namespace aethercl::ops
