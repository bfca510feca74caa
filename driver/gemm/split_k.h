// Split-K for products with few output tiles and a long k (weight gradients such as llm.py's
// dW = A^T dC, 16 x 16 over k = 1024): k is cut into slices, one batched GEMM writes a partial
// product per slice and a fold adds them in slice order.
#pragma once

#include "gemm/gemm.h"

namespace aethercl::gemm {

// Enqueues p as a split-K product and returns true where that pays: devices that run the GPU
// kernel forms, batch 1, beta 0, float32 C, fewer 64 x 64 output tiles than compute units and
// k of at least two slices of kMinSliceK. Returns false (nothing enqueued) otherwise.
bool enqueue_split_k(DeviceCall& call, const GemmProblem& p);

}  // namespace aethercl::gemm
