// Tensor-core kernel selection, build options and launch geometry.
#include "gemm/mma_kernel.h"

#include "runtime/launch.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace aethercl::gemm {
namespace {

constexpr const char* kFamily = "gemm_mma";
constexpr const char* kKernel = "gemm_mma_product";
constexpr const char* kParamsVariable = env::kMmaParams;
// Groups per launch along the batch dimension (CUDA's grid z limit).
constexpr std::uint64_t kMaxBatchGroups = 65535;

void apply_override(MmaConfig& config, const std::string& text) {
  struct Field {
    const char* key;
    int MmaConfig::*member;
  };
  constexpr Field kFields[] = {{"bm", &MmaConfig::bm},       {"bn", &MmaConfig::bn},
                               {"wm", &MmaConfig::wm},       {"wn", &MmaConfig::wn},
                               {"stages", &MmaConfig::stages},
                               {"tf32_round", &MmaConfig::tf32_round},
                               {"wgmma", &MmaConfig::wgmma},
                               {"inflight", &MmaConfig::inflight},
                               {"bulk", &MmaConfig::bulk},
                               {"row_bytes", &MmaConfig::row_bytes},
                               {"split", &MmaConfig::split}};
  bool row_bytes_named = false;
  bool bm_named = false;
  std::string_view rest(text);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    const Field* field = nullptr;
    for (const Field& candidate : kFields) {
      if (key == candidate.key) field = &candidate;
    }
    int value = 0;
    const std::string_view digits =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (field == nullptr || error != std::errc() || end != digits.data() + digits.size()) {
      fail(Status::kInvalidArgument, "{}='{}': '{}' is not one of bm, bn, wm, wn, stages, "
           "tf32_round, wgmma, inflight, bulk, row_bytes, split = integer", kParamsVariable, text,
           item);
    }
    config.*field->member = value;
    row_bytes_named |= field->member == &MmaConfig::row_bytes;
    bm_named |= field->member == &MmaConfig::bm;
  }
  // wgmma=1 over an mma.sync default: what only mma.sync takes (128-byte K-tile rows, skinny
  // tiles) and the override did not name becomes the warpgroup kernel's.
  if (config.wgmma && !row_bytes_named && config.row_bytes == 128) config.row_bytes = 64;
  if (config.wgmma && !bm_named && config.bm < 64) config.bm = 64;
  // Sizes in range first: threads() divides by wm and wn, the copy checks by the work-items
  // and the units per row, and products of them must not overflow.
  const auto in_range = [](int value, int low, int high) { return value >= low && value <= high; };
  const bool sized = in_range(config.bm, 16, 1024) && in_range(config.bn, 64, 1024) &&
                     in_range(config.wm, 16, 1024) && in_range(config.wn, 16, 1024) &&
                     in_range(config.row_bytes, 32, 128);
  const bool warp_ok =
      sized && (config.wgmma ? config.bm % 64 == 0 &&
                                   (config.bn == 64 || config.bn == 128 || config.bn == 256 ||
                                    (config.bulk && (config.bn == 120 || config.bn == 248)))
                             : config.wm % 16 == 0 && config.wn % 16 == 0 &&
                                   config.bm % config.wm == 0 && config.bn % config.wn == 0);
  // The cp.async kernels copy K-tiles of A and B (rows of row_bytes / 16 units) in whole rows
  // worth of units per work-item, or one unit each by the first work-items of a skinny A tile.
  const int threads = warp_ok ? config.threads() : 0;  // then at least 32
  const int units = config.row_bytes / 16;
  const bool copies_ok = warp_ok && (config.bulk || ((config.bn * units) % threads == 0 &&
                                                     ((config.bm * units) % threads == 0 ||
                                                      threads % (config.bm * units) == 0)));
  const bool skinny = !config.wgmma && (config.bm == 16 || config.bm == 32);
  const bool shape_ok = warp_ok && copies_ok && (config.bm >= 64 || skinny) && config.bn >= 64 &&
                        threads <= 1024 && config.stages >= 2 && config.stages <= 8 &&
                        (config.wgmma == 0 || config.wgmma == 1) &&
                        (config.inflight == 0 || config.inflight == 1) &&
                        config.split >= 0 && config.split <= 64 &&
                        (config.tf32_round == 0 || config.tf32_round == 1 ||
                         (config.tf32_round == 2 && config.wgmma == 1 && config.bulk == 0)) &&
                        (config.bulk == 0 || (config.bulk == 1 && config.wgmma == 1)) &&
                        (config.row_bytes == 64 || (config.row_bytes == 32 && config.bulk) ||
                         (config.row_bytes == 128 && !config.wgmma && threads % 64 == 0));
  if (!shape_ok) {
    fail(Status::kInvalidArgument, "{}='{}' is not a valid tile configuration (warp tiles of "
         "multiples of 16 dividing block tiles of at least 64 (bm also 16 or 32), or wgmma=1 "
         "with bm a multiple of 64 and bn 64, 128 or 256, or 120 or 248 with bulk=1; at most 32 "
         "warps, each copying whole rows (row_bytes / 16 units) of bm and bn, or one unit each of "
         "a skinny bm; 2-8 stages; bulk=1 only with wgmma=1; row_bytes 64, or 32 with bulk=1, or "
         "128 with wgmma=0 and a multiple of 64 work-items; tf32_round 0 or 1, or 2 with wgmma=1 "
         "and bulk=0; split 0-64)", kParamsVariable, text);
  }
}

bool aligned(std::uint64_t elements, std::uint64_t element_bytes, int chunk) {
  return (elements * element_bytes) % static_cast<std::uint64_t>(chunk) == 0;
}

}  // namespace

const char* mma_kind_name(MmaKind kind) {
  switch (kind) {
    case MmaKind::kTF32: return "tf32";
    case MmaKind::k3xTF32: return "3xtf32";
    case MmaKind::kBF16: return "bf16";
    case MmaKind::kFP16: return "fp16";
  }
  return "?";
}

std::optional<MmaKind> mma_kind_for(const GemmProblem& p) {
  switch (p.a.storage) {
    case GemmStorage::kF32:
      if (p.rounding == GemmRounding::kTF32) return MmaKind::kTF32;
      if (p.rounding == GemmRounding::k3xTF32) return MmaKind::k3xTF32;
      return std::nullopt;
    case GemmStorage::kBF16:
      if (p.rounding == GemmRounding::kNone) return MmaKind::kBF16;
      return std::nullopt;
    case GemmStorage::kF16:
      if (p.rounding == GemmRounding::kNone) return MmaKind::kFP16;
      return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t MmaConfig::local_bytes(bool two_parts) const {
  const auto stages64 = static_cast<std::uint64_t>(stages);
  return stages64 * static_cast<std::uint64_t>(bm + bn) * static_cast<std::uint64_t>(row_bytes) *
             (two_parts ? 2 : 1) +
         (bulk ? stages64 * 16 : 0);  // a full and an empty barrier per stage
}

std::string MmaConfig::to_string() const {
  return fmt::format(
      "bm={},bn={},wm={},wn={},stages={},tf32_round={},wgmma={},inflight={},bulk={},row_bytes={},"
      "split={}{}",
      bm, bn, wm, wn, stages, tf32_round, wgmma, inflight, bulk, row_bytes, split,
      narrow ? fmt::format(" (narrowed to {} in registers)",
                           mma_kind_name(static_cast<MmaKind>(narrow)))
             : "");
}

MmaConfig mma_config(const GemmProblem& p, MmaKind kind, std::uint32_t compute_units,
                     bool warpgroup, MmaMode mode) {
  MmaConfig config;
  const std::uint64_t tiles = ((p.m + 127) / 128) * ((p.n + 127) / 128) * p.batch;
  const bool big = tiles * 2 >= compute_units && p.k >= 64;
  // 3xTF32's warpgroup tiles are 128 x 64; rows of fewer than 64 waste most of them.
  const std::uint64_t split_tiles = ((p.m + 127) / 128) * ((p.n + 63) / 64) * p.batch;
  const bool split_fills = split_tiles * 2 >= compute_units && p.k >= 64 && p.m >= 64;
  if (mode == MmaMode::kEmulated) {
    config = {64, 64, 32, 32, 2, 1, 0};
  } else if (mode == MmaMode::kEmulatedWarpgroup) {
    config = {64, 64, 16, 64, 2, 1, kind == MmaKind::k3xTF32 ? 0 : 1};
    if (!config.wgmma) config = {64, 64, 32, 32, 2, 1, 0};
  } else if (p.m <= 32 && !p.trans_a) {
    // Decode-like rows: 16 x 64 tiles of four warps side by side along n, so that the MMAs are
    // not three quarters zeros (32 rows run as two such tiles: measured faster than one of 32);
    // TF32 and 3xTF32 with K-tiles of 128 bytes per row, and at 16 rows 16 x 128 tiles in two
    // stages once those fill the device (docs/PERFORMANCE.md).
    const bool tf32_kind = kind == MmaKind::kTF32 || kind == MmaKind::k3xTF32;
    const bool wide = tf32_kind && p.m <= 16 && (p.n + 127) / 128 >= compute_units;
    config = wide ? MmaConfig{16, 128, 16, 32, 2, 1, 0} : MmaConfig{16, 64, 16, 16, 4, 1, 0};
    if (tf32_kind) config.row_bytes = 128;
  } else if (kind == MmaKind::k3xTF32 && p.m > 64 && p.m <= 128 && p.batch == 1) {
    // 3xTF32 of 65-128 rows: one 128-row tile of four 64 x 32 warp tiles, which reads B once and
    // reuses each fragment over more MMAs; split in k by the dispatch. Measured faster than 64 x 64
    // tiles and the warpgroup kernel (docs/PERFORMANCE.md).
    config = {128, 64, 64, 32, 3, 1, 0};
  } else if (warpgroup && kind == MmaKind::k3xTF32 && split_fills) {
    config = warpgroup_config(kind);
  } else if (warpgroup && kind != MmaKind::k3xTF32 && big) {
    // Packing both operands costs (m + n) * k element moves, which the bulk kernel's speed repays
    // once m * n / (m + n) reaches about 2048 (measured: docs/PERFORMANCE.md). TF32 packs both
    // operands to round them either way.
    const bool repaid = kind == MmaKind::kTF32 || p.m * p.n >= 2048 * (p.m + p.n);
    config = repaid ? warpgroup_config(kind) : MmaConfig{128, 128, 16, 128, 3, 1, 1};
    // Fewer 128 x 128 tiles than two per compute unit (a GPT's 4096 x 512 products on an H200):
    // tiles of one warpgroup, 64 rows, twice as many; measured 11% faster there, slower where
    // the 128-row tiles fill the device twice (docs/PERFORMANCE.md, "Warpgroup tiles of 64 rows").
    if (!repaid && tiles < 2ull * compute_units) config.bm = 64;
    // The cp.async kernel copies both operands when A is stored k x m and B k x n (a weight
    // gradient dY^T X); bulk copies of the same tiles cost no more and feed a faster loop (GPT
    // medium's 3072 x 768 x 4096 dW on an H200: 101 -> 74 us; docs/PERFORMANCE.md, session 20).
    if (!repaid && p.trans_a && !p.trans_b) config.bulk = 1;
  } else if (tiles < compute_units) {
    // Fewer 128 x 128 tiles than compute units leaves the GPU idle: smaller tiles then, with
    // K-tiles of 128 bytes per row (half the barriers per k; 48 KiB in three stages).
    config = {64, 64, 32, 32, 3, 1, 0};
    config.row_bytes = 128;
  }
  if (auto text = env::get(kParamsVariable)) {
    apply_override(config, *text);
    if (config.bm < 64 && p.trans_a) {
      fail(Status::kInvalidArgument, "{}='{}': tiles of {} rows need A stored m x k (this "
           "product's A is transposed)", kParamsVariable, *text, config.bm);
    }
  }
  // 3xTF32 splits its operands only in the bulk kernel's packing: mma.sync elsewhere.
  if (!config.wgmma || (!config.bulk && kind == MmaKind::k3xTF32)) config.drop_warpgroup();
  return config;
}

int operand_chunk_bytes(const GemmOperand& op, std::uint64_t cols) {
  const std::uint64_t bytes = storage_bytes(op.storage);
  const std::uint64_t ld = leading_dimension(op, cols);
  for (int chunk : {16, 8, 4}) {
    if (aligned(ld, bytes, chunk) && aligned(op.offset, bytes, chunk) &&
        aligned(op.batch_stride, bytes, chunk)) {
      return chunk;
    }
  }
  return 0;
}

int mma_chunk_bytes(const GemmProblem& p) {
  // A single item's batch stride is never used, whatever its alignment.
  GemmOperand a = p.a;
  GemmOperand b = p.b;
  if (p.batch == 1) a.batch_stride = b.batch_stride = 0;
  return std::min(operand_chunk_bytes(a, p.trans_a ? p.m : p.k),
                  operand_chunk_bytes(b, p.trans_b ? p.k : p.n));
}

std::string mma_build_options(const Device& device, const GemmProblem& p, MmaKind kind,
                              const MmaConfig& config, int chunk, MmaMode mode, bool cvt_rn) {
  const std::uint64_t ldc = leading_dimension(p.c, p.n);
  // Element alignments of C's rows: a single item's batch stride is never used.
  const std::uint64_t c_stride = p.batch > 1 ? p.c.batch_stride : 0;
  const bool c_pairs = ldc % 2 == 0 && p.c.offset % 2 == 0 && c_stride % 2 == 0;
  const std::uint64_t c_bytes = storage_bytes(p.c.storage);
  // 16-bit C through local memory in whole 16-byte units (MMA_C_STAGED): measured faster than pair
  // stores; float32 C, whose pair stores fill whole sectors already, measured slower staged
  // (docs/PERFORMANCE.md).
  // The stored pre-activation goes out in the same units, so it must start on 16 bytes too.
  const bool pre_aligned =
      p.epilogue.pre.mem == nullptr || (p.epilogue.pre_offset * c_bytes) % 16 == 0;
  const bool c_staged = c_bytes == 2 && (ldc * c_bytes) % 16 == 0 &&
                        (p.c.offset * c_bytes) % 16 == 0 && (c_stride * c_bytes) % 16 == 0 &&
                        pre_aligned;
  // Emulation (a testing mode that checks layouts, never speed) is built unoptimised on CPUs:
  // LLVM's optimisation of the emulated warp instructions took about 90 % of a cold PoCL build,
  // 70 s of 75 s per variant on a busy 2-core machine. NVIDIA's compiler refuses these builds.
  const bool emulated = mode != MmaMode::kHardware;
  const bool unoptimised = emulated && device.info().kind == DeviceKind::kCpu;
  return fmt::format(
      "-DMMA_KIND={} -DMMA_C_TYPE={} -DMMA_TRANS_A={} -DMMA_TRANS_B={} -DMMA_BM={} -DMMA_BN={} "
      "-DMMA_WM={} -DMMA_WN={} -DMMA_STAGES={} -DMMA_CHUNK={} -DMMA_C_PAIRS={} "
      "-DMMA_TF32_ROUND={} -DMMA_EMULATE={} -DMMA_WGMMA={} -DMMA_WG_INFLIGHT={} -DMMA_BULK={} "
      "-DMMA_ROW_BYTES={} -DMMA_CVT_RN={} -DMMA_C_STAGED={} -DMMA_NARROW={}{}",
      static_cast<int>(kind), static_cast<int>(p.c.storage), p.trans_a ? 1 : 0,
      p.trans_b ? 1 : 0, config.bm, config.bn, config.wm, config.wn, config.stages, chunk,
      c_pairs ? 1 : 0, config.tf32_round, emulated ? 1 : 0, config.wgmma,
      config.wgmma ? config.inflight : 0, config.bulk, config.row_bytes, cvt_rn ? 1 : 0,
      c_staged ? 1 : 0, config.narrow, unoptimised ? " -cl-opt-disable" : "") +
         epilogue_options(p.epilogue);
}

void enqueue_mma_gemm(DeviceCall& call, const GemmProblem& p, const MmaConfig& config,
                      const std::string& options, const BinaryPatch* patch) {
  Device& device = call.device();
  const std::uint64_t lda = leading_dimension(p.a, p.trans_a ? p.m : p.k);
  const std::uint64_t ldb = leading_dimension(p.b, p.trans_b ? p.k : p.n);
  const std::uint64_t ldc = leading_dimension(p.c, p.n);
  Kernel& kernel = patch ? device.programs().kernel(kFamily, kKernel, options, *patch)
                         : device.programs().kernel(kFamily, kKernel, options);

  const std::uint64_t tiles_m = (p.m + config.bm - 1) / config.bm;
  const std::uint64_t tiles_n = (p.n + config.bn - 1) / config.bn;
  const auto threads = static_cast<std::size_t>(config.threads());
  if (log().should_log(spdlog::level::trace)) {
    log().trace("GEMM {}x{}x{} batch {} on tensor cores ({} -> {}): {}", p.m, p.n, p.k,
                p.batch, storage_name(p.a.storage), storage_name(p.c.storage),
                options);
  }
  for (std::uint64_t batch0 = 0; batch0 < p.batch; batch0 += kMaxBatchGroups) {
    const std::uint64_t groups_b = std::min(p.batch - batch0, kMaxBatchGroups);
    const std::size_t global[3] = {static_cast<std::size_t>(tiles_m * tiles_n) * threads, 1,
                                   static_cast<std::size_t>(groups_b)};
    const std::size_t local[3] = {threads, 1, 1};
    LaunchRecord record = make_launch(
        kernel, LaunchGeometry::grid(3, global, local), p.a.buffer.mem, p.b.buffer.mem,
        p.c.buffer.mem, static_cast<cl_uint>(p.m), static_cast<cl_uint>(p.n),
        static_cast<cl_uint>(p.k), static_cast<cl_ulong>(lda), static_cast<cl_ulong>(ldb),
        static_cast<cl_ulong>(ldc), static_cast<cl_ulong>(p.a.offset),
        static_cast<cl_ulong>(p.b.offset), static_cast<cl_ulong>(p.c.offset),
        static_cast<cl_ulong>(p.a.batch_stride), static_cast<cl_ulong>(p.b.batch_stride),
        static_cast<cl_ulong>(p.c.batch_stride), p.alpha, p.beta, static_cast<cl_uint>(tiles_m),
        static_cast<cl_uint>(tiles_n), static_cast<cl_ulong>(batch0));
    add_epilogue_args(record.args, p.epilogue, p.c.buffer.mem);
    call.enqueue(record);
  }
}

}  // namespace aethercl::gemm
