// Optimiser updates (SGD with momentum / Nesterov / weight decay, AdamW) and global gradient-norm
// clipping computed on the device: per-chunk partial sums of squares, an ordered final sum and
// the clip coefficient, then a scale pass that reads the coefficient from device memory.

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

// PyTorch's SGD step. first_step initialises the momentum buffer with the gradient.
__kernel void optim_sgd(__global float* p, __global const float* g, __global float* buf, ulong n,
                       float lr, float weight_decay, float momentum, float dampening,
                       int nesterov, int first_step, int has_momentum) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    const float param = p[i];
    float grad = g[i];
    if (weight_decay != 0.0f) grad = grad + weight_decay * param;
    if (has_momentum) {
      const float b = first_step ? grad : momentum * buf[i] + (1.0f - dampening) * grad;
      buf[i] = b;
      grad = nesterov ? grad + momentum * b : b;
    }
    p[i] = param - lr * grad;
  }
}

// AdamW: decoupled decay, then Adam with bias correction; step_size = lr / (1 - beta1^t) and
// inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t) come from the host (double, rounded to float).
__kernel void optim_adamw(__global float* p, __global const float* g, __global float* m,
                         __global float* v, ulong n, float decay_factor, float beta1, float beta2,
                         float eps, float step_size, float inv_sqrt_bc2) {
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    const float grad = g[i];
    const float param = p[i] * decay_factor;
    const float m_new = beta1 * m[i] + (1.0f - beta1) * grad;
    const float v_new = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = m_new;
    v[i] = v_new;
    const float denominator = sqrt(v_new) * inv_sqrt_bc2 + eps;
    p[i] = param - step_size * (m_new / denominator);
  }
}

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

// partials[first + c] = sum of x^2 over chunk c = [c * chunk, min(n, (c + 1) * chunk)).
__kernel void optim_sum_squares_chunks(__global const float* x, ulong n, ulong chunk, ulong chunks,
                                 __global acc_t* partials, ulong first, __local acc_t* scratch) {
  for (ulong c = get_group_id(0); c < chunks; c += get_num_groups(0)) {
    const ulong begin = c * chunk, end = min(n, begin + chunk);
    acc_t sum = 0;
    for (ulong i = begin + get_local_id(0); i < end; i += get_local_size(0)) {
      const acc_t value = (acc_t)x[i];
      sum += value * value;
    }
    sum = group_sum(scratch, sum);
    if (get_local_id(0) == 0) partials[first + c] = sum;
  }
}

// One work-item: total = sqrt(sum of partials, in order); coefficient min(1, max / (total + 1e-6)),
// 1 when total is not finite.
__kernel void optim_clip_coefficient(__global const acc_t* partials, ulong count, float max_norm,
                               __global float* coefficient, __global float* total_norm,
                               int has_total) {
  if (get_global_id(0) != 0) return;
  acc_t sum = 0;
  for (ulong i = 0; i < count; ++i) sum += partials[i];
  const acc_t total = sqrt(sum);
  acc_t coef = (acc_t)max_norm / (total + (acc_t)1e-6);
  if (!isfinite(total) || coef > (acc_t)1) coef = 1;
  coefficient[0] = (float)coef;
  if (has_total) total_norm[0] = (float)total;
}

__kernel void optim_scale_by_coefficient(__global float* x, ulong n,
                                   __global const float* coefficient) {
  const float coef = coefficient[0];
  if (coef == 1.0f) return;
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) x[i] *= coef;
}
