// Compute modes of the general GEMM (AETHERCL_COMPUTE_*): parsing, the device's matmul precision
// (aethercl_set_matmul_precision, AETHERCL_MATMUL_PRECISION) and what a mode means for a product.
#pragma once

#include "gemm/gemm.h"
#include "runtime/device_call.h"

#include <string_view>

namespace aethercl::gemm {

enum class ComputeMode : int { kDefault = 0, kFP32 = 1, kTF32 = 2, k3xTF32 = 3, kBF16 = 4, kFP16 = 5 };

const char* compute_mode_name(ComputeMode mode);  // "default", "fp32", "tf32", ...
// The mode of an AETHERCL_COMPUTE_* code; throws kInvalidArgument naming `argument` otherwise.
ComputeMode compute_mode_from_code(int code, const char* argument);
// "fp32", "tf32", "3xtf32", "bf16" or "fp16" (any case); nullopt otherwise.
std::optional<ComputeMode> compute_mode_from_name(std::string_view name);

// Sets the device's matmul precision (kDefault means kFP32).
void set_matmul_precision(DeviceCall& call, ComputeMode mode);
// The device's matmul precision: the value set, else AETHERCL_MATMUL_PRECISION, else kFP32.
// Throws kInvalidArgument for a malformed environment value. Never kDefault.
ComputeMode matmul_precision(DeviceCall& call);

// Sets problem.rounding and problem.tensor_cores for mode (not kDefault) and the operands'
// storage: inputs stored in a format the mode represents exactly need no rounding.
void apply_compute_mode(GemmProblem& problem, ComputeMode mode);

}  // namespace aethercl::gemm
