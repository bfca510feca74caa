// Elementwise float32 kernels: add, mul, mul_backward, gelu and gelu_backward over n elements,
// each in two forms over a grid-stride range (any n works with a bounded launch; 64-bit indices).
// The _vec4 one (GPUs) takes four elements per step through float4 pointers, one 16-byte access
// per operand: buffers start at a cl_mem's base, which OpenCL aligns to
// CL_DEVICE_MEM_BASE_ADDR_ALIGN. The _lanes one (CPUs, where PoCL does not vectorise a grid-stride
// loop across work-items) takes ACL_LANES elements per step in its own vector code. Both cover the
// first n - n % width elements, and items 0 .. n % width - 1 take one tail element each (the host
// launches max(n / width, n % width) items). Every item reads its elements before writing them,
// so an output may alias any input.
// erf/exp are ACL_ERF/ACL_EXP of kernels/fastmath.cl (branch-free on CPUs). mul_backward is one
// launch of elementwise_mul_backward, or elementwise_mul for the one output asked for.

#define GRID_STRIDE_LOOP(i, n) \
  for (ulong i = get_global_id(0); i < (n); i += get_global_size(0))

#define VECTORS_AND_TAIL(n, width, vector_step, scalar_step)                               \
  GRID_STRIDE_LOOP(j, (n) / (width)) vector_step;                                          \
  {                                                                                        \
    ulong i = (n) / (width) * (width) + get_global_id(0);                                  \
    if (i < (n)) scalar_step;                                                              \
  }
#define LANES_AND_TAIL(n, vector_step, scalar_step) \
  VECTORS_AND_TAIL(n, ACL_LANES, vector_step, scalar_step)
#define VEC4_AND_TAIL(n, vector_step, scalar_step) VECTORS_AND_TAIL(n, 4, vector_step, scalar_step)
// Element j of p as float4 j (the _vec4 forms).
#define IN4(p, j) (((__global const float4*)(p))[j])
#define OUT4(p, j) (((__global float4*)(p))[j])

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

__kernel void elementwise_add_lanes(__global const float* a, __global const float* b,
                                    __global float* c, ulong n) {
  LANES_AND_TAIL(n, ACL_VSTORE(ACL_VLOAD(j, a) + ACL_VLOAD(j, b), j, c), c[i] = a[i] + b[i])
}

__kernel void elementwise_add_vec4(__global const float* a, __global const float* b,
                                   __global float* c, ulong n) {
  VEC4_AND_TAIL(n, OUT4(c, j) = IN4(a, j) + IN4(b, j), c[i] = a[i] + b[i])
}

__kernel void elementwise_mul_lanes(__global const float* a, __global const float* b,
                                    __global float* c, ulong n) {
  LANES_AND_TAIL(n, ACL_VSTORE(ACL_VLOAD(j, a) * ACL_VLOAD(j, b), j, c), c[i] = a[i] * b[i])
}

__kernel void elementwise_mul_vec4(__global const float* a, __global const float* b,
                                   __global float* c, ulong n) {
  VEC4_AND_TAIL(n, OUT4(c, j) = IN4(a, j) * IN4(b, j), c[i] = a[i] * b[i])
}

// dA = dC * B and dB = dC * A in one pass (mul_backward with both outputs).
void mul_backward_step(__global const float* dc, __global const float* a, __global const float* b,
                       __global float* da, __global float* db, ulong i) {
  const float g = dc[i], x = a[i], y = b[i];
  da[i] = g * y;
  db[i] = g * x;
}

void mul_backward_lanes_step(__global const float* dc, __global const float* a,
                             __global const float* b, __global float* da, __global float* db,
                             ulong j) {
  const acl_floatv g = ACL_VLOAD(j, dc), x = ACL_VLOAD(j, a), y = ACL_VLOAD(j, b);
  ACL_VSTORE(g * y, j, da);
  ACL_VSTORE(g * x, j, db);
}

void mul_backward_vec4_step(__global const float* dc, __global const float* a,
                            __global const float* b, __global float* da, __global float* db,
                            ulong j) {
  const float4 g = IN4(dc, j), x = IN4(a, j), y = IN4(b, j);
  OUT4(da, j) = g * y;
  OUT4(db, j) = g * x;
}

__kernel void elementwise_mul_backward_lanes(__global const float* dc, __global const float* a,
                                             __global const float* b, __global float* da,
                                             __global float* db, ulong n) {
  LANES_AND_TAIL(n, mul_backward_lanes_step(dc, a, b, da, db, j),
                 mul_backward_step(dc, a, b, da, db, i))
}

__kernel void elementwise_mul_backward_vec4(__global const float* dc, __global const float* a,
                                            __global const float* b, __global float* da,
                                            __global float* db, ulong n) {
  VEC4_AND_TAIL(n, mul_backward_vec4_step(dc, a, b, da, db, j),
                mul_backward_step(dc, a, b, da, db, i))
}

// Exact erf form: y = 0.5 x (1 + erf(x / sqrt 2)).
acl_floatv gelu_lanes(acl_floatv v) { return 0.5f * v * (1.0f + ACL_ERFV(v * INV_SQRT2)); }
float4 gelu4(float4 v) { return 0.5f * v * (1.0f + ACL_ERF4(v * INV_SQRT2)); }
float gelu1(float v) { return 0.5f * v * (1.0f + ACL_ERF(v * INV_SQRT2)); }

// Phi(x) + x * phi(x), Phi the normal CDF and phi its density.
acl_floatv gelu_slope_lanes(acl_floatv v) {
  acl_floatv cdf = 0.5f * (1.0f + ACL_ERFV(v * INV_SQRT2));
  acl_floatv pdf = ACL_EXPV(-0.5f * v * v) * INV_SQRT_2PI;
  return cdf + v * pdf;
}
float4 gelu_slope4(float4 v) {
  float4 cdf = 0.5f * (1.0f + ACL_ERF4(v * INV_SQRT2));
  float4 pdf = ACL_EXP4(-0.5f * v * v) * INV_SQRT_2PI;
  return cdf + v * pdf;
}
float gelu_slope1(float v) {
  float cdf = 0.5f * (1.0f + ACL_ERF(v * INV_SQRT2));
  float pdf = ACL_EXP(-0.5f * v * v) * INV_SQRT_2PI;
  return cdf + v * pdf;
}

__kernel void elementwise_gelu_vec4(__global const float* x, __global float* y, ulong n) {
  VEC4_AND_TAIL(n, OUT4(y, j) = gelu4(IN4(x, j)), y[i] = gelu1(x[i]))
}

__kernel void elementwise_gelu_lanes(__global const float* x, __global float* y, ulong n) {
  LANES_AND_TAIL(n, ACL_VSTORE(gelu_lanes(ACL_VLOAD(j, x)), j, y), y[i] = gelu1(x[i]))
}

// dx = dy * (Phi(x) + x * phi(x)).
__kernel void elementwise_gelu_backward_vec4(__global const float* x, __global const float* dy,
                                             __global float* dx, ulong n) {
  VEC4_AND_TAIL(n, OUT4(dx, j) = IN4(dy, j) * gelu_slope4(IN4(x, j)),
                dx[i] = dy[i] * gelu_slope1(x[i]))
}

__kernel void elementwise_gelu_backward_lanes(__global const float* x, __global const float* dy,
                                              __global float* dx, ulong n) {
  LANES_AND_TAIL(n, ACL_VSTORE(ACL_VLOAD(j, dy) * gelu_slope_lanes(ACL_VLOAD(j, x)), j, dx),
                 dx[i] = dy[i] * gelu_slope1(x[i]))
}
