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

// The per-element updates. The one-tensor kernels and optim_multi both call these, so the two
// paths run the same float operations in the same order: aethercl_optimizer_step_multi promises
// the bits of aethercl_optimizer_step. Contraction is off inside them so that no inlining context
// can fuse a multiply-add in one path and not in the other.

// PyTorch's SGD step on element i. first_step initialises the momentum buffer with the gradient.
inline void sgd_element(__global float* p, __global const float* g, __global float* buf, ulong i,
                        float lr, float weight_decay, float momentum, float dampening,
                        int nesterov, int first_step, int has_momentum) {
#pragma OPENCL FP_CONTRACT OFF
  const float param = p[i];
  float grad = g[i];
  if (weight_decay != 0.0f) grad = grad + weight_decay * param;
  if (has_momentum) {
    const float b = first_step ? grad : momentum * buf[i] + (1.0f - dampening) * grad;
    buf[i] = b;
    grad = nesterov ? grad + momentum * b : b;
  }
  p[i] = param - lr * grad;
}

// AdamW on element i: decoupled decay, then Adam with bias correction; step_size =
// lr / (1 - beta1^t) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t) come from the host (double, rounded
// to float).
inline void adamw_element(__global float* p, __global const float* g, __global float* m,
                          __global float* v, ulong i, float decay_factor, float beta1,
                          float beta2, float eps, float step_size, float inv_sqrt_bc2) {
#pragma OPENCL FP_CONTRACT OFF
  const float grad = g[i];
  const float param = p[i] * decay_factor;
  const float m_new = beta1 * m[i] + (1.0f - beta1) * grad;
  const float v_new = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  m[i] = m_new;
  v[i] = v_new;
  const float denominator = sqrt(v_new) * inv_sqrt_bc2 + eps;
  p[i] = param - step_size * (m_new / denominator);
}

// finite_gate: with `gated`, the update runs only if gate[0] is finite (every work-item reads the
// same value, so a launch updates all of its elements or none).
inline bool gate_open(__global const float* gate, int gated) {
  return !gated || isfinite(gate[0]);
}

__kernel void optim_sgd(__global float* p, __global const float* g, __global float* buf, ulong n,
                       float lr, float weight_decay, float momentum, float dampening,
                       int nesterov, int first_step, int has_momentum,
                       __global const float* gate, int gated) {
  if (!gate_open(gate, gated)) return;
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    sgd_element(p, g, buf, i, lr, weight_decay, momentum, dampening, nesterov, first_step,
                has_momentum);
  }
}

__kernel void optim_adamw(__global float* p, __global const float* g, __global float* m,
                         __global float* v, ulong n, float decay_factor, float beta1, float beta2,
                         float eps, float step_size, float inv_sqrt_bc2,
                         __global const float* gate, int gated) {
  if (!gate_open(gate, gated)) return;
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    adamw_element(p, g, m, v, i, decay_factor, beta1, beta2, eps, step_size, inv_sqrt_bc2);
  }
}

// ---- Many tensors in one launch (aethercl_optimizer_step_multi) ----
// Up to OPTIM_MULTI_SLOTS tensors per launch, each with its own five buffers (param, grad, two
// states, gate; OpenCL 1.2 has no pointers in tables). Tensor k owns the flat range [first[k], first[k] + count[k]) of the
// launch's index space; first[k] is a multiple of 64 so every tensor starts aligned. The host
// struct OptimMultiTable (ops/train/optim_multi.cpp) mirrors this layout (360 bytes).
#define OPTIM_MULTI_SLOTS 8
#define OPTIM_MULTI_HYPER 6
// mode bits: the aethercl_optimizer_kind, then SGD's flags.
#define OPTIM_MODE_KIND 15
#define OPTIM_MODE_NESTEROV 16
#define OPTIM_MODE_FIRST_STEP 32
#define OPTIM_MODE_HAS_MOMENTUM 64
#define OPTIM_MODE_GATED 128

typedef struct optim_multi_table {
  ulong first[OPTIM_MULTI_SLOTS + 1];  // first[OPTIM_MULTI_SLOTS]: the launch's index space
  ulong count[OPTIM_MULTI_SLOTS];
  float hyper[OPTIM_MULTI_SLOTS * OPTIM_MULTI_HYPER];  // SGD: lr, weight_decay, momentum,
                                       // dampening; AdamW: the six arguments of adamw_element
  int mode[OPTIM_MULTI_SLOTS];
} optim_multi_table;

inline void multi_element(__global float* p, __global const float* g, __global float* a,
                          __global float* b, ulong i, int mode, float h0, float h1, float h2,
                          float h3, float h4, float h5) {
  if ((mode & OPTIM_MODE_KIND) == 0) {
    sgd_element(p, g, a, i, h0, h1, h2, h3, (mode & OPTIM_MODE_NESTEROV) != 0,
                (mode & OPTIM_MODE_FIRST_STEP) != 0, (mode & OPTIM_MODE_HAS_MOMENTUM) != 0);
  } else {
    adamw_element(p, g, a, b, i, h0, h1, h2, h3, h4, h5);
  }
}

#define OPTIM_MULTI_ARGS(k)                                                                  \
  __global float *p##k, __global const float *g##k, __global float *a##k, __global float *b##k, \
      __global const float *gate##k
// Tensor k, with constant indices into the table (no dynamic indexing of a by-value argument).
// Ranges are tested in order, so reaching case k means i >= first[k].
#define OPTIM_MULTI_CASE(k)                                                                    \
  if (i < t.first[k + 1]) {                                                                    \
    const ulong j = i - t.first[k];                                                            \
    if (j < t.count[k] && gate_open(gate##k, t.mode[k] & OPTIM_MODE_GATED)) {                  \
      multi_element(p##k, g##k, a##k, b##k, j, t.mode[k], t.hyper[k * OPTIM_MULTI_HYPER],      \
                    t.hyper[k * OPTIM_MULTI_HYPER + 1], t.hyper[k * OPTIM_MULTI_HYPER + 2],    \
                    t.hyper[k * OPTIM_MULTI_HYPER + 3], t.hyper[k * OPTIM_MULTI_HYPER + 4],    \
                    t.hyper[k * OPTIM_MULTI_HYPER + 5]);                                       \
    }                                                                                          \
    continue;                                                                                  \
  }

// Grid-stride over the launch's index space: neighbouring items take neighbouring elements of one
// tensor (coalesced); an item changes tensor only at a range boundary.
__kernel void optim_multi(OPTIM_MULTI_ARGS(0), OPTIM_MULTI_ARGS(1), OPTIM_MULTI_ARGS(2),
                          OPTIM_MULTI_ARGS(3), OPTIM_MULTI_ARGS(4), OPTIM_MULTI_ARGS(5),
                          OPTIM_MULTI_ARGS(6), OPTIM_MULTI_ARGS(7), optim_multi_table t) {
  const ulong total = t.first[OPTIM_MULTI_SLOTS];
  for (ulong i = get_global_id(0); i < total; i += get_global_size(0)) {
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
