// Warpgroup MMA on Hopper (sm_90a) from OpenCL: the rewrite of kernels/gemm_mma.cl's PTX that
// makes its MMA_WGMMA kernel loadable, the transposed copies of operands that kernel needs, and
// its launch.
#pragma once

#include "gemm/mma_kernel.h"
#include "runtime/program_cache.h"

namespace aethercl::gemm {

// Turns the PTX NVIDIA's OpenCL compiler emits (".target sm_90", wgmma written as comments
// starting with "//AECL_SM90A ") into PTX for sm_90a with those instructions. Refuses (kBuildFailed)
// binaries that are not such PTX.
const BinaryPatch& sm90a_patch();

// Whether the operands the kernel reads in place (A when not trans_a, B when trans_b) are aligned
// to 4 bytes (offsets, leading dimensions, batch strides), as its cp.async copies need.
bool wgmma_operands_aligned(const GemmProblem& p);

// Enqueues p on the warpgroup-MMA kernel of `kind` (not 3xTF32): A transposed into a temporary
// when trans_a, B when not trans_b (the kernel reads both with k contiguous), then the product.
// Throws like enqueue_mma_gemm; the temporaries are released either way.
void enqueue_wgmma_gemm(Device& device, const GemmProblem& p, MmaKind kind,
                        const MmaConfig& config, MmaMode mode);

}  // namespace aethercl::gemm
