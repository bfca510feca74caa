// Float32 operands of BF16 and FP16 products as 16-bit copies (kernels/gemm_pack.cl, PACK_NARROW),
// so that those products run on the tensor cores' 16-bit kernels.
#pragma once

#include "gemm/gemm.h"
#include "gemm/mma_kernel.h"
#include "runtime/scratch.h"

#include <optional>

namespace aethercl::gemm {

// kBF16 or kFP16 for a product of float32 operands that the compute mode rounds to that format
// (GemmRounding::kBF16 or kFP16); nullopt otherwise.
std::optional<MmaKind> narrowed_kind(const GemmProblem& p);

// p with A and B copied, rounded to nearest even, into kind's 16-bit format as m x k and n x k
// (trans_a false, trans_b true; their blocks added to temps, released with it), their
// rows padded to 16 bytes, and rounding kNone: the same product as p computes in its mode.
GemmProblem narrow_operands(DeviceCall& call, const GemmProblem& p, MmaKind kind,
                            ScratchBlocks& temps);

}  // namespace aethercl::gemm
