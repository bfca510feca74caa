// Launch plans of the column-tile reductions: kernels/reduce.cl's column sums and
// kernels/reduce_axis.cl's reduce_axis_tiles, and the folds of their chunk partials.
#pragma once

#include "runtime/device.h"

#include <cstddef>
#include <cstdint>

namespace aethercl::ops {

// Work-groups of cx * ly lanes: cx float4 lanes across 4 * cx adjacent columns (a tile), ly lanes
// along the reduced axis; tiles cover the columns, chunks of span rows cover the axis.
struct ColumnTiles {
  std::size_t cx = 1, ly = 1;
  std::uint64_t tiles = 1, chunks = 1, span = 1;
  std::size_t local() const { return cx * ly; }
};

// Plan for `outer` independent (len x cols) slabs reduced over their len rows (len > 0, cols > 0).
// The chunking depends only on the shape, the device and the kernel's limits, so a sum's order
// is the same on every call.
ColumnTiles column_tiles(const Device& device, const Kernel& kernel, std::uint64_t outer,
                         std::uint64_t len, std::uint64_t cols);

// The fold of plan.chunks partial rows per slab: cx as the plan's (within the fold kernel's
// limit), ly lanes along the chunks; chunks and span are the plan's.
ColumnTiles fold_tiles(const Device& device, const Kernel& fold, const ColumnTiles& plan,
                       std::uint64_t cols);

}  // namespace aethercl::ops
