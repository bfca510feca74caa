// Dense copies of GEMM operands (kernels/gemm_pack.cl): transposed or not, rows padded to 16
// bytes, for kernels that need layouts or alignments the caller's operands do not have.
#pragma once

#include "gemm/gemm.h"
#include "runtime/device_call.h"

#include <cstdint>

namespace aethercl::gemm {

// A copy's leading dimension (16-byte rows), stride between batch items and bytes.
struct CopyShape {
  std::uint64_t out_ld, out_stride, bytes;
};

// The copy pack_operand makes of an operand stored rows x cols (cols x rows when transposed).
CopyShape copy_shape(const GemmOperand& op, std::uint64_t rows, std::uint64_t cols,
                     std::uint64_t batch, bool transpose);

// A dense copy of an operand stored rows x cols, transposed (cols x rows) or not, with its
// leading dimension padded to 16 bytes and, for float32 with round_tf32, its values rounded to
// TF32, into block (of copy_shape's bytes). Broadcast operands are copied once.
GemmOperand pack_operand(DeviceCall& call, const GemmOperand& op, std::uint64_t rows,
                         std::uint64_t cols, std::uint64_t batch, bool transpose, bool round_tf32,
                         const PoolBlock& block);

}  // namespace aethercl::gemm
