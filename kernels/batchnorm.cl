// Batch normalisation over x (n, channels, spatial): per-channel statistics with one work-group
// per channel (power-of-two local size, fixed-order tree sums in acc_t), then elementwise passes.
// Statistics come either as (mean, rstd) from a training forward, or as (mean, var) running
// statistics turned into rstd = 1 / sqrt(var + eps) (from_var = 1).

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#define FOR_EACH_CHANNEL(c, channels) \
  for (ulong c = get_group_id(0); c < (channels); c += get_num_groups(0))
// Element k of a channel's n * spatial elements, in (batch, spatial) order.
#define CHANNEL_INDEX(k, c, channels, spatial) \
  ((((k) / (spatial)) * (channels) + (c)) * (spatial) + (k) % (spatial))

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

inline acc_t rstd_of(__global const float* stat, ulong c, int from_var, float eps) {
  return from_var ? (acc_t)1 / sqrt((acc_t)stat[c] + (acc_t)eps) : (acc_t)stat[c];
}

// Batch mean and biased variance per channel; save_mean/save_rstd receive mean and rstd; running
// statistics move towards the batch ones (unbiased variance) when has_running.
__kernel void batchnorm_stats(__global const float* x, __global float* save_mean,
                       __global float* save_rstd, __global float* running_mean,
                       __global float* running_var, ulong n, ulong channels, ulong spatial,
                       float eps, float momentum, int has_running, __local acc_t* scratch) {
  const ulong m = n * spatial;
  FOR_EACH_CHANNEL(c, channels) {
    acc_t partial = 0;
    for (ulong k = get_local_id(0); k < m; k += get_local_size(0))
      partial += (acc_t)x[CHANNEL_INDEX(k, c, channels, spatial)];
    const acc_t mean = group_sum(scratch, partial) / (acc_t)m;
    acc_t partial_sq = 0;
    for (ulong k = get_local_id(0); k < m; k += get_local_size(0)) {
      const acc_t d = (acc_t)x[CHANNEL_INDEX(k, c, channels, spatial)] - mean;
      partial_sq += d * d;
    }
    const acc_t sq = group_sum(scratch, partial_sq);
    if (get_local_id(0) == 0) {
      const acc_t variance = sq / (acc_t)m;
      save_mean[c] = (float)mean;
      save_rstd[c] = (float)((acc_t)1 / sqrt(variance + (acc_t)eps));
      if (has_running) {
        const acc_t unbiased = sq / (acc_t)(m - 1);
        const acc_t keep = (acc_t)1 - (acc_t)momentum;
        running_mean[c] = (float)(keep * (acc_t)running_mean[c] + (acc_t)momentum * mean);
        running_var[c] = (float)(keep * (acc_t)running_var[c] + (acc_t)momentum * unbiased);
      }
    }
  }
}

// y = (x - mean) * rstd * gamma + beta.
__kernel void batchnorm_apply(__global const float* x, __global const float* mean,
                       __global const float* stat, __global const float* gamma,
                       __global const float* beta, __global float* y, ulong count,
                       ulong channels, ulong spatial, int from_var, float eps, int has_gamma,
                       int has_beta) {
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong c = (e / spatial) % channels;
    acc_t v = ((acc_t)x[e] - (acc_t)mean[c]) * rstd_of(stat, c, from_var, eps);
    if (has_gamma) v *= (acc_t)gamma[c];
    if (has_beta) v += (acc_t)beta[c];
    y[e] = (float)v;
  }
}

// Per channel: sums[2c] = sum dy, sums[2c + 1] = sum dy * xhat; dgamma / dbeta from them.
__kernel void batchnorm_backward_sums(__global const float* x, __global const float* dy,
                               __global const float* mean, __global const float* stat,
                               __global float* sums, __global float* dgamma,
                               __global float* dbeta, ulong n, ulong channels, ulong spatial,
                               int from_var, float eps, int has_dgamma, int has_dbeta,
                               __local acc_t* scratch) {
  const ulong m = n * spatial;
  FOR_EACH_CHANNEL(c, channels) {
    const acc_t mu = (acc_t)mean[c];
    const acc_t rstd = rstd_of(stat, c, from_var, eps);
    acc_t partial_g = 0, partial_gx = 0;
    for (ulong k = get_local_id(0); k < m; k += get_local_size(0)) {
      const ulong e = CHANNEL_INDEX(k, c, channels, spatial);
      const acc_t g = (acc_t)dy[e];
      partial_g += g;
      partial_gx += g * ((acc_t)x[e] - mu) * rstd;
    }
    const acc_t sum_g = group_sum(scratch, partial_g);
    const acc_t sum_gx = group_sum(scratch, partial_gx);
    if (get_local_id(0) == 0) {
      sums[2 * c] = (float)sum_g;
      sums[2 * c + 1] = (float)sum_gx;
      if (has_dgamma) dgamma[c] = (float)sum_gx;
      if (has_dbeta) dbeta[c] = (float)sum_g;
    }
  }
}

// Training: dx = gamma rstd / M (M dy - sum dy - xhat sum(dy xhat)); evaluation: dy gamma rstd.
__kernel void batchnorm_backward_dx(__global const float* x, __global const float* dy,
                             __global const float* mean, __global const float* stat,
                             __global const float* gamma, __global const float* sums,
                             __global float* dx, ulong count, ulong channels, ulong spatial,
                             int training, int from_var, float eps, int has_gamma) {
  const acc_t m = (acc_t)(count / channels);
  for (ulong e = get_global_id(0); e < count; e += get_global_size(0)) {
    const ulong c = (e / spatial) % channels;
    const acc_t rstd = rstd_of(stat, c, from_var, eps);
    const acc_t scale = has_gamma ? (acc_t)gamma[c] * rstd : rstd;
    if (training) {
      const acc_t xhat = ((acc_t)x[e] - (acc_t)mean[c]) * rstd;
      dx[e] = (float)(scale / m *
                      (m * (acc_t)dy[e] - (acc_t)sums[2 * c] - xhat * (acc_t)sums[2 * c + 1]));
    } else {
      dx[e] = (float)(scale * (acc_t)dy[e]);
    }
  }
}
