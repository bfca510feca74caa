// Launch geometry helpers shared by the op families.
#pragma once

#include "runtime/device.h"

#include <algorithm>
#include <cstdint>

namespace aethercl::ops {

struct Geometry1D {
  std::size_t global;
  std::size_t local;
};

// For grid-stride kernels over n items with work-groups of `local` items: one item per element up
// to 2^24 groups (every int-sized n), so the stride loop normally runs once. One pass per item is
// what CPU runtimes such as PoCL vectorise across work-items; capping the grid at a few groups per
// compute unit made every item loop and cost PoCL a factor of ten in elementwise bandwidth.
inline Geometry1D linear_geometry(std::size_t local, std::uint64_t n) {
  constexpr std::uint64_t kMaxGroups = 1ull << 24;
  std::uint64_t groups = std::clamp<std::uint64_t>((n + local - 1) / local, 1, kMaxGroups);
  return Geometry1D{static_cast<std::size_t>(groups * local), local};
}

// Work-groups of up to 256 items, as the device allows.
inline Geometry1D linear_geometry(const Device& device, std::uint64_t n) {
  return linear_geometry(std::min<std::size_t>(256, device.info().max_work_group_size), n);
}

}  // namespace aethercl::ops
