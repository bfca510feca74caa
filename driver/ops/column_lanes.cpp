// Launch plan of the CPU forms of the column reductions (blocks of columns, chunks of rows).
#include "ops/column_lanes.h"

#include <algorithm>

namespace aethercl::ops {
namespace {

// Inputs of kSplitElements floats or more are cut into chunks of rows until there are
// kGroupsPerUnit work-items (groups) per core, each chunk at least kMinSpan rows.
constexpr std::uint64_t kSplitElements = std::uint64_t{1} << 16;
constexpr std::uint64_t kGroupsPerUnit = 4;
constexpr std::uint64_t kMinSpan = 64;

}  // namespace

LaunchGeometry ColumnLanes::geometry() const {
  const std::size_t global[2] = {static_cast<std::size_t>(blocks),
                                 static_cast<std::size_t>(outer * chunks)};
  const std::size_t group[2] = {1, 1};
  return LaunchGeometry::grid(2, global, group);
}

ColumnLanes column_lanes(const Device& device, std::uint64_t outer, std::uint64_t len,
                         std::uint64_t cols) {
  ColumnLanes plan;
  plan.outer = outer;
  plan.blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  if (outer * len * cols >= kSplitElements) {
    const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
    const std::uint64_t have = plan.blocks * outer;
    const std::uint64_t want = (units * kGroupsPerUnit + have - 1) / have;
    plan.chunks = std::clamp<std::uint64_t>(want, 1, std::max<std::uint64_t>(1, len / kMinSpan));
  }
  plan.span = (len + plan.chunks - 1) / plan.chunks;
  plan.chunks = (len + plan.span - 1) / plan.span;  // no empty chunk
  return plan;
}

}  // namespace aethercl::ops
