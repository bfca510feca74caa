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

// Exact erf form: y = 0.5 x (1 + erf(x / sqrt 2)).
__kernel void elementwise_gelu(__global const float* x, __global float* y, ulong n) {
  GRID_STRIDE_LOOP(i, n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erf(v * INV_SQRT2));
  }
}

// dx = dy * (Phi(x) + x * phi(x)), Phi the normal CDF and phi its density.
__kernel void elementwise_gelu_backward(__global const float* x, __global const float* dy,
                                   __global float* dx, ulong n) {
  GRID_STRIDE_LOOP(i, n) {
    float v = x[i];
    float cdf = 0.5f * (1.0f + erf(v * INV_SQRT2));
    float pdf = exp(-0.5f * v * v) * INV_SQRT_2PI;
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}
