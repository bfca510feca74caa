// Matrix-product family (docs/ABI.md section 4.4): validation, and each product on the GEMM engine.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

// C(B,M,N) = A(B,M,K) @ W(K,N). Any zero dimension (K == 0 included) returns without touching
// memory, so K == 0 leaves C unwritten (docs/ABI.md section 3.6).
void matmul(DeviceCall& call, void* a, void* w, void* c, int B, int M, int N, int K);
// dA = dC @ W^T and dW = sum over b of A[b]^T @ dC[b], both overwritten; NULL outputs skipped.
void matmul_backward(DeviceCall& call, void* a, void* w, void* dc, void* da, void* dw, int B,
                     int M, int N, int K);
// C[b] = A[b](M,K) @ Bt[b](K,N).
void matmul_batched(DeviceCall& call, void* a, void* bt, void* c, int B, int M, int N, int K);
// dA[b] = dC[b] @ Bt[b]^T and dB[b] = A[b]^T @ dC[b]; NULL outputs skipped.
void matmul_batched_backward(DeviceCall& call, void* a, void* bt, void* dc, void* da, void* db,
                             int B, int M, int N, int K);

}  // namespace aethercl::ops
