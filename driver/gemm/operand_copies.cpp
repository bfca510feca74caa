// Dense copies of GEMM operands with 16-byte rows (kernels/gemm_pack.cl's copy and transpose).
#include "gemm/operand_copies.h"

#include "runtime/launch.h"
#include "support/error.h"

#include <algorithm>
#include <fmt/format.h>

namespace aethercl::gemm {
namespace {

constexpr std::uint64_t kMaxGroups = 65535;  // per NDRange dimension (CUDA's grid y/z)

}  // namespace

CopyShape copy_shape(const GemmOperand& op, std::uint64_t rows, std::uint64_t cols,
                     std::uint64_t batch, bool transpose) {
  const std::uint64_t bytes = storage_bytes(op.storage);
  const std::uint64_t align = 16 / bytes;
  const std::uint64_t out_cols = transpose ? rows : cols;
  const std::uint64_t out_ld = (out_cols + align - 1) / align * align;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t out_rows = transpose ? cols : rows;
  return {out_ld, items > 1 ? out_rows * out_ld : 0,
          std::max<std::uint64_t>(items * out_rows * out_ld * bytes, 16)};
}

GemmOperand pack_operand(DeviceCall& call, const GemmOperand& op, std::uint64_t rows,
                         std::uint64_t cols, std::uint64_t batch, bool transpose, bool round_tf32,
                         const PoolBlock& block) {
  Device& device = call.device();
  const std::uint64_t bytes = storage_bytes(op.storage);
  const CopyShape shape = copy_shape(op, rows, cols, batch, transpose);
  const std::uint64_t out_ld = shape.out_ld, out_stride = shape.out_stride;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  if ((rows + 31) / 32 > kMaxGroups) {
    fail(Status::kDeviceError, "an operand of {} rows is too tall to pack in one launch", rows);
  }
  Kernel& kernel = device.programs().kernel(
      "gemm_pack", transpose ? "gemm_pack_transpose" : "gemm_pack_copy",
      fmt::format("-DPACK_ELEM={} -DPACK_ROUND_TF32={}", bytes, round_tf32 ? 1 : 0));
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
  return {{block.mem, block.capacity}, out_stride, 0, out_ld, op.storage};
}

}  // namespace aethercl::gemm
