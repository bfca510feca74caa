// LayerNorm and RMSNorm with optional gamma/beta (aethercl_norm_forward/_backward): one
// work-group per row (power-of-two local size, fixed-order sums in acc_t: group_reduce.cl), and
// one work-item per column for the parameter gradients (rows summed in ascending order).
// Formats of x, y, dy, dx (operand_storage.cl): NORM_X, NORM_Y, NORM_DY, NORM_DX, float32 when
// not set; gamma, beta, their gradients and the statistics are always float32. The forward's
// residual add (has_res: sum = x + res in x's format, then sum normalised) reads res as
// NORM_RES; the backward's dx_copy (has_copy) is stored as NORM_DXC.

#include "group_reduce.cl"
#include "operand_storage.cl"
#ifndef NORM_X
#define NORM_X 0
#endif
#ifndef NORM_Y
#define NORM_Y 0
#endif
#ifndef NORM_DY
#define NORM_DY 0
#endif
#ifndef NORM_DX
#define NORM_DX 0
#endif
#ifndef NORM_RES
#define NORM_RES 0
#endif
#ifndef NORM_DXC
#define NORM_DXC 0
#endif

#define FOR_EACH_ROW(row, rows) \
  for (ulong row = get_group_id(0); row < (rows); row += get_num_groups(0))
#define FOR_EACH_COL(j, cols) \
  for (ulong j = get_local_id(0); j < (cols); j += get_local_size(0))

// Sum over the work-group; every item gets the total. Ends with a barrier (scratch reusable).
#define group_sum group_sum_acc

// mean (0 for RMS) and rstd of one row.
void row_stats(__global const OS_TYPE(NORM_X)* x, ulong cols, float eps, int rms,
               __local acc_t* scratch, acc_t* mean_out, acc_t* rstd_out) {
  // Every item reaches every barrier: the LayerNorm mean is computed for RMS too, then unused.
  acc_t partial = 0;
  FOR_EACH_COL(j, cols) partial += (acc_t)OS_LOAD(NORM_X, x, j);
  const acc_t total = group_sum(scratch, partial);
  const acc_t mean = rms ? (acc_t)0 : total / (acc_t)cols;
  acc_t partial_sq = 0;
  FOR_EACH_COL(j, cols) {
    const acc_t d = (acc_t)OS_LOAD(NORM_X, x, j) - mean;
    partial_sq += d * d;
  }
  const acc_t variance = group_sum(scratch, partial_sq) / (acc_t)cols;
  *mean_out = mean;
  *rstd_out = (acc_t)1 / sqrt(variance + (acc_t)eps);
}

__kernel void norm_forward(__global const OS_TYPE(NORM_X)* x, __global const float* gamma,
                           __global const float* beta, __global OS_TYPE(NORM_Y)* y, ulong rows,
                           ulong cols,
                           float eps, int rms, int has_gamma, int has_beta,
                           __global const OS_TYPE(NORM_RES)* res, __global OS_TYPE(NORM_X)* sum,
                           int has_res, __local acc_t* scratch) {
  FOR_EACH_ROW(row, rows) {
    __global const OS_TYPE(NORM_X)* xr = x + row * cols;
    __global OS_TYPE(NORM_Y)* yr = y + row * cols;
    if (has_res) {  // the row's sum first; then it is the row normalised, as stored
      FOR_EACH_COL(j, cols) {
        OS_STORE(NORM_X, sum + row * cols, j,
                 OS_LOAD(NORM_X, xr, j) + OS_LOAD(NORM_RES, res + row * cols, j));
      }
      xr = sum + row * cols;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);  // (outside the branch: see norm_backward_rows)
    acc_t mean, rstd;
    row_stats(xr, cols, eps, rms, scratch, &mean, &rstd);
    FOR_EACH_COL(j, cols) {
      float v = (float)(((acc_t)OS_LOAD(NORM_X, xr, j) - mean) * rstd);
      if (has_gamma) v *= gamma[j];
      if (has_beta) v += beta[j];
      OS_STORE(NORM_Y, yr, j, v);
    }
  }
}

// dx per row; stats (2 floats per row: mean, rstd) are written for the parameter gradients.
// LayerNorm: dx = rstd (g - mean(g) - xhat mean(g xhat)); RMS: dx = rstd (g - xhat mean(g xhat)),
// g = dy * gamma; plus dres where has_dres (in dx's format, possibly dx itself: each element is
// read before the same item writes it).
__kernel void norm_backward_rows(__global const OS_TYPE(NORM_X)* x, __global const float* gamma,
                                 __global const OS_TYPE(NORM_DY)* dy,
                                 __global OS_TYPE(NORM_DX)* dx,
                                 __global const OS_TYPE(NORM_DX)* dres,
                                 __global float* stats, ulong rows, ulong cols, float eps,
                                 int rms, int has_gamma, int has_dx, int has_dres,
                                 __global OS_TYPE(NORM_DXC)* dx_copy, int has_copy,
                                 __local acc_t* scratch) {
  FOR_EACH_ROW(row, rows) {
    __global const OS_TYPE(NORM_X)* xr = x + row * cols;
    __global const OS_TYPE(NORM_DY)* dyr = dy + row * cols;
    acc_t mean, rstd;
    row_stats(xr, cols, eps, rms, scratch, &mean, &rstd);
    if (get_local_id(0) == 0) {
      stats[2 * row] = (float)mean;
      stats[2 * row + 1] = (float)rstd;
    }
    // Computed even without dx: no barrier may sit in a branch (PoCL miscompiles such kernels
    // even when the branch is uniform); only the stores are conditional.
    acc_t partial_g = 0, partial_gx = 0;
    FOR_EACH_COL(j, cols) {
      const acc_t g =
          (acc_t)OS_LOAD(NORM_DY, dyr, j) * (has_gamma ? (acc_t)gamma[j] : (acc_t)1);
      const acc_t xhat = ((acc_t)OS_LOAD(NORM_X, xr, j) - mean) * rstd;
      partial_g += g;
      partial_gx += g * xhat;
    }
    const acc_t sum_g = group_sum(scratch, partial_g);
    const acc_t mean_g = rms ? (acc_t)0 : sum_g / (acc_t)cols;
    const acc_t mean_gx = group_sum(scratch, partial_gx) / (acc_t)cols;
    __global OS_TYPE(NORM_DX)* dxr = dx + row * cols;
    FOR_EACH_COL(j, cols) {
      const acc_t g =
          (acc_t)OS_LOAD(NORM_DY, dyr, j) * (has_gamma ? (acc_t)gamma[j] : (acc_t)1);
      const acc_t xhat = ((acc_t)OS_LOAD(NORM_X, xr, j) - mean) * rstd;
      float out = (float)(rstd * (g - mean_g - xhat * mean_gx));
      if (has_dres) out += OS_LOAD(NORM_DX, dres + row * cols, j);
      if (has_dx) OS_STORE(NORM_DX, dxr, j, out);
      if (has_copy) OS_STORE(NORM_DXC, dx_copy + row * cols, j, out);
    }
  }
}

// Register forms for rows of cols % 4 == 0 and cols <= 16 * local size (the host's choice): each
// item holds the quads lid, lid + local size, ... (NORM_QUADS at most) of its row, read once as
// vectors (coalesced; 8 bytes per quad for 16-bit operands), and writes each result once.
#define NORM_QUADS 4
#define FOR_EACH_QUAD(i, q, quads)                                           \
  for (int i = 0; i < NORM_QUADS; ++i)                                       \
    for (ulong q = get_local_id(0) + (ulong)i * get_local_size(0); q < (quads); q = (quads))

inline acc_t quad_sum(float4 v) { return (acc_t)v.x + (acc_t)v.y + (acc_t)v.z + (acc_t)v.w; }

// Double accumulators (LN_FUSED, group_reduce.cl): a row's sums in one group_sums pass (scratch
// of NORM_SUMS acc_t per item), the variance as E[x^2] - mean^2 and sum(g xhat) as
// rstd (sum(g x) - mean sum(g)) from exact float products; the outputs in float from the double
// statistics (row_center). Float accumulators: two-pass sums, one reduction each.
#if LN_FUSED
inline acc_t quad_dot(float4 a, float4 b) {
  return (double)a.x * b.x + (double)a.y * b.y + (double)a.z * b.z + (double)a.w * b.w;
}

// mean (0 for RMS) and rstd from the sums of x and x^2 of a row of cols elements.
inline void stats_from_sums(double sum, double sum_sq, ulong cols, float eps, int rms,
                            double* mean, double* rstd) {
  if (rms) {
    *mean = 0.0;
    *rstd = 1.0 / sqrt(sum_sq / (double)cols + (double)eps);
  } else {
    moments_from_sums(sum, sum_sq, (double)cols, eps, mean, rstd);
  }
}
#else
// mean (0 for RMS) and rstd of the row whose quads this item holds in v.
void quad_row_stats(const float4* v, ulong cols, float eps, int rms, __local acc_t* scratch,
                    acc_t* mean_out, acc_t* rstd_out) {
  const ulong quads = cols / 4;
  acc_t partial = 0;
  FOR_EACH_QUAD(i, q, quads) partial += quad_sum(v[i]);
  const acc_t total = group_sum(scratch, partial);
  const acc_t mean = rms ? (acc_t)0 : total / (acc_t)cols;
  acc_t partial_sq = 0;
  FOR_EACH_QUAD(i, q, quads) {
    const float4 d = v[i] - (float)mean;
    partial_sq += quad_sum(d * d);
  }
  const acc_t variance = group_sum(scratch, partial_sq) / (acc_t)cols;
  *mean_out = mean;
  *rstd_out = (acc_t)1 / sqrt(variance + (acc_t)eps);
}
#endif

// (v - mean) rstd per element, in float.
#if LN_FUSED
#define NORM_CENTER(mean, rstd) const row_center_t center = row_center(mean, rstd)
inline float4 quad_normalized(row_center_t c, float4 v) {
  return (float4)(normalized(c, v.x), normalized(c, v.y), normalized(c, v.z), normalized(c, v.w));
}
#define NORM_XHAT(v) quad_normalized(center, (v))
#else
#define NORM_CENTER(mean, rstd) const float center_mean = (float)(mean), center_rstd = (float)(rstd)
#define NORM_XHAT(v) (((v) - center_mean) * center_rstd)
#endif

__kernel void norm_forward_quads(__global const OS_TYPE(NORM_X)* x, __global const float* gamma,
                                 __global const float* beta, __global OS_TYPE(NORM_Y)* y,
                                 ulong rows, ulong cols, float eps, int rms, int has_gamma,
                                 int has_beta, __global const OS_TYPE(NORM_RES)* res,
                                 __global OS_TYPE(NORM_X)* sum, int has_res,
                                 __local acc_t* scratch) {
  const ulong quads = cols / 4;
  FOR_EACH_ROW(row, rows) {
    __global const OS_TYPE(NORM_X)* xr = x + row * cols;
    float4 v[NORM_QUADS];
    FOR_EACH_QUAD(i, q, quads) {
      v[i] = OS_LOAD4(NORM_X, xr, q);
      if (has_res) {
        v[i] += OS_LOAD4(NORM_RES, res + row * cols, q);
        OS_STORE4(NORM_X, sum + row * cols, q, v[i]);
#if NORM_X != 0
        v[i] = OS_LOAD4(NORM_X, sum + row * cols, q);  // normalised as stored (rounded)
#endif
      }
    }
    acc_t mean, rstd;
#if LN_FUSED
    double sums[2] = {0.0, 0.0};
    FOR_EACH_QUAD(i, q, quads) {
      sums[0] += quad_sum(v[i]);
      sums[1] += quad_dot(v[i], v[i]);
    }
    group_sums(scratch, sums, 2);
    stats_from_sums(sums[0], sums[1], cols, eps, rms, &mean, &rstd);
#else
    quad_row_stats(v, cols, eps, rms, scratch, &mean, &rstd);
#endif
    NORM_CENTER(mean, rstd);
    FOR_EACH_QUAD(i, q, quads) {
      float4 out = NORM_XHAT(v[i]);
      if (has_gamma) out *= vload4(q, gamma);
      if (has_beta) out += vload4(q, beta);
      OS_STORE4(NORM_Y, y + row * cols, q, out);
    }
  }
}

// norm_backward_rows for rows held in registers: x and dy are read once.
__kernel void norm_backward_rows_quads(__global const OS_TYPE(NORM_X)* x,
                                       __global const float* gamma,
                                       __global const OS_TYPE(NORM_DY)* dy,
                                       __global OS_TYPE(NORM_DX)* dx,
                                       __global const OS_TYPE(NORM_DX)* dres,
                                       __global float* stats, ulong rows, ulong cols, float eps,
                                       int rms, int has_gamma, int has_dx, int has_dres,
                                       __global OS_TYPE(NORM_DXC)* dx_copy, int has_copy,
                                       __local acc_t* scratch) {
  const ulong quads = cols / 4;
  FOR_EACH_ROW(row, rows) {
    float4 v[NORM_QUADS], g[NORM_QUADS];
    FOR_EACH_QUAD(i, q, quads) {
      v[i] = OS_LOAD4(NORM_X, x + row * cols, q);
      g[i] = OS_LOAD4(NORM_DY, dy + row * cols, q);
      if (has_gamma) g[i] *= vload4(q, gamma);
    }
    acc_t mean, rstd, sum_g, sum_gx;
#if LN_FUSED
    // sum(g xhat) = rstd (sum(g x) - mean sum(g)): all four sums in one pass.
    double sums[4] = {0.0, 0.0, 0.0, 0.0};
    FOR_EACH_QUAD(i, q, quads) {
      sums[0] += quad_sum(v[i]);
      sums[1] += quad_dot(v[i], v[i]);
      sums[2] += quad_sum(g[i]);
      sums[3] += quad_dot(g[i], v[i]);
    }
    group_sums(scratch, sums, 4);
    stats_from_sums(sums[0], sums[1], cols, eps, rms, &mean, &rstd);
    sum_g = sums[2];
    sum_gx = rstd * (sums[3] - mean * sums[2]);
#else
    quad_row_stats(v, cols, eps, rms, scratch, &mean, &rstd);
    acc_t partial_g = 0, partial_gx = 0;
    FOR_EACH_QUAD(i, q, quads) {
      partial_g += quad_sum(g[i]);
      partial_gx += quad_sum(g[i] * ((v[i] - (float)mean) * (float)rstd));
    }
    sum_g = group_sum(scratch, partial_g);
    sum_gx = group_sum(scratch, partial_gx);
#endif
    if (get_local_id(0) == 0) {
      stats[2 * row] = (float)mean;
      stats[2 * row + 1] = (float)rstd;
    }
    const float mean_g = rms ? 0.0f : (float)(sum_g / (acc_t)cols);
    const float mean_gx = (float)(sum_gx / (acc_t)cols);
    NORM_CENTER(mean, rstd);
    FOR_EACH_QUAD(i, q, quads) {
      if (has_dx) {
        float4 out = (float)rstd * (g[i] - mean_g - NORM_XHAT(v[i]) * mean_gx);
        if (has_dres) out += OS_LOAD4(NORM_DX, dres + row * cols, q);
        OS_STORE4(NORM_DX, dx + row * cols, q, out);
        if (has_copy) OS_STORE4(NORM_DXC, dx_copy + row * cols, q, out);
      }
    }
  }
}

// dgamma[j] = sum_r dy[r, j] xhat[r, j]; dbeta[j] = sum_r dy[r, j].
__kernel void norm_backward_params(__global const OS_TYPE(NORM_X)* x,
                                   __global const OS_TYPE(NORM_DY)* dy,
                                   __global const float* stats, __global float* dgamma,
                                   __global float* dbeta, ulong rows, ulong cols,
                                   int has_dgamma, int has_dbeta) {
  for (ulong j = get_global_id(0); j < cols; j += get_global_size(0)) {
    acc_t sum_gx = 0, sum_g = 0;
    for (ulong r = 0; r < rows; ++r) {
      const acc_t g = (acc_t)OS_LOAD(NORM_DY, dy, r * cols + j);
      const acc_t xhat =
          ((acc_t)OS_LOAD(NORM_X, x, r * cols + j) - (acc_t)stats[2 * r]) * (acc_t)stats[2 * r + 1];
      sum_gx += g * xhat;
      sum_g += g;
    }
    if (has_dgamma) dgamma[j] = (float)sum_gx;
    if (has_dbeta) dbeta[j] = (float)sum_g;
  }
}
