// Float32 operands of BF16 and FP16 products as 16-bit copies for the tensor cores.
#include "gemm/narrow_operands.h"

#include "support/error.h"

#include <algorithm>
#include <fmt/format.h>

namespace aethercl::gemm {

// Work-groups of one launch along dimension 0 (CUDA's grid x: 2^31 - 1).
constexpr std::uint64_t kMaxGroups1D = (1ull << 31) - 1;

namespace {

// gemm_pack_narrow_pair's modes (kernels/gemm_pack.cl PACK_NARROW_*).
enum NarrowMode : cl_uint { kCopy = 0, kTranspose = 1, kCopy4 = 2 };

// One operand's part of the launch: the operand stored rows x cols, copied as a dense 16-bit
// operand, transposed (cols x rows) or not, its rows padded to 8 elements (16 bytes).
struct NarrowedOperand {
  const GemmOperand& in;
  std::uint64_t rows, cols, ld, items, out_ld, out_stride;
  NarrowMode mode;
  PoolBlock block;

  std::uint64_t groups() const {
    const std::uint64_t width = mode == kCopy4 ? 128 : 32;
    return items * ((rows + 31) / 32) * ((cols + width - 1) / width);
  }
  GemmOperand out(GemmStorage target) const {
    return {{block.mem, block.capacity}, out_stride, 0, out_ld, target};
  }
};

NarrowedOperand plan(const GemmOperand& op, std::uint64_t rows, std::uint64_t cols,
                     std::uint64_t batch, bool transpose, ScratchBlocks& temps) {
  const std::uint64_t out_rows = transpose ? cols : rows;
  const std::uint64_t out_ld = ((transpose ? rows : cols) + 7) / 8 * 8;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t out_stride = items > 1 ? out_rows * out_ld : 0;
  const std::uint64_t ld = leading_dimension(op, cols);
  // Rows of whole 16-byte units are copied four elements at a time.
  const bool units = ld % 4 == 0 && op.offset % 4 == 0 && (items == 1 || op.batch_stride % 4 == 0);
  const NarrowMode mode = transpose ? kTranspose : units ? kCopy4 : kCopy;
  const PoolBlock block = temps.add(std::max<std::uint64_t>(items * out_rows * out_ld * 2, 16));
  return {op, rows, cols, ld, items, out_ld, out_stride, mode, block};
}

}  // namespace

std::optional<MmaKind> narrowed_kind(const GemmProblem& p) {
  if (p.a.storage != GemmStorage::kF32 || p.b.storage != GemmStorage::kF32) return std::nullopt;
  if (p.rounding == GemmRounding::kBF16) return MmaKind::kBF16;
  if (p.rounding == GemmRounding::kFP16) return MmaKind::kFP16;
  return std::nullopt;
}

GemmProblem narrow_operands(DeviceCall& call, const GemmProblem& p, MmaKind kind,
                            ScratchBlocks& temps) {
  const GemmStorage target = kind == MmaKind::kBF16 ? GemmStorage::kBF16 : GemmStorage::kF16;
  // A as m x k and B as n x k, which every tensor-core kernel reads in place (the warpgroup
  // kernels would otherwise transpose the other forms in a pass of their own); both in one
  // launch (gemm_pack_narrow_pair).
  const NarrowedOperand a = plan(p.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k,
                                 p.batch, p.trans_a, temps);
  const NarrowedOperand b = plan(p.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n,
                                 p.batch, !p.trans_b, temps);
  const std::uint64_t groups = a.groups() + b.groups();
  if (groups > kMaxGroups1D || a.rows > 0xffffffffull || a.cols > 0xffffffffull ||
      b.rows > 0xffffffffull || b.cols > 0xffffffffull) {
    fail(Status::kDeviceError, "operands of {} and {} tiles are too many to narrow in one launch",
         a.groups(), b.groups());
  }
  Kernel& kernel = call.device().programs().kernel(
      "gemm_pack", "gemm_pack_narrow_pair",
      fmt::format("-DPACK_ELEM=2 -DPACK_NARROW={}", target == GemmStorage::kBF16 ? 1 : 2));
  const std::size_t global[2] = {static_cast<std::size_t>(groups * 32), 8};
  const std::size_t local[2] = {32, 8};
  call.launch(kernel, LaunchGeometry::grid(2, global, local), a.in.buffer.mem, a.block.mem,
              static_cast<cl_uint>(a.rows), static_cast<cl_uint>(a.cols),
              static_cast<cl_ulong>(a.ld), static_cast<cl_ulong>(a.in.offset),
              static_cast<cl_ulong>(a.in.batch_stride), static_cast<cl_ulong>(a.out_ld),
              static_cast<cl_ulong>(a.out_stride), static_cast<cl_uint>(a.mode),
              static_cast<cl_ulong>(a.groups()), b.in.buffer.mem, b.block.mem,
              static_cast<cl_uint>(b.rows), static_cast<cl_uint>(b.cols),
              static_cast<cl_ulong>(b.ld), static_cast<cl_ulong>(b.in.offset),
              static_cast<cl_ulong>(b.in.batch_stride), static_cast<cl_ulong>(b.out_ld),
              static_cast<cl_ulong>(b.out_stride), static_cast<cl_uint>(b.mode));
  GemmProblem q = p;
  q.a = a.out(target);
  q.b = b.out(target);
  q.trans_a = false;
  q.trans_b = true;
  q.rounding = GemmRounding::kNone;
  return q;
}

}  // namespace aethercl::gemm
