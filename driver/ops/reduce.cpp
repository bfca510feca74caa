// Reductions and broadcasts: validate, then launch kernels/reduce.cl. reduce_sum sums column
// tiles (float4 lanes along the row, strips of rows per lane, a local tree), in one pass where the
// tiles fill the device and otherwise over chunks of rows into scratch partials, which each
// tile's last group folds in the same launch (a second launch folds them where the launch
// counters are not to be had; plans in ops/column_tiles.h). CPU devices sum float32 columns in
// blocks per work-item instead (ops/column_lanes.h).
#include "ops/reduce.h"

#include "ops/aliasing.h"
#include "ops/column_lanes.h"
#include "ops/column_tiles.h"
#include "runtime/family_launch.h"
#include "runtime/scratch.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "reduce";

// c = a + periodic broadcast of b: a and c hold `count` floats (a whole number of periods), b
// holds `period` floats. CPU devices take whole periods per work-item.
void launch_periodic(DeviceCall& call, cl_mem a, cl_mem b, cl_mem c, std::uint64_t count,
                     std::uint64_t period) {
  if (cpu_kernel_forms(call.device())) {
    Kernel& rows = family_kernel(call, kFamily, "reduce_add_periodic_rows");
    call.launch(rows, linear_geometry(call.device(), rows, count / period), a, b, c,
                static_cast<cl_ulong>(count / period), static_cast<cl_ulong>(period));
    return;
  }
  Kernel& kernel = family_kernel(call, kFamily, "reduce_add_periodic");
  call.launch(kernel, linear_geometry(call.device(), kernel, count), a, b, c,
         static_cast<cl_ulong>(count), static_cast<cl_ulong>(period));
}

// The chunks' partial sums (a pair of floats per column and chunk) as an optional workspace in
// parts: where they do not fit, plan becomes one chunk of every row, which writes out directly
// (the partials are not read then).
template <typename Plan>
void row_chunk_partials(std::optional<Scratch>& parts, DeviceCall& call, Plan& plan,
                        std::uint64_t rows, std::uint64_t cols) {
  if (plan.chunks > 1 &&
      !optional_scratch(parts, call, 2 * plan.chunks * cols * sizeof(float),
                        fmt::format("the partial sums of {} row chunks", plan.chunks))) {
    plan.chunks = 1;
    plan.span = rows;
  }
}

// column_sums' CPU form (float32 operands): blocks of columns per work-item over chunks of rows
// (ops/column_lanes.h), the chunks folded by a second launch (16 columns per work-item).
void column_sums_lanes(DeviceCall& call, cl_mem in_mem, cl_mem out_mem, std::uint64_t rows,
                       std::uint64_t cols, float scale) {
  Kernel& kernel = family_kernel(call, kFamily, "reduce_sum_columns_lanes");
  ColumnLanes plan = column_lanes(call.device(), 1, rows, cols);
  std::optional<Scratch> parts;
  row_chunk_partials(parts, call, plan, rows, cols);
  call.launch(kernel, plan.geometry(), in_mem, out_mem, parts ? parts->mem() : out_mem,
              static_cast<cl_ulong>(rows), static_cast<cl_ulong>(cols),
              static_cast<cl_ulong>(plan.span), scale);
  if (!parts) return;
  Kernel& fold = family_kernel(call, kFamily, "reduce_sum_columns_lanes_fold");
  call.launch(fold, linear_geometry(call.device(), fold, (cols + 15) / 16), parts->mem(), out_mem,
              static_cast<cl_ulong>(cols), static_cast<cl_ulong>(plan.chunks), scale);
}

}  // namespace

void reduce_sum(DeviceCall& call, void* in, void* out, int b, int m, int n) {
  std::uint64_t count = element_count({{"B", b}, {"M", m}, {"N", n}});
  std::uint64_t out_count = element_count({{"N", n}});
  cl_mem in_mem = call.buffer(in, "in", byte_count(count, sizeof(float))).mem;
  // With B*M == 0 and N > 0 the sums are empty: nothing is written (zero work, docs/ABI.md
  // section 3.6).
  std::uint64_t out_bytes = count == 0 ? 0 : byte_count(out_count, sizeof(float));
  cl_mem out_mem = call.buffer(out, "out", out_bytes).mem;
  require_distinct(in, "in", out, "out");
  if (count == 0) return;

  column_sums(call, in_mem, out_mem, count / out_count, out_count, 1.0f, "");
}

void column_sums(DeviceCall& call, cl_mem in_mem, cl_mem out_mem, std::uint64_t rows,
                 std::uint64_t out_count, float scale, const std::string& formats) {
  Device& device = call.device();
  if (cpu_kernel_forms(device) && formats.empty()) {
    column_sums_lanes(call, in_mem, out_mem, rows, out_count, scale);
    return;
  }
  Kernel& tile = formats.empty() ? family_kernel(call, kFamily, "reduce_sum_columns_tile")
                                 : family_kernel(call, kFamily, "reduce_sum_columns_tile", formats);
  ColumnTiles plan = column_tiles(device, tile, 1, rows, out_count);
  std::optional<Scratch> parts;
  row_chunk_partials(parts, call, plan, rows, out_count);  // without them out stands in
  const LocalBytes pair_bytes{plan.local() * 4 * sizeof(float)};
  const cl_int aligned = out_count % 4 == 0 ? 1 : 0;
  const std::size_t global[2] = {static_cast<std::size_t>(plan.tiles) * plan.local(),
                                 static_cast<std::size_t>(plan.chunks)};
  const std::size_t group[2] = {plan.local(), 1};
  // The chunks folded in the same launch by each tile's last group where counters are to be had
  // (a second launch costs an H200 about 5 us plus the gap between kernels).
  cl_mem counters = parts ? call.counters(plan.tiles) : nullptr;
  call.launch(tile, LaunchGeometry::grid(2, global, group), in_mem, out_mem,
              parts ? parts->mem() : out_mem, static_cast<cl_ulong>(rows),
              static_cast<cl_ulong>(out_count), static_cast<cl_ulong>(plan.span),
              static_cast<cl_uint>(plan.cx), aligned, scale, counters ? counters : out_mem,
              static_cast<cl_int>(counters != nullptr), pair_bytes, pair_bytes);
  if (!parts || counters) return;
  Kernel& fold = formats.empty() ? family_kernel(call, kFamily, "reduce_sum_columns_fold")
                                 : family_kernel(call, kFamily, "reduce_sum_columns_fold", formats);
  const ColumnTiles folding = fold_tiles(device, fold, plan, out_count);
  const LocalBytes fold_pair_bytes{folding.local() * 4 * sizeof(float)};
  call.launch(fold, LaunchGeometry::linear(static_cast<std::size_t>(folding.tiles) * folding.local(),
                                           folding.local()),
              parts->mem(), out_mem, static_cast<cl_ulong>(out_count),
              static_cast<cl_ulong>(plan.chunks), static_cast<cl_uint>(folding.cx), scale,
              fold_pair_bytes, fold_pair_bytes);
}

void broadcast_add(DeviceCall& call, void* a, void* bias, void* c, int b, int m, int n) {
  std::uint64_t count = element_count({{"B", b}, {"M", m}, {"N", n}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  std::uint64_t bias_bytes = count == 0 ? 0 : byte_count(element_count({{"N", n}}), sizeof(float));
  cl_mem a_mem = call.buffer(a, "a", bytes).mem;
  cl_mem bias_mem = call.buffer(bias, "b", bias_bytes).mem;
  cl_mem c_mem = call.buffer(c, "c", bytes).mem;
  require_distinct(bias, "b", c, "c");
  if (count == 0) return;
  launch_periodic(call, a_mem, bias_mem, c_mem, count, static_cast<std::uint64_t>(n));
}

void add_broadcast_pe(DeviceCall& call, void* x, void* pe, void* y, int b, int s, int e) {
  std::uint64_t count = element_count({{"B", b}, {"S", s}, {"E", e}});
  std::uint64_t bytes = byte_count(count, sizeof(float));
  std::uint64_t period = element_count({{"S", s}, {"E", e}});
  std::uint64_t pe_bytes = count == 0 ? 0 : byte_count(period, sizeof(float));
  cl_mem x_mem = call.buffer(x, "input", bytes).mem;
  cl_mem pe_mem = call.buffer(pe, "pe_slice", pe_bytes).mem;
  cl_mem y_mem = call.buffer(y, "output", bytes).mem;
  require_distinct(pe, "pe_slice", y, "output");
  if (count == 0) return;
  launch_periodic(call, x_mem, pe_mem, y_mem, count, period);
}

}  // namespace aethercl::ops
