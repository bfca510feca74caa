// Reductions and broadcasts: validate, then launch kernels/reduce.cl. reduce_sum sums column
// tiles (float4 lanes along the row, strips of rows per lane, a local tree), in one pass where the
// tiles fill the device and otherwise over chunks of rows into scratch partials and their fold.
#include "ops/reduce.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"
#include "runtime/scratch.h"

#include <algorithm>
#include <optional>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "reduce";
// Column sums (reduce_sum_columns_tile / _fold): a tile is up to kTileLanes float4 lanes (64
// columns, a 256-byte run of each row) by ly row lanes, ly = 1 on CPU forms (one lane walks its
// rows; no tree) and otherwise as many as the group allows (up to kMaxGroupSize items) and the
// rows need. Inputs below kSinglePassElements floats run in one pass (one launch costs less than
// two); larger ones are cut into chunks of rows until there are about kItemsPerUnit items per
// compute unit on GPUs (an H100/H200 multiprocessor keeps 2048 in flight) or kCpuGroupsPerUnit
// groups per core on CPUs, each lane summing at least kRowsPerLane rows of its chunk, at most
// kMaxChunks chunks. Partials are two floats per chunk and column: with 8 rows per lane and 16+
// row lanes at most 1/64 of the input's traffic on GPUs.
constexpr std::size_t kTileLanes = 16;
constexpr std::size_t kMaxGroupSize = 256;
constexpr std::uint64_t kSinglePassElements = std::uint64_t{1} << 16;
constexpr std::uint64_t kItemsPerUnit = 2048;
constexpr std::uint64_t kCpuGroupsPerUnit = 4;
constexpr std::uint64_t kRowsPerLane = 8;
constexpr std::uint64_t kMaxChunks = 4096;

// c = a + periodic broadcast of b: a and c hold `count` floats, b holds `period` floats.
void launch_periodic(DeviceCall& call, cl_mem a, cl_mem b, cl_mem c, std::uint64_t count,
                     std::uint64_t period) {
  Kernel& kernel = family_kernel(call, kFamily, "reduce_add_periodic");
  call.launch(kernel, linear_geometry(call.device(), kernel, count), a, b, c,
         static_cast<cl_ulong>(count), static_cast<cl_ulong>(period));
}

// The launch of a column sum of rows x cols: groups of cx * ly lanes over tiles x chunks.
struct ColumnPlan {
  std::size_t cx = 1, ly = 1;
  std::uint64_t tiles = 1, chunks = 1, span = 0;
};

ColumnPlan column_plan(const Device& device, const Kernel& kernel, std::uint64_t rows,
                       std::uint64_t cols) {
  const std::size_t limit = work_group_limit(device, kernel, kMaxGroupSize);
  const std::uint64_t lanes = (cols + 3) / 4;
  const bool cpu = cpu_kernel_forms(device);
  ColumnPlan plan;
  plan.cx = static_cast<std::size_t>(std::min<std::uint64_t>({kTileLanes, lanes, limit}));
  plan.ly = cpu ? 1 : static_cast<std::size_t>(std::clamp<std::uint64_t>(limit / plan.cx, 1, rows));
  plan.tiles = (lanes + plan.cx - 1) / plan.cx;
  if (rows * cols >= kSinglePassElements) {
    const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
    const std::uint64_t groups =
        cpu ? units * kCpuGroupsPerUnit
            : units * std::max<std::uint64_t>(1, kItemsPerUnit / (plan.cx * plan.ly));
    const std::uint64_t by_rows = rows / (kRowsPerLane * plan.ly);
    plan.chunks = std::clamp<std::uint64_t>((groups + plan.tiles - 1) / plan.tiles, 1,
                                            std::clamp<std::uint64_t>(by_rows, 1, kMaxChunks));
  }
  plan.span = (rows + plan.chunks - 1) / plan.chunks;
  plan.chunks = (rows + plan.span - 1) / plan.span;  // no empty chunk
  return plan;
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

  const std::uint64_t rows = count / out_count;
  Device& device = call.device();
  Kernel& tile = family_kernel(call, kFamily, "reduce_sum_columns_tile");
  const ColumnPlan plan = column_plan(device, tile, rows, out_count);
  const std::size_t local = plan.cx * plan.ly;
  const LocalBytes pair_bytes{local * 4 * sizeof(float)};
  const cl_int aligned = out_count % 4 == 0 ? 1 : 0;
  const std::size_t global[2] = {static_cast<std::size_t>(plan.tiles) * local,
                                 static_cast<std::size_t>(plan.chunks)};
  const std::size_t group[2] = {local, 1};
  std::optional<Scratch> parts;
  // One chunk writes out directly; parts is not read then and out stands in for it.
  if (plan.chunks > 1) parts.emplace(call, 2 * plan.chunks * out_count * sizeof(float));
  call.launch(tile, LaunchGeometry::grid(2, global, group), in_mem, out_mem,
              parts ? parts->mem() : out_mem, static_cast<cl_ulong>(rows),
              static_cast<cl_ulong>(out_count), static_cast<cl_ulong>(plan.span),
              static_cast<cl_uint>(plan.cx), aligned, pair_bytes, pair_bytes);
  if (!parts) return;
  Kernel& fold = family_kernel(call, kFamily, "reduce_sum_columns_fold");
  const std::size_t fold_limit = work_group_limit(device, fold, kMaxGroupSize);
  const std::size_t fold_cx = std::min(plan.cx, fold_limit);
  const std::size_t fold_ly = cpu_kernel_forms(device)
      ? 1
      : static_cast<std::size_t>(std::clamp<std::uint64_t>(fold_limit / fold_cx, 1, plan.chunks));
  const std::size_t fold_local = fold_cx * fold_ly;
  const LocalBytes fold_pair_bytes{fold_local * 4 * sizeof(float)};
  const std::uint64_t fold_tiles = ((out_count + 3) / 4 + fold_cx - 1) / fold_cx;
  call.launch(fold, LaunchGeometry::linear(static_cast<std::size_t>(fold_tiles) * fold_local,
                                           fold_local),
              parts->mem(), out_mem, static_cast<cl_ulong>(out_count),
              static_cast<cl_ulong>(plan.chunks), static_cast<cl_uint>(fold_cx), aligned,
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
