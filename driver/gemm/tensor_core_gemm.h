// Tensor-core GEMM kernels (kernels/gemm_mma.cl: mma.sync through inline PTX on NVIDIA sm_80+),
// the probe that decides whether a device can run them, and the dispatch of a product onto them.
#pragma once

#include "gemm/gemm.h"
#include "gemm/mma_kernel.h"
#include "runtime/device_call.h"

namespace aethercl::gemm {

// Enqueues p on tensor cores and returns true when the device has them (probed at first use:
// one warning when the probe fails) and a kernel handles p's storage, rounding and layout;
// returns false, having done nothing, otherwise (the caller runs the portable kernel).
// Throws kInvalidArgument for an AETHERCL_MMA_PARAMS override that is malformed or does not fit
// the device. Preconditions: those of enqueue_gemm, already checked.
bool enqueue_tensor_core_gemm(DeviceCall& call, const GemmProblem& p);

// Where 16-bit tensor-core kernels of other families (kernels/attention_mma.cl) may run on
// device: kHardware on NVIDIA compute capability 8.0+, an emulated mode where
// AETHERCL_TENSOR_CORES asks for one; nullopt where tensor cores are off or absent. The caller
// holds the device's mutex (a DeviceCall).
std::optional<MmaMode> tensor_cores_for(Device& device);

// How many k slices (1: none) the mma.sync kernel computes p in when whole it would run as
// `tiles` work-groups on a device with `units` compute units (the rule and its measurements are
// at the definition).
std::uint64_t mma_slices(const GemmProblem& p, MmaKind kind, std::uint64_t tiles,
                         std::uint64_t units);

}  // namespace aethercl::gemm
