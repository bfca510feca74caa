// Layout ops: validate both buffers against the element count, then launch kernels/layout.cl.
// Every transpose is out-of-place (the same buffer for input and output is refused).
#include "ops/layout.h"

#include "ops/aliasing.h"
#include "runtime/family_launch.h"

#include <algorithm>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "layout";
constexpr std::uint64_t kTile = 16;  // TILE in layout.cl

struct Operands {
  cl_mem in;
  cl_mem out;
  std::uint64_t count;
};

Operands resolve(DeviceCall& call, void* in, const char* in_name, void* out, const char* out_name,
                 std::uint64_t count) {
  std::uint64_t bytes = byte_count(count, sizeof(float));
  cl_mem in_mem = call.buffer(in, in_name, bytes).mem;
  cl_mem out_mem = call.buffer(out, out_name, bytes).mem;
  require_distinct(in, in_name, out, out_name);
  return Operands{in_mem, out_mem, count};
}

// out (batches, cols, rows) = in (batches, rows, cols) transposed per batch; all counts > 0.
void launch_tiled(DeviceCall& call, const Operands& ops, std::uint64_t batches, std::uint64_t rows,
                  std::uint64_t cols) {
  Device& device = call.device();
  if (cpu_kernel_forms(device)) {  // one 8x8 block per item; blocks <= elements, already bounded
    Kernel& blocks = family_kernel(call, kFamily, "layout_transpose_blocks");
    const std::uint64_t count = batches * ((rows + 7) / 8) * ((cols + 7) / 8);
    call.launch(blocks, linear_geometry(device, blocks, count), ops.in, ops.out,
                static_cast<cl_ulong>(batches), static_cast<cl_ulong>(rows),
                static_cast<cl_ulong>(cols));
    return;
  }
  Kernel& kernel = family_kernel(call, kFamily, "layout_transpose_tiled");
  std::size_t local = work_group_limit(device, kernel, kTile * kTile);
  // tiles <= batches * rows * cols, which byte_count has bounded.
  std::uint64_t tiles = batches * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  call.launch(kernel, capped_groups(device, tiles, local), ops.in, ops.out,
         static_cast<cl_ulong>(batches), static_cast<cl_ulong>(rows), static_cast<cl_ulong>(cols));
}

}  // namespace

void transpose(DeviceCall& call, void* in, void* out, int rows, int cols) {
  std::uint64_t count = element_count({{"rows", rows}, {"cols", cols}});
  Operands ops = resolve(call, in, "buffer_input", out, "buffer_output", count);
  if (count == 0) return;
  launch_tiled(call, ops, 1, rows, cols);
}

void transpose_backward(DeviceCall& call, void* dc, void* da, int rows_a, int cols_a) {
  // dC is (cols_A, rows_A); dA (rows_A, cols_A) is its transpose.
  std::uint64_t count = element_count({{"rows_A", rows_a}, {"cols_A", cols_a}});
  Operands ops = resolve(call, dc, "buffer_dC", da, "buffer_dA", count);
  if (count == 0) return;
  launch_tiled(call, ops, 1, cols_a, rows_a);
}

void transpose_batched(DeviceCall& call, void* in, void* out, int batches, int d1, int d2) {
  std::uint64_t count = element_count({{"B_flat", batches}, {"d1", d1}, {"d2", d2}});
  Operands ops = resolve(call, in, "in", out, "out", count);
  if (count == 0) return;
  launch_tiled(call, ops, batches, d1, d2);
}

void transpose_12_batched(DeviceCall& call, void* in, void* out, int b, int d1, int d2, int d3) {
  std::uint64_t count = element_count({{"B", b}, {"D1", d1}, {"D2", d2}, {"D3", d3}});
  Operands ops = resolve(call, in, "buffer_in", out, "buffer_out", count);
  if (count == 0) return;
  if (d3 == 1) {  // a batched 2-D transpose of (D1, D2)
    launch_tiled(call, ops, b, d1, d2);
    return;
  }
  if (cpu_kernel_forms(call.device())) {  // one run of D3 elements per item
    Kernel& runs = family_kernel(call, kFamily, "layout_transpose_12_runs");
    const std::uint64_t run_count = count / static_cast<std::uint64_t>(d3);
    call.launch(runs, linear_geometry(call.device(), runs, run_count), ops.in, ops.out,
                static_cast<cl_ulong>(d1), static_cast<cl_ulong>(d2), static_cast<cl_ulong>(d3),
                static_cast<cl_ulong>(run_count));
    return;
  }
  Kernel& kernel = family_kernel(call, kFamily, "layout_transpose_12");
  call.launch(kernel, linear_geometry(call.device(), kernel, count), ops.in, ops.out,
         static_cast<cl_ulong>(d1), static_cast<cl_ulong>(d2), static_cast<cl_ulong>(d3),
         static_cast<cl_ulong>(count));
}

}  // namespace aethercl::ops
