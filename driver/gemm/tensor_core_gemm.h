// Tensor-core GEMM kernels (kernels/gemm_mma.cl: mma.sync through inline PTX on NVIDIA sm_80+),
// the probe that decides whether a device can run them, and the dispatch of a product onto them.
#pragma once

#include "gemm/gemm.h"
#include "runtime/device_call.h"

namespace aethercl::gemm {

// Enqueues p on tensor cores and returns true when the device has them (probed at first use:
// one warning when the probe fails) and a kernel handles p's storage, rounding and layout;
// returns false, having done nothing, otherwise (the caller runs the portable kernel).
// Throws kInvalidArgument for an AETHERCL_MMA_PARAMS override that is malformed or does not fit
// the device. Preconditions: those of enqueue_gemm, already checked.
bool enqueue_tensor_core_gemm(DeviceCall& call, const GemmProblem& p);

}  // namespace aethercl::gemm
