// GEMM routine: hands reduced-precision products to the tensor-core kernels where the device
// has them (gemm/tensor_core_gemm.h); otherwise picks parameters for the device and shape
// (gemm/params.h), the global-load widths the operands allow, checks the operands' extents and
// launches kernels/gemm.cl over (N tiles, M tiles, batch), split into several launches where a
// grid would exceed the per-dimension group limit.
#include "gemm/gemm.h"

#include "gemm/database.h"
#include "gemm/params.h"
#include "gemm/split_k.h"
#include "gemm/tensor_core_gemm.h"
#include "runtime/launch.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/log.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <aethercl/driver.h>
#include <numeric>

namespace aethercl::gemm {

std::uint64_t storage_bytes(GemmStorage storage) {
  return storage == GemmStorage::kF32 ? 4 : 2;
}

const char* storage_name(GemmStorage storage) {
  switch (storage) {
    case GemmStorage::kF32: return "f32";
    case GemmStorage::kF16: return "f16";
    case GemmStorage::kBF16: return "bf16";
  }
  return "?";
}

const char* rounding_name(GemmRounding rounding) {
  switch (rounding) {
    case GemmRounding::kNone: return "fp32";
    case GemmRounding::kTF32: return "tf32";
    case GemmRounding::k3xTF32: return "3xtf32";
    case GemmRounding::kBF16: return "bf16";
    case GemmRounding::kFP16: return "fp16";
  }
  return "?";
}

std::uint64_t leading_dimension(const GemmOperand& operand, std::uint64_t cols) {
  return operand.ld != 0 ? operand.ld : cols;
}

namespace {

constexpr const char* kFamily = "gemm";
// Groups per NDRange dimension in one launch: within every runtime's limits (CUDA's grid y/z).
constexpr std::uint64_t kMaxGroupsPerDimension = 65535;

const char* kernel_name(bool trans_a, bool trans_b) {
  if (!trans_a) return trans_b ? "gemm_nt" : "gemm_nn";
  return trans_b ? "gemm_tt" : "gemm_tn";
}

// rows x cols as stored, with its leading dimension, offset and batch stride.
void check_extent(const char* operand, const GemmOperand& op, std::uint64_t batch,
                  std::uint64_t rows, std::uint64_t cols) {
  const std::uint64_t ld = leading_dimension(op, cols);
  if (rows == 0 || cols == 0) {  // nothing is touched (k == 0): the offset is still in range
    if (op.offset * storage_bytes(op.storage) > op.buffer.size) {
      fail(Status::kInternal, "GEMM operand {} starts past its buffer", operand);
    }
    return;
  }
  auto rows_before = checked_mul(rows - 1, ld);
  auto strides = checked_mul(batch - 1, op.batch_stride);
  auto elements = rows_before && strides ? checked_add(*strides, *rows_before) : std::nullopt;
  if (elements) elements = checked_add(*elements, cols);
  if (elements) elements = checked_add(*elements, op.offset);
  auto bytes = elements ? checked_mul(*elements, storage_bytes(op.storage)) : std::nullopt;
  if (ld < cols || !bytes || *bytes > op.buffer.size) {
    fail(Status::kInternal, "GEMM operand {} ({} x {} {}, ld {}, offset {}, batch {} with stride "
         "{}) exceeds its buffer of {} bytes", operand, rows, cols, storage_name(op.storage), ld,
         op.offset, batch, op.batch_stride, op.buffer.size);
  }
}

// The global-load width of an operand stored rows x cols (gemm/params.h): the leading
// dimension, the columns, the offset and the batch stride must all be multiples of it.
int operand_load_width(const GemmParams& params, const GemmOperand& op, std::uint64_t cols,
                       int tile_rows, int tile_cols) {
  const std::uint64_t alignment = std::gcd(std::gcd(op.batch_stride, op.offset), cols);
  return global_load_width(params, leading_dimension(op, cols), alignment, tile_rows, tile_cols);
}

std::string type_options(const GemmProblem& p) {
  return fmt::format(" -DGEMM_AB_TYPE={} -DGEMM_C_TYPE={} -DGEMM_ROUND={}",
                     static_cast<int>(p.a.storage), static_cast<int>(p.c.storage),
                     static_cast<int>(p.rounding)) +
         epilogue_options(p.epilogue);
}

// Where the parameters of the device come from (gemm/params.h: GemmParamSources).
GemmParamSources param_sources(const DeviceInfo& info) {
  GemmParamSources sources;
  sources.override_text = env::get(env::kGemmParams);
  if (!sources.override_text) {
    sources.tuned = cached_gemm_tuning({info.name, info.driver_version, AETHERCL_VERSION_STRING},
                                       info.kind);
    sources.builtin = builtin_gemm_params(info.name, info.kind);
  }
  return sources;
}

struct KernelChoice {
  Kernel* kernel;
  GemmParams params;
};

// Choices already made on a device, by everything a choice depends on: the transposes, the shape,
// storage and rounding, and the leading dimensions, offsets and batch strides (load widths), under the AETHERCL_GEMM_PARAMS and AETHERCL_TUNING_FILE
// values they were made with (a change of either starts afresh). The step of a training loop
// repeats a few dozen shapes, so after the first step no call parses or formats parameters.
struct GemmPlans : DeviceExtension {
  // Everything the choice depends on: layout, shape, the storage and rounding (build options)
  // and what decides the global-load widths (leading dimensions, offsets, batch strides).
  // and the fused epilogue's kind (a build option too).
  using Key = std::tuple<bool, bool, std::uint64_t, std::uint64_t, std::uint64_t, int, int, int,
                         std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                         std::uint64_t, std::uint64_t, int>;
  static constexpr std::size_t kMaxPlans = 4096;
  std::optional<std::string> override_text;
  std::optional<std::string> tuning_file;
  std::map<Key, KernelChoice> plans;
};

// The kernel and its parameters: the preferred choice for the device and shape, or a smaller
// one when the compiled kernel supports fewer work-items than the device maximum.
KernelChoice choose_kernel_uncached(Device& device, const GemmProblem& p) {
  const DeviceInfo& info = device.info();
  GemmLimits limits{info.max_work_group_size, info.local_mem_bytes};
  GemmParamSources sources = param_sources(info);
  const char* name = kernel_name(p.trans_a, p.trans_b);
  for (;;) {
    GemmChoice choice = select_gemm_params(info.kind, limits, sources, p.m, p.n);
    const GemmParams& params = choice.params;
    // A is staged as TILE_M x TILE_K, contiguous along m when transposed, else along k; B as
    // TILE_K x TILE_N, contiguous along k when transposed, else along n.
    int vec_a = operand_load_width(params, p.a, p.trans_a ? p.m : p.k, params.tile_m,
                                   params.tile_k);
    int vec_b = operand_load_width(params, p.b, p.trans_b ? p.k : p.n, params.tile_k,
                                   params.tile_n);
    Kernel& kernel = device.programs().kernel(
        kFamily, name, params.build_options(vec_a, vec_b) + type_options(p));
    std::size_t kernel_limit = kernel.max_work_group_size;
    if (params.work_group_size() <= kernel_limit) {
      if (log().should_log(spdlog::level::trace)) {
        log().trace("GEMM {} {}x{}x{} batch {} {}->{} {}: {} ({}), vec_a={} vec_b={}", name,
                    p.m, p.n, p.k, p.batch, storage_name(p.a.storage), storage_name(p.c.storage),
                    rounding_name(p.rounding), params.to_string(), choice.source, vec_a, vec_b);
      }
      return {&kernel, params};
    }
    if (sources.override_text) {
      fail(Status::kInvalidArgument, "AETHERCL_GEMM_PARAMS '{}': {} supports work-groups of at "
           "most {} items, the parameters need {}", *sources.override_text, name, kernel_limit,
           params.work_group_size());
    }
    // Each retry lowers the limit strictly, so the loop ends at the one-item fallback.
    limits.max_work_group_size = kernel_limit;
  }
}

KernelChoice choose_kernel(Device& device, const GemmProblem& p) {
  GemmPlans& memo = device.extension<GemmPlans>();
  auto override_text = env::get(env::kGemmParams);
  auto tuning_file = env::get(env::kTuningFile);
  if (override_text != memo.override_text || tuning_file != memo.tuning_file ||
      memo.plans.size() >= GemmPlans::kMaxPlans) {
    memo.plans.clear();
    memo.override_text = std::move(override_text);
    memo.tuning_file = std::move(tuning_file);
  }
  GemmPlans::Key key{p.trans_a,
                     p.trans_b,
                     p.m,
                     p.n,
                     p.k,
                     static_cast<int>(p.a.storage),
                     static_cast<int>(p.c.storage),
                     static_cast<int>(p.rounding),
                     leading_dimension(p.a, p.trans_a ? p.m : p.k),
                     leading_dimension(p.b, p.trans_b ? p.k : p.n),
                     p.a.offset,
                     p.b.offset,
                     p.a.batch_stride,
                     p.b.batch_stride,
                     p.epilogue.kind};
  auto it = memo.plans.find(key);
  if (it != memo.plans.end()) return it->second;
  KernelChoice choice = choose_kernel_uncached(device, p);
  memo.plans.emplace(key, choice);
  return choice;
}

}  // namespace

void enqueue_gemm(DeviceCall& call, const GemmProblem& p) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) {
    fail(Status::kInternal, "GEMM with an empty output (m={} n={} batch={})", p.m, p.n, p.batch);
  }
  if (p.a.storage != p.b.storage) {
    fail(Status::kInternal, "GEMM operands A ({}) and B ({}) are stored differently",
         storage_name(p.a.storage), storage_name(p.b.storage));
  }
  check_extent("A", p.a, p.batch, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k);
  check_extent("B", p.b, p.batch, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n);
  check_extent("C", p.c, p.batch, p.m, p.n);
  if (p.tensor_cores && enqueue_tensor_core_gemm(call, p)) return;

  Device& device = call.device();
  auto [kernel, params] = choose_kernel(device, p);
  if (const std::uint64_t slices = split_k_slices(device, p, params); slices > 1) {
    // Slices of a product the tensor cores declined stay on this kernel: as a batch they would
    // meet a different tile default there (and an override meant for the whole product).
    GemmProblem portable = p;
    portable.tensor_cores = false;
    if (enqueue_split_k(call, portable, slices)) return;
  }
  const std::uint64_t lda = leading_dimension(p.a, p.trans_a ? p.m : p.k);
  const std::uint64_t ldb = leading_dimension(p.b, p.trans_b ? p.k : p.n);
  const std::uint64_t ldc = leading_dimension(p.c, p.n);
  const std::uint64_t tiles_m = (p.m + params.tile_m - 1) / params.tile_m;
  const std::uint64_t tiles_n = (p.n + params.tile_n - 1) / params.tile_n;
  const std::size_t local[3] = {static_cast<std::size_t>(params.threads_n()),
                                static_cast<std::size_t>(params.threads_m()), 1};

  for (std::uint64_t batch0 = 0; batch0 < p.batch; batch0 += kMaxGroupsPerDimension) {
    std::uint64_t groups_b = std::min(p.batch - batch0, kMaxGroupsPerDimension);
    for (std::uint64_t tile_m0 = 0; tile_m0 < tiles_m; tile_m0 += kMaxGroupsPerDimension) {
      std::uint64_t groups_m = std::min(tiles_m - tile_m0, kMaxGroupsPerDimension);
      for (std::uint64_t tile_n0 = 0; tile_n0 < tiles_n; tile_n0 += kMaxGroupsPerDimension) {
        std::uint64_t groups_n = std::min(tiles_n - tile_n0, kMaxGroupsPerDimension);
        const std::size_t global[3] = {static_cast<std::size_t>(groups_n) * local[0],
                                       static_cast<std::size_t>(groups_m) * local[1],
                                       static_cast<std::size_t>(groups_b)};
        LaunchRecord record = make_launch(
                    *kernel, LaunchGeometry::grid(3, global, local), p.a.buffer.mem,
                    p.b.buffer.mem, p.c.buffer.mem, static_cast<cl_ulong>(p.m),
                    static_cast<cl_ulong>(p.n), static_cast<cl_ulong>(p.k),
                    static_cast<cl_ulong>(lda), static_cast<cl_ulong>(ldb),
                    static_cast<cl_ulong>(ldc), static_cast<cl_ulong>(p.a.offset),
                    static_cast<cl_ulong>(p.b.offset), static_cast<cl_ulong>(p.c.offset),
                    static_cast<cl_ulong>(p.a.batch_stride),
                    static_cast<cl_ulong>(p.b.batch_stride),
                    static_cast<cl_ulong>(p.c.batch_stride), p.alpha, p.beta,
                    static_cast<cl_ulong>(tile_m0), static_cast<cl_ulong>(tile_n0),
                    static_cast<cl_ulong>(batch0));
        add_epilogue_args(record.args, p.epilogue, p.c.buffer.mem);
        call.enqueue(record);
      }
    }
  }
}

}  // namespace aethercl::gemm
