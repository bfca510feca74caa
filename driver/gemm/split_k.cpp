// Split-K products: slices of k as one batched GEMM into scratch, then gemm_fold_parts.
#include "gemm/split_k.h"

#include "runtime/family_launch.h"
#include "runtime/scratch.h"
#include "support/log.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

namespace aethercl::gemm {
namespace {

// Each slice keeps at least this much of k: shorter slices cost more in partial products
// written and folded than their extra work-groups gain.
constexpr std::uint64_t kMinSliceK = 64;
constexpr std::uint64_t kMaxSlices = 64;
// Work-items per compute unit a product should reach before it is left whole: half of what an
// NVIDIA multiprocessor holds (2048), the occupancy the GEMM kernels run at.
constexpr std::uint64_t kItemsPerUnit = 1024;

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

std::uint64_t split_k_slices(Device& device, const GemmProblem& p, std::uint64_t groups,
                             std::uint64_t group_items, std::uint64_t k_multiple) {
  if (ops::cpu_kernel_forms(device) || !k_splittable(p)) return 1;
  const std::uint64_t units = std::max<std::uint32_t>(1, device.info().compute_units);
  const std::uint64_t items = groups * group_items;
  const std::uint64_t wanted = units * kItemsPerUnit;
  if (items >= wanted) return 1;
  const std::uint64_t operand_elements = p.m * p.k + p.k * p.n;
  const std::uint64_t min_slice_k = std::max(kMinSliceK, k_multiple);
  const std::uint64_t slices = std::min({(wanted + items - 1) / items, p.k / min_slice_k,
                                         kMaxSlices, operand_elements / (p.m * p.n)});
  return slices < 2 ? 1 : slices;
}

std::uint64_t split_k_slices(Device& device, const GemmProblem& p, const GemmParams& params) {
  const std::uint64_t groups = ((p.m + params.tile_m - 1) / params.tile_m) *
                               ((p.n + params.tile_n - 1) / params.tile_n);
  return split_k_slices(device, p, groups, params.work_group_size());
}

bool enqueue_split_k(DeviceCall& call, const GemmProblem& p, std::uint64_t slices,
                     std::uint64_t k_multiple, const SliceProduct& product) {
  Device& device = call.device();
  // The partial products are an optional workspace: halve the slices until they fit.
  std::optional<Scratch> partials;
  std::uint64_t slice_k = 0, tail = 0, parts = 0;
  for (; slices >= 2; slices /= 2) {
    slice_k = p.k / slices / k_multiple * k_multiple;
    tail = p.k - slices * slice_k;  // the rest, as one more product
    parts = slices + (tail > 0 ? 1 : 0);
    if (optional_scratch(partials, call, parts * p.m * p.n * sizeof(float),
                         fmt::format("the partial products of a {}x{}x{} product in {} k slices",
                                     p.m, p.n, p.k, slices))) {
      break;
    }
  }
  if (!partials) {
    log().debug("device {}: the {}x{}x{} product runs unsplit", device.index(), p.m, p.n, p.k);
    return false;
  }
  const std::uint64_t lda = leading_dimension(p.a, p.trans_a ? p.m : p.k);
  const std::uint64_t ldb = leading_dimension(p.b, p.trans_b ? p.k : p.n);

  auto enqueue_slices = [&](std::uint64_t k0, std::uint64_t k, std::uint64_t batch,
                            std::uint64_t first_part) {
    GemmProblem slice = p;
    slice.k = k;
    slice.batch = batch;
    // op(A) is m x k: k runs along A's stored rows unless A is transposed; op(B) is k x n: k runs
    // along B's stored rows only when B is transposed.
    slice.a = k_slice(p.a, !p.trans_a, lda, k0, k);
    slice.b = k_slice(p.b, p.trans_b, ldb, k0, k);
    slice.c = GemmOperand{partials->view(), p.m * p.n, first_part * p.m * p.n, 0,
                          GemmStorage::kF32};
    slice.epilogue = GemmEpilogue{};  // applied by the fold
    if (product) {
      product(call, slice);
    } else {
      enqueue_gemm(call, slice);
    }
  };
  enqueue_slices(0, slice_k, slices, 0);
  if (tail > 0) enqueue_slices(slices * slice_k, tail, 1, slices);

  Kernel& fold = device.programs().kernel(
      "gemm_fold", "gemm_fold_parts",
      fmt::format("-DFOLD_C_TYPE={}", static_cast<int>(p.c.storage)) +
          epilogue_options(p.epilogue));
  LaunchRecord record = make_launch(
      fold, ops::linear_geometry(device, fold, p.m * p.n), partials->mem(), p.c.buffer.mem,
      static_cast<cl_ulong>(p.m), static_cast<cl_ulong>(p.n),
      static_cast<cl_ulong>(leading_dimension(p.c, p.n)), static_cast<cl_ulong>(p.c.offset),
      static_cast<cl_ulong>(parts));
  add_epilogue_args(record.args, p.epilogue, p.c.buffer.mem);
  call.enqueue(record);
  return true;
}

}  // namespace aethercl::gemm
