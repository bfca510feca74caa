// Reductions of one axis of a tensor viewed as (outer, len, inner) into (outer, inner), and their
// backward. op codes are aethercl_reduce_op: 0 sum, 1 mean, 2 max, 3 min, 4 argmax, 5 argmin.
// MAX/MIN propagate NaN; the ARG ops pick the first index of the extreme value, a NaN counting as
// the extreme. Sums accumulate in acc_t in ascending order (items) or a fixed tree (groups).

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
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

// Few outputs over a long axis (a column sum of a tall matrix): one item per output leaves a GPU
// idle, so the axis is cut into `chunks` spans of `span` elements. Pass 1: one item per (outer,
// chunk, inner) reduces its span in ascending order into partial sums / best values / indices
// (absolute k); pass 2: one item per output folds its chunks in ascending order. The chunking
// depends only on the shape and the device, so results are reproducible.
__kernel void reduce_axis_partial(__global const float* x, __global acc_t* part_sums,
                                  __global float* part_values, __global int* part_indices,
                                  ulong outer, ulong len, ulong inner, ulong chunks, ulong span,
                                  int op) {
  const ulong parts = outer * chunks * inner;
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong p = get_global_id(0); p < parts; p += get_global_size(0)) {
    const ulong i = p % inner, c = (p / inner) % chunks, o = p / (inner * chunks);
    const ulong begin = c * span, end = min(len, begin + span);
    __global const float* base = x + o * len * inner + i;
    acc_t sum = 0;
    float best = base[begin * inner];
    int best_index = (int)begin;
    if (summing) {
      for (ulong k = begin; k < end; ++k) sum += (acc_t)base[k * inner];
    } else {
      for (ulong k = begin + 1; k < end; ++k) {
        const float v = base[k * inner];
        if (beats(best, best_index, v, (int)k, want_max)) {
          best = v;
          best_index = (int)k;
        }
      }
    }
    part_sums[p] = sum;
    part_values[p] = best;
    part_indices[p] = best_index;
  }
}

__kernel void reduce_axis_combine(__global const acc_t* part_sums,
                                  __global const float* part_values,
                                  __global const int* part_indices, __global float* y,
                                  __global int* y_index, ulong outer, ulong len, ulong inner,
                                  ulong chunks, int op) {
  const ulong outputs = outer * inner;
  const int want_max = wants_max(op);
  for (ulong out = get_global_id(0); out < outputs; out += get_global_size(0)) {
    const ulong o = out / inner, i = out % inner;
    const ulong first = o * chunks * inner + i;
    acc_t sum = 0;
    float best = part_values[first];
    int best_index = part_indices[first];
    for (ulong c = 0; c < chunks; ++c) {
      const ulong at = first + c * inner;
      sum += part_sums[at];
      if (c > 0 && beats(best, best_index, part_values[at], part_indices[at], want_max)) {
        best = part_values[at];
        best_index = part_indices[at];
      }
    }
    store(y, y_index, out, op, sum, len, best, best_index);
  }
}

// One work-group per output row when inner == 1: strided partials, then a fixed-order tree.
// Local size is a power of two; sums, values and indices hold one entry per item.
__kernel void reduce_axis_groups(__global const float* x, __global float* y,
                                 __global int* y_index, ulong outer, ulong len, int op,
                                 __local acc_t* sums, __local float* values,
                                 __local int* indices) {
  const uint lid = get_local_id(0), size = get_local_size(0);
  const int want_max = wants_max(op);
  const bool summing = op == OP_SUM || op == OP_MEAN;
  for (ulong row = get_group_id(0); row < outer; row += get_num_groups(0)) {
    __global const float* base = x + row * len;
    acc_t sum = 0;
    float best = NAN;
    int best_index = -1;
    for (ulong k = lid; k < len; k += size) {
      const float v = base[k];
      if (summing) sum += (acc_t)v;
      else if (best_index < 0 || beats(best, best_index, v, (int)k, want_max)) {
        best = v;
        best_index = (int)k;
      }
    }
    sums[lid] = sum;
    values[lid] = best;
    indices[lid] = best_index;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint step = size >> 1; step > 0; step >>= 1) {
      if (lid < step) {
        sums[lid] += sums[lid + step];
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
