// Split-K products: slices of k as one batched GEMM into scratch, then gemm_fold_parts.
#include "gemm/split_k.h"

#include "ops/launch.h"

#include <algorithm>

namespace aethercl::gemm {
namespace {

// Each slice keeps at least this much of k: shorter slices cost more in partial products
// written and folded than their extra work-groups gain.
constexpr std::uint64_t kMinSliceK = 64;
constexpr std::uint64_t kMaxSlices = 64;
constexpr std::uint64_t kTile = 64;

// A block of scratch memory on the call's stream, back to the pool at scope exit (the pool is
// stream-ordered: later work on the stream runs after the fold that reads it).
class Partials {
 public:
  Partials(DeviceCall& call, std::uint64_t bytes)
      : device_(call.device()), block_(device_.allocate(call.stream(), bytes)), bytes_(bytes) {}
  Partials(const Partials&) = delete;
  Partials& operator=(const Partials&) = delete;
  ~Partials() { device_.pool().release(block_); }
  BufferView view() const { return BufferView{block_.mem, bytes_}; }

 private:
  Device& device_;
  PoolBlock block_;
  std::uint64_t bytes_;
};

// The operand's slice of k starting at k0: offset moved by k0 along k (one element per k when k
// runs along the stored rows, ld per k when it runs down the columns), with an explicit leading
// dimension, since the slices' shorter k would change the dense default.
GemmOperand k_slice(const GemmOperand& operand, bool k_along_rows, std::uint64_t ld,
                    std::uint64_t k0, std::uint64_t slice_k) {
  GemmOperand slice = operand;
  slice.ld = ld;
  const std::uint64_t step = k_along_rows ? 1 : ld;
  slice.offset = operand.offset + k0 * step;
  slice.batch_stride = slice_k * step;
  return slice;
}

}  // namespace

bool enqueue_split_k(DeviceCall& call, const GemmProblem& p) {
  Device& device = call.device();
  if (ops::cpu_kernel_forms(device) || p.batch != 1 || p.beta != 0.0f ||
      p.c.storage != GemmStorage::kF32) {
    return false;
  }
  const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
  const std::uint64_t tiles = ((p.m + kTile - 1) / kTile) * ((p.n + kTile - 1) / kTile);
  if (tiles >= units) return false;
  const std::uint64_t slices =
      std::min({(2 * units + tiles - 1) / tiles, p.k / kMinSliceK, kMaxSlices});
  if (slices < 2) return false;
  const std::uint64_t slice_k = p.k / slices;
  const std::uint64_t tail = p.k - slices * slice_k;  // the rest, as one more product
  const std::uint64_t parts = slices + (tail > 0 ? 1 : 0);
  const std::uint64_t lda = leading_dimension(p.a, p.trans_a ? p.m : p.k);
  const std::uint64_t ldb = leading_dimension(p.b, p.trans_b ? p.k : p.n);
  Partials partials(call, parts * p.m * p.n * sizeof(float));

  auto enqueue_slices = [&](std::uint64_t k0, std::uint64_t k, std::uint64_t batch,
                            std::uint64_t first_part) {
    GemmProblem slice = p;
    slice.k = k;
    slice.batch = batch;
    // op(A) is m x k: k runs along A's stored rows unless A is transposed; op(B) is k x n: k runs
    // along B's stored rows only when B is transposed.
    slice.a = k_slice(p.a, !p.trans_a, lda, k0, k);
    slice.b = k_slice(p.b, p.trans_b, ldb, k0, k);
    slice.c = GemmOperand{partials.view(), p.m * p.n, first_part * p.m * p.n, 0,
                          GemmStorage::kF32};
    enqueue_gemm(call, slice);
  };
  enqueue_slices(0, slice_k, slices, 0);
  if (tail > 0) enqueue_slices(slices * slice_k, tail, 1, slices);

  Kernel& fold = device.programs().literal_kernel("gemm_fold", "gemm_fold_parts");
  call.launch(fold, ops::linear_geometry(device, fold, p.m * p.n), partials.view().mem,
              p.c.buffer.mem, static_cast<cl_ulong>(p.m), static_cast<cl_ulong>(p.n),
              static_cast<cl_ulong>(leading_dimension(p.c, p.n)),
              static_cast<cl_ulong>(p.c.offset), static_cast<cl_ulong>(parts));
  return true;
}

}  // namespace aethercl::gemm
