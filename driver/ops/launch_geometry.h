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

// For grid-stride kernels over n items: work-groups of up to 256 items, at most 64 groups per
// compute unit (the loop covers the rest).
inline Geometry1D linear_geometry(const Device& device, std::uint64_t n) {
  std::size_t local = std::min<std::size_t>(256, device.info().max_work_group_size);
  std::uint64_t groups_needed = (n + local - 1) / local;
  std::uint64_t group_cap = std::max<std::uint64_t>(1, device.info().compute_units) * 64;
  std::uint64_t groups = std::max<std::uint64_t>(1, std::min(groups_needed, group_cap));
  return Geometry1D{static_cast<std::size_t>(groups * local), local};
}

}  // namespace aethercl::ops
