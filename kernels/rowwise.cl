// Row-wise float32 kernels (softmax, log-softmax, LayerNorm, their backward passes, cross-entropy):
// one work-group per row, fixed-order local-memory tree reductions, so output is bit-identical run
// to run for a given device and work-group size.
//
// Launch contract (driver/ops/launch.h): 1-D, local size a power of two, any number of groups
// (each group walks rows group_id, group_id + num_groups, ...), `scratch` holds local_size
// elements of the kernel's reduction type. Row r starts at element r * cols (64-bit).
//
// LayerNorm statistics and the softmax-backward dot product accumulate in acc_t: double where the
// device has FP64 (as the original driver did), float otherwise. ROWWISE_ACC_DOUBLE may be given
// as a build option to force float accumulation on an FP64 device (used by the unit tests).

#ifndef ROWWISE_ACC_DOUBLE
#define ROWWISE_ACC_DOUBLE AETHERCL_FP64
#endif

#if ROWWISE_ACC_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#define SOFTMAX_DENOMINATOR_EPS 1e-9f

#define FOR_EACH_ROW(row, rows) \
  for (ulong row = get_group_id(0); row < (rows); row += get_num_groups(0))
#define FOR_EACH_COL(j, cols) \
  for (ulong j = get_local_id(0); j < (cols); j += get_local_size(0))

// Tree reductions over the work-group: every item passes its partial value and gets the combined
// value of the group. The pairing order is fixed. Ends with a barrier, so scratch can be reused.
#define DEFINE_GROUP_REDUCE(NAME, T, COMBINE)                           \
  T NAME(__local T* scratch, T value) {                                 \
    const uint lid = get_local_id(0);                                   \
    scratch[lid] = value;                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                       \
    for (uint step = get_local_size(0) >> 1; step > 0; step >>= 1) {    \
      if (lid < step) scratch[lid] = COMBINE(scratch[lid], scratch[lid + step]); \
      barrier(CLK_LOCAL_MEM_FENCE);                                     \
    }                                                                   \
    T result = scratch[0];                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                       \
    return result;                                                      \
  }

#define COMBINE_SUM(a, b) ((a) + (b))
#define COMBINE_MAX(a, b) fmax((a), (b))

DEFINE_GROUP_REDUCE(group_max_f, float, COMBINE_MAX)
DEFINE_GROUP_REDUCE(group_sum_f, float, COMBINE_SUM)
DEFINE_GROUP_REDUCE(group_sum_acc, acc_t, COMBINE_SUM)

// Compensated (Kahan) float accumulation for the per-item partial sums of exp: on CPU devices one
// item sums a whole row, and a plain float sum over 1e5 terms loses about 1e-4 relative.
typedef struct {
  float sum;
  float compensation;
} kahan_t;

inline void kahan_add(kahan_t* k, float value) {
  const float y = value - k->compensation;
  const float t = k->sum + y;
  k->compensation = (t - k->sum) - y;
  k->sum = t;
}

// Row maximum and sum of exp(x - max), shared by softmax and log-softmax.
void row_max_and_exp_sum(__global const float* x, ulong cols, __local float* scratch,
                         float* max_out, float* sum_out) {
  float local_max = -INFINITY;
  FOR_EACH_COL(j, cols) local_max = fmax(local_max, x[j]);
  const float row_max = group_max_f(scratch, local_max);
  kahan_t local_sum = {0.0f, 0.0f};
  FOR_EACH_COL(j, cols) kahan_add(&local_sum, exp(x[j] - row_max));
  *max_out = row_max;
  *sum_out = group_sum_f(scratch, local_sum.sum);
}

// Row mean and biased variance (two passes) and 1 / sqrt(var + eps), all in acc_t.
void row_moments(__global const float* x, ulong cols, float eps, __local acc_t* scratch,
                 acc_t* mean_out, acc_t* inv_std_out) {
  acc_t local_sum = 0;
  FOR_EACH_COL(j, cols) local_sum += (acc_t)x[j];
  const acc_t mean = group_sum_acc(scratch, local_sum) / (acc_t)cols;
  acc_t local_sq = 0;
  FOR_EACH_COL(j, cols) {
    const acc_t d = (acc_t)x[j] - mean;
    local_sq += d * d;
  }
  const acc_t variance = group_sum_acc(scratch, local_sq) / (acc_t)cols;
  *mean_out = mean;
  *inv_std_out = (acc_t)1 / sqrt(variance + (acc_t)eps);
}

// y = exp(x - max) / (sum + 1e-9). Each exp is computed once: the second pass stores it in y and
// the third divides it in place (every item rereads only the elements it wrote itself).
__kernel void rowwise_softmax(__global const float* x, __global float* y, ulong rows, ulong cols,
                             __local float* scratch) {
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    float local_max = -INFINITY;
    FOR_EACH_COL(j, cols) local_max = fmax(local_max, x[base + j]);
    const float row_max = group_max_f(scratch, local_max);
    kahan_t local_sum = {0.0f, 0.0f};
    FOR_EACH_COL(j, cols) {
      const float e = exp(x[base + j] - row_max);
      y[base + j] = e;
      kahan_add(&local_sum, e);
    }
    const float denominator = group_sum_f(scratch, local_sum.sum) + SOFTMAX_DENOMINATOR_EPS;
    FOR_EACH_COL(j, cols) y[base + j] = y[base + j] / denominator;
  }
}

// out = (x - max) - log(sum + 1e-9)
__kernel void rowwise_log_softmax(__global const float* x, __global float* out, ulong rows,
                                 ulong cols, __local float* scratch) {
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    float row_max, row_sum;
    row_max_and_exp_sum(x + base, cols, scratch, &row_max, &row_sum);
    const float log_denominator = log(row_sum + SOFTMAX_DENOMINATOR_EPS);
    FOR_EACH_COL(j, cols) out[base + j] = (x[base + j] - row_max) - log_denominator;
  }
}

// dx = (dy - sum_j dy_j y_j) * y
__kernel void rowwise_softmax_backward(__global const float* dy, __global const float* y,
                                      __global float* dx, ulong rows, ulong cols,
                                      __local acc_t* scratch) {
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    acc_t local_dot = 0;
    FOR_EACH_COL(j, cols) local_dot += (acc_t)dy[base + j] * (acc_t)y[base + j];
    const acc_t dot = group_sum_acc(scratch, local_dot);
    FOR_EACH_COL(j, cols) {
      dx[base + j] = (float)(((acc_t)dy[base + j] - dot) * (acc_t)y[base + j]);
    }
  }
}

// y = (x - mean) / sqrt(var + eps); eps > 0 is guaranteed by the host.
__kernel void rowwise_layernorm(__global const float* x, __global float* y, ulong rows, ulong cols,
                               float eps, __local acc_t* scratch) {
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    acc_t mean, inv_std;
    row_moments(x + base, cols, eps, scratch, &mean, &inv_std);
    FOR_EACH_COL(j, cols) y[base + j] = (float)(((acc_t)x[base + j] - mean) * inv_std);
  }
}

// xhat = (x - mean) * inv, dx = (inv / C) * (C * dy - sum(dy) - xhat * sum(dy * xhat))
__kernel void rowwise_layernorm_backward(__global const float* dy, __global const float* x,
                                        __global float* dx, ulong rows, ulong cols, float eps,
                                        __local acc_t* scratch) {
  const acc_t n = (acc_t)cols;
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    acc_t mean, inv_std;
    row_moments(x + base, cols, eps, scratch, &mean, &inv_std);
    acc_t local_dy = 0, local_dy_xhat = 0;
    FOR_EACH_COL(j, cols) {
      const acc_t g = (acc_t)dy[base + j];
      local_dy += g;
      local_dy_xhat += g * (((acc_t)x[base + j] - mean) * inv_std);
    }
    const acc_t sum_dy = group_sum_acc(scratch, local_dy);
    const acc_t sum_dy_xhat = group_sum_acc(scratch, local_dy_xhat);
    const acc_t scale = inv_std / n;
    FOR_EACH_COL(j, cols) {
      const acc_t xhat = ((acc_t)x[base + j] - mean) * inv_std;
      dx[base + j] = (float)(scale * (n * (acc_t)dy[base + j] - sum_dy - xhat * sum_dy_xhat));
    }
  }
}

// grad = exp(lp) - onehot(t); loss = -lp[t]. A target outside [0, V) gives loss 0 and leaves the
// gradient row as the plain probabilities (the original driver's behaviour, docs/ABI.md
// section 4.6).
__kernel void rowwise_cross_entropy(__global const float* log_probs, __global const int* targets,
                                   __global float* grad, __global float* loss, ulong rows,
                                   ulong cols) {
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    const long target = (long)targets[row];
    const bool valid = target >= 0 && (ulong)target < cols;
    FOR_EACH_COL(j, cols) {
      const float p = exp(log_probs[base + j]);
      grad[base + j] = (valid && j == (ulong)target) ? p - 1.0f : p;
    }
    if (get_local_id(0) == 0) loss[row] = valid ? -log_probs[base + (ulong)target] : 0.0f;
  }
}
