// Float32 operands of BF16 and FP16 products as 16-bit copies for the tensor cores.
#include "gemm/narrow_operands.h"

#include "support/error.h"

#include <algorithm>
#include <fmt/format.h>

namespace aethercl::gemm {
namespace {

constexpr std::uint64_t kMaxGroups = 65535;  // per NDRange dimension (CUDA's grid y/z)

// The operand stored rows x cols as a dense 16-bit copy, transposed (cols x rows) or not, with
// rows padded to 8 elements (16 bytes).
GemmOperand narrow(DeviceCall& call, const GemmOperand& op, std::uint64_t rows, std::uint64_t cols,
                   std::uint64_t batch, bool transpose, GemmStorage target,
                   std::vector<PoolBlock>& temps) {
  Device& device = call.device();
  const std::uint64_t out_rows = transpose ? cols : rows;
  const std::uint64_t out_ld = ((transpose ? rows : cols) + 7) / 8 * 8;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t out_stride = items > 1 ? out_rows * out_ld : 0;
  if ((rows + 31) / 32 > kMaxGroups) {
    fail(Status::kDeviceError, "an operand of {} rows is too tall to narrow in one launch", rows);
  }
  temps.push_back(device.allocate(call.stream(),
                                  std::max<std::uint64_t>(items * out_rows * out_ld * 2, 16)));
  const PoolBlock& block = temps.back();
  Kernel& kernel = device.programs().kernel(
      "gemm_pack", transpose ? "gemm_pack_transpose" : "gemm_pack_copy",
      fmt::format("-DPACK_ELEM=2 -DPACK_NARROW={}", target == GemmStorage::kBF16 ? 1 : 2));
  const std::uint64_t ld = leading_dimension(op, cols);
  for (std::uint64_t batch0 = 0; batch0 < items; batch0 += kMaxGroups) {
    const std::uint64_t groups = std::min(items - batch0, kMaxGroups);
    const std::size_t global[3] = {static_cast<std::size_t>((cols + 31) / 32 * 32),
                                   static_cast<std::size_t>((rows + 31) / 32 * 8),
                                   static_cast<std::size_t>(groups)};
    const std::size_t local[3] = {32, 8, 1};
    call.launch(kernel, LaunchGeometry::grid(3, global, local), op.buffer.mem, block.mem,
                static_cast<cl_uint>(rows), static_cast<cl_uint>(cols), static_cast<cl_ulong>(ld),
                static_cast<cl_ulong>(op.offset), static_cast<cl_ulong>(op.batch_stride),
                static_cast<cl_ulong>(out_ld), static_cast<cl_ulong>(out_stride),
                static_cast<cl_ulong>(batch0));
  }
  return {{block.mem, block.capacity}, out_stride, 0, out_ld, target};
}

}  // namespace

std::optional<MmaKind> narrowed_kind(const GemmProblem& p) {
  if (p.a.storage != GemmStorage::kF32 || p.b.storage != GemmStorage::kF32) return std::nullopt;
  if (p.rounding == GemmRounding::kBF16) return MmaKind::kBF16;
  if (p.rounding == GemmRounding::kFP16) return MmaKind::kFP16;
  return std::nullopt;
}

GemmProblem narrow_operands(DeviceCall& call, const GemmProblem& p, MmaKind kind,
                            std::vector<PoolBlock>& temps) {
  const GemmStorage target = kind == MmaKind::kBF16 ? GemmStorage::kBF16 : GemmStorage::kF16;
  // A as m x k and B as n x k, which every tensor-core kernel reads in place (the warpgroup
  // kernels would otherwise transpose the other forms in a pass of their own).
  GemmProblem q = p;
  q.a = narrow(call, p.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.batch, p.trans_a,
               target, temps);
  q.b = narrow(call, p.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.batch, !p.trans_b,
               target, temps);
  q.trans_a = false;
  q.trans_b = true;
  q.rounding = GemmRounding::kNone;
  return q;
}

}  // namespace aethercl::gemm
