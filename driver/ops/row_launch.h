// Launch geometry for the one-work-group-per-row kernels of kernels/rowwise.cl.
#pragma once

#include "runtime/device.h"
#include "runtime/kernel_args.h"

#include <cstddef>
#include <cstdint>

namespace aethercl::ops {

struct RowGeometry {
  std::size_t global;
  std::size_t local;  // a power of two; also the number of scratch elements the kernel needs
};

// Local size: the largest power of two <= min(256, device maximum, the kernel's own maximum) that
// the device's local memory holds (scratch_element_bytes per item), but no larger than the row
// rounded up to a power of two, so short rows do not idle most of the group. Groups: one per row,
// capped at 64 per compute unit (the kernels walk the remaining rows). Deterministic for a given
// device, kernel and row length, which keeps the reductions bit-reproducible.
RowGeometry row_geometry(const Device& device, cl_kernel kernel, std::uint64_t rows,
                         std::uint64_t cols, std::size_t scratch_element_bytes);

// Bytes of one element of the kernels' acc_t: double on FP64 devices, float otherwise (the
// AETHERCL_FP64 build option the program cache passes follows the same DeviceInfo::fp64).
inline std::size_t accumulator_bytes(const Device& device) {
  return device.info().fp64 ? sizeof(double) : sizeof(float);
}

// Launches kernel_name of the "rowwise" family over rows x cols with args bound in order; when
// scratch_element_bytes > 0 a local scratch of local-size elements is bound after them.
template <typename... Args>
void launch_rows(Device& device, const char* kernel_name, std::uint64_t rows, std::uint64_t cols,
                 std::size_t scratch_element_bytes, const Args&... args) {
  cl_kernel kernel = device.programs().kernel("rowwise", kernel_name);
  RowGeometry geometry = row_geometry(device, kernel, rows, cols, scratch_element_bytes);
  if (scratch_element_bytes > 0) {
    set_kernel_args(kernel, args..., LocalBytes{geometry.local * scratch_element_bytes});
  } else {
    set_kernel_args(kernel, args...);
  }
  device.launch(kernel, 1, &geometry.global, &geometry.local);
}

}  // namespace aethercl::ops
