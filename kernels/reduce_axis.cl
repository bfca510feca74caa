// Reductions of one axis of a tensor viewed as (outer, len, inner) into (outer, inner), and their
// backward. op codes are aethercl_reduce_op: 0 sum, 1 mean, 2 max, 3 min, 4 argmax, 5 argmin.
// MAX/MIN propagate NaN; the ARG ops pick the first index of the extreme value, a NaN counting as
// the extreme. Sums accumulate in acc_t in ascending order per lane and a fixed tree across lanes.

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
typedef double4 acc4_t;
#define convert_acc4_t convert_double4
#else
typedef float acc_t;
typedef float4 acc4_t;
#define convert_acc4_t convert_float4
#endif

#define OP_SUM 0
#define OP_MEAN 1
#define OP_MAX 2
#define OP_MIN 3
#define OP_ARGMAX 4
#define OP_ARGMIN 5

// True when (v2, i2) beats (v1, i1): a NaN wins, then the larger (max) or smaller (min) value,
// then the smaller index.
inline bool beats(float v1, int i1, float v2, int i2, int want_max) {
  const bool n1 = isnan(v1), n2 = isnan(v2);
  if (n1 || n2) return n2 && (!n1 || i2 < i1);
  if (v2 != v1) return want_max ? v2 > v1 : v2 < v1;
  return i2 < i1;
}

inline int wants_max(int op) { return op == OP_MAX || op == OP_ARGMAX; }

inline void store(__global float* y, __global int* y_index, ulong at, int op, acc_t sum,
                  ulong len, float best, int best_index) {
  if (op == OP_SUM) y[at] = (float)sum;
  else if (op == OP_MEAN) y[at] = (float)(sum / (acc_t)len);
  else if (op == OP_MAX || op == OP_MIN) y[at] = best;
  else y_index[at] = best_index;
}

// One work-item per output element, walking the axis in ascending order.
__kernel void reduce_axis_items(__global const float* x, __global float* y,
                                __global int* y_index, ulong outer, ulong len, ulong inner,
                                int op) {
  const ulong outputs = outer * inner;
  for (ulong out = get_global_id(0); out < outputs; out += get_global_size(0)) {
    const ulong o = out / inner, i = out % inner;
    __global const float* base = x + o * len * inner + i;
    acc_t sum = 0;
    float best = len > 0 ? base[0] : 0.0f;
    int best_index = 0;
    if (op == OP_SUM || op == OP_MEAN) {
      for (ulong k = 0; k < len; ++k) sum += (acc_t)base[k * inner];
    } else {
      const int want_max = wants_max(op);
      for (ulong k = 1; k < len; ++k) {
        const float v = base[k * inner];
        if (beats(best, best_index, v, (int)k, want_max)) {
          best = v;
          best_index = (int)k;
        }
      }
    }
    store(y, y_index, out, op, sum, len, best, best_index);
  }
}

// Reductions over a non-innermost axis (inner > 1) in tiles, the layout of kernels/reduce.cl's
// column sums: a work-group of cx * ly lanes owns 4 * cx adjacent inner positions of one outer
// index over one chunk [chunk * span, ...) of the axis. Lane (x, y) holds positions 4x .. 4x + 3
// as four lanes of a vector (a row of the tile is cx consecutive 16-byte loads) and walks axis
// indices begin + y, begin + y + ly, ... in ascending order; a fixed local-memory tree folds the ly
// lanes. Virtual group g is tile g % tiles, chunk (g / tiles) % chunks, outer g / (tiles * chunks),
// walked group-stride. One chunk stores the outputs; otherwise chunk c's sum, best value and index
// go to the partials at (o * chunks + c) * inner + i, which reduce_axis_tiles_fold folds. The
// order depends only on the shape and the launch geometry (sums repeat bit for bit); MAX/MIN/ARG
// results do not depend on the order at all (beats is a total order on (value, index)).
// aligned: inner % 4 == 0, so every row of a tile starts on 16 bytes (x is a whole buffer).

// Positions i0 .. i0 + 3 of `row` (i0 < inner), zeros past the last.
inline float4 load_inner(__global const float* row, ulong i0, ulong inner, int aligned) {
  if (i0 + 4 <= inner) return aligned ? *(__global const float4*)(row + i0) : vload4(0, row + i0);
  float4 v = (float4)(row[i0], 0.0f, 0.0f, 0.0f);
  if (i0 + 1 < inner) v.y = row[i0 + 1];
  if (i0 + 2 < inner) v.z = row[i0 + 2];
  return v;
}

// (best, index) takes (v, k) when it beats it; index < 0 marks a lane with nothing yet.
inline void take_best(float* best, int* index, float v, int k, int want_max) {
  if (k >= 0 && (*index < 0 || beats(*best, *index, v, k, want_max))) {
    *best = v;
    *index = k;
  }
}

// take_best on each lane (OpenCL C has no address of a vector element).
#define TAKE_LANE(c)                                \
  {                                                 \
    float b = best->c;                              \
    int i = index->c;                               \
    take_best(&b, &i, v.c, k.c, want_max);          \
    best->c = b;                                    \
    index->c = i;                                   \
  }
inline void take_best4(float4* best, int4* index, float4 v, int4 k, int want_max) {
  TAKE_LANE(x) TAKE_LANE(y) TAKE_LANE(z) TAKE_LANE(w)
}
#undef TAKE_LANE

// Row k of a lane's four positions into its sum or its best values and indices.
inline void accumulate(acc4_t* sum, float4* best, int4* index, float4 v, ulong k, bool summing,
                       int want_max) {
  if (summing) *sum += convert_acc4_t(v);
  else take_best4(best, index, v, (int4)((int)k), want_max);
}

// Lane i's four sums in local memory, kept as scalars sums[4i .. 4i + 3] (NVIDIA's compiler has
// failed on double vectors in local memory; see kernels/rowwise.cl).
inline acc4_t local_sums(__local const acc_t* sums, uint i) {
  return (acc4_t)(sums[4 * i], sums[4 * i + 1], sums[4 * i + 2], sums[4 * i + 3]);
}

inline void set_local_sums(__local acc_t* sums, uint i, acc4_t value) {
  sums[4 * i] = value.x;
  sums[4 * i + 1] = value.y;
  sums[4 * i + 2] = value.z;
  sums[4 * i + 3] = value.w;
}

// Folds the ly lanes of each of the cx lanes x (lid = y * cx + x) by a fixed tree, leaving lane
// x's result in sums[x] (summing) or values[x], indices[x] (the others). Every lane calls it.
inline void fold_axis_lanes(__local acc_t* sums, __local float4* values, __local int4* indices,
                            acc4_t sum, float4 best, int4 index, uint lid, uint cx, uint ly,
                            bool summing, int want_max) {
  const uint y = lid / cx;
  set_local_sums(sums, lid, sum);
  values[lid] = best;
  indices[lid] = index;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint active = ly; active > 1;) {
    const uint upper = (active + 1) / 2;
    if (y + upper < active && summing) {
      set_local_sums(sums, lid, local_sums(sums, lid) + local_sums(sums, lid + upper * cx));
    } else if (y + upper < active) {
      const uint other = lid + upper * cx;
      float4 v = values[lid];
      int4 k = indices[lid];
      take_best4(&v, &k, values[other], indices[other], want_max);
      values[lid] = v;
      indices[lid] = k;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    active = upper;
  }
}

// Stores the in-range lanes of a tile's result at `at` .. at + 3 (positions i0 .. of inner): the
// outputs, or with `partial` the chunk's partials.
inline void store_tile(__global float* y, __global int* y_index, __global acc_t* part_sums,
                       __global float* part_values, __global int* part_indices, int partial,
                       ulong at, ulong i0, ulong inner, int op, ulong len, acc4_t sum,
                       float4 best, int4 index) {
  const acc_t s[4] = {sum.x, sum.y, sum.z, sum.w};
  const float b[4] = {best.x, best.y, best.z, best.w};
  const int k[4] = {index.x, index.y, index.z, index.w};
  for (uint c = 0; c < 4 && i0 + c < inner; ++c) {
    if (partial) {
      part_sums[at + c] = s[c];
      part_values[at + c] = b[c];
      part_indices[at + c] = k[c];
    } else {
      store(y, y_index, at + c, op, s[c], len, b[c], k[c]);
    }
  }
}

__kernel void reduce_axis_tiles(__global const float* x, __global float* y, __global int* y_index,
                                __global acc_t* part_sums, __global float* part_values,
                                __global int* part_indices, ulong outer, ulong len, ulong inner,
                                ulong tiles, ulong chunks, ulong span, uint cx, int aligned,
                                int op, __local acc_t* sums, __local float4* values,
                                __local int4* indices) {
  const uint lid = (uint)get_local_id(0);
  const uint ly = (uint)get_local_size(0) / cx;
  const uint ylane = lid / cx;
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong g = get_group_id(0); g < tiles * chunks * outer; g += get_num_groups(0)) {
    const ulong i0 = ((g % tiles) * cx + lid % cx) * 4;
    const ulong chunk = (g / tiles) % chunks, o = g / (tiles * chunks);
    const ulong end = min(len, chunk * span + span);
    __global const float* base = x + o * len * inner;
    acc4_t sum = (acc4_t)(0);
    float4 best = (float4)(0.0f);
    int4 index = (int4)(-1);
    if (i0 < inner) {
      ulong k = chunk * span + ylane;
      for (; k + 3 * (ulong)ly < end; k += 4 * (ulong)ly) {  // four rows' loads, then their use
        const float4 v0 = load_inner(base + k * inner, i0, inner, aligned);
        const float4 v1 = load_inner(base + (k + ly) * inner, i0, inner, aligned);
        const float4 v2 = load_inner(base + (k + 2 * ly) * inner, i0, inner, aligned);
        const float4 v3 = load_inner(base + (k + 3 * ly) * inner, i0, inner, aligned);
        accumulate(&sum, &best, &index, v0, k, summing, want_max);
        accumulate(&sum, &best, &index, v1, k + ly, summing, want_max);
        accumulate(&sum, &best, &index, v2, k + 2 * ly, summing, want_max);
        accumulate(&sum, &best, &index, v3, k + 3 * ly, summing, want_max);
      }
      for (; k < end; k += ly) {
        accumulate(&sum, &best, &index, load_inner(base + k * inner, i0, inner, aligned), k,
                   summing, want_max);
      }
    }
    fold_axis_lanes(sums, values, indices, sum, best, index, lid, cx, ly, summing, want_max);
    if (ylane == 0 && i0 < inner) {
      const int partial = chunks > 1;
      const ulong at = partial ? (o * chunks + chunk) * inner + i0 : o * inner + i0;
      store_tile(y, y_index, part_sums, part_values, part_indices, partial, at, i0, inner, op, len,
                 local_sums(sums, lid), values[lid], indices[lid]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// The second pass of reduce_axis_tiles: virtual group g is tile g % tiles of outer index
// g / tiles; lane (x, y) folds chunks y, y + ly, ... of its four positions in ascending order,
// then the tree folds the ly lanes and the outputs are stored.
__kernel void reduce_axis_tiles_fold(__global const acc_t* part_sums,
                                     __global const float* part_values,
                                     __global const int* part_indices, __global float* y,
                                     __global int* y_index, ulong outer, ulong len, ulong inner,
                                     ulong tiles, ulong chunks, uint cx, int op,
                                     __local acc_t* sums, __local float4* values,
                                     __local int4* indices) {
  const uint lid = (uint)get_local_id(0);
  const uint ly = (uint)get_local_size(0) / cx;
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong g = get_group_id(0); g < tiles * outer; g += get_num_groups(0)) {
    const ulong i0 = ((g % tiles) * cx + lid % cx) * 4;
    const ulong o = g / tiles;
    acc4_t sum = (acc4_t)(0);
    float4 best = (float4)(0.0f);
    int4 index = (int4)(-1);
    if (i0 < inner) {
      for (ulong c = lid / cx; c < chunks; c += ly) {
        const ulong at = (o * chunks + c) * inner + i0;
        acc4_t s4 = (acc4_t)(0);
        float4 v4 = (float4)(0.0f);
        int4 k4 = (int4)(-1);
        s4.x = part_sums[at];
        v4.x = part_values[at];
        k4.x = part_indices[at];
        if (i0 + 1 < inner) {
          s4.y = part_sums[at + 1];
          v4.y = part_values[at + 1];
          k4.y = part_indices[at + 1];
        }
        if (i0 + 2 < inner) {
          s4.z = part_sums[at + 2];
          v4.z = part_values[at + 2];
          k4.z = part_indices[at + 2];
        }
        if (i0 + 3 < inner) {
          s4.w = part_sums[at + 3];
          v4.w = part_values[at + 3];
          k4.w = part_indices[at + 3];
        }
        sum += s4;
        take_best4(&best, &index, v4, k4, want_max);
      }
    }
    fold_axis_lanes(sums, values, indices, sum, best, index, lid, cx, ly, summing, want_max);
    if (lid < cx && i0 < inner) {
      store_tile(y, y_index, 0, 0, 0, 0, o * inner + i0, i0, inner, op, len,
                 local_sums(sums, lid), values[lid], indices[lid]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// One work-group per output row when inner == 1: strided partials, then a fixed-order tree.
// Local size is a power of two; sums, values and indices hold one entry per item. aligned:
// len % 4 == 0, so every row starts on 16 bytes (x is a whole buffer) and items read float4s.
__kernel void reduce_axis_groups(__global const float* x, __global float* y,
                                 __global int* y_index, ulong outer, ulong len, int op,
                                 int aligned, __local acc_t* sums, __local float* values,
                                 __local int* indices) {
  const uint lid = get_local_id(0), size = get_local_size(0);
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong row = get_group_id(0); row < outer; row += get_num_groups(0)) {
    __global const float* base = x + row * len;
    acc_t sum = 0;
    float best = NAN;
    int best_index = -1;
    if (aligned) {
      // Items take whole float4s: element 4q + c of the row for q = lid, lid + size, ...
      __global const float4* row4 = (__global const float4*)base;
#pragma unroll 4
      for (ulong q = lid; q < len / 4; q += size) {
        const float4 v = row4[q];
        if (summing) {
          sum += (acc_t)v.x;
          sum += (acc_t)v.y;
          sum += (acc_t)v.z;
          sum += (acc_t)v.w;
        } else {
          take_best(&best, &best_index, v.x, (int)(4 * q), want_max);
          take_best(&best, &best_index, v.y, (int)(4 * q + 1), want_max);
          take_best(&best, &best_index, v.z, (int)(4 * q + 2), want_max);
          take_best(&best, &best_index, v.w, (int)(4 * q + 3), want_max);
        }
      }
    } else {
      for (ulong k = lid; k < len; k += size) {
        const float v = base[k];
        if (summing) sum += (acc_t)v;
        else take_best(&best, &best_index, v, (int)k, want_max);
      }
    }
    sums[lid] = sum;
    values[lid] = best;
    indices[lid] = best_index;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint step = size >> 1; step > 0; step >>= 1) {
      if (lid < step && summing) {
        sums[lid] += sums[lid + step];
      } else if (lid < step) {
        const int other = indices[lid + step];
        if (other >= 0 && (indices[lid] < 0 ||
                           beats(values[lid], indices[lid], values[lid + step], other, want_max))) {
          values[lid] = values[lid + step];
          indices[lid] = other;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) store(y, y_index, row, op, sums[0], len, values[0], indices[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// dx over (outer, len, inner): SUM broadcasts dy, MEAN dy / len, MAX/MIN route dy to the index
// recorded in picked (outer, inner).
__kernel void reduce_axis_backward(__global const float* dy, __global const int* picked,
                                   __global float* dx, ulong outer, ulong len, ulong inner,
                                   int op) {
  const ulong count = outer * len * inner;
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong i = e % inner;
    const ulong k = (e / inner) % len;
    const ulong o = e / (inner * len);
    const ulong out = o * inner + i;
    float value;
    if (op == OP_SUM) value = dy[out];
    else if (op == OP_MEAN) value = (float)((acc_t)dy[out] / (acc_t)len);
    else value = picked[out] == (int)k ? dy[out] : 0.0f;
    dx[e] = value;
  }
}

// ---- CPU forms (SUM, MEAN, MAX, MIN): no barriers, each work-item's own float16 vector code
// (PoCL vectorises a kernel's vectors, not a loop over work-items). Sums accumulate in acc_t;
// MAX/MIN keep the first index's value exactly as beats does, so their bits match the GPU forms.
#if AETHERCL_FP64
typedef double8 acc8_t;
#define convert_acc8_t convert_double8
#else
typedef float8 acc8_t;
#define convert_acc8_t convert_float8
#endif

// Lanes where (v, a later index) beats best under beats' rule: a NaN over a number, then the
// larger (max) or smaller (min) value; ties keep best, the earlier index.
inline int16 later_beats(float16 best, float16 v, int want_max) {
  const int16 nan_over_number = (v != v) & (best == best);
  return nan_over_number | (want_max ? v > best : v < best);
}

// Inner positions per work-item of reduce_axis_lanes (ops/column_lanes.h kColumnBlock): its
// accumulators stay in the core's L1 while it streams whole rows of up to 4 KiB. Rows per load
// and store of an accumulator: AXIS_ROWS.
#define AXIS_BLOCK 1024
#define AXIS_ROWS 4

// Rows row, row + inner, ... (count of them, at most AXIS_ROWS) of a block of width positions
// added into its sums in order: whole vectors in sum8, the positions past them through sums (a
// scalar view of sum8). Called with a constant count, so the loop over the rows unrolls.
inline void add_rows(acc8_t* sum8, acc_t* sums, __global const float* row, ulong inner,
                     ulong width, uint count) {
  const ulong vectors = width / 16;
  for (ulong q = 0; q < vectors; ++q) {
    acc8_t lo = sum8[2 * q], hi = sum8[2 * q + 1];
    for (uint r = 0; r < count; ++r) {
      const float16 v = vload16(q, row + r * inner);
      lo += convert_acc8_t(v.lo);
      hi += convert_acc8_t(v.hi);
    }
    sum8[2 * q] = lo;
    sum8[2 * q + 1] = hi;
  }
  for (ulong j = vectors * 16; j < width; ++j) {
    for (uint r = 0; r < count; ++r) sums[j] += (acc_t)row[r * inner + j];
  }
}

// add_rows for MAX/MIN: each position takes a later row's value when it beats the one held.
inline void take_rows(float16* best16, float* values, __global const float* row, ulong inner,
                      ulong width, uint count, int want_max) {
  const ulong vectors = width / 16;
  for (ulong q = 0; q < vectors; ++q) {
    float16 best = best16[q];
    for (uint r = 0; r < count; ++r) {
      const float16 v = vload16(q, row + r * inner);
      best = select(best, v, later_beats(best, v, want_max));
    }
    best16[q] = best;
  }
  for (ulong j = vectors * 16; j < width; ++j) {
    for (uint r = 0; r < count; ++r) {
      const float v = row[r * inner + j];
      if (beats(values[j], 0, v, 1, want_max)) values[j] = v;
    }
  }
}

// A work-item per block of AXIS_BLOCK inner positions i0 = AXIS_BLOCK * get_global_id(0) ..
// (fewer at the end) and per slab get_global_id(1) = o * chunks + chunk: the axis indices of its
// chunk, [chunk * span, min(len, chunk * span + span)), in ascending order, each row's run added
// into the block's accumulators 16 positions at a time. Work-items walking narrow strips of
// columns alone read a short run per row, which the hardware prefetchers do not follow. One
// chunk stores the outputs; otherwise the chunk's sums or values go to the partials at
// (o * chunks + chunk) * inner + i, as reduce_axis_tiles' do, and reduce_axis_lanes_fold adds
// them.
__kernel void reduce_axis_lanes(__global const float* x, __global float* y,
                                __global acc_t* part_sums, __global float* part_values,
                                ulong outer, ulong len, ulong inner, ulong chunks, ulong span,
                                int op) {
  const ulong i0 = get_global_id(0) * AXIS_BLOCK;
  const ulong slab = get_global_id(1);
  if (i0 >= inner || slab >= outer * chunks) return;
  const ulong o = slab / chunks, chunk = slab % chunks;
  const ulong width = min((ulong)AXIS_BLOCK, inner - i0);
  const ulong begin = chunk * span, end = min(len, begin + span);
  __global const float* base = x + o * len * inner + i0;
  const bool summing = op == OP_SUM || op == OP_MEAN;
  const int want_max = wants_max(op);
  // Whole vectors, loaded and stored as such (a vload16 of what two 32-byte stores wrote stalls
  // store forwarding).
  acc8_t sum8[AXIS_BLOCK / 8];
  float16 best16[AXIS_BLOCK / 16];
  acc_t* sums = (acc_t*)sum8;
  float* values = (float*)best16;
  if (summing) {
    for (ulong j = 0; j < AXIS_BLOCK / 8; ++j) sum8[j] = (acc8_t)(0);
    for (ulong k = begin; k < end; k += AXIS_ROWS) {
      if (k + AXIS_ROWS <= end) add_rows(sum8, sums, base + k * inner, inner, width, AXIS_ROWS);
      else add_rows(sum8, sums, base + k * inner, inner, width, (uint)(end - k));
    }
  } else {
    for (ulong j = 0; j < width; ++j) values[j] = base[begin * inner + j];
    for (ulong k = begin + 1; k < end; k += AXIS_ROWS) {
      __global const float* row = base + k * inner;
      if (k + AXIS_ROWS <= end) take_rows(best16, values, row, inner, width, AXIS_ROWS, want_max);
      else take_rows(best16, values, row, inner, width, (uint)(end - k), want_max);
    }
  }
  const int partial = chunks > 1;
  const ulong at = partial ? slab * inner + i0 : o * inner + i0;
  for (ulong j = 0; j < width; ++j) {
    if (partial && summing) {
      part_sums[at + j] = sums[j];
    } else if (partial) {
      part_values[at + j] = values[j];
    } else {
      store(y, 0, at + j, op, sums[j], len, values[j], 0);
    }
  }
}

// The second pass of reduce_axis_lanes: one work-item per output (o, i) adds the chunks' sums in
// ascending order, or takes their values by the same rule.
__kernel void reduce_axis_lanes_fold(__global const acc_t* part_sums,
                                     __global const float* part_values, __global float* y,
                                     ulong outer, ulong len, ulong inner, ulong chunks, int op) {
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong out = get_global_id(0); out < outer * inner; out += get_global_size(0)) {
    const ulong o = out / inner, i = out % inner;
    const ulong first = o * chunks * inner + i;
    acc_t sum = 0;
    float best = 0.0f;
    if (summing) {
      for (ulong c = 0; c < chunks; ++c) sum += part_sums[first + c * inner];
    } else {
      best = part_values[first];
      for (ulong c = 1; c < chunks; ++c) {
        if (beats(best, 0, part_values[first + c * inner], 1, want_max)) {
          best = part_values[first + c * inner];
        }
      }
    }
    store(y, 0, out, op, sum, len, best, 0);
  }
}

// A work-item per row (inner == 1, len > 0): the row in float16 vectors, lane j taking elements
// j, j + 16, ... (sums as two acc8_t halves folded in a fixed order; values with their indices,
// folded by beats), then the tail in ascending order.
__kernel void reduce_axis_rows_lanes(__global const float* x, __global float* y, ulong outer,
                                     ulong len, int op) {
  const ulong vectors = len / 16;
  const int want_max = wants_max(op);
  for (ulong row = get_global_id(0); row < outer; row += get_global_size(0)) {
    __global const float* xr = x + row * len;
    acc_t sum = 0;
    float best = xr[0];
    int best_index = 0;
    if (op == OP_SUM || op == OP_MEAN) {
      acc8_t lo = (acc8_t)(0), hi = (acc8_t)(0);
      for (ulong k = 0; k < vectors; ++k) {
        const float16 v = vload16(k, xr);
        lo += convert_acc8_t(v.lo);
        hi += convert_acc8_t(v.hi);
      }
      const acc8_t h8 = lo + hi;
      const acc4_t h4 = h8.lo + h8.hi;
      sum = (h4.x + h4.y) + (h4.z + h4.w);
      for (ulong k = vectors * 16; k < len; ++k) sum += (acc_t)xr[k];
    } else {
      if (vectors > 0) {
        float16 lane_best = vload16(0, xr);
        int16 lane_index = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        int16 index = lane_index;
        for (ulong k = 1; k < vectors; ++k) {
          const float16 v = vload16(k, xr);
          index += 16;
          const int16 take = later_beats(lane_best, v, want_max);
          lane_best = select(lane_best, v, take);
          lane_index = select(lane_index, index, take);
        }
        float values[16];
        int indices[16];
        vstore16(lane_best, 0, values);
        vstore16(lane_index, 0, indices);
        best = values[0];
        best_index = indices[0];
        for (uint c = 1; c < 16; ++c) {
          if (beats(best, best_index, values[c], indices[c], want_max)) {
            best = values[c];
            best_index = indices[c];
          }
        }
      }
      for (ulong k = vectors * 16; k < len; ++k) {
        if (beats(best, best_index, xr[k], (int)k, want_max)) {
          best = xr[k];
          best_index = (int)k;
        }
      }
    }
    store(y, 0, row, op, sum, len, best, best_index);
  }
}
