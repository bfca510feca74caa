// The tensor-core kernel family kernels/gemm_mma.cl: which kernel runs a product, its build
// options and tile configuration, and its launch.
#pragma once

#include "gemm/gemm.h"
#include "runtime/device_call.h"

#include <optional>
#include <string>

namespace aethercl::gemm {

// What the tensor cores multiply (kernels/gemm_mma.cl MMA_KIND).
enum class MmaKind : int { kTF32 = 0, k3xTF32 = 1, kBF16 = 2, kFP16 = 3 };
const char* mma_kind_name(MmaKind kind);

// The kind that computes p exactly as its compute mode says, or nullopt (other combinations of
// storage and rounding run on the portable kernel).
std::optional<MmaKind> mma_kind_for(const GemmProblem& p);

// Tile configuration: work-group tile bm x bn, warp tile wm x wn (mma.sync; warpgroup MMA gives
// each warpgroup 64 rows and all bn columns), K-tiles in flight.
struct MmaConfig {
  int bm = 128;
  int bn = 128;
  int wm = 64;
  int wn = 64;
  int stages = 3;
  // 1: round TF32 inputs to nearest (the documented rounding); on the warpgroup kernel that is
  // a packing pass over both operands. 2: the same rounding, done by the cp.async warpgroup
  // kernel (wgmma=1, bulk=0) on each staged tile instead, so operands stored k-contiguous are
  // read in place. 0: the tensor cores' truncation.
  int tf32_round = 1;
  int wgmma = 0;       // 1: the warpgroup-MMA kernel (sm_90a)
  int inflight = 1;    // warpgroup MMA: 1 keeps a K-tile's MMAs running across the next barrier
  int bulk = 0;        // warpgroup MMA: 1 packs A and B into stage images and bulk-copies them
  int row_bytes = 64;  // bytes of k per K-tile row: 64, or 32 with bulk, or 128 with mma.sync
  // mma.sync products: 0 splits products of fewer tiles than compute units into k slices as the
  // tensor-core dispatch decides; 1 never splits; 2-64 asks for that many slices (tuning), fewer
  // where k is too short for them.
  int split = 0;
  // Float32 operands of a BF16 (2) or FP16 (3) product read as TF32's by mma.sync, each fragment
  // rounded to 16 bits in registers (kernels/gemm_mma.cl MMA_NARROW); 0: operands as stored.
  int narrow = 0;
  int threads() const {
    return wgmma ? (bm / 64) * 128 + (bulk ? 32 : 0) : (bm / wm) * (bn / wn) * 32;
  }
  // The mma.sync form of this configuration: no warpgroup MMA, hence no bulk copies either.
  void drop_warpgroup() {
    if (wgmma) row_bytes = 64;
    if (tf32_round == 2) tf32_round = 1;  // mma.sync rounds its fragments in registers
    wgmma = 0;
    bulk = 0;
  }
  // Local memory of one work-group; two_parts: 3xTF32 on the bulk kernel (two parts per operand).
  std::uint64_t local_bytes(bool two_parts = false) const;
  std::string to_string() const;
};

// The warpgroup-MMA kernel of products that fill the device: 128 x 128 tiles of two warpgroups,
// operands packed into stage images and bulk-copied into five stages of 32-byte rows, each
// K-tile's MMAs ended before its stage is released; 3xTF32, whose stages hold two parts of each
// operand, in 128 x 64 tiles and three stages (measured in docs/PERFORMANCE.md).
inline MmaConfig warpgroup_config(MmaKind kind) {
  MmaConfig config{128, 128, 16, 128, 5, 1, 1};
  if (kind == MmaKind::k3xTF32) config = {128, 64, 16, 64, 3, 1, 1};
  config.inflight = 0;
  config.bulk = 1;
  config.row_bytes = 32;
  return config;
}

// Where the tensor-core kernels run.
enum class MmaMode { kHardware, kEmulated, kEmulatedWarpgroup };

// The configuration for p on a device with `compute_units` that supports warpgroup MMA or not:
// mma.sync with 16 x 64 tiles for products of at most 32 rows with A stored m x k (decode-like;
// TF32 and 3xTF32 of 16 rows in 16 x 128 tiles where those fill the device);
// warpgroup MMA when the product fills the device with 128 x 128 tiles (warpgroup_config() for
// TF32 and for 16-bit products large enough to repay packing both operands, else the cp.async
// form) or, for 3xTF32, mma.sync with 128 x 64 tiles of 64 x 32 warp tiles for single products
// of 65-128 rows, else warpgroup MMA with 128 x 64 tiles of at least 64 rows
// (warpgroup_config()); else
// mma.sync with 128 x 128 tiles, or 64 x 64 ones with 128-byte K-tile rows for products with
// fewer tiles than compute units. AETHERCL_MMA_PARAMS ("bm=128,bn=128,wm=64,wn=64,
// stages=3,tf32_round=1,wgmma=0,inflight=1,bulk=0,row_bytes=64,split=0", any subset) overrides it
// (tuning; bm 16 or 32 only with A stored m x k). Emulation uses small tiles. Throws
// kInvalidArgument for a malformed override.
MmaConfig mma_config(const GemmProblem& p, MmaKind kind, std::uint32_t compute_units,
                     bool warpgroup, MmaMode mode);

// The cp.async width (16, 8 or 4 bytes) A and B allow: offsets, leading dimensions and batch
// strides in bytes must be multiples of it; 0 when not even 4 works.
int mma_chunk_bytes(const GemmProblem& p);

// mma_chunk_bytes for one operand stored with `cols` columns (its batch stride counted).
int operand_chunk_bytes(const GemmOperand& op, std::uint64_t cols);

// The build options of the kernel for p (they name the kernel variant); cvt_rn: the kernel runs
// on hardware that rounds to TF32 with one instruction (PTX cvt.rn.tf32.f32, compute capability
// 9.0 and later), never in emulation.
std::string mma_build_options(const Device& device, const GemmProblem& p, MmaKind kind,
                              const MmaConfig& config, int chunk, MmaMode mode, bool cvt_rn);

// Builds (or finds) the kernel with those options (its PTX rewritten by `patch` when not NULL)
// and enqueues it on the call's stream. Preconditions: kind == mma_kind_for(p),
// chunk == mma_chunk_bytes(p) > 0.
// Throws kBuildFailed when the kernel does not build, kDeviceError when the runtime refuses the
// launch.
void enqueue_mma_gemm(DeviceCall& call, const GemmProblem& p, const MmaConfig& config,
                      const std::string& options, const BinaryPatch* patch = nullptr);

}  // namespace aethercl::gemm
