// Row-wise float32 kernels (softmax, log-softmax, LayerNorm, their backward passes, cross-entropy):
// one work-group per row, fixed-order local-memory tree reductions, so output is bit-identical run
// to run for a given device and work-group size.
//
// Launch contract (driver/runtime/family_launch.h): 1-D, local size a power of two, any number of
// groups (each group walks rows group_id, group_id + num_groups, ...), `scratch` holds local_size
// elements of the kernel's reduction type. Row r starts at element r * cols (64-bit).
//
// LayerNorm statistics and the softmax-backward dot product accumulate in acc_t: double where the
// device has FP64 (as the original driver did), float otherwise. ROWWISE_ACC_DOUBLE may be given
// as a build option to force float accumulation on an FP64 device (used by the unit tests).
//
// Rows of up to ROW_REGS * local size elements are read from global memory once into private
// registers and written once: each item holds the elements lid, lid + local size, ... (coalesced).
// Longer rows, and every row when built with ROW_LOOP_ONLY=1 (AETHERCL_ROW_KERNEL=loop), stream
// through global memory in several passes. ROW_REGS must match kRowRegisters in
// runtime/family_launch.cpp.

#ifdef ROWWISE_ACC_DOUBLE
#define GROUP_ACC_DOUBLE ROWWISE_ACC_DOUBLE
#endif
#include "group_reduce.cl"

#define SOFTMAX_DENOMINATOR_EPS 1e-9f

#define ROW_REGS 16
#ifndef ROW_LOOP_ONLY
#define ROW_LOOP_ONLY 0
#endif
// Whether a row fits the registers of the group, and element i of this item's share of it.
#define ROW_IN_REGISTERS(cols) (!ROW_LOOP_ONLY && (cols) <= (ulong)get_local_size(0) * ROW_REGS)
#define REG_COL(i) ((ulong)get_local_id(0) + (ulong)(i) * get_local_size(0))

#define FOR_EACH_ROW(row, rows) \
  for (ulong row = get_group_id(0); row < (rows); row += get_num_groups(0))
#define FOR_EACH_COL(j, cols) \
  for (ulong j = get_local_id(0); j < (cols); j += get_local_size(0))


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

// row_moments for a row held in registers: loads this item's elements into v (0 past the row).
void row_moments_registers(__global const float* x, ulong cols, float eps,
                           __local acc_t* scratch, float* v, acc_t* mean_out,
                           acc_t* inv_std_out) {
  acc_t local_sum = 0;
  #pragma unroll
  for (int i = 0; i < ROW_REGS; ++i) {
    const ulong j = REG_COL(i);
    v[i] = j < cols ? x[j] : 0.0f;
    local_sum += (acc_t)v[i];
  }
  const acc_t mean = group_sum_acc(scratch, local_sum) / (acc_t)cols;
  acc_t local_sq = 0;
  #pragma unroll
  for (int i = 0; i < ROW_REGS; ++i) {
    if (REG_COL(i) < cols) {
      const acc_t d = (acc_t)v[i] - mean;
      local_sq += d * d;
    }
  }
  const acc_t variance = group_sum_acc(scratch, local_sq) / (acc_t)cols;
  *mean_out = mean;
  *inv_std_out = (acc_t)1 / sqrt(variance + (acc_t)eps);
}

// Loads this item's elements of a row held in registers into v (-inf past the row) and returns
// the row's maximum (softmax and log-softmax).
float row_max_registers(__global const float* x, ulong cols, __local float* scratch, float* v) {
  float local_max = -INFINITY;
  #pragma unroll
  for (int i = 0; i < ROW_REGS; ++i) {
    const ulong j = REG_COL(i);
    v[i] = j < cols ? x[j] : -INFINITY;
    local_max = fmax(local_max, v[i]);
  }
  return group_max_f(scratch, local_max);
}

// y = exp(x - max) / (sum + 1e-9). Each exp is computed once: the second pass stores it in y and
// the third divides it in place (every item rereads only the elements it wrote itself).
__kernel void rowwise_softmax(__global const float* x, __global float* y, ulong rows, ulong cols,
                             __local float* scratch) {
  if (ROW_IN_REGISTERS(cols)) {
    FOR_EACH_ROW(row, rows) {
      const ulong base = row * cols;
      float v[ROW_REGS];
      const float row_max = row_max_registers(x + base, cols, scratch, v);
      float local_sum = 0.0f;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        v[i] = REG_COL(i) < cols ? exp(v[i] - row_max) : 0.0f;
        local_sum += v[i];
      }
      const float denominator = group_sum_f(scratch, local_sum) + SOFTMAX_DENOMINATOR_EPS;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) y[base + j] = v[i] / denominator;
      }
    }
    return;
  }
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

// ---- CPU forms: one work-item per row, the row in ACL_LANES-wide vectors plus a scalar tail
// (PoCL vectorises a kernel's own vector code, not a loop over work-items). No barriers, so any
// local size works (rows are walked by global id). Exp is ACL_EXPV (kernels/fastmath.cl); lane
// partials are combined in a fixed order.

float lanes_row_max(__global const float* xr, ulong cols) {
  const ulong vectors = cols / ACL_LANES;
  acl_floatv lane_max = (acl_floatv)(-INFINITY);
  for (ulong k = 0; k < vectors; ++k) lane_max = fmax(lane_max, ACL_VLOAD(k, xr));
  float row_max = acl_lanes_max(lane_max);
  for (ulong j = vectors * ACL_LANES; j < cols; ++j) row_max = fmax(row_max, xr[j]);
  return row_max;
}

// The sum of exp(x - row_max), Kahan-compensated per lane; with `exps` non-NULL each exp is also
// stored there.
float lanes_exp_sum(__global const float* xr, ulong cols, float row_max, __global float* exps) {
  const ulong vectors = cols / ACL_LANES;
  acl_floatv sum = (acl_floatv)(0.0f), compensation = (acl_floatv)(0.0f);
  for (ulong k = 0; k < vectors; ++k) {
    const acl_floatv e = ACL_EXPV(ACL_VLOAD(k, xr) - row_max);
    if (exps) ACL_VSTORE(e, k, exps);
    const acl_floatv term = e - compensation;
    const acl_floatv total = sum + term;
    compensation = (total - sum) - term;
    sum = total;
  }
  kahan_t tail = {0.0f, 0.0f};
  for (ulong j = vectors * ACL_LANES; j < cols; ++j) {
    const float e = ACL_EXP(xr[j] - row_max);
    if (exps) exps[j] = e;
    kahan_add(&tail, e);
  }
  return acl_lanes_sum(sum) + tail.sum;
}

// rowwise_softmax's formula, except that y is scaled by 1 / denominator (one division per row:
// dividing every element took half the kernel's time on PoCL; within 1 ulp more of the quotient).
__kernel void rowwise_softmax_lanes(__global const float* x, __global float* y, ulong rows,
                                    ulong cols) {
  const ulong vectors = cols / ACL_LANES;
  for (ulong row = get_global_id(0); row < rows; row += get_global_size(0)) {
    __global const float* xr = x + row * cols;
    __global float* yr = y + row * cols;
    const float row_max = lanes_row_max(xr, cols);
    const float scale = 1.0f / (lanes_exp_sum(xr, cols, row_max, yr) + SOFTMAX_DENOMINATOR_EPS);
    for (ulong k = 0; k < vectors; ++k) ACL_VSTORE(ACL_VLOAD(k, yr) * scale, k, yr);
    for (ulong j = vectors * ACL_LANES; j < cols; ++j) yr[j] = yr[j] * scale;
  }
}

// rowwise_log_softmax's formula.
__kernel void rowwise_log_softmax_lanes(__global const float* x, __global float* out, ulong rows,
                                        ulong cols) {
  const ulong vectors = cols / ACL_LANES;
  for (ulong row = get_global_id(0); row < rows; row += get_global_size(0)) {
    __global const float* xr = x + row * cols;
    __global float* outr = out + row * cols;
    const float row_max = lanes_row_max(xr, cols);
    const float log_denominator =
        log(lanes_exp_sum(xr, cols, row_max, 0) + SOFTMAX_DENOMINATOR_EPS);
    for (ulong k = 0; k < vectors; ++k) {
      ACL_VSTORE((ACL_VLOAD(k, xr) - row_max) - log_denominator, k, outr);
    }
    for (ulong j = vectors * ACL_LANES; j < cols; ++j) outr[j] = (xr[j] - row_max) - log_denominator;
  }
}

#if LN_FUSED
// rowwise_layernorm's fused double sums (x and x^2), per lane pair of double8, lanes combined in
// a fixed order; normalised in double like the GPU form.
double lanes_sum_double(double8 v) {
  double4 h4 = v.lo + v.hi;
  double2 h2 = h4.lo + h4.hi;
  return h2.x + h2.y;
}

__kernel void rowwise_layernorm_lanes(__global const float* x, __global float* y, ulong rows,
                                      ulong cols, float eps) {
  const ulong vectors = cols / ACL_LANES;
  const double n = (double)cols;
  for (ulong row = get_global_id(0); row < rows; row += get_global_size(0)) {
    __global const float* xr = x + row * cols;
    __global float* yr = y + row * cols;
    double8 sum_lo = 0.0, sum_hi = 0.0, sq_lo = 0.0, sq_hi = 0.0;
    for (ulong k = 0; k < vectors; ++k) {
      const acl_floatv v = ACL_VLOAD(k, xr);
      const double8 lo = convert_double8(v.lo), hi = convert_double8(v.hi);
      sum_lo += lo;
      sum_hi += hi;
      sq_lo += lo * lo;
      sq_hi += hi * hi;
    }
    double sum = lanes_sum_double(sum_lo + sum_hi), sum_sq = lanes_sum_double(sq_lo + sq_hi);
    for (ulong j = vectors * ACL_LANES; j < cols; ++j) {
      const double value = (double)xr[j];
      sum += value;
      sum_sq += value * value;
    }
    double mean, inv_std;
    moments_from_sums(sum, sum_sq, n, eps, &mean, &inv_std);
    for (ulong k = 0; k < vectors; ++k) {
      const acl_floatv v = ACL_VLOAD(k, xr);
      const float8 lo = convert_float8((convert_double8(v.lo) - mean) * inv_std);
      const float8 hi = convert_float8((convert_double8(v.hi) - mean) * inv_std);
      ACL_VSTORE((acl_floatv)(lo, hi), k, yr);
    }
    for (ulong j = vectors * ACL_LANES; j < cols; ++j) {
      yr[j] = (float)(((double)xr[j] - mean) * inv_std);
    }
  }
}
#endif

// out = (x - max) - log(sum + 1e-9)
__kernel void rowwise_log_softmax(__global const float* x, __global float* out, ulong rows,
                                 ulong cols, __local float* scratch) {
  if (ROW_IN_REGISTERS(cols)) {
    FOR_EACH_ROW(row, rows) {
      const ulong base = row * cols;
      float v[ROW_REGS];
      const float row_max = row_max_registers(x + base, cols, scratch, v);
      float local_sum = 0.0f;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        if (REG_COL(i) < cols) local_sum += exp(v[i] - row_max);
      }
      const float log_denominator =
          log(group_sum_f(scratch, local_sum) + SOFTMAX_DENOMINATOR_EPS);
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) out[base + j] = (v[i] - row_max) - log_denominator;
      }
    }
    return;
  }
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    float row_max, row_sum;
    row_max_and_exp_sum(x + base, cols, scratch, &row_max, &row_sum);
    const float log_denominator = log(row_sum + SOFTMAX_DENOMINATOR_EPS);
    FOR_EACH_COL(j, cols) out[base + j] = (x[base + j] - row_max) - log_denominator;
  }
}

// dx = (dy - sum_j dy_j y_j) * y. Rows that fit the group's registers are read once: each item
// sums its products (at most ROW_REGS) in float and the group adds the partial sums in acc_t;
// longer rows stream their two inputs twice.
__kernel void rowwise_softmax_backward(__global const float* dy, __global const float* y,
                                      __global float* dx, ulong rows, ulong cols,
                                      __local acc_t* scratch) {
  if (ROW_IN_REGISTERS(cols)) {
    FOR_EACH_ROW(row, rows) {
      const ulong base = row * cols;
      float g[ROW_REGS], p[ROW_REGS];
      float partial = 0.0f;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        g[i] = j < cols ? dy[base + j] : 0.0f;
        p[i] = j < cols ? y[base + j] : 0.0f;
        partial = fma(g[i], p[i], partial);
      }
      const float dot = (float)group_sum_acc(scratch, (acc_t)partial);
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) dx[base + j] = (g[i] - dot) * p[i];
      }
    }
    return;
  }
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
#if LN_FUSED
  const double n = (double)cols;
  const bool registers = ROW_IN_REGISTERS(cols);
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    float v[ROW_REGS];
    double sum = 0, sum_sq = 0;
    if (registers) {
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        v[i] = j < cols ? x[base + j] : 0.0f;
        sum += (double)v[i];
        sum_sq += (double)v[i] * (double)v[i];
      }
    } else {
      FOR_EACH_COL(j, cols) {
        const double value = (double)x[base + j];
        sum += value;
        sum_sq += value * value;
      }
    }
    double total[2] = {sum, sum_sq};
    group_sums(scratch, total, 2);  // the host binds 2 acc_t per item
    double mean, inv_std;
    moments_from_sums(total[0], total[1], n, eps, &mean, &inv_std);
    if (registers) {
      const row_center_t center = row_center(mean, inv_std);
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) y[base + j] = normalized(center, v[i]);
      }
    } else {
      FOR_EACH_COL(j, cols) y[base + j] = (float)(((double)x[base + j] - mean) * inv_std);
    }
  }
  return;
#endif
  if (ROW_IN_REGISTERS(cols)) {
    FOR_EACH_ROW(row, rows) {
      const ulong base = row * cols;
      float v[ROW_REGS];
      acc_t mean, inv_std;
      row_moments_registers(x + base, cols, eps, scratch, v, &mean, &inv_std);
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) y[base + j] = (float)(((acc_t)v[i] - mean) * inv_std);
      }
    }
    return;
  }
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
#if LN_FUSED
  const bool registers = ROW_IN_REGISTERS(cols);
  FOR_EACH_ROW(row, rows) {
    const ulong base = row * cols;
    float v[ROW_REGS], g[ROW_REGS];
    double sum = 0, sum_sq = 0, sum_dy = 0, sum_dy_x = 0;
    if (registers) {
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        v[i] = j < cols ? x[base + j] : 0.0f;
        g[i] = j < cols ? dy[base + j] : 0.0f;
        sum += (double)v[i];
        sum_sq += (double)v[i] * (double)v[i];
        sum_dy += (double)g[i];
        sum_dy_x += (double)g[i] * (double)v[i];
      }
    } else {
      FOR_EACH_COL(j, cols) {
        const double value = (double)x[base + j], grad = (double)dy[base + j];
        sum += value;
        sum_sq += value * value;
        sum_dy += grad;
        sum_dy_x += grad * value;
      }
    }
    double total[4] = {sum, sum_sq, sum_dy, sum_dy_x};
    group_sums(scratch, total, 4);  // the host binds 4 acc_t per item
    double mean, inv_std;
    moments_from_sums(total[0], total[1], n, eps, &mean, &inv_std);
    const double row_dy = total[2];
    const double row_dy_xhat = inv_std * (total[3] - mean * total[2]);
    const double scale = inv_std / n;
    if (registers) {
      // dx = inv * dy - (scale * sum(dy) + xhat * scale * sum(dy * xhat)), in float.
      const row_center_t center = row_center(mean, inv_std);
      const float shift = (float)(scale * row_dy), slope = (float)(scale * row_dy_xhat);
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) {
          dx[base + j] = fma(center.inv_std, g[i], -fma(normalized(center, v[i]), slope, shift));
        }
      }
    } else {
      FOR_EACH_COL(j, cols) {
        const double xhat = ((double)x[base + j] - mean) * inv_std;
        dx[base + j] = (float)(scale * (n * (double)dy[base + j] - row_dy - xhat * row_dy_xhat));
      }
    }
  }
  return;
#endif
  if (ROW_IN_REGISTERS(cols)) {
    FOR_EACH_ROW(row, rows) {
      const ulong base = row * cols;
      float v[ROW_REGS], g[ROW_REGS];
      acc_t mean, inv_std;
      row_moments_registers(x + base, cols, eps, scratch, v, &mean, &inv_std);
      acc_t local_dy = 0, local_dy_xhat = 0;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        g[i] = j < cols ? dy[base + j] : 0.0f;
        local_dy += (acc_t)g[i];
        if (j < cols) local_dy_xhat += (acc_t)g[i] * (((acc_t)v[i] - mean) * inv_std);
      }
      const acc_t sum_dy = group_sum_acc(scratch, local_dy);
      const acc_t sum_dy_xhat = group_sum_acc(scratch, local_dy_xhat);
      const acc_t scale = inv_std / n;
      #pragma unroll
      for (int i = 0; i < ROW_REGS; ++i) {
        const ulong j = REG_COL(i);
        if (j < cols) {
          const acc_t xhat = ((acc_t)v[i] - mean) * inv_std;
          dx[base + j] = (float)(scale * (n * (acc_t)g[i] - sum_dy - xhat * sum_dy_xhat));
        }
      }
    }
    return;
  }
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
