// Fused attention on tensor cores: the choice of kernels/attention_mma.cl for a call, its build
// options, a probe per build (kind and head-dimension bucket), and the launches.
#include "ops/attention_mma.h"

#include "gemm/compute_mode.h"
#include "gemm/tensor_core_gemm.h"
#include "runtime/family_launch.h"
#include "runtime/graph.h"
#include "support/error.h"
#include "support/log.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace aethercl::ops {
namespace {

constexpr const char* kFamily = "attention_mma";
constexpr const char* kKernels[] = {"attention_mma_forward", "attention_mma_dq",
                                    "attention_mma_dkdv"};
constexpr std::size_t kThreads = 128;       // four warps (ATTM_THREADS)
constexpr std::uint64_t kRows = 64;         // rows of a work-group's tile (ATTM_ROWS)
constexpr std::uint64_t kMaxHeadDim = 128;
constexpr std::uint64_t kScratchUints = 6;  // per work-item, emulation only (WM_SCRATCH_UINTS)

struct AttentionMmaState : DeviceExtension {
  std::map<std::string, bool> usable;  // build options -> they built and the probe matched
};

std::uint64_t head_dim_bucket(std::uint64_t head_dim) {
  for (std::uint64_t d : {16, 32, 64}) {
    if (head_dim <= d) return d;
  }
  return kMaxHeadDim;
}

// What the kernels declare: two tiles of 64 rows of d + 8 16-bit values, the inner query block's
// lse and delta (attention_mma_dkdv), and the emulation's scratch.
std::uint64_t local_bytes(std::uint64_t d, bool emulated) {
  return 2 * kRows * (d + 8) * 2 + 2 * kRows * 4 + (emulated ? kThreads * kScratchUints * 4 : 0);
}

cl_uint u32(std::uint64_t value) { return static_cast<cl_uint>(value); }

struct Grid {
  cl_uint tiles;
  LaunchGeometry geometry;
};

// One work-group of four warps per (batch*head, tile of 64 of `seq` rows).
Grid grid(const AttentionShape& s, std::uint64_t seq) {
  const std::uint64_t tiles = (seq + kRows - 1) / kRows;
  const std::uint64_t groups = s.batch * s.heads * tiles;
  if (tiles > 0xffffffffull || groups > (1ull << 40)) {
    fail(Status::kInvalidArgument, "the attention grid of {} work-groups is too large", groups);
  }
  return {u32(tiles), LaunchGeometry::linear(static_cast<std::size_t>(groups * kThreads),
                                             kThreads)};
}

// A causal 1 x 1 x 70 x 70 problem with head_dim d, of multiples of 1/8 exact in both 16-bit
// formats, through the forward kernel of `options`, against float64. The kernel rounds each
// probability to the format before the second product (normalising by the unrounded sum), so o
// is within u max|v| of the exact value (u = 2^-8 bf16, 2^-11 f16); a wrong fragment layout or mask
// is off by about max|v|. Returns "" when o is within 4u max|v|, else what went wrong; throws
// kOutOfMemory where its buffers find no room.
std::string probe(DeviceCall& call, const std::string& options, std::uint64_t d, bool bf16) {
  constexpr std::uint64_t n = 70;
  AttentionShape s{};
  s.batch = s.heads = 1;
  s.seq_q = s.seq_k = n;
  s.head_dim = d;
  s.q_count = s.k_count = n * d;
  s.rows = n;
  s.element_bytes = 4;
  s.layout = 0;
  s.causal = 1;
  s.dtype = AETHERCL_F32;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<float> q(n * d), k(n * d), v(n * d);
  for (std::uint64_t i = 0; i < n * d; ++i) {
    q[i] = static_cast<float>(static_cast<int>((i * 7 + 3) % 9) - 4) / 8.0f;
    k[i] = static_cast<float>(static_cast<int>((i * 5 + 1) % 7) - 3) / 8.0f;
    v[i] = static_cast<float>(static_cast<int>((i * 3 + 2) % 11) - 5) / 8.0f;
  }
  double v_max = 0.0;
  for (float x : v) v_max = std::max(v_max, std::fabs(static_cast<double>(x)));
  std::vector<double> expected(n * d, 0.0);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::vector<double> p(i + 1);
    double m = -INFINITY, l = 0.0;
    for (std::uint64_t j = 0; j <= i; ++j) {
      double dot = 0.0;
      for (std::uint64_t c = 0; c < d; ++c) dot += double(q[i * d + c]) * k[j * d + c];
      p[j] = dot * s.scale;
      m = std::max(m, p[j]);
    }
    for (double& x : p) l += (x = std::exp(x - m));
    for (std::uint64_t j = 0; j <= i; ++j)
      for (std::uint64_t c = 0; c < d; ++c) expected[i * d + c] += p[j] / l * v[j * d + c];
  }

  Device& device = call.device();
  Stream& stream = call.stream();
  CapturePause eager(stream);  // the probe runs and reads back at once, also during a capture
  PoolBlock blocks[5];
  std::string problem;
  try {
    const std::uint64_t bytes = n * d * 4;
    for (int b = 0; b < 4; ++b) blocks[b] = device.allocate(stream, bytes);
    blocks[4] = device.allocate(stream, n * 4);
    device.write(stream, blocks[0].mem, 0, bytes, q.data(), false);
    device.write(stream, blocks[1].mem, 0, bytes, k.data(), false);
    device.write(stream, blocks[2].mem, 0, bytes, v.data(), false);
    attention_mma_forward(call, s, options, blocks[0].mem, blocks[1].mem, blocks[2].mem,
                          blocks[3].mem, blocks[4].mem, true);
    std::vector<float> o(n * d);
    device.read(stream, blocks[3].mem, 0, bytes, o.data());
    const double bound = 4.0 * (bf16 ? 0x1p-8 : 0x1p-11) * v_max;
    for (std::uint64_t i = 0; i < o.size() && problem.empty(); ++i) {
      if (!(std::fabs(o[i] - expected[i]) <= bound)) {
        problem = fmt::format("probe element {} is {}, expected {} (within {})", i, o[i],
                              expected[i], bound);
      }
    }
  } catch (...) {
    for (PoolBlock& block : blocks) {
      if (block.mem != nullptr) device.free_block(block, {});
    }
    throw;
  }
  for (PoolBlock& block : blocks) {
    if (block.mem != nullptr) device.free_block(block, {});
  }
  return problem;
}

}  // namespace

std::optional<std::string> attention_mma_options(DeviceCall& call, const AttentionShape& s) {
  auto mode = static_cast<gemm::ComputeMode>(s.compute);  // validated by attention_shape
  if (mode == gemm::ComputeMode::kDefault) mode = gemm::matmul_precision(call);
  if ((mode != gemm::ComputeMode::kBF16 && mode != gemm::ComputeMode::kFP16) ||
      s.head_dim > kMaxHeadDim) {
    return std::nullopt;
  }
  Device& device = call.device();
  const std::optional<gemm::MmaMode> tensor_cores = gemm::tensor_cores_for(device);
  if (!tensor_cores) return std::nullopt;
  const bool emulated = *tensor_cores != gemm::MmaMode::kHardware;
  const std::uint64_t d = head_dim_bucket(s.head_dim);
  if (local_bytes(d, emulated) > device.info().local_mem_bytes ||
      device.info().max_work_group_size < kThreads) {
    return std::nullopt;
  }
  const bool bf16 = mode == gemm::ComputeMode::kBF16;
  // Emulation is a testing mode (layouts, not speed): unoptimised on CPUs, as the GEMM's.
  const std::string options = fmt::format(
      "-DATTM_D={} -DATTM_BQ={} -DWM_KIND={} -DWM_EMULATE={}{}", d, d > 64 ? 32 : 64,
      bf16 ? 2 : 3, emulated ? 1 : 0,
      emulated && device.info().kind == DeviceKind::kCpu ? " -cl-opt-disable" : "");
  // AETHERCL_WG_LIMIT (tests) may cap work-groups below the kernels' four warps: portable then.
  // (Before the build below: a capped first call leaves the probe to a later one.)
  auto& usable = device.extension<AttentionMmaState>().usable;
  auto known = usable.find(options);
  if (known == usable.end()) {
    std::string problem;
    try {
      for (const char* name : kKernels) {
        Kernel& kernel = family_kernel(call, kFamily, name, options);
        if (work_group_limit(device, kernel, kThreads) < kThreads) return std::nullopt;
      }
      problem = probe(call, options, d, bf16);
    } catch (const Error& error) {
      if (error.status() == Status::kOutOfMemory) {
        log().debug("device {}: no room to probe the tensor-core attention ({}); the portable "
                    "kernels take this call: {}", device.index(), options, error.what());
        return std::nullopt;
      }
      if (error.status() != Status::kBuildFailed && error.status() != Status::kDeviceError) throw;
      problem = error.what();
    }
    if (!problem.empty()) {
      log().warn("device {} ({}): the tensor-core attention kernels ({}) failed their build or "
                 "probe; the portable kernels take over: {}", device.index(), device.info().name,
                 options, problem);
    }
    known = usable.emplace(options, problem.empty()).first;
  }
  if (!known->second) return std::nullopt;
  for (const char* name : kKernels) {
    if (work_group_limit(device, family_kernel(call, kFamily, name, options), kThreads) <
        kThreads) {
      return std::nullopt;
    }
  }
  return options;
}

void attention_mma_forward(DeviceCall& call, const AttentionShape& s, const std::string& options,
                           cl_mem q, cl_mem k, cl_mem v, cl_mem o, cl_mem lse, bool has_lse) {
  const Grid g = grid(s, s.seq_q);
  call.launch(family_kernel(call, kFamily, "attention_mma_forward", options), g.geometry, q, k, v,
              o, lse, cl_int{has_lse ? 1 : 0}, u32(s.heads), u32(s.seq_q), u32(s.seq_k),
              u32(s.head_dim), cl_int{s.layout}, cl_int{s.causal}, s.scale, cl_int{s.dtype},
              g.tiles);
}

void attention_mma_backward(DeviceCall& call, const AttentionShape& s,
                            const std::string& options, cl_mem q, cl_mem k, cl_mem v, cl_mem lse,
                            cl_mem delta, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv) {
  if (s.k_count > 0) {  // keys no query sees (seq_q = 0, causal) get dk = dv = 0
    const Grid g = grid(s, s.seq_k);
    call.launch(family_kernel(call, kFamily, "attention_mma_dkdv", options), g.geometry, q, k, v,
                lse, delta, dout, dk, dv, u32(s.heads), u32(s.seq_q), u32(s.seq_k),
                u32(s.head_dim), cl_int{s.layout}, cl_int{s.causal}, s.scale, cl_int{s.dtype},
                g.tiles);
  }
  if (s.q_count > 0) {
    const Grid g = grid(s, s.seq_q);
    call.launch(family_kernel(call, kFamily, "attention_mma_dq", options), g.geometry, q, k, v,
                lse, delta, dout, dq, u32(s.heads), u32(s.seq_q), u32(s.seq_k), u32(s.head_dim),
                cl_int{s.layout}, cl_int{s.causal}, s.scale, cl_int{s.dtype}, g.tiles);
  }
}

}  // namespace aethercl::ops
