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

// A transposed dense copy of an operand stored rows x cols (leading dimension padded to 16
// bytes), in a pool block the caller releases. Broadcast operands are copied once.
GemmOperand pack_transposed(Device& device, const GemmOperand& op, std::uint64_t rows,
                            std::uint64_t cols, std::uint64_t batch, std::vector<PoolBlock>& temps) {
  const std::uint64_t bytes = storage_bytes(op.storage);
  const std::uint64_t align = 16 / bytes;
  const std::uint64_t out_ld = (rows + align - 1) / align * align;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t out_stride = items > 1 ? cols * out_ld : 0;
  if ((rows + 31) / 32 > kMaxGroups) {
    fail(Status::kDeviceError, "an operand of {} rows is too tall to transpose in one launch",
         rows);
  }
  temps.push_back(device.pool().acquire(std::max<std::uint64_t>(items * cols * out_ld * bytes, 16)));
  const PoolBlock& block = temps.back();
  Kernel& kernel = device.programs().kernel("gemm_pack", "gemm_pack_transpose",
                                            fmt::format("-DPACK_ELEM={}", bytes));
  const std::uint64_t ld = leading_dimension(op, cols);
  for (std::uint64_t batch0 = 0; batch0 < items; batch0 += kMaxGroups) {
    const std::uint64_t groups = std::min(items - batch0, kMaxGroups);
    const std::size_t global[3] = {static_cast<std::size_t>((cols + 31) / 32 * 32),
                                   static_cast<std::size_t>((rows + 31) / 32 * 8),
                                   static_cast<std::size_t>(groups)};
    const std::size_t local[3] = {32, 8, 1};
    device.enqueue(device.current_stream(), make_launch(kernel, LaunchGeometry::grid(3, global, local), op.buffer.mem,
                               block.mem, static_cast<cl_uint>(rows), static_cast<cl_uint>(cols),
                               static_cast<cl_ulong>(ld), static_cast<cl_ulong>(op.offset),
                               static_cast<cl_ulong>(op.batch_stride),
                               static_cast<cl_ulong>(out_ld), static_cast<cl_ulong>(out_stride),
                               static_cast<cl_ulong>(batch0)));
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

void enqueue_wgmma_gemm(Device& device, const GemmProblem& p, MmaKind kind,
                        const MmaConfig& config, MmaMode mode) {
  std::vector<PoolBlock> temps;
  try {
    GemmProblem packed = p;
    if (p.trans_a) {  // A stored k x m: a copy stored m x k
      packed.a = pack_transposed(device, p.a, p.k, p.m, p.batch, temps);
      packed.trans_a = false;
    }
    if (!p.trans_b) {  // B stored k x n: a copy stored n x k
      packed.b = pack_transposed(device, p.b, p.k, p.n, p.batch, temps);
      packed.trans_b = true;
    }
    const int chunk = mma_chunk_bytes(packed);
    if (chunk == 0) {
      fail(Status::kInternal, "warpgroup-MMA operands are not aligned to 4 bytes");
    }
    const std::string options = mma_build_options(packed, kind, config, chunk, mode);
    enqueue_mma_gemm(device, packed, config, options,
                     mode == MmaMode::kHardware ? &sm90a_patch() : nullptr);
  } catch (...) {
    for (PoolBlock& block : temps) device.pool().release(block);
    throw;
  }
  // In-order queue: blocks released now are handed out only to commands after this product.
  for (PoolBlock& block : temps) device.pool().release(block);
}

}  // namespace aethercl::gemm
