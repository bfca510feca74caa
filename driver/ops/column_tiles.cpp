// Launch plans of the column-tile reductions (tile width, lanes along the axis, chunks).
#include "ops/column_tiles.h"

#include "runtime/family_launch.h"
#include "support/env.h"

#include <algorithm>

namespace aethercl::ops {
namespace {

// A tile is up to kTileLanes float4 lanes (64 columns, a 256-byte run of each row) by ly lanes
// along the axis: ly = 1 on CPU forms (one lane walks its rows; no tree), otherwise as many as
// the group allows (up to kMaxGroupSize items) and the axis needs. Inputs below kSplitElements
// floats run in one pass (one launch costs less than two); larger ones are cut into chunks of the
// axis until there are about kItemsPerUnit items per compute unit on GPUs (an H100/H200
// multiprocessor keeps 2048 in flight) or kCpuGroupsPerUnit groups per core on CPUs, each lane
// summing at least AETHERCL_REDUCE_LANE_ROWS (default kLaneRows) rows of its chunk, at most
// kMaxChunks chunks. Partials are two or three values per chunk and column: with 16 rows per lane
// and 16 lanes along the axis at most 1/128 of the input's traffic per value on GPUs.
constexpr std::size_t kTileLanes = 16;
constexpr std::size_t kMaxGroupSize = 256;
constexpr std::uint64_t kSplitElements = std::uint64_t{1} << 16;
constexpr std::uint64_t kItemsPerUnit = 2048;
constexpr std::uint64_t kCpuGroupsPerUnit = 4;
constexpr std::uint64_t kLaneRows = 16;
constexpr std::uint64_t kMaxChunks = 4096;

}  // namespace

ColumnTiles column_tiles(const Device& device, const Kernel& kernel, std::uint64_t outer,
                         std::uint64_t len, std::uint64_t cols) {
  const std::size_t limit = work_group_limit(device, kernel, kMaxGroupSize);
  const std::uint64_t lanes = (cols + 3) / 4;
  const bool cpu = cpu_kernel_forms(device);
  ColumnTiles plan;
  plan.cx = static_cast<std::size_t>(std::min<std::uint64_t>({kTileLanes, lanes, limit}));
  plan.ly = cpu ? 1 : static_cast<std::size_t>(std::clamp<std::uint64_t>(limit / plan.cx, 1, len));
  plan.tiles = (lanes + plan.cx - 1) / plan.cx;
  if (outer * len * cols >= kSplitElements) {
    const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
    const std::uint64_t groups =
        cpu ? units * kCpuGroupsPerUnit
            : units * std::max<std::uint64_t>(1, kItemsPerUnit / plan.local());
    const std::uint64_t have = plan.tiles * outer;
    const std::uint64_t lane_rows = env::count(env::kReduceLaneRows, 1, 4096).value_or(kLaneRows);
    const std::uint64_t by_length =
        std::clamp<std::uint64_t>(len / (lane_rows * plan.ly), 1, kMaxChunks);
    plan.chunks = std::clamp<std::uint64_t>((groups + have - 1) / have, 1, by_length);
  }
  plan.span = (len + plan.chunks - 1) / plan.chunks;
  plan.chunks = (len + plan.span - 1) / plan.span;  // no empty chunk
  return plan;
}

ColumnTiles fold_tiles(const Device& device, const Kernel& fold, const ColumnTiles& plan,
                       std::uint64_t cols) {
  const std::size_t limit = work_group_limit(device, fold, kMaxGroupSize);
  ColumnTiles tiles = plan;
  tiles.cx = std::min(plan.cx, limit);
  tiles.ly = cpu_kernel_forms(device)
                 ? 1
                 : static_cast<std::size_t>(std::clamp<std::uint64_t>(limit / tiles.cx, 1, plan.chunks));
  tiles.tiles = ((cols + 3) / 4 + tiles.cx - 1) / tiles.cx;
  return tiles;
}

}  // namespace aethercl::ops
