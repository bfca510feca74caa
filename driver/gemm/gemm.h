// The GEMM engine: one tiled, register-blocked kernel family (kernels/gemm.cl) behind every
// matrix product of the matmul family (docs/ARCHITECTURE.md decision 6).
#pragma once

#include "runtime/device_call.h"

#include <cstdint>

namespace aethercl::gemm {

struct GemmOperand {
  BufferView buffer;
  std::uint64_t batch_stride = 0;  // elements between consecutive batches; 0 broadcasts
};

// C[b] = op(A[b]) @ op(B[b]) for b < batch, float32 with float32 accumulation.
// op(A) is m x k (A stored m x k, or k x m when trans_a); op(B) is k x n (B stored k x n, or
// n x k when trans_b); C is m x n. Operands are dense row-major; strides count elements.
struct GemmProblem {
  bool trans_a = false;
  bool trans_b = false;
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
  std::uint64_t batch = 1;
  GemmOperand a;
  GemmOperand b;
  GemmOperand c;
};

// Enqueues the product (asynchronously, on the call's queue). Preconditions, checked as
// Error(kInternal) because the ops validate client arguments first: every dimension > 0 and
// every operand's extent ((batch - 1) * stride + rows * cols floats) within its buffer.
void enqueue_gemm(DeviceCall& call, const GemmProblem& problem);

}  // namespace aethercl::gemm
