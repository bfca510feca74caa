// Tensor-core dispatch: which devices have tensor cores (NVIDIA compute capability 8.0+ from
// cl_nv_device_attribute_query, then a probe product per kernel checked exactly), and the handing
// of products to kernels/gemm_mma.cl: warpgroup MMA on compute capability 9.0 (gemm/wgmma.h),
// mma.sync elsewhere and for 3xTF32. AETHERCL_TENSOR_CORES=0 turns tensor cores off;
// AETHERCL_TENSOR_CORES=emulate (emulate-wgmma) runs the mma.sync (warpgroup) kernels with
// emulated warp instructions on any device, which tests their layouts on PoCL;
// AETHERCL_TENSOR_CORES=unprobed trusts every kernel without its probe (diagnosing kernels).
#include "gemm/tensor_core_gemm.h"

#include "gemm/device_state.h"
#include "gemm/mma_kernel.h"
#include "gemm/narrow_operands.h"
#include "gemm/operand_copies.h"
#include "gemm/split_k.h"
#include "gemm/wgmma.h"
#include "runtime/graph.h"
#include "runtime/scratch.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

namespace aethercl::gemm {
namespace {

// nullopt: tensor cores off.
std::optional<MmaMode> tensor_core_mode() {
  auto text = env::get(env::kTensorCores);
  if (!text || *text == "auto" || *text == "unprobed") return MmaMode::kHardware;
  if (*text == "emulate") return MmaMode::kEmulated;
  if (*text == "emulate-wgmma") return MmaMode::kEmulatedWarpgroup;
  if (!env::flag(env::kTensorCores, true)) return std::nullopt;
  return MmaMode::kHardware;
}
// 16-bit patterns of small integers (exact in f16 and bf16).
std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t f16_bits(float value) {
  if (value == 0.0f) return 0;
  const std::uint16_t sign = value < 0 ? 0x8000 : 0;
  int exponent = 0;
  const float mantissa = std::frexp(std::fabs(value), &exponent);  // [0.5, 1) * 2^exponent
  const auto fraction = static_cast<std::uint16_t>((mantissa * 2.0f - 1.0f) * 1024.0f);
  return static_cast<std::uint16_t>(sign | ((exponent - 1 + 15) << 10) | fraction);
}

bool rounds_with_cvt(Device& device, MmaMode mode);

// Runs a 96 x 80 x 72 product of small integers (exact in every kind) through the kernel of
// `kind` (with `narrow`, BF16 or FP16 on float32 operands rounded in registers) and compares it
// with the host's. Returns what went wrong, or "" when it matched; throws kOutOfMemory where its
// buffers or the kernel's copies find no room.
std::string probe_kind(DeviceCall& call, MmaKind kind, MmaMode mode, bool warpgroup,
                       bool narrow) {
  Device& device = call.device();
  constexpr std::uint64_t m = 96, n = 80, k = 72;
  std::vector<float> a(m * k), b(k * n), expected(m * n, 0.0f);
  for (std::uint64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 + 3) % 7) - 3;
  for (std::uint64_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5 + 1) % 5) - 2;
  for (std::uint64_t i = 0; i < m; ++i)
    for (std::uint64_t j = 0; j < n; ++j)
      for (std::uint64_t l = 0; l < k; ++l) expected[i * n + j] += a[i * k + l] * b[l * n + j];

  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.tensor_cores = true;
  std::vector<unsigned char> a_bytes, b_bytes;
  auto pack = [&](const std::vector<float>& values, std::vector<unsigned char>& out) {
    if (kind == MmaKind::kTF32 || kind == MmaKind::k3xTF32 || narrow) {
      out.resize(values.size() * 4);
      std::memcpy(out.data(), values.data(), out.size());
      return;
    }
    std::vector<std::uint16_t> half(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      half[i] = kind == MmaKind::kBF16 ? bf16_bits(values[i]) : f16_bits(values[i]);
    out.resize(half.size() * 2);
    std::memcpy(out.data(), half.data(), out.size());
  };
  pack(a, a_bytes);
  pack(b, b_bytes);
  GemmStorage storage = narrow                    ? GemmStorage::kF32
                        : kind == MmaKind::kBF16 ? GemmStorage::kBF16
                        : kind == MmaKind::kFP16 ? GemmStorage::kF16
                                                 : GemmStorage::kF32;
  p.rounding = kind == MmaKind::kTF32    ? GemmRounding::kTF32
               : kind == MmaKind::k3xTF32 ? GemmRounding::k3xTF32
               : !narrow                  ? GemmRounding::kNone
               : kind == MmaKind::kBF16   ? GemmRounding::kBF16
                                          : GemmRounding::kFP16;

  Stream& stream = call.stream();
  // The probe runs and reads back at once, also when the call is being captured into a graph.
  CapturePause eager(stream);
  PoolBlock blocks[3];
  std::string problem;
  bool no_room = false;
  try {
    const std::uint64_t sizes[3] = {a_bytes.size(), b_bytes.size(), expected.size() * 4};
    for (int i = 0; i < 3; ++i) blocks[i] = device.allocate(stream, sizes[i]);
    device.write(stream, blocks[0].mem, 0, a_bytes.size(), a_bytes.data(), false);
    device.write(stream, blocks[1].mem, 0, b_bytes.size(), b_bytes.data(), false);
    p.a = {{blocks[0].mem, a_bytes.size()}, 0, 0, 0, storage};
    p.b = {{blocks[1].mem, b_bytes.size()}, 0, 0, 0, storage};
    p.c = {{blocks[2].mem, expected.size() * 4}, 0, 0, 0, GemmStorage::kF32};
    if (warpgroup) {  // the production tiles: the instructions and the PTX rewrite
      MmaConfig config = warpgroup_config(kind);
      if (mode != MmaMode::kHardware) {  // small tiles; the bulk form only where it is the only one
        config = {64, 64, 16, 64, 2, 1, 1};
        config.bulk = kind == MmaKind::k3xTF32 ? 1 : 0;
        config.row_bytes = config.bulk ? 32 : 64;
      }
      enqueue_wgmma_gemm(call, p, kind, config, mode);
    } else {  // small tiles: the instructions, not a tuning
      MmaConfig config{64, 64, 32, 32, 2, 1, 0};
      config.narrow = narrow ? static_cast<int>(kind) : 0;
      enqueue_mma_gemm(call, p, config,
                       mma_build_options(device, p, narrow ? MmaKind::kTF32 : kind, config,
                                         mma_chunk_bytes(p), mode,
                                         rounds_with_cvt(device, mode)));
    }
    std::vector<float> result(m * n);
    device.read(stream, blocks[2].mem, 0, result.size() * 4, result.data());
    for (std::size_t i = 0; i < result.size() && problem.empty(); ++i) {
      if (result[i] != expected[i]) {
        problem = fmt::format("probe product element {} is {}, expected {}", i, result[i],
                              expected[i]);
      }
    }
  } catch (const Error& error) {
    problem = error.what();
    // Memory refused says nothing about the kernel: the caller learns it, and nothing is kept.
    no_room = error.status() == Status::kOutOfMemory;
  }
  for (PoolBlock& block : blocks) {
    if (block.mem != nullptr) device.free_block(block, {});
  }
  if (no_room) fail(Status::kOutOfMemory, "{}", problem);
  return problem;
}

// What the device has: tensor cores at all (compute capability 8.0+) and warpgroup MMA (9.0),
// decided at the first hardware call. Emulation runs on every device, whatever a hardware call
// decided before.
const TensorCoreSupport& device_support(Device& device, MmaMode mode) {
  static const TensorCoreSupport emulated{true, true, 0, ""};
  if (mode != MmaMode::kHardware) return emulated;
  TensorCoreSupport& support = device_state(device).tensor_cores;
  if (!support.probed) {
    support.probed = true;
    support.sm = device.info().nv_compute_capability;
    support.available = support.sm >= 80;
    if (!support.available) {
      support.reason = support.sm == 0 ? "not an NVIDIA GPU"
                                       : fmt::format("compute capability {}.{} is below 8.0",
                                                     support.sm / 10, support.sm % 10);
      log().info("device {} ({}): no tensor-core GEMM ({}); reduced-precision products use the "
                 "portable kernels", device.index(), device.info().name, support.reason);
    }
  }
  return support;
}

// Whether the device rounds to TF32 with cvt.rn.tf32.f32 (compute capability 9.0 and later).
bool rounds_with_cvt(Device& device, MmaMode mode) {
  return mode == MmaMode::kHardware && device_support(device, mode).sm >= 90;
}

// Whether the device runs `kind` on tensor cores (with warpgroup MMA or mma.sync; `narrow`:
// mma.sync on float32 operands rounded in registers), probing at the first call per kind and
// instruction family.
bool kind_available(DeviceCall& call, MmaKind kind, MmaMode mode, bool warpgroup,
                    bool narrow = false) {
  Device& device = call.device();
  auto& kinds = device_state(device).kind_checked;
  const int key = static_cast<int>(kind) + (warpgroup ? 100 : 0) + (narrow ? 10 : 0) +
                  (mode == MmaMode::kHardware ? 0 : 1000);
  auto it = kinds.find(key);
  if (it == kinds.end() && env::get(env::kTensorCores) == std::optional<std::string>("unprobed")) {
    return true;
  }
  if (it == kinds.end()) {
    std::string problem;
    try {
      problem = probe_kind(call, kind, mode, warpgroup, narrow);
    } catch (const Error& error) {
      // No room for the probe's operands: this product declines the kind, and a later one
      // probes it again (nothing is remembered).
      if (error.status() != Status::kOutOfMemory) throw;
      log().debug("device {}: no room to probe the {} tensor-core GEMM; other kernels take this "
                  "product: {}", device.index(), mma_kind_name(kind), error.what());
      return false;
    }
    if (!problem.empty()) {
      log().warn("device {} ({}): the {} tensor-core GEMM ({}) failed its probe; {} take over: "
                 "{}", device.index(), device.info().name, mma_kind_name(kind),
                 warpgroup ? "warpgroup MMA"
                           : narrow ? "mma.sync rounding float32 operands in registers"
                                    : "mma.sync",
                 warpgroup ? "the mma.sync kernels"
                           : narrow ? "16-bit copies of the operands" : "the portable kernels",
                 problem);
    }
    it = kinds.emplace(key, problem.empty()).first;
  }
  return it->second;
}

// Local memory of one work-group of `config` for p: emulation keeps its fragments there too.
std::uint64_t local_bytes(const GemmProblem& p, const MmaConfig& config, MmaMode mode) {
  return config.local_bytes(config.bulk && mma_kind_for(p) == MmaKind::k3xTF32) +
         (mode != MmaMode::kHardware ? static_cast<std::uint64_t>(config.threads()) * 24 : 0);
}

// Work-groups (output tiles) of one batch item of p in `config`'s tiles.
std::uint64_t tile_count(const GemmProblem& p, const MmaConfig& config) {
  return ((p.m + config.bm - 1) / config.bm) * ((p.n + config.bn - 1) / config.bn);
}

bool fits(const Device& device, const GemmProblem& p, const MmaConfig& config, MmaMode mode) {
  return local_bytes(p, config, mode) <= device.info().local_mem_bytes &&
         static_cast<std::size_t>(config.threads()) <= device.info().max_work_group_size &&
         tile_count(p, config) * static_cast<std::uint64_t>(config.threads()) <= (1ull << 31);
}

// Runs `launch` unless its variant (build options) was refused before; a variant that does not
// build or launch is remembered, logged once, and reported as not run. (With a submission thread
// a refused launch surfaces later as a deferred error instead; the probes run every kind first.)
template <typename Launch>
bool run_variant(Device& device, MmaKind kind, const std::string& variant, Launch&& launch) {
  auto& refused = device_state(device).variant_refused;
  if (refused.count(variant)) return false;
  try {
    launch();
  } catch (const Error& error) {
    if (error.status() != Status::kBuildFailed && error.status() != Status::kDeviceError) throw;
    log().warn("device {}: a {} tensor-core GEMM variant was refused; other kernels take over "
               "for it ({}): {}", device.index(), mma_kind_name(kind), variant, error.what());
    refused.emplace(variant, true);
    return false;
  }
  return true;
}

// Slices of k for split-K products, in elements: whole K-tiles of TF32 (16 or 32 elements; only
// TF32 and 3xTF32 products split), which keeps their operands' 16-byte alignment.
constexpr std::uint64_t kSliceMultiple = 32;

// Split-K of tensor-core products (mma_slices).
constexpr std::uint64_t kGroupsPerUnit = 4;
constexpr std::uint64_t kMinSliceK = 256;
constexpr std::uint64_t kMaxSlices = 64;
constexpr std::uint64_t kMinSplitK16 = 2048;

// One product of k slices of a split-K product on the mma.sync kernel of `config`; the portable
// kernel takes it where that kernel variant was refused.
void enqueue_mma_slices(DeviceCall& call, const GemmProblem& slice, MmaKind kind,
                        const MmaConfig& config, MmaMode mode) {
  const int chunk = mma_chunk_bytes(slice);
  const std::string options =
      chunk ? mma_build_options(call.device(), slice, kind, config, chunk, mode,
                                rounds_with_cvt(call.device(), mode))
            : "";
  if (chunk && run_variant(call.device(), kind, options,
                           [&] { enqueue_mma_gemm(call, slice, config, options); })) {
    return;
  }
  GemmProblem portable = slice;
  portable.tensor_cores = false;
  enqueue_gemm(call, portable);
}

// Whether BF16 and FP16 products of float32 operands round them in the mma.sync kernel's
// registers (default) or through 16-bit copies of both operands (AETHERCL_GEMM_NARROWING=copies).
bool narrowing_in_registers() {
  const auto text = env::get(env::kGemmNarrowing);
  if (!text || *text == "registers") return true;
  if (*text == "copies") return false;
  static const bool warned = [&] {
    log().warn("{}='{}' is not 'registers' or 'copies'; 'registers' it is", env::kGemmNarrowing,
               *text);
    return true;
  }();
  (void)warned;
  return true;
}

}  // namespace

// Products of fewer tiles than the device has compute units (decode-like m, weight gradients)
// run as k slices of whole K-tiles, each slice product on the same kernel, folded in slice order:
// as many slices as keep the product within one wave of kGroupsPerUnit work-groups per unit (an
// H100 multiprocessor holds four of the 48 KiB groups these products run as), in powers of two
// (no shorter rest of k as a launch of its own where k is a multiple of 32 times that), each of
// at least kMinSliceK of k, with no more partial products than the operands hold elements;
// 16-bit products only from k = kMinSplitK16 on. These limits measured fastest against keeping
// products whole; with more tiles the fold costs more than slices gain (docs/PERFORMANCE.md,
// "Split-K of decode-like products").
std::optional<MmaMode> tensor_cores_for(Device& device) {
  const std::optional<MmaMode> mode = tensor_core_mode();
  if (!mode || !device_support(device, *mode).available) return std::nullopt;
  return mode;
}

std::uint64_t mma_slices(const GemmProblem& p, MmaKind kind, std::uint64_t tiles,
                         std::uint64_t units) {
  const bool sixteen_bit = kind == MmaKind::kBF16 || kind == MmaKind::kFP16;
  if (!k_splittable(p) || p.m == 0 || p.n == 0 || tiles >= units ||
      (sixteen_bit && p.k < kMinSplitK16)) {
    return 1;
  }
  const std::uint64_t partials_allowed = (p.m * p.k + p.k * p.n) / (p.m * p.n);
  std::uint64_t slices = 1;
  while (slices * 2 * tiles <= units * kGroupsPerUnit && slices * 2 * kMinSliceK <= p.k &&
         slices * 2 <= std::min(kMaxSlices, partials_allowed)) {
    slices *= 2;
  }
  return slices;
}

namespace {

// p on the mma.sync kernel of `config` built for kind (named `named` in messages about a refused
// variant), whole or as k slices (split-K for products of fewer tiles than compute units, or a
// tuning override's count as far as whole K-tiles of k allow).
bool enqueue_mma_sync(DeviceCall& call, const GemmProblem& p, MmaKind kind, MmaKind named,
                      const MmaConfig& config, int chunk, MmaMode mode) {
  Device& device = call.device();
  std::uint64_t slices = 1;
  if (config.split >= 2 && k_splittable(p)) {
    slices = std::min<std::uint64_t>(static_cast<std::uint64_t>(config.split),
                                     p.k / kSliceMultiple);
  } else if (config.split == 0) {
    slices = mma_slices(p, kind, tile_count(p, config), device.info().compute_units);
  }
  if (slices > 1 && enqueue_split_k(call, p, slices, kSliceMultiple,
                                     [&](DeviceCall& slice_call, const GemmProblem& slice) {
                                       enqueue_mma_slices(slice_call, slice, kind, config, mode);
                                     })) {
    return true;
  }
  const std::string options = mma_build_options(device, p, kind, config, chunk, mode,
                                                rounds_with_cvt(device, mode));
  return run_variant(device, named, options,
                     [&] { enqueue_mma_gemm(call, p, config, options); });
}

// Whether the 16-bit form of p would run on a warpgroup kernel (compute capability 9.0, products
// that fill the device): there the narrowing copies feed wgmma, which repays their passes over
// the operands; every other product rounds in the mma.sync kernel's registers in one launch.
// Measured on an H200 over the GPT small's nine product shapes (docs/PERFORMANCE.md, "Narrowing
// float32 operands"): copies + wgmma 17-53 us against 21-79 us in registers wherever wgmma takes
// the product; registers faster (26 against 33 us) where the product is split in k on mma.sync.
bool copies_feed_warpgroup_kernel(Device& device, const GemmProblem& p, MmaKind narrowed,
                                  MmaMode mode) {
  const bool warpgroup = mode == MmaMode::kEmulatedWarpgroup ||
                         (mode == MmaMode::kHardware && device_support(device, mode).sm == 90);
  if (!warpgroup) return false;
  return mma_config(p, narrowed, device.info().compute_units, true, mode).wgmma;
}

// A BF16 or FP16 product of float32 operands on the mma.sync kernel that copies them as TF32's
// and rounds each fragment to 16 bits in registers: no narrowing launch and no copies, at twice
// the local-memory bytes per k of 16-bit operands. Split in k as TF32 products are.
bool enqueue_narrowed_in_registers(DeviceCall& call, const GemmProblem& p, MmaKind narrowed,
                                   MmaMode mode) {
  Device& device = call.device();
  const std::uint32_t units = device.info().compute_units;
  MmaConfig config = mma_config(p, MmaKind::kTF32, units, false, mode);
  config.drop_warpgroup();
  config.narrow = static_cast<int>(narrowed);
  const int chunk = mma_chunk_bytes(p);
  if (chunk == 0 || !fits(device, p, config, mode) ||
      !kind_available(call, narrowed, mode, false, true)) {
    return false;
  }
  return enqueue_mma_sync(call, p, MmaKind::kTF32, narrowed, config, chunk, mode);
}

// 16-bit operands whose rows, offset or batch stride are an odd number of elements (a
// vocabulary of 50,257 or 53 columns) are out of cp.async's reach: each such operand is copied
// with 16-byte rows and the product runs on those copies. The copies are an optional workspace:
// without room for them, false (the portable kernel takes the product).
bool enqueue_realigned(DeviceCall& call, const GemmProblem& p) {
  Device& device = call.device();
  struct Side {
    GemmOperand& op;
    std::uint64_t rows, cols;
    bool copy;
  };
  GemmProblem q = p;
  if (q.batch == 1) q.a.batch_stride = q.b.batch_stride = 0;  // never used
  Side sides[2] = {{q.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, false},
                   {q.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, false}};
  ScratchBlocks temps(call);
  PoolBlock blocks[2];
  try {
    for (int i = 0; i < 2; ++i) {
      sides[i].copy = operand_chunk_bytes(sides[i].op, sides[i].cols) == 0;
      if (sides[i].copy) {
        blocks[i] = temps.add(
            copy_shape(sides[i].op, sides[i].rows, sides[i].cols, q.batch, false).bytes);
      }
    }
  } catch (const Error& error) {
    if (error.status() != Status::kOutOfMemory) throw;
    log().debug("device {}: no room to realign a {}x{}x{} product's 16-bit operands; the "
                "portable kernel takes it: {}", device.index(), p.m, p.n, p.k, error.what());
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    if (sides[i].copy) {
      sides[i].op = pack_operand(call, sides[i].op, sides[i].rows, sides[i].cols, q.batch,
                                 false, false, blocks[i]);
    }
  }
  return enqueue_tensor_core_gemm(call, q);
}

}  // namespace

bool enqueue_tensor_core_gemm(DeviceCall& call, const GemmProblem& p) {
  const std::optional<MmaMode> mode = tensor_core_mode();
  if (!mode || p.k == 0) return false;
  Device& device = call.device();
  const std::optional<MmaKind> kind = mma_kind_for(p);
  if (!kind) {
    // Float32 operands in BF16 or FP16 mode: rounded in the mma.sync kernel's registers, else
    // 16-bit copies, rounded as the mode rounds, run on the 16-bit kernels (half the bytes of
    // TF32's operands, twice its MMA rate).
    const std::optional<MmaKind> narrowed = narrowed_kind(p);
    if (!narrowed || !device_support(device, *mode).available) return false;
    if (narrowing_in_registers() && !copies_feed_warpgroup_kernel(device, p, *narrowed, *mode) &&
        enqueue_narrowed_in_registers(call, p, *narrowed, *mode)) {
      return true;
    }
    if (!kind_available(call, *narrowed, *mode, false)) return false;
    ScratchBlocks temps(call);
    std::optional<GemmProblem> narrow;
    try {
      narrow = narrow_operands(call, p, *narrowed, temps);
    } catch (const Error& error) {
      // The copies are an optional workspace (allocated before their launch): without room for
      // them the portable kernel runs the product, rounding the operands as the mode does while
      // it reads them (the same products, summed in float32).
      if (error.status() != Status::kOutOfMemory) throw;
      log().debug("device {}: no room for the {} copies of a {}x{}x{} product's operands; the "
                  "portable kernel takes it: {}", device.index(), mma_kind_name(*narrowed), p.m,
                  p.n, p.k, error.what());
      return false;
    }
    return enqueue_tensor_core_gemm(call, *narrow);
  }
  const TensorCoreSupport& support = device_support(device, *mode);
  if (!support.available) return false;
  const std::uint32_t units = device.info().compute_units;
  const bool warpgroup = *mode == MmaMode::kEmulatedWarpgroup ||
                         (*mode == MmaMode::kHardware && support.sm == 90);

  MmaConfig config = mma_config(p, *kind, units, warpgroup, *mode);
  if (config.wgmma && warpgroup && (config.bulk || wgmma_operands_aligned(p)) &&
      fits(device, p, config, *mode) &&
      kind_available(call, *kind, *mode, true)) {
    const std::string variant = "wgmma " + config.to_string() + fmt::format(
        " kind {} trans {}{} c {} chunk {}", static_cast<int>(*kind), p.trans_a, p.trans_b,
        static_cast<int>(p.c.storage), mma_chunk_bytes(p)) + epilogue_options(p.epilogue);
    try {
      if (run_variant(device, *kind, variant,
                      [&] { enqueue_wgmma_gemm(call, p, *kind, config, *mode); })) {
        return true;
      }
    } catch (const Error& error) {
      // The warpgroup kernel's packed copies of A and B (stage images, transposed or TF32-
      // rounded operands) may not fit where the operands did; the mma.sync kernel reads them in
      // place.
      if (error.status() != Status::kOutOfMemory) throw;
      log().debug("device {}: no room to pack a {}x{}x{} product for the warpgroup kernel; "
                  "mma.sync takes it: {}", device.index(), p.m, p.n, p.k, error.what());
    }
  }
  if (config.wgmma) config = mma_config(p, *kind, units, false, *mode);
  config.drop_warpgroup();
  const int chunk = mma_chunk_bytes(p);
  const bool config_fits = fits(device, p, config, *mode);
  if (auto text = env::get(env::kMmaParams); !config_fits && text) {
    // A default that does not fit falls back quietly; a tuning override is told why.
    fail(Status::kInvalidArgument, "{}='{}': {} does not fit device {}: {} bytes of local memory "
         "({} available), {} work-items per group ({} allowed), a grid of {} groups (at most "
         "2^31 work-items in all)", env::kMmaParams, *text, config.to_string(), device.index(),
         local_bytes(p, config, *mode), device.info().local_mem_bytes, config.threads(),
         device.info().max_work_group_size, tile_count(p, config));
  }
  // (The warpgroup kernel's bulk packing above reads any alignment.)
  if (chunk == 0 && config_fits) return enqueue_realigned(call, p);
  if (chunk == 0 || !config_fits || !kind_available(call, *kind, *mode, false)) return false;
  return enqueue_mma_sync(call, p, *kind, *kind, config, chunk, *mode);
}

}  // namespace aethercl::gemm
