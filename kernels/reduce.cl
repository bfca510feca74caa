// Reductions and broadcasts: column sums over rows, and adds of a periodic (broadcast) operand.
// Indices are 64-bit; the reduction works with any work-group size and has a fixed summation
// order for a given launch geometry (deterministic run to run).

// Error-free addition (Knuth's TwoSum): *hi + *lo accumulates value with the rounding error of
// every float addition kept in *lo. While the running sum is not finite the error term is dropped,
// so inf and NaN propagate exactly as in a plain sum.
inline void two_sum_add(float* hi, float* lo, float value) {
  const float sum = *hi + value;
  const float b_virtual = sum - *hi;
  const float error = (*hi - (sum - b_virtual)) + (value - b_virtual);
  *lo += isfinite(sum) ? error : 0.0f;
  *hi = sum;
}

// out[n] = sum over r < rows of in[r * cols + n].
// A work-group of cx * ly lanes owns cx adjacent columns (grid-stride over column blocks): lane
// (x, y) sums rows y, y + ly, ... of column x as a float-float pair (hi, lo), then the ly pairs of
// each column are folded in local memory by a tree that handles any ly (not only powers of two).
// The order is fixed by the launch geometry, so results are repeatable; no fp64 is needed. Lanes
// past the last column still take part in every barrier.
__kernel void reduce_sum_columns(__global const float* in, __global float* out, ulong rows,
                                 ulong cols, uint cx, __local float* partial_hi,
                                 __local float* partial_lo) {
  const uint lid = (uint)get_local_id(0);
  const uint ly = (uint)get_local_size(0) / cx;
  const uint x = lid % cx;
  const uint y = lid / cx;

  for (ulong block = get_group_id(0); block * cx < cols; block += get_num_groups(0)) {
    const ulong n = block * cx + x;
    float hi = 0.0f;
    float lo = 0.0f;
    if (n < cols) {
      for (ulong r = y; r < rows; r += ly) two_sum_add(&hi, &lo, in[r * cols + n]);
    }
    partial_hi[lid] = hi;
    partial_lo[lid] = lo;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint active = ly; active > 1;) {
      const uint upper = (active + 1) / 2;  // ("half" is a type name)
      if (y + upper < active) {
        const uint other = lid + upper * cx;
        float sum_hi = partial_hi[lid];
        float sum_lo = partial_lo[lid] + partial_lo[other];
        two_sum_add(&sum_hi, &sum_lo, partial_hi[other]);
        partial_hi[lid] = sum_hi;
        partial_lo[lid] = sum_lo;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      active = upper;
    }
    if (y == 0 && n < cols) out[n] = partial_hi[x] + partial_lo[x];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// The two-level column sum of tall inputs (driver/ops/reduce.cpp picks it where one work-group per
// column block would leave the device idle): pass 1 cuts the rows into `blocks` spans of
// `span` rows; work-item (n, block) sums rows [block * span, ...) of column n in ascending order
// as a float-float pair into parts[block * cols + n] (hi) and parts[(blocks + block) * cols + n]
// (lo). Consecutive work-items read consecutive columns of a row (coalesced); four rows' loads are
// issued before their additions. Pass 2 folds each column's blocks in ascending order. The spans
// depend only on the shape and the device, so results are repeatable run to run.
__kernel void reduce_sum_columns_partial(__global const float* in, __global float* parts,
                                         ulong rows, ulong cols, ulong span) {
  const ulong n = get_global_id(0);
  const ulong block = get_global_id(1);
  const ulong blocks = get_global_size(1);
  if (n >= cols) return;
  const ulong begin = block * span;
  const ulong end = min(rows, begin + span);
  float hi = 0.0f;
  float lo = 0.0f;
  __global const float* at = in + begin * cols + n;
  ulong r = begin;
  for (; r + 4 <= end; r += 4, at += 4 * cols) {
    const float v0 = at[0], v1 = at[cols], v2 = at[2 * cols], v3 = at[3 * cols];
    two_sum_add(&hi, &lo, v0);
    two_sum_add(&hi, &lo, v1);
    two_sum_add(&hi, &lo, v2);
    two_sum_add(&hi, &lo, v3);
  }
  for (; r < end; ++r, at += cols) two_sum_add(&hi, &lo, at[0]);
  parts[block * cols + n] = hi;
  parts[(blocks + block) * cols + n] = lo;
}

__kernel void reduce_sum_columns_fold(__global const float* parts, __global float* out,
                                      ulong cols, ulong blocks) {
  for (ulong n = get_global_id(0); n < cols; n += get_global_size(0)) {
    float hi = 0.0f;
    float lo = 0.0f;
    for (ulong block = 0; block < blocks; ++block) {
      two_sum_add(&hi, &lo, parts[block * cols + n]);
      lo += parts[(blocks + block) * cols + n];
    }
    out[n] = hi + lo;
  }
}

// c[i] = a[i] + b[i % period]: broadcast_add (period N) and add_broadcast_pe (period S * E).
__kernel void reduce_add_periodic(__global const float* a, __global const float* b, __global float* c,
                           ulong total, ulong period) {
  for (ulong i = get_global_id(0); i < total; i += get_global_size(0)) {
    c[i] = a[i] + b[i % period];
  }
}
