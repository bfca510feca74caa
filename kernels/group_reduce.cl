// Fixed-order reductions over a work-group for the row kernels (rowwise.cl, norm.cl): sums and
// maxima through warp shuffles where the runtime enables them (ACL_WARP_SHUFFLE) or local-memory
// trees, several double sums in one pass (group_sums), and the row statistics LayerNorm takes from
// them. acc_t is double where GROUP_ACC_DOUBLE (default: the device has FP64), float otherwise.
#ifndef AETHERCL_GROUP_REDUCE_CL
#define AETHERCL_GROUP_REDUCE_CL

#ifndef GROUP_ACC_DOUBLE
#define GROUP_ACC_DOUBLE AETHERCL_FP64
#endif

#if GROUP_ACC_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

// Reductions over the work-group: every item passes its partial value and gets the combined value
// of the group; the pairing order is fixed. With ACL_WARP_SHUFFLE (NVIDIA, set by the runtime) and
// a local size that is a multiple of 32, each warp combines its values by butterfly shuffles,
// which leave the same bits in every lane (each step adds a and b in one lane and b and a in its
// partner), and the warps' results are combined in warp order through scratch: two barriers
// instead of one per halving step. Otherwise a local-memory tree. Both end with a barrier (or use
// no scratch), so scratch can be reused.
#if ACL_WARP_SHUFFLE
// Lane i receives lane (i ^ mask)'s value (PTX shfl.sync over the full warp).
inline float warp_xor_f(float value, uint mask) {
  float result;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                       : "=f"(result) : "f"(value), "r"(mask));
  return result;
}

inline uint warp_xor_u(uint value, uint mask) {
  uint result;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                       : "=r"(result) : "r"(value), "r"(mask));
  return result;
}

inline double warp_xor_d(double value, uint mask) {
  const uint2 halves = as_uint2(value);
  return as_double((uint2)(warp_xor_u(halves.x, mask), warp_xor_u(halves.y, mask)));
}

#define WARP_REDUCE_AVAILABLE() ((get_local_size(0) & 31) == 0)
#define DEFINE_WARP_REDUCE(NAME, T, COMBINE, XOR)                                  \
  T NAME##_warps(__local T* scratch, T value) {                                    \
    const uint lid = get_local_id(0), warps = get_local_size(0) >> 5;              \
    for (uint mask = 16; mask > 0; mask >>= 1) value = COMBINE(value, XOR(value, mask)); \
    if (warps == 1) return value;                                                  \
    if ((lid & 31) == 0) scratch[lid >> 5] = value;                                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                  \
    T result = scratch[0];                                                         \
    for (uint w = 1; w < warps; ++w) result = COMBINE(result, scratch[w]);         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                  \
    return result;                                                                 \
  }
#define WARP_REDUCE_FIRST(NAME, scratch, value) \
  if (WARP_REDUCE_AVAILABLE()) return NAME##_warps(scratch, value);
#else
#define DEFINE_WARP_REDUCE(NAME, T, COMBINE, XOR)
#define WARP_REDUCE_FIRST(NAME, scratch, value)
#endif

#define DEFINE_GROUP_REDUCE(NAME, T, COMBINE, XOR)                      \
  DEFINE_WARP_REDUCE(NAME, T, COMBINE, XOR)                             \
  T NAME(__local T* scratch, T value) {                                 \
    WARP_REDUCE_FIRST(NAME, scratch, value)                             \
    const uint lid = get_local_id(0);                                   \
    scratch[lid] = value;                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                       \
    for (uint step = get_local_size(0) >> 1; step > 0; step >>= 1) {    \
      if (lid < step) scratch[lid] = COMBINE(scratch[lid], scratch[lid + step]); \
      barrier(CLK_LOCAL_MEM_FENCE);                                     \
    }                                                                   \
    T result = scratch[0];                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                       \
    return result;                                                      \
  }

#define COMBINE_SUM(a, b) ((a) + (b))
#define COMBINE_MAX(a, b) fmax((a), (b))

#if GROUP_ACC_DOUBLE
#define warp_xor_acc warp_xor_d
#else
#define warp_xor_acc warp_xor_f
#endif
DEFINE_GROUP_REDUCE(group_max_f, float, COMBINE_MAX, warp_xor_f)
DEFINE_GROUP_REDUCE(group_sum_f, float, COMBINE_SUM, warp_xor_f)
DEFINE_GROUP_REDUCE(group_sum_acc, acc_t, COMBINE_SUM, warp_xor_acc)

// With double accumulators LayerNorm takes its row sums in one pass and one reduction: the
// variance as E[x^2] - mean^2, and sum(dy * xhat) as inv_std * (sum(dy * x) - mean * sum(dy)).
// Products of floats are exact in double, so the cancellation costs about 1e-16 of the sums
// (a mean 1e6 times the spread still leaves 1e-4 relative in the variance). One tree of two or four
// sums replaces two or four trees, each a chain of barriers on GPUs, and CPUs read the row once
// for its statistics instead of two or three times. Rows held in registers then compute their
// outputs in float from the double statistics (row_center): double conversions per element
// measured as a cost on GPUs. Float accumulation keeps the two-pass form.
#if GROUP_ACC_DOUBLE
#define LN_FUSED 1
// count sums in one tree: scratch holds count arrays of local-size doubles (scalar arrays: NVIDIA's
// compiler failed on vector types in local memory here). values[c] becomes the group's sum c.
inline void group_sums(__local double* scratch, double* values, const int count) {
  const uint lid = get_local_id(0), size = get_local_size(0);
#if ACL_WARP_SHUFFLE
  if (WARP_REDUCE_AVAILABLE()) {  // as group_sum_acc_warps, count sums at a time
    const uint warps = size >> 5;
    for (uint mask = 16; mask > 0; mask >>= 1) {
      for (int c = 0; c < count; ++c) values[c] += warp_xor_d(values[c], mask);
    }
    if (warps == 1) return;
    if ((lid & 31) == 0) {
      for (int c = 0; c < count; ++c) scratch[c * warps + (lid >> 5)] = values[c];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int c = 0; c < count; ++c) {
      double total = scratch[c * warps];
      for (uint w = 1; w < warps; ++w) total += scratch[c * warps + w];
      values[c] = total;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return;
  }
#endif
  for (int c = 0; c < count; ++c) scratch[c * size + lid] = values[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = size >> 1; step > 0; step >>= 1) {
    if (lid < step) {
      for (int c = 0; c < count; ++c) scratch[c * size + lid] += scratch[c * size + lid + step];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int c = 0; c < count; ++c) values[c] = scratch[c * size];
  barrier(CLK_LOCAL_MEM_FENCE);
}

// A row's mean and 1 / std for per-element float math: the mean as a float and the float of
// its remainder, so (x - mean) keeps the double mean's accuracy (x - hi is exact where x is
// near the mean, the case where its rounding would matter).
typedef struct {
  float hi, lo, inv_std;
} row_center_t;

inline row_center_t row_center(double mean, double inv_std) {
  row_center_t c;
  c.hi = (float)mean;
  c.lo = (float)(mean - (double)c.hi);
  c.inv_std = (float)inv_std;
  return c;
}

inline float normalized(row_center_t c, float x) { return ((x - c.hi) - c.lo) * c.inv_std; }

inline void moments_from_sums(double sum, double sum_sq, double n, float eps, double* mean,
                              double* inv_std) {
  *mean = sum / n;
  const double variance = fmax(sum_sq / n - *mean * *mean, 0.0);
  *inv_std = 1.0 / sqrt(variance + (double)eps);
}
#else
#define LN_FUSED 0
#endif

#endif  // AETHERCL_GROUP_REDUCE_CL
