// Optimiser updates (SGD with momentum / Nesterov / weight decay, AdamW; one tensor or several per
// launch) and global gradient-norm clipping computed on the device: per-chunk partial sums of
// squares, an ordered final sum and the clip coefficient, then a scale pass that reads the
// coefficient from device memory.

#if AETHERCL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

// The per-element updates, on values: the one-tensor kernels and optim_multi both call these,
// so the two paths run the same float operations in the same order (aethercl_optimizer_step_multi
// promises the bits of aethercl_optimizer_step). Contraction is off inside them so that no
// inlining context can fuse a multiply-add in one path and not in the other.

// PyTorch's SGD step: returns the new parameter; first_step initialises the momentum buffer *buf
// with the gradient.
inline float sgd_value(float param, float grad, float* buf, float lr, float weight_decay,
                       float momentum, float dampening, int nesterov, int first_step,
                       int has_momentum) {
#pragma OPENCL FP_CONTRACT OFF
  if (weight_decay != 0.0f) grad = grad + weight_decay * param;
  if (has_momentum) {
    const float b = first_step ? grad : momentum * *buf + (1.0f - dampening) * grad;
    *buf = b;
    grad = nesterov ? grad + momentum * b : b;
  }
  return param - lr * grad;
}

// AdamW: decoupled decay, then Adam with bias correction; returns the new parameter and updates
// *m and *v. step_size = lr / (1 - beta1^t) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t) come from
// the host (double, rounded to float).
inline float adamw_value(float param, float grad, float* m, float* v, float decay_factor,
                         float beta1, float beta2, float eps, float step_size,
                         float inv_sqrt_bc2) {
#pragma OPENCL FP_CONTRACT OFF
  param = param * decay_factor;
  const float m_new = beta1 * *m + (1.0f - beta1) * grad;
  const float v_new = beta2 * *v + (1.0f - beta2) * grad * grad;
  *m = m_new;
  *v = v_new;
  const float denominator = sqrt(v_new) * inv_sqrt_bc2 + eps;
  return param - step_size * (m_new / denominator);
}

// The hyper-parameters of one tensor's update, as the multi-tensor table holds them: mode bits
// (the aethercl_optimizer_kind, then SGD's flags) and six floats (SGD: lr, weight_decay,
// momentum, dampening; AdamW: the arguments of adamw_value after its buffers).
#define OPTIM_MODE_KIND 15
#define OPTIM_MODE_NESTEROV 16
#define OPTIM_MODE_FIRST_STEP 32
#define OPTIM_MODE_HAS_MOMENTUM 64
#define OPTIM_MODE_GATED 128

typedef struct optim_hyper {
  int mode;
  float h[6];
} optim_hyper;

inline float update_value(float param, float grad, float* a, float* b, const optim_hyper* u) {
  if ((u->mode & OPTIM_MODE_KIND) == 0) {
    return sgd_value(param, grad, a, u->h[0], u->h[1], u->h[2], u->h[3],
                     (u->mode & OPTIM_MODE_NESTEROV) != 0,
                     (u->mode & OPTIM_MODE_FIRST_STEP) != 0,
                     (u->mode & OPTIM_MODE_HAS_MOMENTUM) != 0);
  }
  return adamw_value(param, grad, a, b, u->h[0], u->h[1], u->h[2], u->h[3], u->h[4], u->h[5]);
}

// Elements per work-item: 4 (16-byte loads and stores) on GPUs, 1 on CPU devices, whose
// compilers vectorise neighbouring work-items' scalar accesses (ops/train/optim.cpp).
#ifndef OPTIM_PER_ITEM
#define OPTIM_PER_ITEM 4
#endif

// Elements OPTIM_PER_ITEM q ... of a tensor of n elements (those below n): with 4 per item, one
// 16-byte load and store per buffer when all four exist (buffers start 16-byte aligned), element
// by element at the tail. SGD without momentum and the states a kind does not use are never read
// or written.
inline void update_item(__global float* p, __global const float* g, __global float* a,
                        __global float* b, ulong q, ulong n, const optim_hyper* u) {
  const bool adamw = (u->mode & OPTIM_MODE_KIND) != 0;
  const bool uses_a = adamw || (u->mode & OPTIM_MODE_HAS_MOMENTUM) != 0;
#if OPTIM_PER_ITEM == 4
  const ulong i = q * 4;
  if (i + 4 <= n) {
    float4 P = ((__global const float4*)p)[q];
    const float4 G = ((__global const float4*)g)[q];
    float4 A = uses_a ? ((__global const float4*)a)[q] : (float4)(0.0f);
    float4 B = adamw ? ((__global const float4*)b)[q] : (float4)(0.0f);
    float a0 = A.x, a1 = A.y, a2 = A.z, a3 = A.w, b0 = B.x, b1 = B.y, b2 = B.z, b3 = B.w;
    P.x = update_value(P.x, G.x, &a0, &b0, u);
    P.y = update_value(P.y, G.y, &a1, &b1, u);
    P.z = update_value(P.z, G.z, &a2, &b2, u);
    P.w = update_value(P.w, G.w, &a3, &b3, u);
    ((__global float4*)p)[q] = P;
    if (uses_a) ((__global float4*)a)[q] = (float4)(a0, a1, a2, a3);
    if (adamw) ((__global float4*)b)[q] = (float4)(b0, b1, b2, b3);
    return;
  }
  for (ulong j = i; j < n; ++j) {
#else
  if (q < n) {
    const ulong j = q;
#endif
    float x = uses_a ? a[j] : 0.0f, y = adamw ? b[j] : 0.0f;
    p[j] = update_value(p[j], g[j], &x, &y, u);
    if (uses_a) a[j] = x;
    if (adamw) b[j] = y;
  }
}

// finite_gate: with OPTIM_MODE_GATED, the update runs only if gate[0] is finite (every work-item
// reads the same value, so a launch updates all of a tensor's elements or none).
inline bool gate_open(__global const float* gate, int mode) {
  return (mode & OPTIM_MODE_GATED) == 0 || isfinite(gate[0]);
}

// One tensor: work-item q updates item q, q + global size, ... (OPTIM_PER_ITEM elements each).
__kernel void optim_update(__global float* p, __global const float* g, __global float* a,
                           __global float* b, ulong n, int mode, float h0, float h1, float h2,
                           float h3, float h4, float h5, __global const float* gate) {
  if (!gate_open(gate, mode)) return;
  const optim_hyper u = {mode, {h0, h1, h2, h3, h4, h5}};
  const ulong items = (n + OPTIM_PER_ITEM - 1) / OPTIM_PER_ITEM;
  for (ulong q = get_global_id(0); q < items; q += get_global_size(0)) {
    update_item(p, g, a, b, q, n, &u);
  }
}

// ---- Many tensors in one launch (aethercl_optimizer_step_multi) ----
// Up to OPTIM_MULTI_SLOTS tensors per launch, each with its own five buffers (param, grad, two
// states, gate; OpenCL 1.2 has no pointers in tables). Tensor k owns the items [first[k],
// first[k] + ceil(count[k] / OPTIM_PER_ITEM)) of the launch's index space; first[k] is a
// multiple of 16 so every tensor starts on a whole group of neighbouring work-items. The host
// struct OptimMultiTable (ops/train/optim_multi.cpp) mirrors this layout (360 bytes).
#define OPTIM_MULTI_SLOTS 8
#define OPTIM_MULTI_HYPER 6

typedef struct optim_multi_table {
  ulong first[OPTIM_MULTI_SLOTS + 1];  // first[OPTIM_MULTI_SLOTS]: the launch's items
  ulong count[OPTIM_MULTI_SLOTS];
  float hyper[OPTIM_MULTI_SLOTS * OPTIM_MULTI_HYPER];
  int mode[OPTIM_MULTI_SLOTS];
} optim_multi_table;

#define OPTIM_MULTI_ARGS(k)                                                                  \
  __global float *p##k, __global const float *g##k, __global float *a##k, __global float *b##k, \
      __global const float *gate##k
// Tensor k, with constant indices into the table (no dynamic indexing of a by-value argument).
// Ranges are tested in order, so reaching case k means q >= first[k].
#define OPTIM_MULTI_CASE(k)                                                                    \
  if (q < t.first[k + 1]) {                                                                    \
    if (gate_open(gate##k, t.mode[k])) {                                                       \
      const optim_hyper u = {t.mode[k],                                                        \
                             {t.hyper[k * OPTIM_MULTI_HYPER], t.hyper[k * OPTIM_MULTI_HYPER + 1], \
                              t.hyper[k * OPTIM_MULTI_HYPER + 2],                              \
                              t.hyper[k * OPTIM_MULTI_HYPER + 3],                              \
                              t.hyper[k * OPTIM_MULTI_HYPER + 4],                              \
                              t.hyper[k * OPTIM_MULTI_HYPER + 5]}};                            \
      update_item(p##k, g##k, a##k, b##k, q - t.first[k], t.count[k], &u);                    \
    }                                                                                          \
    continue;                                                                                  \
  }

// Grid-stride over the launch's items: neighbouring work-items take neighbouring items of one
// tensor (coalesced); a work-item changes tensor only at a range boundary. A range's items beyond
// its tensor's count (the padding to 16) find nothing to do in update_item.
__kernel void optim_multi(OPTIM_MULTI_ARGS(0), OPTIM_MULTI_ARGS(1), OPTIM_MULTI_ARGS(2),
                          OPTIM_MULTI_ARGS(3), OPTIM_MULTI_ARGS(4), OPTIM_MULTI_ARGS(5),
                          OPTIM_MULTI_ARGS(6), OPTIM_MULTI_ARGS(7), optim_multi_table t) {
  const ulong total = t.first[OPTIM_MULTI_SLOTS];
  for (ulong q = get_global_id(0); q < total; q += get_global_size(0)) {
    OPTIM_MULTI_CASE(0)
    OPTIM_MULTI_CASE(1)
    OPTIM_MULTI_CASE(2)
    OPTIM_MULTI_CASE(3)
    OPTIM_MULTI_CASE(4)
    OPTIM_MULTI_CASE(5)
    OPTIM_MULTI_CASE(6)
    OPTIM_MULTI_CASE(7)
  }
}

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

// partials[first + c] = sum of x^2 over chunk c = [c * chunk, min(n, (c + 1) * chunk)).
__kernel void optim_sum_squares_chunks(__global const float* x, ulong n, ulong chunk, ulong chunks,
                                 __global acc_t* partials, ulong first, __local acc_t* scratch) {
  for (ulong c = get_group_id(0); c < chunks; c += get_num_groups(0)) {
    const ulong begin = c * chunk, end = min(n, begin + chunk);
    acc_t sum = 0;
    for (ulong i = begin + get_local_id(0); i < end; i += get_local_size(0)) {
      const acc_t value = (acc_t)x[i];
      sum += value * value;
    }
    sum = group_sum(scratch, sum);
    if (get_local_id(0) == 0) partials[first + c] = sum;
  }
}

// The CPU form of optim_sum_squares_chunks (no barriers): one work-item per chunk, the chunk in
// runs of four float16 vectors (eight acc8_t accumulators: one would wait on its own additions),
// folded in a fixed order, then the tail in ascending order.
#if AETHERCL_FP64
typedef double8 acc8_t;
typedef double4 acc4_t;
#define convert_acc8_t convert_double8
#else
typedef float8 acc8_t;
typedef float4 acc4_t;
#define convert_acc8_t convert_float8
#endif

__kernel void optim_sum_squares_lanes(__global const float* x, ulong n, ulong chunk, ulong chunks,
                                      __global acc_t* partials, ulong first) {
  for (ulong c = get_global_id(0); c < chunks; c += get_global_size(0)) {
    const ulong begin = c * chunk, count = min(n, begin + chunk) - begin, runs = count / 64;
    __global const float* xc = x + begin;
    acc8_t s[8];
    for (uint i = 0; i < 8; ++i) s[i] = (acc8_t)(0);
    for (ulong k = 0; k < runs; ++k) {
      for (uint i = 0; i < 4; ++i) {
        const float16 v = vload16(4 * k + i, xc);
        const acc8_t a = convert_acc8_t(v.lo), b = convert_acc8_t(v.hi);
        s[2 * i] += a * a;
        s[2 * i + 1] += b * b;
      }
    }
    const acc8_t h8 = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    const acc4_t h4 = h8.lo + h8.hi;
    acc_t sum = (h4.x + h4.y) + (h4.z + h4.w);
    for (ulong i = runs * 64; i < count; ++i) {
      const acc_t value = (acc_t)xc[i];
      sum += value * value;
    }
    partials[first + c] = sum;
  }
}

// One work-item: total = sqrt(sum of partials, in order); coefficient min(1, max / (total + 1e-6)),
// 1 when total is not finite.
__kernel void optim_clip_coefficient(__global const acc_t* partials, ulong count, float max_norm,
                               __global float* coefficient, __global float* total_norm,
                               int has_total) {
  if (get_global_id(0) != 0) return;
  acc_t sum = 0;
  for (ulong i = 0; i < count; ++i) sum += partials[i];
  const acc_t total = sqrt(sum);
  acc_t coef = (acc_t)max_norm / (total + (acc_t)1e-6);
  if (!isfinite(total) || coef > (acc_t)1) coef = 1;
  coefficient[0] = (float)coef;
  if (has_total) total_norm[0] = (float)total;
}

__kernel void optim_scale_by_coefficient(__global float* x, ulong n,
                                   __global const float* coefficient) {
  const float coef = coefficient[0];
  if (coef == 1.0f) return;
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) x[i] *= coef;
}
