// Elementwise float32 kernels: add, mul, gelu and gelu_backward over n elements.
// Each work-item walks a grid-stride range, so any n works with a bounded launch; indices are
// 64-bit. erf/exp are ACL_ERF/ACL_EXP of kernels/fastmath.cl (branch-free on CPUs). mul_backward
// is one launch of elementwise_mul_backward, or elementwise_mul for the one output asked for.

#define GRID_STRIDE_LOOP(i, n) \
  for (ulong i = get_global_id(0); i < (n); i += get_global_size(0))

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

__kernel void elementwise_add(__global const float* a, __global const float* b, __global float* c,
                         ulong n) {
  GRID_STRIDE_LOOP(i, n) c[i] = a[i] + b[i];
}

__kernel void elementwise_mul(__global const float* a, __global const float* b, __global float* c,
                         ulong n) {
  GRID_STRIDE_LOOP(i, n) c[i] = a[i] * b[i];
}

// dA = dC * B and dB = dC * A in one pass (mul_backward with both outputs).
__kernel void elementwise_mul_backward(__global const float* dc, __global const float* a,
                                       __global const float* b, __global float* da,
                                       __global float* db, ulong n) {
  GRID_STRIDE_LOOP(i, n) {
    const float g = dc[i], x = a[i], y = b[i];
    da[i] = g * y;
    db[i] = g * x;
  }
}

// GELU and its gradient as float8 over the first n - n % 8 elements (SIMD on CPUs, where PoCL
// does not vectorise a grid-stride loop across work-items), then a scalar tail of n % 8 elements.
#define GELU_EIGHTS_AND_TAIL(n, vector_step, scalar_step)                                  \
  GRID_STRIDE_LOOP(j, (n) / 8) vector_step;                                                \
  {                                                                                        \
    ulong i = (n) / 8 * 8 + get_global_id(0);                                              \
    if (i < (n)) scalar_step;                                                              \
  }

float8 gelu8(float8 v) { return 0.5f * v * (1.0f + ACL_ERF8(v * INV_SQRT2)); }
float gelu1(float v) { return 0.5f * v * (1.0f + ACL_ERF(v * INV_SQRT2)); }

// Phi(x) + x * phi(x), Phi the normal CDF and phi its density.
float8 gelu_slope8(float8 v) {
  float8 cdf = 0.5f * (1.0f + ACL_ERF8(v * INV_SQRT2));
  float8 pdf = ACL_EXP8(-0.5f * v * v) * INV_SQRT_2PI;
  return cdf + v * pdf;
}
float gelu_slope1(float v) {
  float cdf = 0.5f * (1.0f + ACL_ERF(v * INV_SQRT2));
  float pdf = ACL_EXP(-0.5f * v * v) * INV_SQRT_2PI;
  return cdf + v * pdf;
}

// Exact erf form: y = 0.5 x (1 + erf(x / sqrt 2)).
__kernel void elementwise_gelu(__global const float* x, __global float* y, ulong n) {
  GELU_EIGHTS_AND_TAIL(n, vstore8(gelu8(vload8(j, x)), j, y), y[i] = gelu1(x[i]))
}

// dx = dy * (Phi(x) + x * phi(x)).
__kernel void elementwise_gelu_backward(__global const float* x, __global const float* dy,
                                   __global float* dx, ulong n) {
  GELU_EIGHTS_AND_TAIL(n, vstore8(vload8(j, dy) * gelu_slope8(vload8(j, x)), j, dx),
                       dx[i] = dy[i] * gelu_slope1(x[i]))
}

// One element per work-item (GPUs: on the H200 the float8 forms above ran at 0.42x / 0.65x of a
// copy, one element per item at 0.71x / 0.87x; docs/PERFORMANCE.md).
__kernel void elementwise_gelu_scalar(__global const float* x, __global float* y, ulong n) {
  GRID_STRIDE_LOOP(i, n) y[i] = gelu1(x[i]);
}

__kernel void elementwise_gelu_backward_scalar(__global const float* x, __global const float* dy,
                                               __global float* dx, ulong n) {
  GRID_STRIDE_LOOP(i, n) dx[i] = dy[i] * gelu_slope1(x[i]);
}
