// Losses: mean squared error and cross-entropy from logits (log-softmax fused) with ignore_index
// and label smoothing. Totals are sums over fixed chunks (one work-group per chunk, fixed-order
// tree in acc_t) finished by one work-item adding the chunk sums in order, so results do not
// depend on how many groups the device runs.

// Formats of the cross-entropy's logits and grad (operand_storage.cl): CE_LOGITS, CE_GRAD, float32
// when not set; losses are float32.
#include "operand_storage.cl"
#ifndef CE_LOGITS
#define CE_LOGITS 0
#endif
#ifndef CE_GRAD
#define CE_GRAD 0
#endif

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

acc_t group_sum(__local acc_t* scratch, acc_t value) {
  const uint lid = get_local_id(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = get_local_size(0) >> 1; step > 0; step >>= 1) {
    if (lid < step) scratch[lid] += scratch[lid + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const acc_t total = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

float group_max(__local float* scratch, float value) {
  const uint lid = get_local_id(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = get_local_size(0) >> 1; step > 0; step >>= 1) {
    if (lid < step) scratch[lid] = fmax(scratch[lid], scratch[lid + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float result = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return result;
}

#define FOR_EACH_CHUNK(c, chunks) \
  for (ulong c = get_group_id(0); c < (chunks); c += get_num_groups(0))

// partials[c] = sum over chunk c of (p - t)^2; grad = grad_scale * (p - t) when has_grad.
__kernel void losses_mse_chunks(__global const float* p, __global const float* t, __global float* grad,
                         int has_grad, float grad_scale, ulong n, ulong chunk, ulong chunks,
                         __global acc_t* partials, __local acc_t* scratch) {
  FOR_EACH_CHUNK(c, chunks) {
    const ulong begin = c * chunk, end = min(n, begin + chunk);
    acc_t sum = 0;
    for (ulong i = begin + get_local_id(0); i < end; i += get_local_size(0)) {
      const float d = p[i] - t[i];
      sum += (acc_t)d * (acc_t)d;
      if (has_grad) grad[i] = grad_scale * d;
    }
    sum = group_sum(scratch, sum);
    if (get_local_id(0) == 0) partials[c] = sum;
  }
}

// partials[c] = sum of x over chunk c.
__kernel void losses_sum_chunks(__global const float* x, ulong n, ulong chunk, ulong chunks,
                         __global acc_t* partials, __local acc_t* scratch) {
  FOR_EACH_CHUNK(c, chunks) {
    const ulong begin = c * chunk, end = min(n, begin + chunk);
    acc_t sum = 0;
    for (ulong i = begin + get_local_id(0); i < end; i += get_local_size(0)) sum += (acc_t)x[i];
    sum = group_sum(scratch, sum);
    if (get_local_id(0) == 0) partials[c] = sum;
  }
}

// partials[c] = number of targets in chunk c that are not ignore_index.
__kernel void losses_count_valid_chunks(__global const int* targets, ulong rows, int ignore_index,
                                 ulong chunk, ulong chunks, __global acc_t* partials,
                                 __local acc_t* scratch) {
  FOR_EACH_CHUNK(c, chunks) {
    const ulong begin = c * chunk, end = min(rows, begin + chunk);
    acc_t count = 0;
    for (ulong i = begin + get_local_id(0); i < end; i += get_local_size(0))
      count += targets[i] != ignore_index ? (acc_t)1 : (acc_t)0;
    count = group_sum(scratch, count);
    if (get_local_id(0) == 0) partials[c] = count;
  }
}

// One work-item: out[0] = (sum of partials in order) / divisor, divisor = counts[0] when
// use_counts, else the integer divisor.
__kernel void losses_finish_sum(__global const acc_t* partials, ulong chunks, ulong divisor,
                         __global const acc_t* counts, int use_counts, __global float* out) {
  if (get_global_id(0) != 0) return;
  acc_t sum = 0;
  for (ulong c = 0; c < chunks; ++c) sum += partials[c];
  out[0] = (float)(sum / (use_counts ? counts[0] : (acc_t)divisor));
}

// One work-item: counts[0] = sum of partials.
__kernel void losses_finish_count(__global const acc_t* partials, ulong chunks, __global acc_t* counts) {
  if (get_global_id(0) != 0) return;
  acc_t sum = 0;
  for (ulong c = 0; c < chunks; ++c) sum += partials[c];
  counts[0] = sum;
}

// One work-group per row: row_loss[r] = (1 - s)(lse - x_t) + s (lse - mean x) and
// grad[r, j] = (softmax_j - (1 - s)[j == t] - s / classes) * scale, scale = 1 / counts[0] for
// MEAN (use_counts) else 1. Ignored rows: 0; a target outside [0, classes): NaN.
__kernel void losses_cross_entropy_rows(__global const OS_TYPE(CE_LOGITS)* logits,
                      __global const int* targets, __global float* row_loss,
                      __global OS_TYPE(CE_GRAD)* grad, int has_grad, ulong rows,
                      ulong classes, int ignore_index, float smoothing,
                      __global const acc_t* counts, int use_counts, __local acc_t* scratch,
                      __local float* scratch_max) {
  for (ulong r = get_group_id(0); r < rows; r += get_num_groups(0)) {
    __global const OS_TYPE(CE_LOGITS)* x = logits + r * classes;
    __global OS_TYPE(CE_GRAD)* gr = grad + r * classes;
    const int target = targets[r];
    const bool ignored = target == ignore_index;
    const bool invalid = !ignored && (target < 0 || (ulong)target >= classes);
    // Every item reaches every barrier (no barrier in a branch), whatever the target.
    float local_max = -INFINITY;
    for (ulong j = get_local_id(0); j < classes; j += get_local_size(0)) {
      local_max = fmax(local_max, OS_LOAD(CE_LOGITS, x, j));
    }
    const float row_max = group_max(scratch_max, local_max);
    acc_t partial_exp = 0, partial_x = 0;
    for (ulong j = get_local_id(0); j < classes; j += get_local_size(0)) {
      const float xj = OS_LOAD(CE_LOGITS, x, j);
      partial_exp += (acc_t)exp(xj - row_max);
      partial_x += (acc_t)xj;
    }
    const acc_t sum_exp = group_sum(scratch, partial_exp);
    const acc_t mean_x = group_sum(scratch, partial_x) / (acc_t)classes;
    const acc_t lse = (acc_t)row_max + log(sum_exp);
    const acc_t s = (acc_t)smoothing;
    if (get_local_id(0) == 0) {
      float loss = 0.0f;
      if (invalid) loss = NAN;
      else if (!ignored)
        loss = (float)(((acc_t)1 - s) * (lse - (acc_t)OS_LOAD(CE_LOGITS, x, target)) +
                       s * (lse - mean_x));
      row_loss[r] = loss;
    }
    if (has_grad) {
      const acc_t scale = use_counts ? (acc_t)1 / counts[0] : (acc_t)1;
      const acc_t uniform = s / (acc_t)classes;
      for (ulong j = get_local_id(0); j < classes; j += get_local_size(0)) {
        const acc_t p = exp((acc_t)OS_LOAD(CE_LOGITS, x, j) - lse);
        const acc_t q = ((ulong)target == j ? (acc_t)1 - s : (acc_t)0) + uniform;
        float value = (float)((p - q) * scale);
        if (ignored) value = 0.0f;
        if (invalid) value = NAN;
        OS_STORE(CE_GRAD, gr, j, value);
      }
    }
  }
}
