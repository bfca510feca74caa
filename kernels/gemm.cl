// The portable GEMM: C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] with float32 accumulation,
// tiled (GPUs) or direct (CPUs), for every storage type and compute mode on every device.
//
// Build options (driver/gemm/params.cpp chooses them per device; see that file for ranges):
//   GEMM_AB_TYPE, GEMM_C_TYPE storage of A and B (the same) and of C: 0 float32, 1 float16,
//                             2 bfloat16 (16-bit patterns, converted here; numeric_formats.cl)
//   GEMM_ROUND                what the inputs are rounded to before they are multiplied:
//                             0 nothing (FP32 exact), 1 TF32, 2 3xTF32 (each input split into a
//                             TF32 part and a TF32 residual, three products: lo*hi + hi*lo +
//                             hi*hi), 3 BF16, 4 FP16
//   GEMM_TILE_M, GEMM_TILE_N  output tile of one work-group (M rows x N columns)
//   GEMM_TILE_K               tiled: depth of one local-memory stage; direct: k-loop unroll hint
//   GEMM_WPT_M, GEMM_WPT_N    outputs per work-item along M and N (the register block)
//   GEMM_PAD                  tiled: floats of padding per local-memory row (bank conflicts)
//   GEMM_VEC                  tiled: vector width of local-memory reads and of the register
//                             block's column groups; direct: width of the row vectors (1..16)
//   GEMM_VEC_A, GEMM_VEC_B    tiled: vector width of the global loads of A and B (1, 2 or 4).
//                             Above 1 the host guarantees alignment: the operand's contiguous
//                             extent (columns as stored), leading dimension, offset, batch stride
//                             and the matching tile size are multiples of the width (so a vector
//                             is wholly inside or outside and aligned)
//   GEMM_A_KMAJOR             tiled: 1 stores the A tile k-major (transposed) in local memory,
//                             0 m-major
//   GEMM_DIRECT               1 builds the direct kernel: no local memory, no barriers
//   GEMM_DBUF                 tiled: 1 prefetches the next K-tile into registers while computing
//                             on the current one, with two local buffers used in turn (one
//                             barrier per K-tile); 0 loads, barriers, computes, barriers
// Work-group shape: (GEMM_TILE_N / GEMM_WPT_N, GEMM_TILE_M / GEMM_WPT_M, 1). Group (x, y, z)
// computes output tile (tile_m0 + y, tile_n0 + x) of batch batch0 + z; the host splits grids
// that exceed the per-dimension group limits into several launches through these offsets.
//
// Operands are row-major with leading dimensions lda, ldb, ldc (elements between rows) and start
// at element offsets off_a, off_b, off_c of their buffers. op(A) is M x K: A is stored M x K, or
// K x M when transposed. op(B) is K x N: B is stored K x N, or N x K when transposed. C is M x N.
// Batch strides are in elements; stride 0 broadcasts an operand over the batch. No access leaves
// an operand's elements (rows < its rows, columns < its columns): the tiled kernel loads
// elements outside the operands as zero, the direct kernel clamps its edge indices into the
// operand, and neither stores outside C. beta == 0 never reads C. Every output is a float32 sum
// over k in ascending order, then alpha * sum (+ beta * C). All index arithmetic is 64-bit.

#include "numeric_formats.cl"
#define GEMM_C_STORAGE_TYPE GEMM_C_TYPE
#include "gemm_c_storage.cl"
#include "gemm_epilogue.cl"

#define GEMM_ROUND_NONE 0
#define GEMM_ROUND_TF32 1
#define GEMM_ROUND_3XTF32 2
#define GEMM_ROUND_BF16 3
#define GEMM_ROUND_FP16 4

#define GEMM_RT_M (GEMM_TILE_M / GEMM_WPT_M)  // work-items along M
#define GEMM_RT_N (GEMM_TILE_N / GEMM_WPT_N)  // work-items along N
#define GEMM_THREADS (GEMM_RT_M * GEMM_RT_N)

#if GEMM_TILE_M % GEMM_WPT_M != 0 || GEMM_TILE_N % GEMM_WPT_N != 0
#error "GEMM_TILE_M/N must be multiples of GEMM_WPT_M/N"
#endif

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
// floatN / vloadN / vstoreN for a width of 1..16 (width 1 is plain float).
#define GEMM_FLOATN_1 float
#define GEMM_FLOATN_2 float2
#define GEMM_FLOATN_4 float4
#define GEMM_FLOATN_8 float8
#define GEMM_FLOATN_16 float16
#define GEMM_FLOATN(w) GEMM_CAT(GEMM_FLOATN_, w)
#define GEMM_VLOAD_1(i, p) ((p)[i])
#define GEMM_VLOAD_2 vload2
#define GEMM_VLOAD_4 vload4
#define GEMM_VLOAD_8 vload8
#define GEMM_VLOAD_16 vload16
#define GEMM_VLOAD(w) GEMM_CAT(GEMM_VLOAD_, w)
#define GEMM_VSTORE_1(v, i, p) ((p)[i] = (v))
#define GEMM_VSTORE_2 vstore2
#define GEMM_VSTORE_4 vstore4
#define GEMM_VSTORE_8 vstore8
#define GEMM_VSTORE_16 vstore16
#define GEMM_VSTORE(w) GEMM_CAT(GEMM_VSTORE_, w)
// GEMM_SCATTER(w)(v, p, s): p[e * s] = component e of v, for a width of 1, 2 or 4. Component
// by component rather than vstoreN, so private arrays stay in registers.
#define GEMM_SCATTER_1(v, p, s) (p)[0] = (v)
#define GEMM_SCATTER_2(v, p, s) (p)[0] = (v).s0, (p)[(s)] = (v).s1
#define GEMM_SCATTER_4(v, p, s) \
  (p)[0] = (v).s0, (p)[(s)] = (v).s1, (p)[2 * (s)] = (v).s2, (p)[3 * (s)] = (v).s3
#define GEMM_SCATTER(w) GEMM_CAT(GEMM_SCATTER_, w)
// GEMM_COMPONENT(v, e): component e (a compile-time constant) of a vector of width 1, 2 or 4.
#define GEMM_COMPONENT_1(v, e) (v)
#define GEMM_COMPONENT_2(v, e) ((e) == 0 ? (v).s0 : (v).s1)
#define GEMM_COMPONENT_4(v, e) \
  ((e) == 0 ? (v).s0 : (e) == 1 ? (v).s1 : (e) == 2 ? (v).s2 : (v).s3)
#define GEMM_COMPONENT(w) GEMM_CAT(GEMM_COMPONENT_, w)

// Storage access. gemm_load_ab / gemm_c_load / gemm_c_store and their vector forms (suffix 2, 4,
// 8, 16) take element indices and need only element alignment; gemm_load_ab_aligned<w> needs
// the host's guarantee that the index is a multiple of w (see GEMM_VEC_A above).
#define GEMM_SFX_1
#define GEMM_SFX_2 2
#define GEMM_SFX_4 4
#define GEMM_SFX_8 8
#define GEMM_SFX_16 16
#define GEMM_FN(name, w) GEMM_CAT(name, GEMM_CAT(GEMM_SFX_, w))

#if GEMM_AB_TYPE == 0
#define GEMM_AB_STORAGE float
inline float gemm_load_ab(__global const float* p, ulong i) { return p[i]; }
inline float gemm_load_ab_aligned(__global const float* p, ulong i) { return p[i]; }
#define GEMM_DEFINE_LOAD_AB(S)                                                      \
  inline float##S gemm_load_ab##S(__global const float* p, ulong i) {               \
    return vload##S(0, p + i);                                                      \
  }                                                                                 \
  inline float##S gemm_load_ab_aligned##S(__global const float* p, ulong i) {       \
    return *(__global const float##S*)(p + i);                                      \
  }
#elif GEMM_AB_TYPE == 1
#define GEMM_AB_STORAGE half
inline float gemm_load_ab(__global const half* p, ulong i) { return vload_half(0, p + i); }
inline float gemm_load_ab_aligned(__global const half* p, ulong i) { return vload_half(0, p + i); }
#define GEMM_DEFINE_LOAD_AB(S)                                                      \
  inline float##S gemm_load_ab##S(__global const half* p, ulong i) {                \
    return vload_half##S(0, p + i);                                                 \
  }                                                                                 \
  inline float##S gemm_load_ab_aligned##S(__global const half* p, ulong i) {        \
    return vload_half##S(0, p + i);                                                 \
  }
#elif GEMM_AB_TYPE == 2
#define GEMM_AB_STORAGE ushort
inline float gemm_load_ab(__global const ushort* p, ulong i) { return nf_from_bf16(p[i]); }
inline float gemm_load_ab_aligned(__global const ushort* p, ulong i) {
  return nf_from_bf16(p[i]);
}
#define GEMM_DEFINE_LOAD_AB(S)                                                      \
  inline float##S gemm_load_ab##S(__global const ushort* p, ulong i) {              \
    return nf_from_bf16##S(vload##S(0, p + i));                                     \
  }                                                                                 \
  inline float##S gemm_load_ab_aligned##S(__global const ushort* p, ulong i) {      \
    return nf_from_bf16##S(*(__global const ushort##S*)(p + i));                    \
  }
#else
#error "GEMM_AB_TYPE must be 0 (f32), 1 (f16) or 2 (bf16)"
#endif

// C: the element type gemm_c_t and the scalar gemm_c_load / gemm_c_store of gemm_c_storage.cl,
// and their vector forms here.
#if GEMM_C_TYPE == 0
#define GEMM_DEFINE_IO_C(S)                                                              \
  inline float##S gemm_c_load##S(__global const gemm_c_t* p, ulong i) {                  \
    return vload##S(0, p + i);                                                           \
  }                                                                                      \
  inline void gemm_c_store##S(float##S v, __global gemm_c_t* p, ulong i) {               \
    vstore##S(v, 0, p + i);                                                              \
  }
#elif GEMM_C_TYPE == 1
#define GEMM_DEFINE_IO_C(S)                                                              \
  inline float##S gemm_c_load##S(__global const gemm_c_t* p, ulong i) {                  \
    return vload_half##S(0, p + i);                                                      \
  }                                                                                      \
  inline void gemm_c_store##S(float##S v, __global gemm_c_t* p, ulong i) {               \
    vstore_half##S##_rte(v, 0, p + i);                                                   \
  }
#else
#define GEMM_DEFINE_IO_C(S)                                                              \
  inline float##S gemm_c_load##S(__global const gemm_c_t* p, ulong i) {                  \
    return nf_from_bf16##S(vload##S(0, p + i));                                          \
  }                                                                                      \
  inline void gemm_c_store##S(float##S v, __global gemm_c_t* p, ulong i) {               \
    vstore##S(nf_to_bf16##S(v), 0, p + i);                                               \
  }
#endif

// gemm_round<w>: an input as the compute mode multiplies it (3xTF32 splits later, in the math).
#if GEMM_ROUND == GEMM_ROUND_TF32
#define GEMM_ROUND_FN nf_round_tf32
#elif GEMM_ROUND == GEMM_ROUND_BF16
#define GEMM_ROUND_FN nf_round_bf16
#elif GEMM_ROUND == GEMM_ROUND_FP16
#define GEMM_ROUND_FN nf_round_f16
#elif GEMM_ROUND != GEMM_ROUND_NONE && GEMM_ROUND != GEMM_ROUND_3XTF32
#error "GEMM_ROUND must be 0..4"
#endif
#ifdef GEMM_ROUND_FN
#define GEMM_DEFINE_ROUND(S) \
  inline float##S gemm_round##S(float##S v) { return GEMM_CAT(GEMM_ROUND_FN, S)(v); }
#else
#define GEMM_DEFINE_ROUND(S) \
  inline float##S gemm_round##S(float##S v) { return v; }
#endif

GEMM_DEFINE_ROUND()
#define GEMM_DEFINE_WIDTH(S) GEMM_DEFINE_LOAD_AB(S) GEMM_DEFINE_IO_C(S) GEMM_DEFINE_ROUND(S)
GEMM_DEFINE_WIDTH(2)
GEMM_DEFINE_WIDTH(4)
GEMM_DEFINE_WIDTH(8)
GEMM_DEFINE_WIDTH(16)

// The epilogue value of one output (vector): alpha * sum, plus beta * C only when beta != 0.
#define GEMM_OUTPUT(w, sum, p, i) \
  (beta != 0.0f ? alpha * (sum) + beta * GEMM_FN(gemm_c_load, w)((p), (i)) : alpha * (sum))

// Stores of one output vector of width w (value) at element `at` of C, in column `col` onwards,
// and of one output: through the fused epilogue (gemm_epilogue.cl) where there is one.
#if GEMM_EPILOGUE
#define GEMM_STORE_VEC(w, value, at, col)                                           \
  {                                                                                 \
    float epi_v_[w];                                                                \
    GEMM_VSTORE(w)(value, 0, epi_v_);                                               \
    _Pragma("unroll") for (int epi_e_ = 0; epi_e_ < w; ++epi_e_)                    \
        epi_v_[epi_e_] = GEMM_EPI(epi_v_[epi_e_], (col) + epi_e_, (at) + epi_e_);   \
    GEMM_FN(gemm_c_store, w)(GEMM_VLOAD(w)(0, epi_v_), c, at);                      \
  }
#define GEMM_STORE_ONE(value, at, col) gemm_c_store(GEMM_EPI(value, col, at), c, at)
#else
#define GEMM_STORE_VEC(w, value, at, col) GEMM_FN(gemm_c_store, w)(value, c, at)
#define GEMM_STORE_ONE(value, at, col) gemm_c_store(value, c, at)
#endif

// 3xTF32: each input x is split into its TF32 part (kept in x) and the TF32 residual x_lo; the
// products are added small ones first: acc += x_lo * y + x * y_lo + x * y.
#define GEMM_SPLIT_TF32(w, x, x_lo)                          \
  {                                                          \
    const GEMM_FLOATN(w) hi_ = GEMM_FN(nf_round_tf32, w)(x);  \
    x_lo = GEMM_FN(nf_tf32_residual, w)(x, hi_);             \
    x = hi_;                                                 \
  }

#define GEMM_KERNEL_ARGS                                                                       \
  __global const GEMM_AB_STORAGE* restrict a, __global const GEMM_AB_STORAGE* restrict b,     \
      __global gemm_c_t* restrict c, ulong M, ulong N, ulong K, ulong lda, ulong ldb,         \
      ulong ldc, ulong off_a, ulong off_b, ulong off_c, ulong stride_a, ulong stride_b,        \
      ulong stride_c, float alpha, float beta, ulong tile_m0, ulong tile_n0,                   \
      ulong batch0 GEMM_EPI_ARGS
#define GEMM_TILE_ARGS                                                                       \
  a, b, c, M, N, K, lda, ldb, ldc, off_a, off_b, off_c, stride_a, stride_b, stride_c, alpha, \
      beta, tile_m0, tile_n0, batch0 GEMM_EPI_PASS
#define GEMM_ATTRIBUTES __attribute__((reqd_work_group_size(GEMM_RT_N, GEMM_RT_M, 1)))

#if GEMM_DIRECT
// ---- direct kernel ----------------------------------------------------------------------------
// Work-item (x, y) of a group owns WPT_M consecutive rows and WPT_N consecutive columns, held as
// WPT_M x (WPT_N / VEC) row vectors. Per k it loads one row of op(B) and broadcasts WPT_M values
// of op(A): a long, branch-free loop that CPU compilers keep in vector registers. Blocks on the
// M edge clamp their row indices (the extra rows are computed and dropped); blocks on the N edge
// or with a transposed B gather the row of op(B) element by element.
#define GEMM_VW GEMM_VEC
#define GEMM_VN (GEMM_WPT_N / GEMM_VW)
#define GEMM_VT GEMM_FLOATN(GEMM_VW)
#if GEMM_WPT_N % GEMM_VW != 0
#error "GEMM_WPT_N must be a multiple of GEMM_VEC"
#endif

static inline void gemm_direct(const int trans_a, const int trans_b, GEMM_KERNEL_ARGS) {
  const ulong batch = batch0 + get_group_id(2);
  const ulong m0 = (tile_m0 + get_group_id(1)) * GEMM_TILE_M + get_local_id(1) * GEMM_WPT_M;
  const ulong n0 = (tile_n0 + get_group_id(0)) * GEMM_TILE_N + get_local_id(0) * GEMM_WPT_N;
  if (m0 >= M || n0 >= N) return;  // no barriers: idle work-items may leave
  a += off_a + batch * stride_a;
  b += off_b + batch * stride_b;
  c += off_c + batch * stride_c;
#if GEMM_EPILOGUE
  GEMM_EPI_ADVANCE(batch, stride_c);
#endif

  // Row i of the block reads op(A) at a[row_a[i] + k * step_a]; rows past M repeat row M - 1.
  ulong row_a[GEMM_WPT_M];
  const ulong step_a = trans_a ? lda : 1;
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i) {
    const ulong m = min(m0 + i, M - 1);
    row_a[i] = trans_a ? m : m * lda;
  }
  GEMM_VT acc[GEMM_WPT_M][GEMM_VN];
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i)
      _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j) acc[i][j] = 0.0f;

  // One k step: B_ROW(j) yields the j-th vector of row k of op(B), as stored.
#if GEMM_ROUND == GEMM_ROUND_3XTF32
#define GEMM_DIRECT_MATH                                                                 \
  GEMM_VT b_lo[GEMM_VN];                                                                 \
  _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j)                                    \
      GEMM_SPLIT_TF32(GEMM_VW, b_reg[j], b_lo[j]);                                       \
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i) {                               \
    float a_value = a_col[i];                                                            \
    float a_lo;                                                                          \
    GEMM_SPLIT_TF32(1, a_value, a_lo);                                                   \
    _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j) {                                \
      acc[i][j] += a_lo * b_reg[j];                                                      \
      acc[i][j] += a_value * b_lo[j];                                                    \
      acc[i][j] += a_value * b_reg[j];                                                   \
    }                                                                                    \
  }
#else
#define GEMM_DIRECT_MATH                                                                 \
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i) {                               \
    _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j) acc[i][j] += a_col[i] * b_reg[j]; \
  }
#endif
#define GEMM_DIRECT_STEP(k, B_ROW)                                                       \
  {                                                                                      \
    GEMM_VT b_reg[GEMM_VN];                                                              \
    _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j)                                  \
        b_reg[j] = GEMM_FN(gemm_round, GEMM_VW)(B_ROW(j));                               \
    float a_col[GEMM_WPT_M];                                                             \
    _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i)                               \
        a_col[i] = gemm_round(gemm_load_ab(a, row_a[i] + (k) * step_a));                 \
    GEMM_DIRECT_MATH                                                                     \
  }
  const int full_n = n0 + GEMM_WPT_N <= N;
  ulong k = 0;
  if (full_n && !trans_b) {
    // Contiguous rows of B: vector loads, unrolled TILE_K times.
#define GEMM_B_CONTIGUOUS(j) GEMM_FN(gemm_load_ab, GEMM_VW)(b, kk * ldb + n0 + (j) * GEMM_VW)
    for (; k + GEMM_TILE_K <= K; k += GEMM_TILE_K) {
      _Pragma("unroll") for (int u = 0; u < GEMM_TILE_K; ++u) {
        const ulong kk = k + u;
        GEMM_DIRECT_STEP(kk, GEMM_B_CONTIGUOUS)
      }
    }
    for (; k < K; ++k) {
      const ulong kk = k;
      GEMM_DIRECT_STEP(kk, GEMM_B_CONTIGUOUS)
    }
#undef GEMM_B_CONTIGUOUS
  } else {
    // Column j of the block reads op(B) at b[col_b[j] + k * step_b]; columns past N repeat N - 1.
    ulong col_b[GEMM_WPT_N];
    const ulong step_b = trans_b ? 1 : ldb;
    _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N; ++j) {
      const ulong n = min(n0 + j, N - 1);
      col_b[j] = trans_b ? n * ldb : n;
    }
    for (; k < K; ++k) {
      float b_row[GEMM_WPT_N];
      _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N; ++j)
          b_row[j] = gemm_load_ab(b, col_b[j] + k * step_b);
#define GEMM_B_GATHERED(j) GEMM_VLOAD(GEMM_VW)(j, b_row)
      GEMM_DIRECT_STEP(k, GEMM_B_GATHERED)
#undef GEMM_B_GATHERED
    }
  }
#undef GEMM_DIRECT_STEP
#undef GEMM_DIRECT_MATH

  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i) {
    if (m0 + i < M) {
      const ulong row = (m0 + i) * ldc + n0;
      if (full_n) {
        _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j) {
          const ulong at = row + j * GEMM_VW;
          GEMM_STORE_VEC(GEMM_VW, GEMM_OUTPUT(GEMM_VW, acc[i][j], c, at), at, n0 + j * GEMM_VW);
        }
      } else {
        float sums[GEMM_WPT_N];
        _Pragma("unroll") for (int j = 0; j < GEMM_VN; ++j)
            GEMM_VSTORE(GEMM_VW)(acc[i][j], j, sums);
        for (int j = 0; j < GEMM_WPT_N && n0 + j < N; ++j) {
          GEMM_STORE_ONE(GEMM_OUTPUT(1, sums[j], c, row + j), row + j, n0 + j);
        }
      }
    }
  }
}

__kernel GEMM_ATTRIBUTES void gemm_nn(GEMM_KERNEL_ARGS) {
  gemm_direct(0, 0, GEMM_TILE_ARGS);
}
__kernel GEMM_ATTRIBUTES void gemm_nt(GEMM_KERNEL_ARGS) {
  gemm_direct(0, 1, GEMM_TILE_ARGS);
}
__kernel GEMM_ATTRIBUTES void gemm_tn(GEMM_KERNEL_ARGS) {
  gemm_direct(1, 0, GEMM_TILE_ARGS);
}
__kernel GEMM_ATTRIBUTES void gemm_tt(GEMM_KERNEL_ARGS) {
  gemm_direct(1, 1, GEMM_TILE_ARGS);
}

#else
// ---- tiled kernel -----------------------------------------------------------------------------
// Each K-step stages an A tile (TILE_M x TILE_K) and a B tile (TILE_K x TILE_N) in local memory,
// loaded with vectors of VEC_A / VEC_B along each operand's contiguous dimension. Work-item
// (tx, ty) owns WPT_N / VW column groups of VW adjacent columns, group j starting at column
// (j * RT_N + tx) * VW, and likewise WPT_M / VWM row groups (VWM = VW where it divides WPT_M and
// A is k-major, else 1), so adjacent work-items read adjacent vectors of local memory.
#define GEMM_VW GEMM_VEC
#if GEMM_WPT_N % GEMM_VW != 0
#error "GEMM_WPT_N must be a multiple of GEMM_VEC"
#endif
#if GEMM_A_KMAJOR && GEMM_WPT_M % GEMM_VW == 0
#define GEMM_VWM GEMM_VW
#else
#define GEMM_VWM 1
#endif
#define GEMM_LDS_N (GEMM_TILE_N + GEMM_PAD)  // B tile row (one k) length
#if GEMM_A_KMAJOR
#define GEMM_LDS_A (GEMM_TILE_M + GEMM_PAD)  // A tile row (one k) length
#define GEMM_A_AT(m, k) ((k) * GEMM_LDS_A + (m))
#else
#define GEMM_LDS_A (GEMM_TILE_K + GEMM_PAD)  // A tile row (one m) length
#define GEMM_A_AT(m, k) ((m) * GEMM_LDS_A + (k))
#endif
// Local reads are whole vectors where every row starts on a vector boundary.
#define GEMM_LOCAL_VEC_B (GEMM_LDS_N % GEMM_VW == 0)
#define GEMM_LOCAL_VEC_A (GEMM_A_KMAJOR && GEMM_LDS_A % GEMM_VWM == 0)
#define GEMM_A_FLOATS (GEMM_A_KMAJOR ? GEMM_TILE_K * GEMM_LDS_A : GEMM_TILE_M * GEMM_LDS_A)
#define GEMM_B_FLOATS (GEMM_TILE_K * GEMM_LDS_N)
#define GEMM_VT GEMM_FLOATN(GEMM_VW)
#define GEMM_VTM GEMM_FLOATN(GEMM_VWM)
#if (GEMM_TILE_K % GEMM_VEC_A) || (GEMM_TILE_K % GEMM_VEC_B) || (GEMM_TILE_M % GEMM_VEC_A) || \
    (GEMM_TILE_N % GEMM_VEC_B)
#error "tiles must be multiples of the global load widths"
#endif

// Reads VW (VWM) floats of local memory starting at p: one vector access when aligned.
#define GEMM_LOCAL_READ(w, aligned, p) \
  ((aligned) ? *(__local const GEMM_FLOATN(w)*)(p) : GEMM_VLOAD(w)(0, (__local const float*)(p)))

// Reads element (m, k) of the A tile (VWM elements along m when VWM > 1) into a_reg.
#if GEMM_VWM > 1
#define GEMM_READ_A(a_t, i, m, kk)                                                        \
  {                                                                                        \
    GEMM_VTM value = GEMM_LOCAL_READ(GEMM_VWM, GEMM_LOCAL_VEC_A, (a_t) + GEMM_A_AT(m, kk)); \
    GEMM_SCATTER(GEMM_VWM)(value, a_reg + (i) * GEMM_VWM, 1);                              \
  }
#else
#define GEMM_READ_A(a_t, i, m, kk) a_reg[i] = (a_t)[GEMM_A_AT(m, kk)]
#endif
// The math of one K-tile staged in local memory at a_t / b_t: acc += A tile x B tile, k ascending.
#define GEMM_TILE_MATH(a_t, b_t)                                                              \
  _Pragma("unroll") for (int kk = 0; kk < GEMM_TILE_K; ++kk) {                                \
    GEMM_VT b_reg[GEMM_WPT_N / GEMM_VW];                                                       \
    _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j) {                         \
      b_reg[j] = GEMM_LOCAL_READ(GEMM_VW, GEMM_LOCAL_VEC_B,                                    \
                                 (b_t) + kk * GEMM_LDS_N + (j * GEMM_RT_N + tx) * GEMM_VW);    \
    }                                                                                          \
    float a_reg[GEMM_WPT_M];                                                                   \
    _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M / GEMM_VWM; ++i) {                        \
      const int m = (i * GEMM_RT_M + ty) * GEMM_VWM;                                           \
      GEMM_READ_A(a_t, i, m, kk);                                                              \
    }                                                                                          \
    GEMM_TILE_MAC                                                                              \
  }
#if GEMM_ROUND == GEMM_ROUND_3XTF32
#define GEMM_TILE_MAC                                                                     \
  GEMM_VT b_lo[GEMM_WPT_N / GEMM_VW];                                                     \
  _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j)                        \
      GEMM_SPLIT_TF32(GEMM_VW, b_reg[j], b_lo[j]);                                        \
  float a_lo[GEMM_WPT_M];                                                                 \
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i)                                  \
      GEMM_SPLIT_TF32(1, a_reg[i], a_lo[i]);                                              \
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i)                                  \
      _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j) {                  \
    acc[i][j] += a_lo[i] * b_reg[j];                                                      \
    acc[i][j] += a_reg[i] * b_lo[j];                                                      \
    acc[i][j] += a_reg[i] * b_reg[j];                                                     \
  }
#else
#define GEMM_TILE_MAC                                                                     \
  _Pragma("unroll") for (int i = 0; i < GEMM_WPT_M; ++i)                                  \
      _Pragma("unroll") for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j)                    \
          acc[i][j] += a_reg[i] * b_reg[j];
#endif

#if GEMM_DBUF
// Prefetching: vector v of a K-tile (v < GEMM_*_VECS) is the one the single-buffer loop below
// stages, fetched by work-item v % THREADS into its register slot v / THREADS.
#define GEMM_A_VECS (GEMM_TILE_M * GEMM_TILE_K / GEMM_VEC_A)
#define GEMM_B_VECS (GEMM_TILE_K * GEMM_TILE_N / GEMM_VEC_B)
#define GEMM_A_SLOTS ((GEMM_A_VECS + GEMM_THREADS - 1) / GEMM_THREADS)
#define GEMM_B_SLOTS ((GEMM_B_VECS + GEMM_THREADS - 1) / GEMM_THREADS)
// Floats between the two buffers of a tile: the tile rounded up to whole VW vectors.
#define GEMM_A_BUFFER ((GEMM_A_FLOATS + GEMM_VW - 1) / GEMM_VW * GEMM_VW)
#define GEMM_B_BUFFER ((GEMM_B_FLOATS + GEMM_VW - 1) / GEMM_VW * GEMM_VW)
#define GEMM_A_LOAD_T GEMM_FLOATN(GEMM_VEC_A)
#define GEMM_B_LOAD_T GEMM_FLOATN(GEMM_VEC_B)

// Where a work-item's register slot fetches from, worked out once per tile: vector v of the
// K-tile at k0 is element `at` + k0 * (the operand's stride along k) of it, at k = kk + k0, inside
// the operand when `present` (its row of A, or column of B, exists) and k < K. The K-tile loop
// then fetches with one multiply-add and one compare per vector (docs/PERFORMANCE.md measured the
// difference).
typedef struct {
  ulong at;
  int kk;
  int present;
} gemm_source;

// Vector v of the A tile at (m0, 0); a vector is wholly inside or outside A.
static inline gemm_source gemm_source_a(const int trans_a, ulong M, ulong lda, ulong m0, int v) {
  const int mm = trans_a ? (v % (GEMM_TILE_M / GEMM_VEC_A)) * GEMM_VEC_A
                         : v / (GEMM_TILE_K / GEMM_VEC_A);
  const int kk = trans_a ? v / (GEMM_TILE_M / GEMM_VEC_A)
                         : (v % (GEMM_TILE_K / GEMM_VEC_A)) * GEMM_VEC_A;
  const ulong gm = m0 + mm;
  gemm_source source;
  source.at = trans_a ? (ulong)kk * lda + gm : gm * lda + kk;
  source.kk = kk;
  source.present = (GEMM_A_VECS % GEMM_THREADS == 0 || v < GEMM_A_VECS) && gm < M;
  return source;
}

// Stores vector v of the A tile into local memory.
static inline void gemm_stage_a(const int trans_a, GEMM_A_LOAD_T value, __local float* a_tile,
                                int v) {
  const int mm = trans_a ? (v % (GEMM_TILE_M / GEMM_VEC_A)) * GEMM_VEC_A
                         : v / (GEMM_TILE_K / GEMM_VEC_A);
  const int kk = trans_a ? v / (GEMM_TILE_M / GEMM_VEC_A)
                         : (v % (GEMM_TILE_K / GEMM_VEC_A)) * GEMM_VEC_A;
  const int a_step = trans_a ? GEMM_A_AT(1, 0) - GEMM_A_AT(0, 0)
                             : GEMM_A_AT(0, 1) - GEMM_A_AT(0, 0);
  GEMM_SCATTER(GEMM_VEC_A)(value, a_tile + GEMM_A_AT(mm, kk), a_step);
}

// Vector v of the B tile at (0, n0); a vector is wholly inside or outside B.
static inline gemm_source gemm_source_b(const int trans_b, ulong N, ulong ldb, ulong n0, int v) {
  const int nn = trans_b ? v / (GEMM_TILE_K / GEMM_VEC_B)
                         : (v % (GEMM_TILE_N / GEMM_VEC_B)) * GEMM_VEC_B;
  const int kk = trans_b ? (v % (GEMM_TILE_K / GEMM_VEC_B)) * GEMM_VEC_B
                         : v / (GEMM_TILE_N / GEMM_VEC_B);
  const ulong gn = n0 + nn;
  gemm_source source;
  source.at = trans_b ? gn * ldb + kk : (ulong)kk * ldb + gn;
  source.kk = kk;
  source.present = (GEMM_B_VECS % GEMM_THREADS == 0 || v < GEMM_B_VECS) && gn < N;
  return source;
}

// Stores vector v of the B tile into local memory.
static inline void gemm_stage_b(const int trans_b, GEMM_B_LOAD_T value, __local float* b_tile,
                                int v) {
  const int nn = trans_b ? v / (GEMM_TILE_K / GEMM_VEC_B)
                         : (v % (GEMM_TILE_N / GEMM_VEC_B)) * GEMM_VEC_B;
  const int kk = trans_b ? (v % (GEMM_TILE_K / GEMM_VEC_B)) * GEMM_VEC_B
                         : v / (GEMM_TILE_N / GEMM_VEC_B);
  GEMM_SCATTER(GEMM_VEC_B)(value, b_tile + kk * GEMM_LDS_N + nn, trans_b ? GEMM_LDS_N : 1);
}

// The registers of one work-item: its share of the K-tile at k0, fetched (zero outside the
// operands) / staged. Slots past the end of the tile (when THREADS does not divide it) stay unused.
#define GEMM_FETCH(k0_next)                                                                  \
  _Pragma("unroll") for (int s = 0; s < GEMM_A_SLOTS; ++s) {                                  \
    a_next[s] = 0.0f;                                                                         \
    if (a_from[s].present && (k0_next) + a_from[s].kk < K)                                    \
      a_next[s] = GEMM_FN(gemm_round, GEMM_VEC_A)(GEMM_FN(gemm_load_ab_aligned, GEMM_VEC_A)(   \
          a, a_from[s].at + (k0_next) * (trans_a ? lda : 1)));                                \
  }                                                                                           \
  _Pragma("unroll") for (int s = 0; s < GEMM_B_SLOTS; ++s) {                                  \
    b_next[s] = 0.0f;                                                                         \
    if (b_from[s].present && (k0_next) + b_from[s].kk < K)                                    \
      b_next[s] = GEMM_FN(gemm_round, GEMM_VEC_B)(GEMM_FN(gemm_load_ab_aligned, GEMM_VEC_B)(   \
          b, b_from[s].at + (k0_next) * (trans_b ? 1 : ldb)));                                \
  }
#define GEMM_STAGE(a_t, b_t)                                                                 \
  _Pragma("unroll") for (int s = 0; s < GEMM_A_SLOTS; ++s) {                                  \
    const int v = tid + s * GEMM_THREADS;                                                     \
    if (GEMM_A_VECS % GEMM_THREADS == 0 || v < GEMM_A_VECS)                                   \
      gemm_stage_a(trans_a, a_next[s], (a_t), v);                                             \
  }                                                                                           \
  _Pragma("unroll") for (int s = 0; s < GEMM_B_SLOTS; ++s) {                                  \
    const int v = tid + s * GEMM_THREADS;                                                     \
    if (GEMM_B_VECS % GEMM_THREADS == 0 || v < GEMM_B_VECS)                                   \
      gemm_stage_b(trans_b, b_next[s], (b_t), v);                                             \
  }
// One K-tile at k0 from buffer `cur` (a constant: the loop takes two K-tiles per iteration, so
// each buffer's addresses are fixed in the code), the next one prefetched into the other buffer.
#define GEMM_DBUF_STEP(cur, k0)                                                          \
  {                                                                                       \
    const int more = (k0) + GEMM_TILE_K < K;                                              \
    if (more) {                                                                           \
      GEMM_FETCH((k0) + GEMM_TILE_K)                                                      \
    }                                                                                     \
    GEMM_TILE_MATH(a_tile + (cur) * GEMM_A_BUFFER, b_tile + (cur) * GEMM_B_BUFFER);       \
    if (more) {                                                                           \
      GEMM_STAGE(a_tile + (1 - (cur)) * GEMM_A_BUFFER, b_tile + (1 - (cur)) * GEMM_B_BUFFER) \
    }                                                                                     \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
  }
#endif

static inline void gemm_tiled(const int trans_a, const int trans_b, GEMM_KERNEL_ARGS,
                       __local float* a_tile, __local float* b_tile) {
  const ulong batch = batch0 + get_group_id(2);
  const ulong m0 = (tile_m0 + get_group_id(1)) * GEMM_TILE_M;
  const ulong n0 = (tile_n0 + get_group_id(0)) * GEMM_TILE_N;
  const int tx = (int)get_local_id(0);
  const int ty = (int)get_local_id(1);
  const int tid = ty * GEMM_RT_N + tx;
  a += off_a + batch * stride_a;
  b += off_b + batch * stride_b;
  c += off_c + batch * stride_c;
#if GEMM_EPILOGUE
  GEMM_EPI_ADVANCE(batch, stride_c);
#endif

  GEMM_VT acc[GEMM_WPT_M][GEMM_WPT_N / GEMM_VW];
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j) acc[i][j] = 0.0f;

#if GEMM_DBUF
  // a_tile / b_tile hold two buffers each. Buffer `cur` holds K-tile k0 while the registers
  // receive tile k0 + TILE_K, which goes to the other buffer once the math is done: its last
  // readers (the math of tile k0 - TILE_K) passed the previous barrier, so one barrier per
  // K-tile suffices. `more` is uniform over the work-group, so every barrier is reached by all.
  GEMM_A_LOAD_T a_next[GEMM_A_SLOTS];
  GEMM_B_LOAD_T b_next[GEMM_B_SLOTS];
  gemm_source a_from[GEMM_A_SLOTS];
  gemm_source b_from[GEMM_B_SLOTS];
#pragma unroll
  for (int s = 0; s < GEMM_A_SLOTS; ++s) {
    a_from[s] = gemm_source_a(trans_a, M, lda, m0, tid + s * GEMM_THREADS);
  }
#pragma unroll
  for (int s = 0; s < GEMM_B_SLOTS; ++s) {
    b_from[s] = gemm_source_b(trans_b, N, ldb, n0, tid + s * GEMM_THREADS);
  }
  GEMM_FETCH(0)
  GEMM_STAGE(a_tile, b_tile)
  barrier(CLK_LOCAL_MEM_FENCE);
  for (ulong k0 = 0; k0 < K; k0 += 2 * GEMM_TILE_K) {
    GEMM_DBUF_STEP(0, k0)
    if (k0 + GEMM_TILE_K >= K) break;
    GEMM_DBUF_STEP(1, k0 + GEMM_TILE_K)
  }
#else
  for (ulong k0 = 0; k0 < K; k0 += GEMM_TILE_K) {
    // Stage A: vectors of VEC_A along A's contiguous dimension (k, or m when transposed);
    // consecutive work-items take consecutive vectors. A vector is wholly inside or outside.
#define VA GEMM_VEC_A
    for (int v = tid; v < GEMM_TILE_M * GEMM_TILE_K / VA; v += GEMM_THREADS) {
      const int mm = trans_a ? (v % (GEMM_TILE_M / VA)) * VA : v / (GEMM_TILE_K / VA);
      const int kk = trans_a ? v / (GEMM_TILE_M / VA) : (v % (GEMM_TILE_K / VA)) * VA;
      const ulong gm = m0 + mm;
      const ulong gk = k0 + kk;
      GEMM_FLOATN(VA) value = 0.0f;
      if (gm < M && gk < K) {
        value = GEMM_FN(gemm_round, VA)(
            GEMM_FN(gemm_load_ab_aligned, VA)(a, trans_a ? gk * lda + gm : gm * lda + gk));
      }
      // Consecutive elements of the vector go to consecutive m (transposed A) or k.
      const int a_step = trans_a ? GEMM_A_AT(1, 0) - GEMM_A_AT(0, 0)
                                 : GEMM_A_AT(0, 1) - GEMM_A_AT(0, 0);
      GEMM_SCATTER(VA)(value, a_tile + GEMM_A_AT(mm, kk), a_step);
    }
#undef VA
    // Stage B: vectors of VEC_B along n, or along k when transposed.
#define VB GEMM_VEC_B
    for (int v = tid; v < GEMM_TILE_K * GEMM_TILE_N / VB; v += GEMM_THREADS) {
      const int nn = trans_b ? v / (GEMM_TILE_K / VB) : (v % (GEMM_TILE_N / VB)) * VB;
      const int kk = trans_b ? (v % (GEMM_TILE_K / VB)) * VB : v / (GEMM_TILE_N / VB);
      const ulong gn = n0 + nn;
      const ulong gk = k0 + kk;
      GEMM_FLOATN(VB) value = 0.0f;
      if (gn < N && gk < K) {
        value = GEMM_FN(gemm_round, VB)(
            GEMM_FN(gemm_load_ab_aligned, VB)(b, trans_b ? gn * ldb + gk : gk * ldb + gn));
      }
      GEMM_SCATTER(VB)(value, b_tile + kk * GEMM_LDS_N + nn, trans_b ? GEMM_LDS_N : 1);
    }
#undef VB
    barrier(CLK_LOCAL_MEM_FENCE);

    GEMM_TILE_MATH(a_tile, b_tile);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i) {
    const ulong gm = m0 + ((i / GEMM_VWM) * GEMM_RT_M + ty) * GEMM_VWM + i % GEMM_VWM;
    if (gm < M) {
#pragma unroll
      for (int j = 0; j < GEMM_WPT_N / GEMM_VW; ++j) {
        const ulong gn = n0 + (j * GEMM_RT_N + tx) * GEMM_VW;
        const ulong at = gm * ldc + gn;
        if (gn + GEMM_VW <= N) {
          GEMM_STORE_VEC(GEMM_VW, GEMM_OUTPUT(GEMM_VW, acc[i][j], c, at), at, gn);
        } else {
#pragma unroll
          for (int e = 0; e < GEMM_VW; ++e) {
            if (gn + e < N) {
              const float sum = GEMM_COMPONENT(GEMM_VW)(acc[i][j], e);
              GEMM_STORE_ONE(GEMM_OUTPUT(1, sum, c, at + e), at + e, gn + e);
            }
          }
        }
      }
    }
  }
}

#if GEMM_DBUF
#define GEMM_BUFFERS 2
#else
#define GEMM_BUFFERS 1
#endif
#define GEMM_LOCAL_TILES                                                          \
  __local GEMM_VT a_tile[GEMM_BUFFERS * ((GEMM_A_FLOATS + GEMM_VW - 1) / GEMM_VW)]; \
  __local GEMM_VT b_tile[GEMM_BUFFERS * ((GEMM_B_FLOATS + GEMM_VW - 1) / GEMM_VW)]
#define GEMM_TILES (__local float*)a_tile, (__local float*)b_tile

// C = A @ B (forward products).
__kernel GEMM_ATTRIBUTES void gemm_nn(GEMM_KERNEL_ARGS) {
  GEMM_LOCAL_TILES;
  gemm_tiled(0, 0, GEMM_TILE_ARGS, GEMM_TILES);
}

// C = A @ B^T (input gradients: dA = dC @ W^T).
__kernel GEMM_ATTRIBUTES void gemm_nt(GEMM_KERNEL_ARGS) {
  GEMM_LOCAL_TILES;
  gemm_tiled(0, 1, GEMM_TILE_ARGS, GEMM_TILES);
}

// C = A^T @ B (weight gradients: dW = A^T @ dC).
__kernel GEMM_ATTRIBUTES void gemm_tn(GEMM_KERNEL_ARGS) {
  GEMM_LOCAL_TILES;
  gemm_tiled(1, 0, GEMM_TILE_ARGS, GEMM_TILES);
}

// C = A^T @ B^T.
__kernel GEMM_ATTRIBUTES void gemm_tt(GEMM_KERNEL_ARGS) {
  GEMM_LOCAL_TILES;
  gemm_tiled(1, 1, GEMM_TILE_ARGS, GEMM_TILES);
}
#endif
