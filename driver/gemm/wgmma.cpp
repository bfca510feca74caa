// Warpgroup-MMA GEMM: PTX retargeting, operand packing (kernels/gemm_pack.cl) and launch.
#include "gemm/wgmma.h"

#include "runtime/launch.h"
#include "support/error.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <vector>

namespace aethercl::gemm {
namespace {

constexpr const char* kMarker = "//AECL_SM90A ";
constexpr std::uint64_t kMaxGroups = 65535;  // per NDRange dimension (CUDA's grid y/z)

std::string retarget(const std::string& binary) {
  const std::string target = ".target sm_90";
  const std::size_t at = binary.find(target);
  const char after = at == std::string::npos || at + target.size() >= binary.size()
                         ? '\0'
                         : binary[at + target.size()];
  if (at == std::string::npos || after == 'a' || std::isalnum(static_cast<unsigned char>(after))) {
    fail(Status::kBuildFailed, "the program binary is not PTX for sm_90, which the warpgroup-MMA "
         "rewrite needs");
  }
  std::string out = binary.substr(0, at + target.size()) + "a" + binary.substr(at + target.size());
  std::size_t marks = 0;
  for (std::size_t pos = out.find(kMarker); pos != std::string::npos;
       pos = out.find(kMarker, pos)) {
    out.erase(pos, std::string(kMarker).size());
    ++marks;
  }
  if (marks == 0) fail(Status::kBuildFailed, "the PTX holds no warpgroup-MMA instructions");
  return out;
}

// A dense copy of an operand stored rows x cols, transposed (cols x rows) or not, with its
// leading dimension padded to 16 bytes and, for float32 with round_tf32, its values rounded to
// TF32, in a pool block the caller releases. Broadcast operands are copied once.
GemmOperand pack_operand(DeviceCall& call, const GemmOperand& op, std::uint64_t rows,
                         std::uint64_t cols, std::uint64_t batch, bool transpose, bool round_tf32,
                         std::vector<PoolBlock>& temps) {
  Device& device = call.device();
  const std::uint64_t bytes = storage_bytes(op.storage);
  const std::uint64_t align = 16 / bytes;
  const std::uint64_t out_cols = transpose ? rows : cols;
  const std::uint64_t out_ld = (out_cols + align - 1) / align * align;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t out_stride = items > 1 ? (transpose ? cols : rows) * out_ld : 0;
  if ((rows + 31) / 32 > kMaxGroups) {
    fail(Status::kDeviceError, "an operand of {} rows is too tall to pack in one launch", rows);
  }
  temps.push_back(device.allocate(
      call.stream(),
      std::max<std::uint64_t>(items * (transpose ? cols : rows) * out_ld * bytes, 16)));
  const PoolBlock& block = temps.back();
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

}  // namespace

bool wgmma_operands_aligned(const GemmProblem& p) {
  auto aligned = [](const GemmOperand& op, std::uint64_t cols) {
    const std::uint64_t bytes = storage_bytes(op.storage);
    return (leading_dimension(op, cols) * bytes) % 4 == 0 && (op.offset * bytes) % 4 == 0 &&
           (op.batch_stride * bytes) % 4 == 0;
  };
  return (p.trans_a || aligned(p.a, p.k)) && (!p.trans_b || aligned(p.b, p.k));
}

const BinaryPatch& sm90a_patch() {
  static const BinaryPatch patch{"ptx sm_90a wgmma 1", retarget};
  return patch;
}

void enqueue_wgmma_gemm(DeviceCall& call, const GemmProblem& p, MmaKind kind,
                        const MmaConfig& config, MmaMode mode) {
  Device& device = call.device();
  std::vector<PoolBlock> temps;
  try {
    GemmProblem packed = p;
    // TF32 with the documented rounding: both operands are copied rounded, and the kernel leaves
    // them as they are (rounding every staged tile in local memory cost a third of its speed).
    const bool round_tf32 = kind == MmaKind::kTF32 && config.tf32_round == 1;
    MmaConfig kernel_config = config;
    if (round_tf32) kernel_config.tf32_round = 0;
    if (p.trans_a || round_tf32) {  // A as m x k (from k x m when transposed)
      packed.a = pack_operand(call, p.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.batch,
                              p.trans_a, round_tf32, temps);
      packed.trans_a = false;
    }
    if (!p.trans_b || round_tf32) {  // B as n x k (from k x n when not transposed)
      packed.b = pack_operand(call, p.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.batch,
                              !p.trans_b, round_tf32, temps);
      packed.trans_b = true;
    }
    const int chunk = mma_chunk_bytes(packed);
    if (chunk == 0) {
      fail(Status::kInternal, "warpgroup-MMA operands are not aligned to 4 bytes");
    }
    const std::string options = mma_build_options(packed, kind, kernel_config, chunk, mode);
    enqueue_mma_gemm(call, packed, kernel_config, options,
                     mode == MmaMode::kHardware ? &sm90a_patch() : nullptr);
  } catch (...) {
    for (PoolBlock& block : temps) device.free_block(block, {});
    throw;
  }
  // Blocks homed on the call's stream, used only there: the pool hands them out again only to
  // work ordered after this product.
  for (PoolBlock& block : temps) device.free_block(block, {});
}

}  // namespace aethercl::gemm
