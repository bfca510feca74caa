// Fused attention on tensor cores (kernels/attention_mma.cl): whether a call runs there, and its
// launches. The portable form (ops/attention.cpp) takes every call this declines.
#pragma once

#include "ops/attention_shape.h"
#include "runtime/device_call.h"

#include <optional>
#include <string>

namespace aethercl::ops {

// The build options of the tensor-core kernels for s on this call's device, or nullopt where the
// portable kernels take the call: a compute mode (DEFAULT: the device's matmul precision) other
// than BF16 and FP16, head_dim above 128, no 16-bit tensor cores (gemm::tensor_cores_for: NVIDIA
// sm_80+, or AETHERCL_TENSOR_CORES=emulate), a device whose local memory or work-group size is
// too small for them, or a kernel that failed its build or its probe on this device (remembered,
// one warning).
std::optional<std::string> attention_mma_options(DeviceCall& call, const AttentionShape& s);

// o (and lse when has_lse; else lse may be any buffer) for s with the kernels of `options`.
void attention_mma_forward(DeviceCall& call, const AttentionShape& s, const std::string& options,
                           cl_mem q, cl_mem k, cl_mem v, cl_mem o, cl_mem lse, bool has_lse);

// dq, dk and dv for s, given the row dot products delta (float32, one per query row).
void attention_mma_backward(DeviceCall& call, const AttentionShape& s,
                            const std::string& options, cl_mem q, cl_mem k, cl_mem v, cl_mem lse,
                            cl_mem delta, cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv);

}  // namespace aethercl::ops
