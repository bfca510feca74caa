// Elementwise unary ops and their derivatives (aethercl_unary / aethercl_unary_backward): one
// grid-stride kernel per op, generated from the formulas below. y may alias x and dx may alias dy
// (each item reads its elements before writing them). Operand formats (operand_storage.cl): UN_X of
// x, UN_Y of y, UN_DY of dy, UN_DX of dx; float32 when not set.

#include "operand_storage.cl"
#ifndef UN_X
#define UN_X 0
#endif
#ifndef UN_DY
#define UN_DY 0
#endif
#ifndef UN_Y
#define UN_Y 0
#endif
#ifndef UN_DX
#define UN_DX 0
#endif

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

// Overflow-free logistic function.
inline float sigmoid_of(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + exp(-x));
  const float e = exp(x);
  return e / (1.0f + e);
}

inline float gelu_tanh_of(float x) {
  const float inner = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x);
  return 0.5f * x * (1.0f + tanh(inner));
}

inline float gelu_tanh_grad(float x) {
  const float inner = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x);
  const float t = tanh(inner);
  const float d_inner = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
}

// NaN inputs propagate (relu, clamps and leaky_relu keep x when a comparison is false).
// UNARY(name, forward expression of x and alpha, derivative expression of x and alpha). Each
// work-item takes four consecutive elements (quad q: elements 4q .. 4q + 3, read and written as
// vectors); the n % 4 elements past the last quad go one per item.
#define UNARY(NAME, FORWARD, DERIVATIVE)                                                     \
  inline float NAME##_forward(float x, float alpha) { return (FORWARD); }                    \
  inline float NAME##_derivative(float x, float alpha) { return (DERIVATIVE); }              \
  __kernel void unary_##NAME(__global const OS_TYPE(UN_X)* in, __global OS_TYPE(UN_Y)* out,    \
                             ulong n, float alpha) {                                         \
    const ulong quads = n / 4;                                                               \
    for (ulong q = get_global_id(0); q < quads; q += get_global_size(0)) {                   \
      const float4 x = OS_LOAD4(UN_X, in, q);                                                \
      OS_STORE4(UN_Y, out, q,                                                                \
                (float4)(NAME##_forward(x.s0, alpha), NAME##_forward(x.s1, alpha),           \
                         NAME##_forward(x.s2, alpha), NAME##_forward(x.s3, alpha)));         \
    }                                                                                        \
    for (ulong i = quads * 4 + get_global_id(0); i < n; i += get_global_size(0)) {           \
      OS_STORE(UN_Y, out, i, NAME##_forward(OS_LOAD(UN_X, in, i), alpha));                   \
    }                                                                                        \
  }                                                                                          \
  __kernel void unary_##NAME##_backward(__global const OS_TYPE(UN_X)* in,                    \
                                        __global const OS_TYPE(UN_DY)* dy,                   \
                                        __global OS_TYPE(UN_DX)* dx, ulong n, float alpha) { \
    const ulong quads = n / 4;                                                               \
    for (ulong q = get_global_id(0); q < quads; q += get_global_size(0)) {                   \
      const float4 x = OS_LOAD4(UN_X, in, q);                                                \
      const float4 slope =                                                                   \
          (float4)(NAME##_derivative(x.s0, alpha), NAME##_derivative(x.s1, alpha),           \
                   NAME##_derivative(x.s2, alpha), NAME##_derivative(x.s3, alpha));          \
      OS_STORE4(UN_DX, dx, q, OS_LOAD4(UN_DY, dy, q) * slope);                               \
    }                                                                                        \
    for (ulong i = quads * 4 + get_global_id(0); i < n; i += get_global_size(0)) {           \
      OS_STORE(UN_DX, dx, i, OS_LOAD(UN_DY, dy, i) * NAME##_derivative(OS_LOAD(UN_X, in, i), \
                                                                       alpha));              \
    }                                                                                        \
  }

UNARY(relu, x < 0.0f ? 0.0f : x, x > 0.0f ? 1.0f : 0.0f)
UNARY(leaky_relu, x < 0.0f ? alpha * x : x, x > 0.0f ? 1.0f : alpha)
UNARY(sigmoid, sigmoid_of(x), sigmoid_of(x) * (1.0f - sigmoid_of(x)))
UNARY(tanh, tanh(x), 1.0f - tanh(x) * tanh(x))
UNARY(silu, x * sigmoid_of(x), sigmoid_of(x) * (1.0f + x * (1.0f - sigmoid_of(x))))
UNARY(gelu, 0.5f * x * (1.0f + erf(x * INV_SQRT2)),
      0.5f * (1.0f + erf(x * INV_SQRT2)) + x * exp(-0.5f * x * x) * INV_SQRT_2PI)
UNARY(gelu_tanh, gelu_tanh_of(x), gelu_tanh_grad(x))
UNARY(exp, exp(x), exp(x))
UNARY(log, log(x), 1.0f / x)
UNARY(sqrt, sqrt(x), 0.5f / sqrt(x))
UNARY(rsqrt, rsqrt(x), -0.5f * rsqrt(x) / x)
UNARY(abs, fabs(x), x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f))
UNARY(neg, -x, -1.0f)
UNARY(add_scalar, x + alpha, 1.0f)
UNARY(sub_scalar, x - alpha, 1.0f)
UNARY(rsub_scalar, alpha - x, -1.0f)
UNARY(mul_scalar, x * alpha, alpha)
UNARY(div_scalar, x / alpha, 1.0f / alpha)
UNARY(rdiv_scalar, alpha / x, -alpha / (x * x))
UNARY(max_scalar, x < alpha ? alpha : x, x >= alpha ? 1.0f : 0.0f)
UNARY(min_scalar, x > alpha ? alpha : x, x <= alpha ? 1.0f : 0.0f)
UNARY(pow_scalar, pow(x, alpha), alpha == 0.0f ? 0.0f : alpha * pow(x, alpha - 1.0f))
