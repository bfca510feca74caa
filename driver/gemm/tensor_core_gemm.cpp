// Tensor-core dispatch: which devices have tensor cores (NVIDIA compute capability 8.0+ from
// cl_nv_device_attribute_query, then a probe product per kernel kind checked exactly), and the
// handing of products to kernels/gemm_mma.cl. AETHERCL_TENSOR_CORES=0 turns them off;
// AETHERCL_TENSOR_CORES=emulate runs the same kernels with emulated warp instructions on any
// device (tests of their layouts on PoCL).
#include "gemm/tensor_core_gemm.h"

#include "gemm/device_state.h"
#include "gemm/mma_kernel.h"
#include "support/env.h"
#include "support/log.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

namespace aethercl::gemm {
namespace {

constexpr cl_device_info kComputeCapabilityMajorNv = 0x4000;
constexpr cl_device_info kComputeCapabilityMinorNv = 0x4001;

enum class TensorCoreMode { kOff, kAuto, kEmulate };

TensorCoreMode tensor_core_mode() {
  auto text = env::get(env::kTensorCores);
  if (!text) return TensorCoreMode::kAuto;
  if (*text == "emulate") return TensorCoreMode::kEmulate;
  if (*text == "auto") return TensorCoreMode::kAuto;
  return env::flag(env::kTensorCores, true) ? TensorCoreMode::kAuto : TensorCoreMode::kOff;
}

// Compute capability major * 10 + minor from NVIDIA's attribute query; 0 when unavailable.
int compute_capability(const DeviceInfo& info) {
  if (!info.has_extension("cl_nv_device_attribute_query")) return 0;
  cl_uint major = 0;
  cl_uint minor = 0;
  if (clGetDeviceInfo(info.id, kComputeCapabilityMajorNv, sizeof(major), &major, nullptr) !=
          CL_SUCCESS ||
      clGetDeviceInfo(info.id, kComputeCapabilityMinorNv, sizeof(minor), &minor, nullptr) !=
          CL_SUCCESS) {
    return 0;
  }
  return static_cast<int>(major * 10 + minor);
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

// Runs a 96 x 80 x 72 product of small integers (exact in every kind) through the kernel of
// `kind` and compares it with the host's. Returns what went wrong, or "" when it matched.
std::string probe_kind(Device& device, MmaKind kind, bool emulated) {
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
    if (kind == MmaKind::kTF32 || kind == MmaKind::k3xTF32) {
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
  GemmStorage storage = kind == MmaKind::kBF16  ? GemmStorage::kBF16
                             : kind == MmaKind::kFP16 ? GemmStorage::kF16
                                                      : GemmStorage::kF32;
  p.rounding = kind == MmaKind::kTF32    ? GemmRounding::kTF32
               : kind == MmaKind::k3xTF32 ? GemmRounding::k3xTF32
                                          : GemmRounding::kNone;

  MemoryPool& pool = device.pool();
  PoolBlock blocks[3] = {pool.acquire(a_bytes.size()), pool.acquire(b_bytes.size()),
                         pool.acquire(expected.size() * 4)};
  std::string problem;
  try {
    device.write(blocks[0].mem, 0, a_bytes.size(), a_bytes.data());
    device.write(blocks[1].mem, 0, b_bytes.size(), b_bytes.data());
    p.a = {{blocks[0].mem, a_bytes.size()}, 0, 0, 0, storage};
    p.b = {{blocks[1].mem, b_bytes.size()}, 0, 0, 0, storage};
    p.c = {{blocks[2].mem, expected.size() * 4}, 0, 0, 0, GemmStorage::kF32};
    const MmaConfig config{64, 64, 32, 32, 2, 1};  // small: checks the instructions, not a tuning
    enqueue_mma_gemm(device, p, config,
                     mma_build_options(p, kind, config, mma_chunk_bytes(p), emulated));
    std::vector<float> result(m * n);
    device.read(blocks[2].mem, 0, result.size() * 4, result.data());
    for (std::size_t i = 0; i < result.size() && problem.empty(); ++i) {
      if (result[i] != expected[i]) {
        problem = fmt::format("probe product element {} is {}, expected {}", i, result[i],
                              expected[i]);
      }
    }
  } catch (const Error& error) {
    problem = error.what();
  }
  for (PoolBlock& block : blocks) pool.release(block);
  return problem;
}

// Whether the device runs `kind` on tensor cores, probing at the first call per kind.
bool kind_available(Device& device, MmaKind kind, bool emulated) {
  GemmDeviceState& state = device_state(device);
  TensorCoreSupport& support = state.tensor_cores;
  if (!support.probed) {
    support.probed = true;
    support.sm = compute_capability(device.info());
    support.available = emulated || support.sm >= 80;
    if (!support.available) {
      support.reason = support.sm == 0 ? "not an NVIDIA GPU"
                                       : fmt::format("compute capability {}.{} is below 8.0",
                                                     support.sm / 10, support.sm % 10);
      log().info("device {} ({}): no tensor-core GEMM ({}); reduced-precision products use the "
                 "portable kernels", device.index(), device.info().name, support.reason);
    }
  }
  if (!support.available) return false;
  auto& kinds = state.kind_checked;
  const int key = static_cast<int>(kind);
  auto it = kinds.find(key);
  if (it == kinds.end()) {
    std::string problem = probe_kind(device, kind, emulated);
    if (!problem.empty()) {
      log().warn("device {} ({}): the {} tensor-core GEMM failed its probe; the portable kernels "
                 "take over: {}", device.index(), device.info().name, mma_kind_name(kind),
                 problem);
    }
    it = kinds.emplace(key, problem.empty()).first;
  }
  return it->second;
}

}  // namespace

bool enqueue_tensor_core_gemm(DeviceCall& call, const GemmProblem& p) {
  const TensorCoreMode mode = tensor_core_mode();
  if (mode == TensorCoreMode::kOff || p.k == 0) return false;
  const std::optional<MmaKind> kind = mma_kind_for(p);
  if (!kind) return false;
  const int chunk = mma_chunk_bytes(p);
  if (chunk == 0) return false;
  Device& device = call.device();
  const bool emulated = mode == TensorCoreMode::kEmulate;
  const MmaConfig config = mma_config(p, device.info().compute_units, emulated);
  const std::uint64_t local_bytes =
      static_cast<std::uint64_t>(config.stages) * (config.bm + config.bn) * 64 +
      (emulated ? static_cast<std::uint64_t>(config.threads()) * 24 : 0);
  const std::uint64_t tiles = ((p.m + config.bm - 1) / config.bm) *
                              ((p.n + config.bn - 1) / config.bn);
  if (local_bytes > device.info().local_mem_bytes ||
      static_cast<std::size_t>(config.threads()) > device.info().max_work_group_size ||
      tiles * static_cast<std::uint64_t>(config.threads()) > (1ull << 31)) {
    return false;
  }
  if (!kind_available(device, *kind, emulated)) return false;
  const std::string options = mma_build_options(p, *kind, config, chunk, emulated);
  auto& refused = device_state(device).variant_refused;
  if (refused.count(options)) return false;
  try {
    enqueue_mma_gemm(device, p, config, options);
  } catch (const Error& error) {
    // A variant the probe did not cover (layout, tile configuration) that does not build or
    // launch: the portable kernel runs the product, and every later one of this variant.
    if (error.status() != Status::kBuildFailed && error.status() != Status::kDeviceError) throw;
    log().warn("device {}: a {} tensor-core GEMM variant was refused; the portable kernels take "
               "over for it ({}): {}", device.index(), mma_kind_name(*kind), options,
               error.what());
    refused.emplace(options, true);
    return false;
  }
  return true;
}

}  // namespace aethercl::gemm
