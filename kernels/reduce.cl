// Reductions and broadcasts: column sums over rows, and adds of a periodic (broadcast) operand.
// Indices are 64-bit; the reduction works with any work-group size and has a fixed summation
// order for a given launch geometry (deterministic run to run). The column sums read `in` in
// format RED_IN and write `out` in format RED_OUT (operand_storage.cl; float32 when not set);
// their partial sums stay float32.

#include "operand_storage.cl"
#ifndef RED_IN
#define RED_IN 0
#endif
#ifndef RED_OUT
#define RED_OUT 0
#endif

// Error-free addition (Knuth's TwoSum), four lanes at once: *hi + *lo accumulates value with the
// rounding error of every float addition kept in *lo. While a lane's running sum is not finite
// its error term is dropped, so inf and NaN propagate exactly as in a plain sum.
inline void two_sum_add4(float4* hi, float4* lo, float4 value) {
  const float4 sum = *hi + value;
  const float4 b_virtual = sum - *hi;
  const float4 error = (*hi - (sum - b_virtual)) + (value - b_virtual);
  *lo += select((float4)(0.0f), error, isfinite(sum));
  *hi = sum;
}

// Columns n0 .. n0 + 3 of `row` (n0 < cols), zeros past the last column.
inline float4 load_columns(__global const float* row, ulong n0, ulong cols, int aligned) {
  if (n0 + 4 <= cols) return aligned ? *(__global const float4*)(row + n0) : vload4(0, row + n0);
  float4 v = (float4)(row[n0], 0.0f, 0.0f, 0.0f);
  if (n0 + 1 < cols) v.y = row[n0 + 1];
  if (n0 + 2 < cols) v.z = row[n0 + 2];
  return v;
}

// load_columns of the column-sum input, in its format RED_IN.
#if RED_IN == 0
#define load_input_columns load_columns
#else
inline float4 load_input_columns(__global const ushort* row, ulong n0, ulong cols, int aligned) {
  float4 v = (float4)(OS_LOAD(RED_IN, row, n0), 0.0f, 0.0f, 0.0f);
  if (n0 + 1 < cols) v.y = OS_LOAD(RED_IN, row, n0 + 1);
  if (n0 + 2 < cols) v.z = OS_LOAD(RED_IN, row, n0 + 2);
  if (n0 + 3 < cols) v.w = OS_LOAD(RED_IN, row, n0 + 3);
  return v;
}
#endif

// Folds the ly (hi, lo) pairs of each of the cx lanes x through local memory (lane lid = y * cx
// + x) by a fixed tree; the folded pair of lane x is left in partial_hi[x], partial_lo[x]. Every
// lane calls it.
inline void fold_lanes(__local float4* partial_hi, __local float4* partial_lo, float4 hi,
                       float4 lo, uint lid, uint cx, uint ly) {
  const uint y = lid / cx;
  partial_hi[lid] = hi;
  partial_lo[lid] = lo;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint active = ly; active > 1;) {
    const uint upper = (active + 1) / 2;  // ("half" is a type name)
    if (y + upper < active) {
      const uint other = lid + upper * cx;
      float4 sum_hi = partial_hi[lid];
      float4 sum_lo = partial_lo[lid] + partial_lo[other];
      two_sum_add4(&sum_hi, &sum_lo, partial_hi[other]);
      partial_hi[lid] = sum_hi;
      partial_lo[lid] = sum_lo;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    active = upper;
  }
}

// load_columns of partial sums another work-group of this launch wrote: volatile loads (never a
// stale L1 line of a neighbouring tile's row).
inline float4 load_handed_columns(__global volatile const float* row, ulong n0, ulong cols) {
  float4 v = (float4)(row[n0], 0.0f, 0.0f, 0.0f);
  if (n0 + 1 < cols) v.y = row[n0 + 1];
  if (n0 + 2 < cols) v.z = row[n0 + 2];
  if (n0 + 3 < cols) v.w = row[n0 + 3];
  return v;
}

// Orders this work-item's global memory accesses before and after a hand-off between the
// work-groups of one launch (device scope).
inline void device_fence(void) {
#if ACL_WARP_SHUFFLE  // NVIDIA (compute capability 7.0+): the device-scope fence, in PTX
  __asm__ __volatile__("membar.gl;" ::: "memory");
#else
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
}

// Writes the in-range lanes of v to at[0 .. 3] (columns n0 .. n0 + 3 of cols).
inline void store_columns(__global float* at, float4 v, ulong n0, ulong cols) {
  at[0] = v.x;
  if (n0 + 1 < cols) at[1] = v.y;
  if (n0 + 2 < cols) at[2] = v.z;
  if (n0 + 3 < cols) at[3] = v.w;
}

// store_columns of the column sums, scaled, in out's format RED_OUT.
inline void store_sums(__global OS_TYPE(RED_OUT)* out, float4 v, float scale, ulong n0,
                       ulong cols) {
  v *= scale;
  OS_STORE(RED_OUT, out, n0, v.x);
  if (n0 + 1 < cols) OS_STORE(RED_OUT, out, n0 + 1, v.y);
  if (n0 + 2 < cols) OS_STORE(RED_OUT, out, n0 + 2, v.z);
  if (n0 + 3 < cols) OS_STORE(RED_OUT, out, n0 + 3, v.w);
}

// The chunks' pairs of columns n0 .. n0 + 3 summed (lanes along the chunks: lane y adds chunks
// y, y + ly, ... in ascending order), folded by fold_lanes and stored scaled by lanes y = 0.
// Every lane of the group calls it.
inline void fold_chunks(__global volatile const float* parts, __global OS_TYPE(RED_OUT)* out,
                        ulong cols, ulong chunks, ulong n0, uint lid, uint cx, uint ly,
                        float scale, __local float4* partial_hi, __local float4* partial_lo) {
  float4 hi = (float4)(0.0f), lo = (float4)(0.0f);
  if (n0 < cols) {
    for (ulong c = lid / cx; c < chunks; c += ly) {
      two_sum_add4(&hi, &lo, load_handed_columns(parts + c * cols, n0, cols));
      lo += load_handed_columns(parts + (chunks + c) * cols, n0, cols);
    }
  }
  fold_lanes(partial_hi, partial_lo, hi, lo, lid, cx, ly);
  if (lid < cx && n0 < cols) store_sums(out, partial_hi[lid] + partial_lo[lid], scale, n0, cols);
}

// out[n] = scale * the sum over r < rows of in[r * cols + n], in column tiles
// (execute_reduce_sum_gpu with scale 1, aethercl_binary_backward's sums over leading dimensions).
// A work-group of cx * ly lanes owns the 4 * cx adjacent columns of tile get_group_id(0) over the
// rows of chunk get_group_id(1): [chunk * span, min(rows, chunk * span + span)). Lane (x, y) holds
// columns 4x .. 4x + 3 of the tile as one float4 (a row's tile is read as cx consecutive 16-byte
// loads) and sums rows begin + y, begin + y + ly, ... in ascending order as a float-float pair
// (hi, lo), four rows' loads issued before their additions; the ly pairs of each column are then
// folded by a local-memory tree that handles any ly. With one chunk the sums go to out; otherwise
// chunk c's pairs go to parts[c * cols + n] (hi) and parts[(chunks + c) * cols + n] (lo) and
// reduce_sum_columns_fold adds the chunks, or (fold_here) the tile's last group to store its
// pairs does, in the same launch: counters[tile] counts the tile's groups done (zero at the start;
// that group sets it back to zero). The order depends only on the shape and the launch
// geometry, so results are repeatable. aligned: cols % 4 == 0 (every row's tile starts on 16
// bytes; in is a whole buffer), so whole float4 loads; otherwise vload4 and a scalar tail.
__kernel void reduce_sum_columns_tile(__global const OS_TYPE(RED_IN)* in,
                                      __global OS_TYPE(RED_OUT)* out, __global float* parts,
                                      ulong rows, ulong cols, ulong span, uint cx, int aligned,
                                      float scale, __global volatile uint* counters,
                                      int fold_here, __local float4* partial_hi,
                                      __local float4* partial_lo) {
  __local uint ticket;
  const uint lid = (uint)get_local_id(0);
  const uint ly = (uint)get_local_size(0) / cx;
  const uint y = lid / cx;
  const ulong n0 = (get_group_id(0) * cx + lid % cx) * 4;
  const ulong chunk = get_group_id(1), chunks = get_num_groups(1);
  const ulong end = min(rows, chunk * span + span);
  float4 hi = (float4)(0.0f), lo = (float4)(0.0f);
  if (n0 < cols) {
    ulong r = chunk * span + y;
    for (; r + 3 * (ulong)ly < end; r += 4 * (ulong)ly) {
      const float4 v0 = load_input_columns(in + r * cols, n0, cols, aligned);
      const float4 v1 = load_input_columns(in + (r + ly) * cols, n0, cols, aligned);
      const float4 v2 = load_input_columns(in + (r + 2 * ly) * cols, n0, cols, aligned);
      const float4 v3 = load_input_columns(in + (r + 3 * ly) * cols, n0, cols, aligned);
      two_sum_add4(&hi, &lo, v0);
      two_sum_add4(&hi, &lo, v1);
      two_sum_add4(&hi, &lo, v2);
      two_sum_add4(&hi, &lo, v3);
    }
    for (; r < end; r += ly) {
      two_sum_add4(&hi, &lo, load_input_columns(in + r * cols, n0, cols, aligned));
    }
  }
  fold_lanes(partial_hi, partial_lo, hi, lo, lid, cx, ly);
  const int stores = y == 0 && n0 < cols;
  if (chunks == 1) {
    if (stores) store_sums(out, partial_hi[lid] + partial_lo[lid], scale, n0, cols);
    return;
  }
  if (stores) {
    store_columns(parts + chunk * cols + n0, partial_hi[lid], n0, cols);
    store_columns(parts + (chunks + chunk) * cols + n0, partial_lo[lid], n0, cols);
  }
  if (!fold_here) return;
  device_fence();  // this item's partials before the count
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  const uint tile = (uint)get_group_id(0);
  if (lid == 0) ticket = atomic_inc(&counters[tile]);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ticket != chunks - 1) return;  // the group's whole, alike
  device_fence();  // the other groups' partials after the count
  fold_chunks(parts, out, cols, chunks, n0, lid, cx, ly, scale, partial_hi, partial_lo);
  if (lid == 0) counters[tile] = 0;
}

// out[n] = the sum of the chunks' pairs of column n (the second pass of reduce_sum_columns_tile):
// lane (x, y) of a cx * ly group adds chunks y, y + ly, ... of columns 4x .. 4x + 3 of tile
// get_group_id(0) in ascending order, then the same tree folds the ly pairs.
__kernel void reduce_sum_columns_fold(__global const float* parts,
                                      __global OS_TYPE(RED_OUT)* out, ulong cols, ulong chunks,
                                      uint cx, float scale, __local float4* partial_hi,
                                      __local float4* partial_lo) {
  const uint lid = (uint)get_local_id(0);
  const uint ly = (uint)get_local_size(0) / cx;
  const ulong n0 = (get_group_id(0) * cx + lid % cx) * 4;
  fold_chunks(parts, out, cols, chunks, n0, lid, cx, ly, scale, partial_hi, partial_lo);
}

// c[i] = a[i] + b[i % period]: broadcast_add (period N) and add_broadcast_pe (period S * E). The
// position in the period is kept by one wrapped add per element (the grid's stride modulo the
// period, which is below the period) instead of a 64-bit remainder per element, which took most
// of the time on CPUs and GPUs alike.
__kernel void reduce_add_periodic(__global const float* a, __global const float* b, __global float* c,
                           ulong total, ulong period) {
  const ulong stride = get_global_size(0), step = stride % period;
  ulong j = get_global_id(0) % period;
  for (ulong i = get_global_id(0); i < total; i += stride) {
    c[i] = a[i] + b[j];
    j += step;
    if (j >= period) j -= period;
  }
}

// The CPU form: one work-item per whole period ("row") at a time, the period's elements in order,
// a contiguous loop the CPU compiler vectorises. total is rows * period.
__kernel void reduce_add_periodic_rows(__global const float* a, __global const float* b,
                                       __global float* c, ulong rows, ulong period) {
  for (ulong r = get_global_id(0); r < rows; r += get_global_size(0)) {
    __global const float* ar = a + r * period;
    __global float* cr = c + r * period;
    for (ulong j = 0; j < period; ++j) cr[j] = ar[j] + b[j];
  }
}

// ---- CPU forms of the column sums (float32 in and out): no barriers, each work-item's own
// float16 vector code (PoCL vectorises a kernel's vectors, not a loop over work-items).

// two_sum_add4's float operations on 16 lanes (fabs(sum) < INFINITY is isfinite(sum)).
inline void two_sum_add16(float16* hi, float16* lo, float16 value) {
  const float16 sum = *hi + value;
  const float16 b_virtual = sum - *hi;
  const float16 error = (*hi - (sum - b_virtual)) + (value - b_virtual);
  *lo += select((float16)(0.0f), error, fabs(sum) < (float16)(INFINITY));
  *hi = sum;
}

// two_sum_add4's float operations on one lane.
inline void two_sum_add1(float* hi, float* lo, float value) {
  const float sum = *hi + value;
  const float b_virtual = sum - *hi;
  const float error = (*hi - (sum - b_virtual)) + (value - b_virtual);
  *lo += isfinite(sum) ? error : 0.0f;
  *hi = sum;
}

// Elements p[0 .. width - 1] (width <= 16) as a vector, zeros past them.
inline float16 load_columns16(__global const float* p, ulong width) {
  if (width == 16) return vload16(0, p);
  float lanes[16];
  for (uint c = 0; c < 16; ++c) lanes[c] = c < width ? p[c] : 0.0f;
  return vload16(0, lanes);
}

// Lanes 0 .. width - 1 of v to at[0 .. width - 1].
inline void store_columns16(__global float* at, float16 v, ulong width) {
  float lanes[16];
  vstore16(v, 0, lanes);
  for (uint c = 0; c < width; ++c) at[c] = lanes[c];
}

// Columns per work-item of reduce_sum_columns_lanes (ops/column_lanes.h kColumnBlock): its
// (hi, lo) pairs stay in the core's L1 while it streams whole rows of up to 4 KiB. Rows per load
// and store of a pair: COLUMN_ROWS.
#define COLUMN_BLOCK 1024
#define COLUMN_ROWS 4

// Rows row, row + cols, ... (count of them, at most COLUMN_ROWS) of a block of width columns
// added into its pairs in order: whole vectors in hi16, lo16, the columns past them through hi,
// lo (scalar views of those). Called with a constant count, so the loop over the rows unrolls.
inline void two_sum_rows(float16* hi16, float16* lo16, float* hi, float* lo,
                         __global const float* row, ulong cols, ulong width, uint count) {
  const ulong vectors = width / 16;
  for (ulong q = 0; q < vectors; ++q) {
    float16 h = hi16[q], l = lo16[q];
    for (uint r = 0; r < count; ++r) two_sum_add16(&h, &l, vload16(q, row + r * cols));
    hi16[q] = h;
    lo16[q] = l;
  }
  for (ulong j = vectors * 16; j < width; ++j) {
    for (uint r = 0; r < count; ++r) two_sum_add1(&hi[j], &lo[j], row[r * cols + j]);
  }
}

// out[n] = scale * the sum over r < rows of in[r * cols + n]: work-item (b, c) sums columns
// COLUMN_BLOCK * b .. (fewer at the end) over the rows of chunk c = get_global_id(1),
// [c * span, min(rows, c * span + span)), in ascending order as a float-float pair (hi, lo) per
// column, each row's run added 16 columns at a time (work-items walking narrow strips of columns
// alone read a short run per row, which the hardware prefetchers do not follow). With one chunk
// the sums go to out; otherwise chunk c's pairs go to parts[c * cols + n] (hi) and
// parts[(chunks + c) * cols + n] (lo) and reduce_sum_columns_lanes_fold adds the chunks in
// ascending order. The order depends only on the shape and the chunks (the host's plan).
__kernel void reduce_sum_columns_lanes(__global const float* in, __global float* out,
                                       __global float* parts, ulong rows, ulong cols, ulong span,
                                       float scale) {
  const ulong n0 = get_global_id(0) * COLUMN_BLOCK;
  const ulong chunk = get_global_id(1), chunks = get_global_size(1);
  if (n0 >= cols) return;
  const ulong width = min((ulong)COLUMN_BLOCK, cols - n0);
  const ulong end = min(rows, chunk * span + span);
  // Whole vectors, loaded and stored as such (a vload16 of what two 32-byte stores wrote stalls
  // store forwarding).
  float16 hi16[COLUMN_BLOCK / 16], lo16[COLUMN_BLOCK / 16];
  float* hi = (float*)hi16;
  float* lo = (float*)lo16;
  for (ulong q = 0; q < COLUMN_BLOCK / 16; ++q) hi16[q] = lo16[q] = (float16)(0.0f);
  for (ulong r = chunk * span; r < end; r += COLUMN_ROWS) {
    __global const float* row = in + r * cols + n0;
    if (r + COLUMN_ROWS <= end) two_sum_rows(hi16, lo16, hi, lo, row, cols, width, COLUMN_ROWS);
    else two_sum_rows(hi16, lo16, hi, lo, row, cols, width, (uint)(end - r));
  }
  for (ulong j = 0; j < width; ++j) {
    if (chunks == 1) {
      out[n0 + j] = (hi[j] + lo[j]) * scale;
    } else {
      parts[chunk * cols + n0 + j] = hi[j];
      parts[(chunks + chunk) * cols + n0 + j] = lo[j];
    }
  }
}

// The second pass of reduce_sum_columns_lanes: work-item s adds the chunks' pairs of columns
// 16s .. in ascending order (fold_chunks' operations), then stores the scaled sums.
__kernel void reduce_sum_columns_lanes_fold(__global const float* parts, __global float* out,
                                            ulong cols, ulong chunks, float scale) {
  const ulong n0 = get_global_id(0) * 16;
  if (n0 >= cols) return;
  const ulong width = min((ulong)16, cols - n0);
  float16 hi = (float16)(0.0f), lo = (float16)(0.0f);
  for (ulong c = 0; c < chunks; ++c) {
    two_sum_add16(&hi, &lo, load_columns16(parts + c * cols + n0, width));
    lo += load_columns16(parts + (chunks + c) * cols + n0, width);
  }
  store_columns16(out + n0, (hi + lo) * scale, width);
}
