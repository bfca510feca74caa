// Launch plan of the CPU forms of the column reductions (kernels/reduce.cl
// reduce_sum_columns_lanes, kernels/reduce_axis.cl reduce_axis_lanes).
#pragma once

#include "runtime/device.h"
#include "runtime/launch.h"

#include <cstdint>

namespace aethercl::ops {

// The kernels' COLUMN_BLOCK and AXIS_BLOCK: columns per work-item.
constexpr std::uint64_t kColumnBlock = 1024;

// One work-item, alone in its group, per block of kColumnBlock adjacent columns and chunk of
// span rows of each of `outer` slabs: a grid of blocks x (outer * chunks).
struct ColumnLanes {
  std::uint64_t blocks = 1, outer = 1, chunks = 1, span = 1;
  LaunchGeometry geometry() const;
};

// Plan for `outer` independent (len x cols) slabs reduced over their len rows (len > 0,
// cols > 0). The chunking depends only on the shape and the device, so a sum's order is the
// same on every call.
ColumnLanes column_lanes(const Device& device, std::uint64_t outer, std::uint64_t len,
                         std::uint64_t cols);

}  // namespace aethercl::ops
