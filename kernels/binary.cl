// Binary ops with NumPy broadcasting over up to 4 dimensions (aethercl_binary) and their
// gradients reduced back to each operand's shape (aethercl_binary_backward).
//
// Shapes are padded to 4 dimensions (leading 1s). The forward walks the output; each operand is
// addressed in one of three ways chosen by the host: its own index (same shape as the output),
// the output index modulo its size (it equals the output's trailing dimensions), or through
// per-dimension strides that are 0 along broadcast dimensions. The backward gives one work-item
// per element of the operand: it sums dc times the partial derivative over the output positions
// that read the element (the broadcast dimensions), in ascending order, in acc_t.
// Operand formats (operand_storage.cl): BIN_A of a, BIN_B of b, BIN_C of c and dc, BIN_DA of da,
// BIN_DB of db; float32 when not set.

#include "operand_storage.cl"
#ifndef BIN_A
#define BIN_A 0
#endif
#ifndef BIN_B
#define BIN_B 0
#endif
#ifndef BIN_C
#define BIN_C 0
#endif
#ifndef BIN_DA
#define BIN_DA 0
#endif
#ifndef BIN_DB
#define BIN_DB 0
#endif

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#define ADDRESS_SAME 0
#define ADDRESS_PERIODIC 1
#define ADDRESS_STRIDED 2

// The offset of output element i in an operand.
inline ulong operand_offset(ulong i, int mode, ulong period, ulong4 out_shape, ulong4 stride) {
  if (mode == ADDRESS_SAME) return i;
  if (mode == ADDRESS_PERIODIC) return i % period;
  ulong rest = i;
  const ulong c3 = rest % out_shape.w;
  rest /= out_shape.w;
  const ulong c2 = rest % out_shape.z;
  rest /= out_shape.z;
  const ulong c1 = rest % out_shape.y;
  const ulong c0 = rest / out_shape.y;
  return c0 * stride.x + c1 * stride.y + c2 * stride.z + c3 * stride.w;
}

#define BINARY_FORWARD(NAME, EXPR)                                                           \
  __kernel void binary_##NAME(__global const OS_TYPE(BIN_A)* a_in,                         \
                              __global const OS_TYPE(BIN_B)* b_in, __global OS_TYPE(BIN_C)* c, \
                              ulong n, ulong4 out_shape, int mode_a, ulong period_a,         \
                              ulong4 stride_a, int mode_b, ulong period_b, ulong4 stride_b) { \
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                       \
      const float a =                                                                        \
          OS_LOAD(BIN_A, a_in, operand_offset(i, mode_a, period_a, out_shape, stride_a));    \
      const float b =                                                                        \
          OS_LOAD(BIN_B, b_in, operand_offset(i, mode_b, period_b, out_shape, stride_b));    \
      OS_STORE(BIN_C, c, i, (EXPR));                                                         \
    }                                                                                        \
  }

// The forward where a, b and c have the same shape: four elements per work-item (quad q is
// elements 4q .. 4q + 3), the n % 4 past the last quad one per item.
#define BINARY_FORWARD_SAME(NAME, EXPR)                                                      \
  inline float NAME##_of(float a, float b) { return (EXPR); }                                \
  __kernel void binary_##NAME##_same(__global const OS_TYPE(BIN_A)* a_in,                   \
                                     __global const OS_TYPE(BIN_B)* b_in,                   \
                                     __global OS_TYPE(BIN_C)* c, ulong n) {                 \
    const ulong quads = n / 4;                                                               \
    for (ulong q = get_global_id(0); q < quads; q += get_global_size(0)) {                   \
      const float4 a = OS_LOAD4(BIN_A, a_in, q);                                             \
      const float4 b = OS_LOAD4(BIN_B, b_in, q);                                             \
      OS_STORE4(BIN_C, c, q, (float4)(NAME##_of(a.s0, b.s0), NAME##_of(a.s1, b.s1),          \
                                      NAME##_of(a.s2, b.s2), NAME##_of(a.s3, b.s3)));        \
    }                                                                                        \
    for (ulong i = quads * 4 + get_global_id(0); i < n; i += get_global_size(0)) {           \
      OS_STORE(BIN_C, c, i, NAME##_of(OS_LOAD(BIN_A, a_in, i), OS_LOAD(BIN_B, b_in, i)));     \
    }                                                                                        \
  }

// Gradient of one operand X (the other is Y). x_shape: X's padded shape; out_stride: output
// strides; y_stride: Y's strides over output coordinates (0 where Y is broadcast); red_size: the
// output size along the dimensions X is broadcast in (1 elsewhere), red_count their product.
// X_IS_A selects which of a and b the element x is. EXPR uses a, b and g (= dc). XS, YS and DXS
// are the formats of x, y and dx.
#define BINARY_GRAD(NAME, SIDE, X_IS_A, EXPR, XS, YS, DXS)                                   \
  __kernel void binary_##NAME##_grad_##SIDE(                                                 \
      __global const OS_TYPE(XS)* x_in, __global const OS_TYPE(YS)* y_in,                    \
      __global const OS_TYPE(BIN_C)* dc, __global OS_TYPE(DXS)* dx, ulong count,             \
      ulong4 x_shape, ulong4 out_stride, ulong4 y_stride, ulong4 red_size, ulong red_count) { \
    for (ulong j = get_global_id(0); j < count; j += get_global_size(0)) {                   \
      ulong rest = j;                                                                        \
      const ulong x3 = rest % x_shape.w;                                                     \
      rest /= x_shape.w;                                                                     \
      const ulong x2 = rest % x_shape.z;                                                     \
      rest /= x_shape.z;                                                                     \
      const ulong x1 = rest % x_shape.y;                                                     \
      const ulong x0 = rest / x_shape.y;                                                     \
      const ulong base_out = x0 * out_stride.x + x1 * out_stride.y + x2 * out_stride.z +     \
                             x3 * out_stride.w;                                              \
      const ulong base_y = x0 * y_stride.x + x1 * y_stride.y + x2 * y_stride.z +             \
                           x3 * y_stride.w;                                                  \
      const float x_value = OS_LOAD(XS, x_in, j);                                            \
      acc_t sum = 0;                                                                         \
      for (ulong k = 0; k < red_count; ++k) {                                                \
        ulong r = k;                                                                         \
        const ulong r3 = r % red_size.w;                                                     \
        r /= red_size.w;                                                                     \
        const ulong r2 = r % red_size.z;                                                     \
        r /= red_size.z;                                                                     \
        const ulong r1 = r % red_size.y;                                                     \
        const ulong r0 = r / red_size.y;                                                     \
        const ulong o = base_out + r0 * out_stride.x + r1 * out_stride.y +                   \
                        r2 * out_stride.z + r3 * out_stride.w;                               \
        const ulong yo = base_y + r0 * y_stride.x + r1 * y_stride.y + r2 * y_stride.z +       \
                         r3 * y_stride.w;                                                    \
        const float y_value = OS_LOAD(YS, y_in, yo);                                         \
        const float a = X_IS_A ? x_value : y_value;                                          \
        const float b = X_IS_A ? y_value : x_value;                                          \
        const float g = OS_LOAD(BIN_C, dc, o);                                               \
        sum += (acc_t)(EXPR);                                                                \
      }                                                                                      \
      OS_STORE(DXS, dx, j, (float)sum);                                                      \
    }                                                                                        \
  }

#define BINARY(NAME, FORWARD, GRAD_A, GRAD_B)             \
  BINARY_FORWARD(NAME, FORWARD)                           \
  BINARY_FORWARD_SAME(NAME, FORWARD)                      \
  BINARY_GRAD(NAME, a, 1, GRAD_A, BIN_A, BIN_B, BIN_DA) \
  BINARY_GRAD(NAME, b, 0, GRAD_B, BIN_B, BIN_A, BIN_DB)

BINARY(add, a + b, g, g)
BINARY(sub, a - b, g, -g)
BINARY(mul, a * b, g * b, g * a)
BINARY(div, a / b, g / b, -g * a / (b * b))
BINARY(maximum, isnan(a) || a > b ? a : b, a > b ? g : (a == b ? 0.5f * g : 0.0f),
       b > a ? g : (a == b ? 0.5f * g : 0.0f))
BINARY(minimum, isnan(a) || a < b ? a : b, a < b ? g : (a == b ? 0.5f * g : 0.0f),
       b < a ? g : (a == b ? 0.5f * g : 0.0f))
BINARY(power, pow(a, b), g * b * pow(a, b - 1.0f), g * pow(a, b) * log(a))
