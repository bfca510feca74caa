// Elementwise float32 kernels: add, mul, gelu and gelu_backward over n elements.
// Each work-item walks a grid-stride range, so any n works with a bounded launch; indices are
// 64-bit. mul_backward is two launches of elementwise_mul (a NULL output is simply not launched).

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

// The GELU kernels give each work-item GELU_VECTOR consecutive elements (one vector load and
// store; the host sizes the grid in vectors): with the erf evaluations of four elements
// independent, GPUs keep their memory busy instead of waiting on one element's arithmetic.
#define GELU_VECTOR 4
#define GRID_STRIDE_VECTORS(i, n)                                                \
  for (ulong i = get_global_id(0) * GELU_VECTOR; i < (n); i += get_global_size(0) * GELU_VECTOR)

// Exact erf form: y = 0.5 x (1 + erf(x / sqrt 2)).
inline float gelu(float v) { return 0.5f * v * (1.0f + erf(v * INV_SQRT2)); }
inline float4 gelu4(float4 v) { return 0.5f * v * (1.0f + erf(v * INV_SQRT2)); }

// dGELU/dx = Phi(x) + x * phi(x), Phi the normal CDF and phi its density.
inline float gelu_slope(float v) {
  return 0.5f * (1.0f + erf(v * INV_SQRT2)) + v * exp(-0.5f * v * v) * INV_SQRT_2PI;
}
inline float4 gelu_slope4(float4 v) {
  return 0.5f * (1.0f + erf(v * INV_SQRT2)) + v * exp(-0.5f * v * v) * INV_SQRT_2PI;
}

__kernel void elementwise_gelu(__global const float* x, __global float* y, ulong n) {
  GRID_STRIDE_VECTORS(i, n) {
    if (i + GELU_VECTOR <= n) {
      vstore4(gelu4(vload4(0, x + i)), 0, y + i);
    } else {
      for (ulong k = i; k < n; ++k) y[k] = gelu(x[k]);
    }
  }
}

// dx = dy * (Phi(x) + x * phi(x)).
__kernel void elementwise_gelu_backward(__global const float* x, __global const float* dy,
                                        __global float* dx, ulong n) {
  GRID_STRIDE_VECTORS(i, n) {
    if (i + GELU_VECTOR <= n) {
      vstore4(vload4(0, dy + i) * gelu_slope4(vload4(0, x + i)), 0, dx + i);
    } else {
      for (ulong k = i; k < n; ++k) dx[k] = dy[k] * gelu_slope(x[k]);
    }
  }
}
