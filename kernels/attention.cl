// Fused attention (aethercl_attention_forward / _backward), portable form: flash-style tiles in
// local memory, float32 arithmetic for every storage type and compute mode, no seq_q x seq_k
// matrix anywhere. Build options (ops/attention.cpp): ATT_D, head_dim rounded up to a bucket
// (the length of the private row arrays and of a local tile row), and ATT_BK, rows per local tile.
//
// Work decomposition (one 1-D NDRange; group g covers (batch*head) g / tiles, tile g % tiles):
//   attention_forward     one item per query row; K and V tiles of ATT_BK keys in local memory;
//                         online softmax (running max m, running sum l, unnormalised o).
//   attention_row_dot     D_i = sum_d dout[i, d] * o[i, d] (float32), a few items per query row.
//   attention_dkdv        one item per key row; Q and dOut tiles of ATT_BK queries in local memory;
//                         P recomputed from q, k and lse; dv += P dout, dk += dS q.
//   attention_dq          one item per query row; K and V tiles in local memory; dq += dS k.
// Every sum runs in a fixed order inside one work-item: results are the same bits run to run.
// Columns ATT_D > d >= head_dim of the local tiles and private rows hold zeros, so the d loops run
// to the compile-time ATT_D (unrolled on GPUs) without reading garbage.

#include "attention_common.cl"

#ifdef ATT_UNROLL
#define ATT_UNROLL_D _Pragma("unroll")
#else
#define ATT_UNROLL_D
#endif

// Fills rows [0, ATT_BK) of a local tile with zeros (padding columns stay zero afterwards).
inline void att_zero_tile(__local float* tile) {
  for (uint t = get_local_id(0); t < ATT_BK * ATT_D; t += get_local_size(0)) tile[t] = 0.0f;
}

// Copies rows [r0, r0 + n) of one head of src into tile (row stride ATT_D), as float32.
inline void att_load_tile(__local float* tile, __global const uchar* src, int dtype, int layout,
                          uint b, uint h, uint r0, uint n, uint heads, uint seq, uint dim) {
  const uint lid = get_local_id(0), size = get_local_size(0);
  for (uint t = lid; t < n * dim; t += size) {
    const uint r = t / dim, d = t - r * dim;
    tile[r * ATT_D + d] = att_load(src, att_row(layout, b, h, r0 + r, heads, seq, dim) + d, dtype);
  }
}

// Keys and values [j0, j0 + n) of one head into ks and vs for the whole work-group; the barrier
// before keeps the previous tile's readers ahead of these writes, the one after makes them seen.
inline void att_stage_keys_values(__local float* ks, __local float* vs, __global const uchar* k,
                                  __global const uchar* v, int dtype, int layout, uint b, uint h,
                                  uint j0, uint n, uint heads, uint seq_k, uint dim) {
  barrier(CLK_LOCAL_MEM_FENCE);
  att_load_tile(ks, k, dtype, layout, b, h, j0, n, heads, seq_k, dim);
  att_load_tile(vs, v, dtype, layout, b, h, j0, n, heads, seq_k, dim);
  barrier(CLK_LOCAL_MEM_FENCE);
}

inline void att_load_row(float* row, __global const uchar* src, ulong base, uint dim, int dtype) {
  ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) {
    row[d] = d < dim ? att_load(src, base + d, dtype) : 0.0f;
  }
}

inline float att_dot(const float* row, __local const float* tile_row) {
  float sum = 0.0f;
  ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) sum = fma(row[d], tile_row[d], sum);
  return sum;
}

__kernel void attention_forward(__global const uchar* q, __global const uchar* k,
                                __global const uchar* v, __global uchar* o, __global float* lse,
                                int has_lse, uint heads, uint seq_q, uint seq_k, uint dim,
                                int layout, int causal, float scale, int dtype, uint tiles) {
  __local float ks[ATT_BK * ATT_D];
  __local float vs[ATT_BK * ATT_D];
  const uint wg = get_local_size(0), lid = get_local_id(0);
  const uint bh = get_group_id(0) / tiles, tile = get_group_id(0) % tiles;
  const uint b = bh / heads, h = bh % heads;
  const uint i0 = tile * wg, i = i0 + lid;
  const bool active = i < seq_q;
  const uint last = min(i0 + wg, seq_q) - 1;  // the group's last row, which sees the most keys
  const uint group_end = att_key_end(last, seq_q, seq_k, causal);
  const uint my_end = active ? att_key_end(i, seq_q, seq_k, causal) : 0;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);

  float qr[ATT_D], acc[ATT_D], s[ATT_BK];
  att_load_row(qr, q, active ? att_row(layout, b, h, i, heads, seq_q, dim) : 0, active ? dim : 0,
               dtype);
  ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  att_zero_tile(ks);
  att_zero_tile(vs);
  for (uint j0 = 0; j0 < group_end; j0 += ATT_BK) {
    const uint n = min((uint)ATT_BK, group_end - j0);
    att_stage_keys_values(ks, vs, k, v, dtype, layout, b, h, j0, n, heads, seq_k, dim);
    const uint count = my_end > j0 ? min(n, my_end - j0) : 0;
    if (count == 0) continue;
    float tile_max = -INFINITY;
    for (uint jj = 0; jj < count; ++jj) {
      s[jj] = att_dot(qr, ks + jj * ATT_D) * scale;
      tile_max = fmax(tile_max, s[jj]);
    }
    const float m_new = fmax(m, tile_max);
    const float correction = exp(m - m_new);  // 0 on the first tile (m = -inf)
    l *= correction;
    ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) acc[d] *= correction;
    for (uint jj = 0; jj < count; ++jj) {
      const float p = exp(s[jj] - m_new);
      l += p;
      __local const float* vrow = vs + jj * ATT_D;
      ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) acc[d] = fma(p, vrow[d], acc[d]);
    }
    m = m_new;
  }
  if (!active) return;
  // No visible key: o = 0 and lse = -inf (l stays 0).
  const ulong base = att_row(att_out_layout(layout), b, h, i, heads, seq_q, dim);
  for (uint d = 0; d < dim; ++d) att_store(o, base + d, dtype, l > 0.0f ? acc[d] / l : 0.0f);
  if (has_lse) lse[(ulong)bh * seq_q + i] = l > 0.0f ? m + log(l) : -INFINITY;
}

// delta[bh * seq_q + i] = sum_d dout[i, d] o[i, d]; rows = batch * heads * seq_q (grid-stride).
// `lanes` work-items per row (a power of two dividing the group, at most 256 items) read its
// columns lanes apart, so that neighbouring items read neighbouring elements; the row's first
// lane sums the partial sums in lane order.
__kernel void attention_row_dot(__global const uchar* o, __global const uchar* dout,
                                __global float* delta, ulong rows, uint heads, uint seq_q,
                                uint dim, int layout, int dtype, uint lanes) {
  __local float partial[256];
  const uint lid = get_local_id(0), lane = lid % lanes;
  const ulong rows_per_group = get_local_size(0) / lanes;
  for (ulong first = get_group_id(0) * rows_per_group; first < rows;
       first += get_num_groups(0) * rows_per_group) {
    const ulong r = first + lid / lanes;
    float sum = 0.0f;
    if (r < rows) {
      const uint bh = (uint)(r / seq_q), i = (uint)(r % seq_q);
      const ulong base = att_row(att_out_layout(layout), bh / heads, bh % heads, i, heads,
                                 seq_q, dim);
      for (uint d = lane; d < dim; d += lanes) {
        sum = fma(att_load(dout, base + d, dtype), att_load(o, base + d, dtype), sum);
      }
    }
    partial[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && r < rows) {
      float total = 0.0f;
      for (uint l = 0; l < lanes; ++l) total += partial[lid + l];
      delta[r] = total;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// One item per key row j: dv_j = sum_i P_ij dout_i, dk_j = scale sum_i dS_ij q_i with
// P_ij = exp(scale q_i.k_j - lse_i) and dS_ij = P_ij (dout_i.v_j - D_i).
__kernel void attention_dkdv(__global const uchar* q, __global const uchar* k,
                             __global const uchar* v, __global const float* lse,
                             __global const float* delta, __global const uchar* dout,
                             __global uchar* dk, __global uchar* dv, uint heads, uint seq_q,
                             uint seq_k, uint dim, int layout, int causal, float scale,
                             int dtype, uint tiles) {
  __local float qs[ATT_BK * ATT_D];
  __local float dos[ATT_BK * ATT_D];
  __local float lse_s[ATT_BK];
  __local float delta_s[ATT_BK];
  const uint wg = get_local_size(0), lid = get_local_id(0);
  const uint bh = get_group_id(0) / tiles, tile = get_group_id(0) % tiles;
  const uint b = bh / heads, h = bh % heads;
  const uint j0 = tile * wg, j = j0 + lid;
  const bool active = j < seq_k;
  const uint group_begin = att_query_begin(j0, seq_q, seq_k, causal);
  const uint my_begin = active ? att_query_begin(j, seq_q, seq_k, causal) : seq_q;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);
  dk = att_part(dk, layout, 1, heads, dim, dtype);
  dv = att_part(dv, layout, 2, heads, dim, dtype);

  float kr[ATT_D], vr[ATT_D], dkr[ATT_D], dvr[ATT_D];
  const ulong base = active ? att_row(layout, b, h, j, heads, seq_k, dim) : 0;
  att_load_row(kr, k, base, active ? dim : 0, dtype);
  att_load_row(vr, v, base, active ? dim : 0, dtype);
  ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) dkr[d] = dvr[d] = 0.0f;
  att_zero_tile(qs);
  att_zero_tile(dos);
  for (uint i0 = group_begin; i0 < seq_q; i0 += ATT_BK) {
    const uint n = min((uint)ATT_BK, seq_q - i0);
    barrier(CLK_LOCAL_MEM_FENCE);
    att_load_tile(qs, q, dtype, layout, b, h, i0, n, heads, seq_q, dim);
    att_load_tile(dos, dout, dtype, att_out_layout(layout), b, h, i0, n, heads, seq_q, dim);
    for (uint t = lid; t < n; t += wg) {
      lse_s[t] = lse[(ulong)bh * seq_q + i0 + t];
      delta_s[t] = delta[(ulong)bh * seq_q + i0 + t];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint ii = my_begin > i0 ? my_begin - i0 : 0; ii < n; ++ii) {
      const float row_lse = lse_s[ii];
      if (row_lse == -INFINITY) continue;  // a row without visible keys has no probabilities
      __local const float* qrow = qs + ii * ATT_D;
      __local const float* dorow = dos + ii * ATT_D;
      const float p = exp(att_dot(kr, qrow) * scale - row_lse);
      const float ds = p * (att_dot(vr, dorow) - delta_s[ii]);
      ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) {
        dvr[d] = fma(p, dorow[d], dvr[d]);
        dkr[d] = fma(ds, qrow[d], dkr[d]);
      }
    }
  }
  if (!active) return;
  for (uint d = 0; d < dim; ++d) {
    att_store(dk, base + d, dtype, dkr[d] * scale);
    att_store(dv, base + d, dtype, dvr[d]);
  }
}

// One item per query row i: dq_i = scale sum_j dS_ij k_j.
__kernel void attention_dq(__global const uchar* q, __global const uchar* k,
                           __global const uchar* v, __global const float* lse,
                           __global const float* delta, __global const uchar* dout,
                           __global uchar* dq, uint heads, uint seq_q, uint seq_k, uint dim,
                           int layout, int causal, float scale, int dtype, uint tiles) {
  __local float ks[ATT_BK * ATT_D];
  __local float vs[ATT_BK * ATT_D];
  const uint wg = get_local_size(0), lid = get_local_id(0);
  const uint bh = get_group_id(0) / tiles, tile = get_group_id(0) % tiles;
  const uint b = bh / heads, h = bh % heads;
  const uint i0 = tile * wg, i = i0 + lid;
  const bool active = i < seq_q;
  const uint last = min(i0 + wg, seq_q) - 1;
  const uint group_end = att_key_end(last, seq_q, seq_k, causal);
  const float row_lse = active ? lse[(ulong)bh * seq_q + i] : -INFINITY;
  // A row without visible keys (lse = -inf) gets dq = 0.
  const uint my_end = active && row_lse != -INFINITY ? att_key_end(i, seq_q, seq_k, causal) : 0;
  const float row_delta = active ? delta[(ulong)bh * seq_q + i] : 0.0f;
  k = att_part(k, layout, 1, heads, dim, dtype);
  v = att_part(v, layout, 2, heads, dim, dtype);

  float qr[ATT_D], dor[ATT_D], acc[ATT_D];
  const ulong base = active ? att_row(layout, b, h, i, heads, seq_q, dim) : 0;
  const ulong out_base =
      active ? att_row(att_out_layout(layout), b, h, i, heads, seq_q, dim) : 0;
  att_load_row(qr, q, base, active ? dim : 0, dtype);
  att_load_row(dor, dout, out_base, active ? dim : 0, dtype);
  ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) acc[d] = 0.0f;
  att_zero_tile(ks);
  att_zero_tile(vs);
  for (uint j0 = 0; j0 < group_end; j0 += ATT_BK) {
    const uint n = min((uint)ATT_BK, group_end - j0);
    att_stage_keys_values(ks, vs, k, v, dtype, layout, b, h, j0, n, heads, seq_k, dim);
    const uint count = my_end > j0 ? min(n, my_end - j0) : 0;
    for (uint jj = 0; jj < count; ++jj) {
      __local const float* krow = ks + jj * ATT_D;
      const float p = exp(att_dot(qr, krow) * scale - row_lse);
      const float ds = p * (att_dot(dor, vs + jj * ATT_D) - row_delta);
      ATT_UNROLL_D for (uint d = 0; d < ATT_D; ++d) acc[d] = fma(ds, krow[d], acc[d]);
    }
  }
  if (!active) return;
  for (uint d = 0; d < dim; ++d) att_store(dq, base + d, dtype, acc[d] * scale);
}
