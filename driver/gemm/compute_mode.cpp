// Compute modes: names, the per-device matmul precision and the rounding each mode implies.
#include "gemm/compute_mode.h"

#include "gemm/device_state.h"
#include "support/env.h"

#include <aethercl/driver.h>

#include <cctype>
#include <string>

namespace aethercl::gemm {

const char* compute_mode_name(ComputeMode mode) {
  switch (mode) {
    case ComputeMode::kDefault: return "default";
    case ComputeMode::kFP32: return "fp32";
    case ComputeMode::kTF32: return "tf32";
    case ComputeMode::k3xTF32: return "3xtf32";
    case ComputeMode::kBF16: return "bf16";
    case ComputeMode::kFP16: return "fp16";
  }
  return "?";
}

ComputeMode compute_mode_from_code(int code, const char* argument) {
  if (code < AETHERCL_COMPUTE_DEFAULT || code > AETHERCL_COMPUTE_FP16) {
    fail(Status::kInvalidArgument, "{} = {} is not a compute mode (0 DEFAULT, 1 FP32, 2 TF32, "
         "3 3XTF32, 4 BF16, 5 FP16)", argument, code);
  }
  return static_cast<ComputeMode>(code);
}

std::optional<ComputeMode> compute_mode_from_name(std::string_view name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (ComputeMode mode : {ComputeMode::kFP32, ComputeMode::kTF32, ComputeMode::k3xTF32,
                           ComputeMode::kBF16, ComputeMode::kFP16}) {
    if (lower == compute_mode_name(mode)) return mode;
  }
  return std::nullopt;
}

void set_matmul_precision(DeviceCall& call, ComputeMode mode) {
  device_state(call.device()).matmul_precision =
      static_cast<int>(mode == ComputeMode::kDefault ? ComputeMode::kFP32 : mode);
}

ComputeMode matmul_precision(DeviceCall& call) {
  if (auto set = device_state(call.device()).matmul_precision) {
    return static_cast<ComputeMode>(*set);
  }
  auto text = env::get(env::kMatmulPrecision);
  if (!text) return ComputeMode::kFP32;
  auto mode = compute_mode_from_name(*text);
  if (!mode) {
    fail(Status::kInvalidArgument, "{}='{}' is not one of fp32, tf32, 3xtf32, bf16, fp16",
         env::kMatmulPrecision, *text);
  }
  return *mode;
}

void apply_compute_mode(GemmProblem& problem, ComputeMode mode) {
  const GemmStorage storage = problem.a.storage;
  problem.tensor_cores = mode != ComputeMode::kFP32 && mode != ComputeMode::kDefault;
  switch (mode) {
    case ComputeMode::kDefault:
    case ComputeMode::kFP32:
      problem.rounding = GemmRounding::kNone;
      break;
    case ComputeMode::kTF32:
    case ComputeMode::k3xTF32:
      // f16 and bf16 values are TF32 values: their products are exact either way.
      problem.rounding = storage != GemmStorage::kF32 ? GemmRounding::kNone
                         : mode == ComputeMode::kTF32 ? GemmRounding::kTF32
                                                      : GemmRounding::k3xTF32;
      break;
    case ComputeMode::kBF16:
      problem.rounding =
          storage == GemmStorage::kBF16 ? GemmRounding::kNone : GemmRounding::kBF16;
      break;
    case ComputeMode::kFP16:
      problem.rounding =
          storage == GemmStorage::kF16 ? GemmRounding::kNone : GemmRounding::kFP16;
      break;
  }
}

}  // namespace aethercl::gemm
