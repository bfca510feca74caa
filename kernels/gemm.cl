// Tiled, register-blocked float32 GEMM for the matmul family: C[b] = op(A[b]) @ op(B[b]).
//
// Build options (all required; driver/ops/gemm_params.cpp chooses them per device):
//   GEMM_TILE_M, GEMM_TILE_N  output tile of one work-group (M rows x N columns)
//   GEMM_TILE_K               depth of one local-memory stage
//   GEMM_WPT_M, GEMM_WPT_N    outputs per work-item along M and N (the register block)
//   GEMM_PAD                  floats of padding per local-memory row (against bank conflicts)
// Work-group shape: (GEMM_TILE_N / GEMM_WPT_N, GEMM_TILE_M / GEMM_WPT_M, 1). Group (x, y, z)
// computes output tile (tile_m0 + y, tile_n0 + x) of batch batch0 + z; the host splits grids
// that exceed the per-dimension group limits into several launches through these offsets.
//
// Operands are dense and row-major. op(A) is M x K: A is stored M x K, or K x M when transposed.
// op(B) is K x N: B is stored K x N, or N x K when transposed. C is M x N. Batch strides are in
// elements; stride 0 broadcasts an operand over the batch. Elements outside the operands are
// loaded as zero and never stored, so no access leaves an operand's extent
// ((batch - 1) * stride + rows * cols elements). Every output is accumulated in float32 with k
// ascending. All index arithmetic is 64-bit.

#define GEMM_RT_M (GEMM_TILE_M / GEMM_WPT_M)  // work-items along M
#define GEMM_RT_N (GEMM_TILE_N / GEMM_WPT_N)  // work-items along N
#define GEMM_THREADS (GEMM_RT_M * GEMM_RT_N)
#define GEMM_LDS_M (GEMM_TILE_M + GEMM_PAD)   // local row length of the A tile (k-major)
#define GEMM_LDS_N (GEMM_TILE_N + GEMM_PAD)   // local row length of the B tile (k-major)

#if GEMM_TILE_M % GEMM_WPT_M != 0 || GEMM_TILE_N % GEMM_WPT_N != 0
#error "GEMM_TILE_M/N must be multiples of GEMM_WPT_M/N"
#endif

// One output tile. trans_a / trans_b are compile-time constants at every call site, so each
// kernel below is specialised by the compiler.
inline void gemm_tile(const int trans_a, const int trans_b, __global const float* restrict a,
                      __global const float* restrict b, __global float* restrict c, ulong M,
                      ulong N, ulong K, ulong stride_a, ulong stride_b, ulong stride_c,
                      ulong tile_m0, ulong tile_n0, ulong batch0, __local float* a_tile,
                      __local float* b_tile) {
  const ulong batch = batch0 + get_group_id(2);
  const ulong m0 = (tile_m0 + get_group_id(1)) * GEMM_TILE_M;
  const ulong n0 = (tile_n0 + get_group_id(0)) * GEMM_TILE_N;
  const int tx = (int)get_local_id(0);
  const int ty = (int)get_local_id(1);
  const int tid = ty * GEMM_RT_N + tx;
  a += batch * stride_a;
  b += batch * stride_b;
  c += batch * stride_c;

  float acc[GEMM_WPT_M][GEMM_WPT_N];
  for (int i = 0; i < GEMM_WPT_M; ++i)
    for (int j = 0; j < GEMM_WPT_N; ++j) acc[i][j] = 0.0f;

  for (ulong k0 = 0; k0 < K; k0 += GEMM_TILE_K) {
    // Stage the A tile (TILE_M x TILE_K) as a_tile[k][m]; consecutive work-items read
    // consecutive global addresses in either storage order.
    for (int i = tid; i < GEMM_TILE_M * GEMM_TILE_K; i += GEMM_THREADS) {
      const int mm = trans_a ? i % GEMM_TILE_M : i / GEMM_TILE_K;
      const int kk = trans_a ? i / GEMM_TILE_M : i % GEMM_TILE_K;
      const ulong gm = m0 + mm;
      const ulong gk = k0 + kk;
      float value = 0.0f;
      if (gm < M && gk < K) value = trans_a ? a[gk * M + gm] : a[gm * K + gk];
      a_tile[kk * GEMM_LDS_M + mm] = value;
    }
    // Stage the B tile (TILE_K x TILE_N) as b_tile[k][n].
    for (int i = tid; i < GEMM_TILE_K * GEMM_TILE_N; i += GEMM_THREADS) {
      const int nn = trans_b ? i / GEMM_TILE_K : i % GEMM_TILE_N;
      const int kk = trans_b ? i % GEMM_TILE_K : i / GEMM_TILE_N;
      const ulong gn = n0 + nn;
      const ulong gk = k0 + kk;
      float value = 0.0f;
      if (gn < N && gk < K) value = trans_b ? b[gn * K + gk] : b[gk * N + gn];
      b_tile[kk * GEMM_LDS_N + nn] = value;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // Work-item (tx, ty) owns rows ty + i * RT_M and columns tx + j * RT_N of the tile.
    for (int kk = 0; kk < GEMM_TILE_K; ++kk) {
      float a_reg[GEMM_WPT_M];
      float b_reg[GEMM_WPT_N];
      for (int i = 0; i < GEMM_WPT_M; ++i) a_reg[i] = a_tile[kk * GEMM_LDS_M + ty + i * GEMM_RT_M];
      for (int j = 0; j < GEMM_WPT_N; ++j) b_reg[j] = b_tile[kk * GEMM_LDS_N + tx + j * GEMM_RT_N];
      for (int i = 0; i < GEMM_WPT_M; ++i)
        for (int j = 0; j < GEMM_WPT_N; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < GEMM_WPT_M; ++i) {
    const ulong gm = m0 + ty + i * GEMM_RT_M;
    if (gm >= M) break;
    for (int j = 0; j < GEMM_WPT_N; ++j) {
      const ulong gn = n0 + tx + j * GEMM_RT_N;
      if (gn < N) c[gm * N + gn] = acc[i][j];
    }
  }
}

#define GEMM_KERNEL_ARGS                                                                      \
  __global const float* restrict a, __global const float* restrict b,                        \
      __global float* restrict c, ulong M, ulong N, ulong K, ulong stride_a, ulong stride_b, \
      ulong stride_c, ulong tile_m0, ulong tile_n0, ulong batch0
#define GEMM_TILE_ARGS a, b, c, M, N, K, stride_a, stride_b, stride_c, tile_m0, tile_n0, batch0
#define GEMM_ATTRIBUTES __attribute__((reqd_work_group_size(GEMM_RT_N, GEMM_RT_M, 1)))

// C = A @ B (forward products).
__kernel GEMM_ATTRIBUTES void kernel_gemm_nn(GEMM_KERNEL_ARGS) {
  __local float a_tile[GEMM_TILE_K * GEMM_LDS_M];
  __local float b_tile[GEMM_TILE_K * GEMM_LDS_N];
  gemm_tile(0, 0, GEMM_TILE_ARGS, a_tile, b_tile);
}

// C = A @ B^T (input gradients: dA = dC @ W^T).
__kernel GEMM_ATTRIBUTES void kernel_gemm_nt(GEMM_KERNEL_ARGS) {
  __local float a_tile[GEMM_TILE_K * GEMM_LDS_M];
  __local float b_tile[GEMM_TILE_K * GEMM_LDS_N];
  gemm_tile(0, 1, GEMM_TILE_ARGS, a_tile, b_tile);
}

// C = A^T @ B (weight gradients: dW = A^T @ dC).
__kernel GEMM_ATTRIBUTES void kernel_gemm_tn(GEMM_KERNEL_ARGS) {
  __local float a_tile[GEMM_TILE_K * GEMM_LDS_M];
  __local float b_tile[GEMM_TILE_K * GEMM_LDS_N];
  gemm_tile(1, 0, GEMM_TILE_ARGS, a_tile, b_tile);
}
