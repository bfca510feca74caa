// Reductions and broadcasts: validate, then launch kernels/reduce.cl. reduce_sum picks its
// work-group shape from the kernel's own work-group limit (no fixed 256, no power-of-two sizes),
// and sums tall inputs in two passes (blocks of rows into scratch partials, then their fold).
#include "ops/reduce.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"
#include "runtime/scratch.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "reduce";
constexpr std::size_t kMaxColumnsPerGroup = 32;  // adjacent columns: coalesced row reads
constexpr std::size_t kMaxGroupSize = 256;
// The two-level column sum (kernels/reduce.cl reduce_sum_columns_partial / _fold) runs where the
// input has at least kTwoLevelElements floats (below, one launch costs less than two) and the
// rows split into at least two blocks of kMinBlockRows: enough blocks for about kItemsPerUnit
// work-items per compute unit (an H100 multiprocessor keeps 2048 in flight), each block at least
// kMinBlockRows rows, so the partials (two floats per block and column) stay within 1/16 of the
// input's traffic; at most kMaxBlocks blocks.
constexpr std::uint64_t kTwoLevelElements = std::uint64_t{1} << 16;
constexpr std::uint64_t kMinBlockRows = 32;
constexpr std::uint64_t kItemsPerUnit = 2048;
constexpr std::uint64_t kMaxBlocks = 4096;
constexpr std::size_t kPartialGroupColumns = 128;

// c = a + periodic broadcast of b: a and c hold `count` floats, b holds `period` floats.
void launch_periodic(DeviceCall& call, cl_mem a, cl_mem b, cl_mem c, std::uint64_t count,
                     std::uint64_t period) {
  Kernel& kernel = family_kernel(call, kFamily, "reduce_add_periodic");
  call.launch(kernel, linear_geometry(call.device(), kernel, count), a, b, c,
         static_cast<cl_ulong>(count), static_cast<cl_ulong>(period));
}

// Blocks of rows for the two-level sum of rows x cols on this device; 1: the single kernel.
std::uint64_t row_blocks(const Device& device, std::uint64_t rows, std::uint64_t cols) {
  if (rows * cols < kTwoLevelElements) return 1;
  const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
  const std::uint64_t wanted = (units * kItemsPerUnit + cols - 1) / cols;
  return std::min({wanted, rows / kMinBlockRows, kMaxBlocks});
}

// out[n] = sum of rows x cols `in` over its rows, in two passes through scratch partials. The
// partials are an optional workspace: half as many blocks where they do not fit; false (nothing
// enqueued) where not even two blocks' do, and the single kernel sums the rows.
bool reduce_sum_two_level(DeviceCall& call, cl_mem in, cl_mem out, std::uint64_t rows,
                          std::uint64_t cols, std::uint64_t blocks) {
  Device& device = call.device();
  std::optional<Scratch> scratch;
  std::uint64_t span = 0;
  for (; blocks >= 2; blocks /= 2) {
    span = (rows + blocks - 1) / blocks;
    const std::uint64_t used = (rows + span - 1) / span;  // no empty block
    if (optional_scratch(scratch, call, 2 * used * cols * sizeof(float),
                         fmt::format("the partial sums of {} row blocks", used))) {
      blocks = used;
      break;
    }
  }
  if (!scratch) return false;
  const Scratch& parts = *scratch;
  Kernel& partial = family_kernel(call, kFamily, "reduce_sum_columns_partial");
  const std::size_t lx = static_cast<std::size_t>(std::min<std::uint64_t>(
      {work_group_limit(device, partial, kPartialGroupColumns), cols}));
  const std::size_t global[2] = {static_cast<std::size_t>((cols + lx - 1) / lx * lx),
                                 static_cast<std::size_t>(blocks)};
  const std::size_t local[2] = {lx, 1};
  call.launch(partial, LaunchGeometry::grid(2, global, local), in, parts.mem(),
              static_cast<cl_ulong>(rows), static_cast<cl_ulong>(cols),
              static_cast<cl_ulong>(span));
  Kernel& fold = family_kernel(call, kFamily, "reduce_sum_columns_fold");
  call.launch(fold, linear_geometry(device, fold, cols), parts.mem(), out,
              static_cast<cl_ulong>(cols), static_cast<cl_ulong>(blocks));
  return true;
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
  if (const std::uint64_t blocks = row_blocks(device, rows, out_count);
      blocks > 1 && reduce_sum_two_level(call, in_mem, out_mem, rows, out_count, blocks)) {
    return;
  }
  Kernel& kernel = family_kernel(call, kFamily, "reduce_sum_columns");
  std::size_t limit = work_group_limit(device, kernel, kMaxGroupSize);
  std::size_t cx = static_cast<std::size_t>(
      std::min<std::uint64_t>({kMaxColumnsPerGroup, limit, out_count}));
  std::size_t ly = static_cast<std::size_t>(std::min<std::uint64_t>(limit / cx, rows));
  std::size_t local = cx * ly;
  std::uint64_t blocks = (out_count + cx - 1) / cx;
  call.launch(kernel, capped_groups(device, blocks, local), in_mem, out_mem,
         static_cast<cl_ulong>(rows), static_cast<cl_ulong>(out_count), static_cast<cl_uint>(cx),
         LocalBytes{local * sizeof(float)}, LocalBytes{local * sizeof(float)});
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
