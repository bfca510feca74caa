// Fused attention on tensor cores (aethercl_attention_forward / _backward in the BF16 and FP16
// compute modes, NVIDIA sm_80+; emulated elsewhere for tests): flash-style, no seq_q x seq_k matrix
// in device memory. Every product's inputs (q, k, v, dout, and the probabilities P and dS of the
// second products) are rounded to the compute format; sums, softmax and lse are float32.
// Build options: ATTM_D (head_dim rounded up to 16, 32, 64 or 128), ATTM_BQ (query rows per inner
// block of attention_mma_dkdv: 64, or 32 for ATTM_D 128, which keeps its accumulators in
// registers), and warp_mma16.cl's WM_KIND and WM_EMULATE.
//
// Work decomposition: work-groups of four warps, one 1-D NDRange; group g covers one
// (batch*head) and one tile of 64 rows, the heaviest tiles first (attm_head, attm_rank), warp w
// rows 16w .. 16w + 15 of it.
//   attention_mma_forward  query rows; key/value blocks of 64 in local memory; S = q k^T on tensor
//                          cores, online softmax in the accumulators (rows g and g + 8 of each
//                          lane, maxima and sums across the row's four lanes by shuffles), P
//                          rounded into A fragments in registers, o += P v.
//   attention_mma_dq       query rows; per key block S and dP = dout v^T, dS = P (dP - D), dq += dS k.
//   attention_mma_dkdv     key rows; per query block S^T = k q^T and dP^T = v dout^T, dv += P^T dout,
//                          dk += dS^T q.
// D_i = dout_i . o_i comes from attention.cl's attention_row_dot. Local tiles hold 16-bit values in
// rows of ATTM_D + 8 (16-byte rows, ldmatrix without bank conflicts); rows past the sequence and
// columns past head_dim hold zeros. Sums run in a fixed order: results are the same bits run to run.
// Exponentials are base 2 (scores and lse times log2 e, native_exp2: ex2.approx, relative error
// about 2^-22, far below the 16-bit rounding of P).

#include "attention_common.cl"
#include "warp_mma16.cl"

#define ATTM_THREADS 128
#define ATTM_ROWS 64                 // rows of a work-group's tile, and of a key block
#define ATTM_P (ATTM_D + 8)          // ushorts per local row
#define ATTM_TILE (ATTM_ROWS * ATTM_P)
#define ATTM_KSTEPS (ATTM_D / 16)    // k16 steps over head_dim
#define ATTM_DTILES (ATTM_D / 8)     // n8 tiles over head_dim

#if ATTM_D % 16 || ATTM_D > 128 || (ATTM_BQ != 32 && ATTM_BQ != 64)
#error "ATTM_D is 16, 32, 64 or 128 and ATTM_BQ 32 or 64"
#endif

// The two tiles, 16-byte aligned as ldmatrix's row addresses must be (every __local array first:
// kernel-scope declarations, before the pointers into them).
#if WM_EMULATE
#define ATTM_LOCALS                                                                          \
  __local uint4 att_units[ATTM_TILE / 4] __attribute__((aligned(16)));                       \
  __local uint wm_scratch[ATTM_THREADS * WM_SCRATCH_UINTS];                                  \
  __local ushort* att_tiles = (__local ushort*)att_units;                                    \
  __local const uchar* wm_smem = (__local const uchar*)att_units;
#else
#define ATTM_LOCALS                                                                          \
  __local uint4 att_units[ATTM_TILE / 4] __attribute__((aligned(16)));                       \
  __local ushort* att_tiles = (__local ushort*)att_units;
#endif

#define ATTM_UNITS (ATTM_D / 8)  // 16-byte units (8 columns) of a local row
#define ATTM_ITEM_UNITS(rows) ((rows) * ATTM_UNITS / ATTM_THREADS)  // per work-item and tile
#define ATTM_NATIVE (WM_KIND == 2 ? ATT_BF16 : ATT_F16)  // storage the products take as it is

// The tile row and first column of work-item lid's i-th unit.
inline uint attm_unit_row(uint lid, uint i) { return (lid + i * ATTM_THREADS) / ATTM_UNITS; }
inline uint attm_unit_col(uint lid, uint i) { return (lid + i * ATTM_THREADS) % ATTM_UNITS * 8u; }

// Rows [r0, r0 + rows) of one head of src (seq rows) into tile, rounded to 16 bits. Where head_dim
// is a multiple of 8 (rows of whole 32-byte float32 or 16-byte 16-bit units, as every row starts
// a multiple of head_dim into its buffer) each work-item moves `rows` x ATTM_UNITS / ATTM_THREADS
// units, all of its loads issued before the first conversion; else one element at a time.
inline void attm_load_tile(__local ushort* tile, const uint rows, __global const uchar* src,
                           int dtype, int layout, uint b, uint h, uint r0, uint heads, uint seq,
                           uint dim) {
  const uint lid = get_local_id(0);
  if ((dim & 7u) == 0 && (dtype == ATT_F32 || dtype == ATTM_NATIVE)) {
    uint4 units[ATTM_ITEM_UNITS(ATTM_ROWS)];
    if (dtype == ATT_F32) {
      float8 raw[ATTM_ITEM_UNITS(ATTM_ROWS)];
#pragma unroll
      for (uint i = 0; i < ATTM_ITEM_UNITS(rows); ++i) {
        const uint r = attm_unit_row(lid, i), c = attm_unit_col(lid, i);
        raw[i] = (float8)(0.0f);
        if (r0 + r < seq && c < dim) {
          raw[i] = *(__global const float8*)((__global const float*)src +
                                             att_row(layout, b, h, r0 + r, heads, seq, dim) + c);
        }
      }
#pragma unroll
      for (uint i = 0; i < ATTM_ITEM_UNITS(rows); ++i) {
        units[i] = (uint4)(wm_pack(raw[i].s0, raw[i].s1), wm_pack(raw[i].s2, raw[i].s3),
                           wm_pack(raw[i].s4, raw[i].s5), wm_pack(raw[i].s6, raw[i].s7));
      }
    } else {
#pragma unroll
      for (uint i = 0; i < ATTM_ITEM_UNITS(rows); ++i) {
        const uint r = attm_unit_row(lid, i), c = attm_unit_col(lid, i);
        units[i] = (uint4)(0u);
        if (r0 + r < seq && c < dim) {
          units[i] = *(__global const uint4*)((__global const ushort*)src +
                                              att_row(layout, b, h, r0 + r, heads, seq, dim) + c);
        }
      }
    }
#pragma unroll
    for (uint i = 0; i < ATTM_ITEM_UNITS(rows); ++i) {
      const uint r = attm_unit_row(lid, i), c = attm_unit_col(lid, i);
      *(__local uint4*)(tile + r * ATTM_P + c) = units[i];
    }
    return;
  }
  for (uint e = lid; e < rows * ATTM_D; e += ATTM_THREADS) {
    const uint r = e / ATTM_D, c = e % ATTM_D;
    float value = 0.0f;
    if (r0 + r < seq && c < dim) {
      value = att_load(src, att_row(layout, b, h, r0 + r, heads, seq, dim) + c, dtype);
    }
    tile[r * ATTM_P + c] = wm_to16(value);
  }
}

// Group g covers (batch*head) g % heads_total and the tile of rank g / heads_total: every head's
// tile of one rank before the next rank, so that with causal masking the tiles with the most
// blocks (the last query tiles; for dk/dv the first key tiles) start first and the light ones
// fill the last wave.
inline uint attm_head(uint tiles) { return get_group_id(0) % (get_num_groups(0) / tiles); }
inline uint attm_rank(uint tiles) { return get_group_id(0) / (get_num_groups(0) / tiles); }

// Byte address of element (row, col) of the tile at `base`.
#define ATTM_AT(base, row, col) ((base) + ((row) * ATTM_P + (col)) * 2u)

// The A fragments (16 rows from row0, all of head_dim) of a tile: frags[ATTM_KSTEPS][4].
#define ATTM_A_FRAGS(frags, base, row0)                                                      \
  for (uint ks_ = 0; ks_ < ATTM_KSTEPS; ++ks_)                                               \
    wm_ldmatrix(ATTM_AT(base, (row0) + (lane & 15u), ks_ * 16u + (lane >> 4) * 8u), frags[ks_], \
                0 WM_PASS);

// acc[nb / 8][4] = a (16 x head_dim) times the first nb rows of the tile at base, transposed
// (rows of the tile are the columns of the result).
#define ATTM_ROWS_PRODUCT(acc, a, base, nb)                                                  \
  {                                                                                          \
    for (uint j_ = 0; j_ < (nb) / 8u; ++j_)                                                  \
      for (uint e_ = 0; e_ < 4u; ++e_) acc[j_][e_] = 0.0f;                                   \
    for (uint ks_ = 0; ks_ < ATTM_KSTEPS; ++ks_)                                             \
      for (uint jp_ = 0; jp_ < (nb) / 16u; ++jp_) {                                          \
        uint r_[4];                                                                          \
        wm_ldmatrix(ATTM_AT(base, jp_ * 16u + (lane & 7u) + ((lane >> 4) << 3),              \
                            ks_ * 16u + ((lane >> 3) & 1u) * 8u), r_, 0 WM_PASS);            \
        wm_mma(acc[2 * jp_], a[ks_], r_ WM_PASS);                                            \
        wm_mma(acc[2 * jp_ + 1], a[ks_], r_ + 2 WM_PASS);                                    \
      }                                                                                      \
  }

// The accumulators p[nb / 8][4] (16 rows x nb columns) as A fragments pa[nb / 16][4] of a
// product over those nb columns, rounded to 16 bits.
#define ATTM_PACK(pa, p, nb)                                                                 \
  for (uint kk_ = 0; kk_ < (nb) / 16u; ++kk_) {                                              \
    pa[kk_][0] = wm_pack(p[2 * kk_][0], p[2 * kk_][1]);                                      \
    pa[kk_][1] = wm_pack(p[2 * kk_][2], p[2 * kk_][3]);                                      \
    pa[kk_][2] = wm_pack(p[2 * kk_ + 1][0], p[2 * kk_ + 1][1]);                              \
    pa[kk_][3] = wm_pack(p[2 * kk_ + 1][2], p[2 * kk_ + 1][3]);                              \
  }

// acc[ATTM_DTILES][4] += pa (16 x kb) times the first kb rows of the tile at base (kb x head_dim).
#define ATTM_ACCUMULATE(acc, pa, base, kb)                                                   \
  for (uint kk_ = 0; kk_ < (kb) / 16u; ++kk_)                                                \
    for (uint dn_ = 0; dn_ < ATTM_DTILES; dn_ += 2) {                                        \
      uint r_[4];                                                                            \
      wm_ldmatrix(ATTM_AT(base, kk_ * 16u + ((lane >> 3) & 1u) * 8u + (lane & 7u),           \
                          (dn_ + (lane >> 4)) * 8u), r_, 1 WM_PASS);                         \
      wm_mma(acc[dn_], pa[kk_], r_ WM_PASS);                                                 \
      wm_mma(acc[dn_ + 1], pa[kk_], r_ + 2 WM_PASS);                                         \
    }

// The maximum (or sum) over the four lanes of a row group.
#define ATTM_ROW_MAX(x) x = fmax(x, wm_shfl_xor(x, 1u WM_PASS)); x = fmax(x, wm_shfl_xor(x, 2u WM_PASS));
#define ATTM_ROW_SUM(x) x += wm_shfl_xor(x, 1u WM_PASS); x += wm_shfl_xor(x, 2u WM_PASS);

// Stores rows (row0, row0 + 8) of the accumulators acc[ATTM_DTILES][4] times `factor[2]`.
inline void attm_store_rows(__global uchar* dst, float (*acc)[4], const float* factor,
                            uint row0, uint t, int dtype, int layout, uint b, uint h, uint heads,
                            uint seq, uint dim) {
  for (uint part = 0; part < 2; ++part) {
    const uint row = row0 + part * 8u;
    if (row >= seq) continue;
    const ulong base = att_row(layout, b, h, row, heads, seq, dim);
    for (uint dn = 0; dn < ATTM_DTILES; ++dn)
      for (uint e = 0; e < 2; ++e) {
        const uint d = dn * 8u + 2u * t + e;
        if (d < dim) att_store(dst, base + d, dtype, acc[dn][part * 2 + e] * factor[part]);
      }
  }
}

__kernel __attribute__((reqd_work_group_size(ATTM_THREADS, 1, 1))) void attention_mma_forward(
    __global const uchar* q, __global const uchar* k, __global const uchar* v, __global uchar* o,
    __global float* lse, int has_lse, uint heads, uint seq_q, uint seq_k, uint dim, int layout,
    int causal, float scale, int dtype, uint tiles) {
  ATTM_LOCALS
  const uint lid = get_local_id(0), warp = lid >> 5, lane = lid & 31u, g = lane >> 2, t = lane & 3u;
  const uint bh = attm_head(tiles), tile = tiles - 1u - attm_rank(tiles);  // heaviest first
  const uint b = bh / heads, h = bh % heads;
  const uint i0 = tile * ATTM_ROWS;
  const uint k_base = WM_SHARED(att_tiles), v_base = k_base + ATTM_TILE * 2u;
  __local ushort* ks = att_tiles;
  __local ushort* vs = att_tiles + ATTM_TILE;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);

  // This warp's query rows as A fragments (the tile passes through the key tile's space).
  uint qf[ATTM_KSTEPS][4];
  attm_load_tile(ks, ATTM_ROWS, q, dtype, layout, b, h, i0, heads, seq_q, dim);
  barrier(CLK_LOCAL_MEM_FENCE);
  ATTM_A_FRAGS(qf, k_base, warp * 16u)
  barrier(CLK_LOCAL_MEM_FENCE);

  const uint rows[2] = {i0 + warp * 16u + g, i0 + warp * 16u + g + 8u};
  uint end[2];
  for (uint r = 0; r < 2; ++r) end[r] = rows[r] < seq_q ? att_key_end(rows[r], seq_q, seq_k, causal) : 0;
  const uint last = min(i0 + ATTM_ROWS, seq_q) - 1;  // the group's last row sees the most keys
  const uint group_end = att_key_end(last, seq_q, seq_k, causal);
  float acc[ATTM_DTILES][4];
  for (uint dn = 0; dn < ATTM_DTILES; ++dn)
    for (uint e = 0; e < 4; ++e) acc[dn][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // in base 2: scores times log2(e)
  const float scale_log2 = scale * M_LOG2E_F;

  for (uint j0 = 0; j0 < group_end; j0 += ATTM_ROWS) {
    attm_load_tile(ks, ATTM_ROWS, k, dtype, layout, b, h, j0, heads, seq_k, dim);
    attm_load_tile(vs, ATTM_ROWS, v, dtype, layout, b, h, j0, heads, seq_k, dim);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[ATTM_ROWS / 8][4];
    ATTM_ROWS_PRODUCT(s, qf, k_base, ATTM_ROWS)
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (uint j = 0; j < ATTM_ROWS / 8; ++j)
      for (uint e = 0; e < 4; ++e) {
        const uint key = j0 + j * 8u + 2u * t + (e & 1u);
        s[j][e] = key < end[e >> 1] ? s[j][e] * scale_log2 : -INFINITY;
        tile_max[e >> 1] = fmax(tile_max[e >> 1], s[j][e]);
      }
    float base[2], correction[2];
    for (uint r = 0; r < 2; ++r) {
      ATTM_ROW_MAX(tile_max[r])
      const float m_new = fmax(m[r], tile_max[r]);
      base[r] = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: every p is 0
      correction[r] = native_exp2(m[r] - base[r]);  // 0 while m was -inf
      m[r] = m_new;
      l[r] *= correction[r];
    }
    for (uint dn = 0; dn < ATTM_DTILES; ++dn)
      for (uint e = 0; e < 4; ++e) acc[dn][e] *= correction[e >> 1];
    for (uint j = 0; j < ATTM_ROWS / 8; ++j)
      for (uint e = 0; e < 4; ++e) {
        s[j][e] = native_exp2(s[j][e] - base[e >> 1]);
        l[e >> 1] += s[j][e];
      }
    uint pa[ATTM_ROWS / 16][4];
    ATTM_PACK(pa, s, ATTM_ROWS)
    ATTM_ACCUMULATE(acc, pa, v_base, ATTM_ROWS)
    barrier(CLK_LOCAL_MEM_FENCE);  // the next block's tiles overwrite these
  }
  float inverse[2];
  for (uint r = 0; r < 2; ++r) {
    ATTM_ROW_SUM(l[r])
    inverse[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;  // no visible key: o = 0
  }
  attm_store_rows(o, acc, inverse, rows[0], t, dtype, att_out_layout(layout), b, h, heads, seq_q,
                  dim);
  if (has_lse && t == 0) {
    for (uint r = 0; r < 2; ++r) {
      if (rows[r] < seq_q) {
        lse[(ulong)bh * seq_q + rows[r]] = l[r] > 0.0f ? (m[r] + log2(l[r])) * M_LN2_F : -INFINITY;
      }
    }
  }
}

// dq_i = scale sum_j dS_ij k_j, dS_ij = P_ij (dout_i . v_j - D_i), P_ij = exp(scale q_i . k_j - lse_i).
__kernel __attribute__((reqd_work_group_size(ATTM_THREADS, 1, 1))) void attention_mma_dq(
    __global const uchar* q, __global const uchar* k, __global const uchar* v,
    __global const float* lse, __global const float* delta, __global const uchar* dout,
    __global uchar* dq, uint heads, uint seq_q, uint seq_k, uint dim, int layout, int causal,
    float scale, int dtype, uint tiles) {
  ATTM_LOCALS
  const uint lid = get_local_id(0), warp = lid >> 5, lane = lid & 31u, g = lane >> 2, t = lane & 3u;
  const uint bh = attm_head(tiles), tile = tiles - 1u - attm_rank(tiles);  // heaviest first
  const uint b = bh / heads, h = bh % heads;
  const uint i0 = tile * ATTM_ROWS;
  const uint k_base = WM_SHARED(att_tiles), v_base = k_base + ATTM_TILE * 2u;
  __local ushort* ks = att_tiles;
  __local ushort* vs = att_tiles + ATTM_TILE;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);

  uint qf[ATTM_KSTEPS][4], dof[ATTM_KSTEPS][4];
  attm_load_tile(ks, ATTM_ROWS, q, dtype, layout, b, h, i0, heads, seq_q, dim);
  attm_load_tile(vs, ATTM_ROWS, dout, dtype, att_out_layout(layout), b, h, i0, heads, seq_q,
                 dim);
  barrier(CLK_LOCAL_MEM_FENCE);
  ATTM_A_FRAGS(qf, k_base, warp * 16u)
  ATTM_A_FRAGS(dof, v_base, warp * 16u)
  barrier(CLK_LOCAL_MEM_FENCE);

  const uint rows[2] = {i0 + warp * 16u + g, i0 + warp * 16u + g + 8u};
  uint end[2];
  float row_lse[2], row_delta[2];
  const float scale_log2 = scale * M_LOG2E_F;
  for (uint r = 0; r < 2; ++r) {
    const bool active = rows[r] < seq_q;
    row_lse[r] = active ? lse[(ulong)bh * seq_q + rows[r]] * M_LOG2E_F : -INFINITY;  // base 2
    row_delta[r] = active ? delta[(ulong)bh * seq_q + rows[r]] : 0.0f;
    // A row without visible keys (lse = -inf) has no probabilities: dq = 0.
    end[r] = active && row_lse[r] != -INFINITY ? att_key_end(rows[r], seq_q, seq_k, causal) : 0;
  }
  const uint last = min(i0 + ATTM_ROWS, seq_q) - 1;
  const uint group_end = att_key_end(last, seq_q, seq_k, causal);
  float acc[ATTM_DTILES][4];
  for (uint dn = 0; dn < ATTM_DTILES; ++dn)
    for (uint e = 0; e < 4; ++e) acc[dn][e] = 0.0f;

  for (uint j0 = 0; j0 < group_end; j0 += ATTM_ROWS) {
    attm_load_tile(ks, ATTM_ROWS, k, dtype, layout, b, h, j0, heads, seq_k, dim);
    attm_load_tile(vs, ATTM_ROWS, v, dtype, layout, b, h, j0, heads, seq_k, dim);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[ATTM_ROWS / 8][4], dp[ATTM_ROWS / 8][4];
    ATTM_ROWS_PRODUCT(s, qf, k_base, ATTM_ROWS)
    ATTM_ROWS_PRODUCT(dp, dof, v_base, ATTM_ROWS)
    for (uint j = 0; j < ATTM_ROWS / 8; ++j)
      for (uint e = 0; e < 4; ++e) {
        const uint key = j0 + j * 8u + 2u * t + (e & 1u);
        const uint r = e >> 1;
        const float p = key < end[r] ? native_exp2(s[j][e] * scale_log2 - row_lse[r]) : 0.0f;
        s[j][e] = p * (dp[j][e] - row_delta[r]);
      }
    uint dsa[ATTM_ROWS / 16][4];
    ATTM_PACK(dsa, s, ATTM_ROWS)
    ATTM_ACCUMULATE(acc, dsa, k_base, ATTM_ROWS)
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float factor[2] = {scale, scale};
  attm_store_rows(dq, acc, factor, rows[0], t, dtype, layout, b, h, heads, seq_q, dim);
}

// One work-group per 64 key rows: dv_j = sum_i P_ij dout_i, dk_j = scale sum_i dS_ij q_i.
__kernel __attribute__((reqd_work_group_size(ATTM_THREADS, 1, 1))) void attention_mma_dkdv(
    __global const uchar* q, __global const uchar* k, __global const uchar* v,
    __global const float* lse, __global const float* delta, __global const uchar* dout,
    __global uchar* dk, __global uchar* dv, uint heads, uint seq_q, uint seq_k, uint dim,
    int layout, int causal, float scale, int dtype, uint tiles) {
  __local float lse_s[ATTM_BQ];
  __local float delta_s[ATTM_BQ];
  ATTM_LOCALS
  const uint lid = get_local_id(0), warp = lid >> 5, lane = lid & 31u, g = lane >> 2, t = lane & 3u;
  const uint bh = attm_head(tiles), tile = attm_rank(tiles);  // heaviest (first keys) first
  const uint b = bh / heads, h = bh % heads;
  const uint j0 = tile * ATTM_ROWS;
  const uint q_base = WM_SHARED(att_tiles), do_base = q_base + ATTM_TILE * 2u;
  __local ushort* qs = att_tiles;
  __local ushort* dos = att_tiles + ATTM_TILE;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);
  dk = att_part(dk, layout, 1, heads, dim, dtype);
  dv = att_part(dv, layout, 2, heads, dim, dtype);

  uint kf[ATTM_KSTEPS][4], vf[ATTM_KSTEPS][4];
  attm_load_tile(qs, ATTM_ROWS, k, dtype, layout, b, h, j0, heads, seq_k, dim);
  attm_load_tile(dos, ATTM_ROWS, v, dtype, layout, b, h, j0, heads, seq_k, dim);
  barrier(CLK_LOCAL_MEM_FENCE);
  ATTM_A_FRAGS(kf, q_base, warp * 16u)
  ATTM_A_FRAGS(vf, do_base, warp * 16u)
  barrier(CLK_LOCAL_MEM_FENCE);

  const uint keys[2] = {j0 + warp * 16u + g, j0 + warp * 16u + g + 8u};
  float dk_acc[ATTM_DTILES][4], dv_acc[ATTM_DTILES][4];
  for (uint dn = 0; dn < ATTM_DTILES; ++dn)
    for (uint e = 0; e < 4; ++e) dk_acc[dn][e] = dv_acc[dn][e] = 0.0f;
  const uint group_begin = att_query_begin(j0, seq_q, seq_k, causal);
  const float scale_log2 = scale * M_LOG2E_F;
  uint first_query[2];  // the first query row that sees each of this lane's keys (seq_q: none)
  for (uint r = 0; r < 2; ++r) {
    first_query[r] = keys[r] < seq_k ? att_query_begin(keys[r], seq_q, seq_k, causal) : seq_q;
  }

  for (uint i0 = group_begin; i0 < seq_q; i0 += ATTM_BQ) {
    attm_load_tile(qs, ATTM_BQ, q, dtype, layout, b, h, i0, heads, seq_q, dim);
    attm_load_tile(dos, ATTM_BQ, dout, dtype, att_out_layout(layout), b, h, i0, heads, seq_q,
                   dim);
    for (uint r = lid; r < ATTM_BQ; r += ATTM_THREADS) {
      const bool active = i0 + r < seq_q;
      lse_s[r] = active ? lse[(ulong)bh * seq_q + i0 + r] * M_LOG2E_F : -INFINITY;  // base 2
      delta_s[r] = active ? delta[(ulong)bh * seq_q + i0 + r] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float st[ATTM_BQ / 8][4], dpt[ATTM_BQ / 8][4];
    ATTM_ROWS_PRODUCT(st, kf, q_base, ATTM_BQ)
    ATTM_ROWS_PRODUCT(dpt, vf, do_base, ATTM_BQ)
    for (uint j = 0; j < ATTM_BQ / 8; ++j)
      for (uint e = 0; e < 4; ++e) {
        const uint ii = j * 8u + 2u * t + (e & 1u);
        // Rows past seq_q and rows without visible keys have lse = -inf: no probability.
        const bool visible = i0 + ii >= first_query[e >> 1] && lse_s[ii] != -INFINITY;
        const float p = visible ? native_exp2(st[j][e] * scale_log2 - lse_s[ii]) : 0.0f;
        st[j][e] = p;
        dpt[j][e] = p * (dpt[j][e] - delta_s[ii]);
      }
    uint pa[ATTM_BQ / 16][4], dsa[ATTM_BQ / 16][4];
    ATTM_PACK(pa, st, ATTM_BQ)
    ATTM_PACK(dsa, dpt, ATTM_BQ)
    ATTM_ACCUMULATE(dv_acc, pa, do_base, ATTM_BQ)
    ATTM_ACCUMULATE(dk_acc, dsa, q_base, ATTM_BQ)
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.0f, 1.0f};
  attm_store_rows(dk, dk_acc, dk_factor, keys[0], t, dtype, layout, b, h, heads, seq_k, dim);
  attm_store_rows(dv, dv_acc, dv_factor, keys[0], t, dtype, layout, b, h, heads, seq_k, dim);
}
