// GEMM routine: picks parameters for the device and shape (gemm/params.h), the global-load
// widths the operands allow, checks the operands' extents and launches kernels/gemm.cl over
// (N tiles, M tiles, batch), split into several launches where a grid would exceed the
// per-dimension group limit.
#include "gemm/gemm.h"

#include "gemm/database.h"
#include "gemm/params.h"
#include "runtime/launch.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/log.h"

#include <algorithm>
#include <aethercl/driver.h>

namespace aethercl::gemm {
namespace {

constexpr const char* kFamily = "gemm";
// Groups per NDRange dimension in one launch: within every runtime's limits (CUDA's grid y/z).
constexpr std::uint64_t kMaxGroupsPerDimension = 65535;

const char* kernel_name(bool trans_a, bool trans_b) {
  if (!trans_a && !trans_b) return "gemm_nn";
  if (!trans_a && trans_b) return "gemm_nt";
  if (trans_a && !trans_b) return "gemm_tn";
  fail(Status::kInternal, "the GEMM engine has no kernel for op(A) = A^T with op(B) = B^T");
}

void check_extent(const char* operand, const GemmOperand& op, std::uint64_t batch,
                  std::uint64_t rows, std::uint64_t cols) {
  auto matrix = checked_mul(rows, cols);
  auto strides = checked_mul(batch - 1, op.batch_stride);
  auto elements = matrix && strides ? checked_add(*strides, *matrix) : std::nullopt;
  auto bytes = elements ? checked_mul(*elements, sizeof(float)) : std::nullopt;
  if (!bytes || *bytes > op.buffer.size) {
    fail(Status::kInternal, "GEMM operand {} ({} x {}, batch {} with stride {}) exceeds its "
         "buffer of {} bytes", operand, rows, cols, batch, op.batch_stride, op.buffer.size);
  }
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

// The kernel and its parameters: the preferred choice for the device and shape, or a smaller
// one when the compiled kernel supports fewer work-items than the device maximum.
KernelChoice choose_kernel(Device& device, const GemmProblem& p) {
  const DeviceInfo& info = device.info();
  GemmLimits limits{info.max_work_group_size, info.local_mem_bytes};
  GemmParamSources sources = param_sources(info);
  const char* name = kernel_name(p.trans_a, p.trans_b);
  for (;;) {
    GemmChoice choice = select_gemm_params(info.kind, limits, sources, p.m, p.n);
    const GemmParams& params = choice.params;
    // A is staged as TILE_M x TILE_K, contiguous along m when transposed, else along k; B as
    // TILE_K x TILE_N, contiguous along k when transposed, else along n.
    int vec_a = global_load_width(params, p.trans_a ? p.m : p.k, p.a.batch_stride,
                                  params.tile_m, params.tile_k);
    int vec_b = global_load_width(params, p.trans_b ? p.k : p.n, p.b.batch_stride,
                                  params.tile_k, params.tile_n);
    Kernel& kernel =
        device.programs().kernel(kFamily, name, params.build_options(vec_a, vec_b));
    std::size_t kernel_limit = kernel.max_work_group_size;
    if (params.work_group_size() <= kernel_limit) {
      if (log().should_log(spdlog::level::trace)) {
        log().trace("GEMM {} {}x{}x{} batch {}: {} ({}), vec_a={} vec_b={}", name, p.m, p.n,
                    p.k, p.batch, params.to_string(), choice.source, vec_a, vec_b);
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

}  // namespace

void enqueue_gemm(DeviceCall& call, const GemmProblem& p) {
  if (p.m == 0 || p.n == 0 || p.k == 0 || p.batch == 0) {
    fail(Status::kInternal, "GEMM with an empty dimension (m={} n={} k={} batch={})", p.m, p.n,
         p.k, p.batch);
  }
  check_extent("A", p.a, p.batch, p.m, p.k);
  check_extent("B", p.b, p.batch, p.k, p.n);
  check_extent("C", p.c, p.batch, p.m, p.n);

  Device& device = call.device();
  auto [kernel, params] = choose_kernel(device, p);
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
        call.launch(*kernel, LaunchGeometry::grid(3, global, local), p.a.buffer.mem,
                    p.b.buffer.mem, p.c.buffer.mem, static_cast<cl_ulong>(p.m),
                    static_cast<cl_ulong>(p.n), static_cast<cl_ulong>(p.k),
                    static_cast<cl_ulong>(p.a.batch_stride),
                    static_cast<cl_ulong>(p.b.batch_stride),
                    static_cast<cl_ulong>(p.c.batch_stride), static_cast<cl_ulong>(tile_m0),
                    static_cast<cl_ulong>(tile_n0), static_cast<cl_ulong>(batch0));
      }
    }
  }
}

}  // namespace aethercl::gemm
