// The launch helper of the op families: pick a kernel, choose its geometry within the kernel's and
// the device's limits, and enqueue it as a launch record (runtime/launch.h) with
// DeviceCall::launch. No family binds arguments or enqueues by itself. It sits in runtime/ (its
// namespace stays ops::) so that gemm/ and multi/, below ops/, launch their kernels with it too.
#pragma once

#include "runtime/device_call.h"
#include "runtime/launch.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace aethercl::ops {

// The kernel `name` (a string literal) of the family `family` (kernels/<family>.cl).
inline Kernel& family_kernel(DeviceCall& call, const char* family, const char* name) {
  return call.device().programs().literal_kernel(family, name);
}
// The same built with extra -D options (a program of its own per option string).
inline Kernel& family_kernel(DeviceCall& call, const char* family, const char* name,
                             const std::string& extra_options) {
  return call.device().programs().kernel(family, name, extra_options);
}

// Whether the op families use their CPU forms (whole rows and blocks per work-item in ACL_LANES
// lanes, no barriers) on this device: CPU devices, unless AETHERCL_CPU_KERNELS=0 (tests run the GPU
// forms on PoCL with it).
bool cpu_kernel_forms(const Device& device);

// Whether the row kernels use their _lanes forms (one item per row): cpu_kernel_forms, unless
// AETHERCL_ROW_GROUP forces the work-group reductions GPUs use (tests exercise those on PoCL).
bool row_lanes_forms(const Device& device);

// min(the kernel's CL_KERNEL_WORK_GROUP_SIZE, the device maximum, cap, AETHERCL_WG_LIMIT if set),
// at least 1. Kernels sized with this must work with any local size it returns (no power-of-two
// or fixed-size assumption).
std::size_t work_group_limit(const Device& device, const Kernel& kernel, std::size_t cap);

// For grid-stride kernels over n items, work-groups of up to 256 items within work_group_limit:
// one item per element up to 2^24 groups (every int-sized n), so the stride loop normally runs
// once. One pass per item is what CPU runtimes such as PoCL vectorise across work-items; capping
// the grid at a few groups per compute unit made every item loop and cost PoCL a factor of ten in
// elementwise bandwidth.
LaunchGeometry linear_geometry(const Device& device, const Kernel& kernel, std::uint64_t n);

// For kernels that walk their own work (group-stride loops): min(work, 64 per compute unit)
// groups of `local` items.
LaunchGeometry capped_groups(const Device& device, std::uint64_t work_groups, std::size_t local);

// Geometry of the one-work-group-per-row kernels of kernels/rowwise.cl.
struct RowGeometry {
  std::size_t global;
  std::size_t local;  // a power of two; also the number of scratch elements the kernel needs
};

// Local size: the largest power of two <= min(256, device maximum, the kernel's own maximum) that
// the device's local memory holds (scratch_element_bytes per item), but no larger than the items
// the row needs rounded up to a power of two: one per element for rows of up to 64, else 64 or
// more items holding up to 16 elements each in registers (rows up to 4096; longer rows get the
// full group and stream). On CPU devices one item per group (AETHERCL_ROW_GROUP=n forces up to n,
// for tests). Groups: one per row, capped at 64 per compute unit (the kernels walk the remaining
// rows). Deterministic for a given device, kernel and row length, which keeps the reductions
// bit-reproducible.
RowGeometry row_geometry(const Device& device, const Kernel& kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes,
                         bool registers = false);

// Bytes of one element of the row kernels' acc_t: double on FP64 devices, float otherwise (the
// AETHERCL_FP64 build option the program cache passes follows the same DeviceInfo::fp64).
inline std::size_t accumulator_bytes(const Device& device) {
  return device.info().fp64 ? sizeof(double) : sizeof(float);
}

// false when AETHERCL_ROW_KERNEL=loop: every row streams through global memory in several passes
// (the kernels before the register path; kept for comparison in benchmarks).
bool row_kernels_use_registers();
// Whether the rowwise kernel holds rows in registers (softmax and its backward, log-softmax,
// LayerNorm and its backward; cross-entropy streams its row).
bool row_kernel_has_register_path(const char* kernel_name);

// Launches kernel_name of the "rowwise" family over rows x cols with args bound in order; when
// scratch_element_bytes > 0 a local scratch of local-size elements is bound after them.
template <typename... Args>
void launch_rows(DeviceCall& call, const char* kernel_name, std::uint64_t rows, std::uint64_t cols,
                 std::size_t scratch_element_bytes, const Args&... args) {
  const bool registers = row_kernels_use_registers();
  Kernel& kernel = registers ? family_kernel(call, "rowwise", kernel_name)
                             : call.device().programs().kernel("rowwise", kernel_name,
                                                               "-DROW_LOOP_ONLY=1");
  RowGeometry rg = row_geometry(call.device(), kernel, rows, cols, scratch_element_bytes,
                                registers && row_kernel_has_register_path(kernel_name));
  LaunchGeometry geometry = LaunchGeometry::linear(rg.global, rg.local);
  if (scratch_element_bytes > 0) {
    call.launch(kernel, geometry, args..., LocalBytes{rg.local * scratch_element_bytes});
  } else {
    call.launch(kernel, geometry, args...);
  }
}

}  // namespace aethercl::ops
