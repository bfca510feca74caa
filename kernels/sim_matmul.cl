// float64 C(m,n) = A(m,k) @ B(k,n) of the host-memory API (simulated_matrix_multiply), row-major.
// One work-item per element of C, SIM_TILE x SIM_TILE work-groups staging tiles of A and B in local
// memory. Each element is summed with k ascending and without fused multiply-adds, so the result
// equals the host fallback bit for bit. Built only on devices with fp64; empty otherwise.

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef SIM_TILE
#define SIM_TILE 16
#endif

__kernel __attribute__((reqd_work_group_size(SIM_TILE, SIM_TILE, 1)))
void sim_matmul_f64(__global const double* a, __global const double* b, __global double* c,
                    ulong m, ulong n, ulong k) {
  __local double a_tile[SIM_TILE][SIM_TILE];
  __local double b_tile[SIM_TILE][SIM_TILE];
  const size_t tx = get_local_id(0);
  const size_t ty = get_local_id(1);
  const ulong col = get_global_id(0);
  const ulong row = get_global_id(1);
  double sum = 0.0;
  for (ulong k0 = 0; k0 < k; k0 += SIM_TILE) {
    const ulong ka = k0 + tx;
    const ulong kb = k0 + ty;
    a_tile[ty][tx] = (row < m && ka < k) ? a[row * k + ka] : 0.0;
    b_tile[ty][tx] = (kb < k && col < n) ? b[kb * n + col] : 0.0;
    barrier(CLK_LOCAL_MEM_FENCE);
    // Only the valid terms are added (no zero padding), so the sum equals the host's exactly.
    const ulong steps = min((ulong)SIM_TILE, k - k0);
    for (ulong t = 0; t < steps; ++t) sum += a_tile[ty][t] * b_tile[t][tx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

#endif  // AETHERCL_FP64
