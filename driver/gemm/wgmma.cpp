// Warpgroup-MMA GEMM: PTX retargeting, operand packing (kernels/gemm_pack.cl) and launch.
#include "gemm/wgmma.h"

#include "gemm/operand_copies.h"
#include "runtime/launch.h"
#include "runtime/scratch.h"
#include "support/error.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

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

// What the bulk kernels' packing does to float32 values.
enum class PackValues { kAsStored, kRoundTF32, kSplitTF32 };

// pack_tiles' image: k per K-tile, K-tiles, rows padded to whole tiles, elements per batch item
// and bytes.
struct TileShape {
  std::uint64_t tk, k_tiles, padded_rows, item_elems, bytes;
};

TileShape tile_shape(const GemmOperand& op, std::uint64_t rows, std::uint64_t depth,
                     std::uint64_t batch, int tile_rows, int row_bytes, PackValues values) {
  const std::uint64_t bytes = storage_bytes(op.storage);
  const std::uint64_t tk = static_cast<std::uint64_t>(row_bytes) / bytes;
  const std::uint64_t k_tiles = (depth + tk - 1) / tk;
  const std::uint64_t padded_rows = (rows + tile_rows - 1) / tile_rows * tile_rows;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  const std::uint64_t parts = values == PackValues::kSplitTF32 ? 2 : 1;
  const std::uint64_t item_elems = padded_rows * k_tiles * tk * parts;
  return {tk, k_tiles, padded_rows, item_elems,
          std::max<std::uint64_t>(items * item_elems * bytes, 16)};
}

// The operand as `rows` x `depth` (its k; stored depth x rows when k_major) in the bulk kernels'
// stage images (kernels/gemm_pack.cl's gemm_pack_tiles), zero-padded to whole tiles of
// tile_rows x row_bytes (two such parts with kSplitTF32), into block (of tile_shape's bytes).
// Broadcast operands are packed once.
GemmOperand pack_tiles(DeviceCall& call, const GemmOperand& op, std::uint64_t rows,
                       std::uint64_t depth, std::uint64_t batch, bool k_major, int tile_rows,
                       int row_bytes, PackValues values, const PoolBlock& block) {
  Device& device = call.device();
  const std::uint64_t bytes = storage_bytes(op.storage);
  const TileShape shape = tile_shape(op, rows, depth, batch, tile_rows, row_bytes, values);
  const std::uint64_t tk = shape.tk, k_tiles = shape.k_tiles;
  const std::uint64_t padded_rows = shape.padded_rows, item_elems = shape.item_elems;
  const std::uint64_t items = op.batch_stride == 0 ? 1 : batch;
  if ((padded_rows + 7) / 8 > kMaxGroups || k_tiles > 0xffffffffull) {
    fail(Status::kDeviceError, "an operand of {} x {} is too large to pack in one launch", rows,
         depth);
  }
  const std::uint64_t ld = leading_dimension(op, k_major ? rows : depth);
  // Stored rows starting at 16-byte multiples are read as whole units: moved as they are when
  // they run along k, transposed through local memory when they run along the operand's rows.
  // Each form's work-groups of (32, 8) cover (x elements of k, y rows), as gemm_pack.cl says.
  struct Form {
    const char* kernel;
    std::uint64_t k_per_group;
    std::uint64_t rows_per_group;
  };
  const std::uint64_t unit = 16 / bytes;  // elements per 16-byte unit
  const bool units = (ld * bytes) % 16 == 0 && (op.offset * bytes) % 16 == 0 &&
                     (items == 1 || (op.batch_stride * bytes) % 16 == 0);
  const Form form = !units    ? Form{"gemm_pack_tiles", 8 * unit, 32}
                    : k_major ? Form{"gemm_pack_tiles_columns", 32, 8 * unit}
                              : Form{"gemm_pack_tiles_rows", 32 * unit, 8};
  Kernel& kernel = device.programs().kernel(
      "gemm_pack", form.kernel,
      fmt::format("-DPACK_ELEM={} -DPACK_ROUND_TF32={} -DPACK_SPLIT_TF32={} -DPACK_TILE_ROWS={} "
                  "-DPACK_ROW_BYTES={} -DPACK_K_MAJOR={}", bytes,
                  values == PackValues::kRoundTF32 ? 1 : 0,
                  values == PackValues::kSplitTF32 ? 1 : 0, tile_rows, row_bytes,
                  k_major ? 1 : 0));
  const std::uint64_t groups_k = (k_tiles * tk + form.k_per_group - 1) / form.k_per_group;
  const std::uint64_t groups_rows = (padded_rows + form.rows_per_group - 1) / form.rows_per_group;
  for (std::uint64_t batch0 = 0; batch0 < items; batch0 += kMaxGroups) {
    const std::uint64_t groups = std::min(items - batch0, kMaxGroups);
    const std::size_t global[3] = {static_cast<std::size_t>(groups_k * 32),
                                   static_cast<std::size_t>(groups_rows * 8),
                                   static_cast<std::size_t>(groups)};
    const std::size_t local[3] = {32, 8, 1};
    call.launch(kernel, LaunchGeometry::grid(3, global, local), op.buffer.mem, block.mem,
                static_cast<cl_uint>(rows), static_cast<cl_uint>(depth), static_cast<cl_ulong>(ld),
                static_cast<cl_ulong>(op.offset), static_cast<cl_ulong>(op.batch_stride),
                static_cast<cl_uint>(k_tiles), static_cast<cl_ulong>(items > 1 ? item_elems : 0),
                static_cast<cl_ulong>(batch0));
  }
  return {{block.mem, block.capacity}, items > 1 ? item_elems : 0, 0, tk, op.storage};
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
  GemmProblem packed = p;
  // TF32 with the documented rounding: both operands are copied rounded, and the kernel leaves
  // them as they are (rounding every staged tile in local memory cost a third of its speed on
  // products that fill the device). tf32_round=2 asks the cp.async kernel to round its staged
  // tiles instead, which spares products that read few tiles per operand element a pass.
  const bool round_tf32 = kind == MmaKind::kTF32 && config.tf32_round == 1;
  MmaConfig kernel_config = config;
  if (round_tf32) kernel_config.tf32_round = 0;
  if (config.tf32_round == 2) kernel_config.tf32_round = 1;
  // Every copy is allocated before the first is launched: where one does not fit (the caller
  // then takes the mma.sync kernel), no copy has run.
  ScratchBlocks temps(call);
  if (config.bulk) {  // both as stage images: A as m x k, B as n x k
    const PackValues values = kind == MmaKind::k3xTF32 ? PackValues::kSplitTF32
                              : round_tf32             ? PackValues::kRoundTF32
                                                       : PackValues::kAsStored;
    const PoolBlock block_a =
        temps.add(tile_shape(p.a, p.m, p.k, p.batch, config.bm, config.row_bytes, values).bytes);
    const PoolBlock block_b =
        temps.add(tile_shape(p.b, p.n, p.k, p.batch, config.bn, config.row_bytes, values).bytes);
    packed.a = pack_tiles(call, p.a, p.m, p.k, p.batch, p.trans_a, config.bm, config.row_bytes,
                          values, block_a);
    packed.b = pack_tiles(call, p.b, p.n, p.k, p.batch, !p.trans_b, config.bn, config.row_bytes,
                          values, block_b);
    packed.trans_a = false;
    packed.trans_b = true;
  } else {
    // A as m x k (from k x m when transposed); B as n x k (from k x n, not transposed).
    const bool copy_a = p.trans_a || round_tf32, copy_b = !p.trans_b || round_tf32;
    const std::uint64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
    const std::uint64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
    PoolBlock block_a, block_b;
    if (copy_a) block_a = temps.add(copy_shape(p.a, a_rows, a_cols, p.batch, p.trans_a).bytes);
    if (copy_b) block_b = temps.add(copy_shape(p.b, b_rows, b_cols, p.batch, !p.trans_b).bytes);
    if (copy_a) {
      packed.a = pack_operand(call, p.a, a_rows, a_cols, p.batch, p.trans_a, round_tf32, block_a);
      packed.trans_a = false;
    }
    if (copy_b) {
      packed.b = pack_operand(call, p.b, b_rows, b_cols, p.batch, !p.trans_b, round_tf32,
                              block_b);
      packed.trans_b = true;
    }
  }
  const int chunk = mma_chunk_bytes(packed);
  if (chunk == 0) fail(Status::kInternal, "warpgroup-MMA operands are not aligned to 4 bytes");
  // The warpgroup kernel's hardware is compute capability 9.0, which has cvt.rn.tf32.f32.
  const std::string options = mma_build_options(call.device(), packed, kind, kernel_config,
                                                chunk, mode, mode == MmaMode::kHardware);
  enqueue_mma_gemm(call, packed, kernel_config, options,
                   mode == MmaMode::kHardware ? &sm90a_patch() : nullptr);
}

}  // namespace aethercl::gemm
