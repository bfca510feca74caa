// Collective reductions: one rank's block of a chunk reduced over every rank's contribution, in
// rank order 0, 1, ..., P-1, so a fixed device count always gives the same bits whichever path
// moved the data. The rank's own values are read from its buffer, the peers' from the scratch
// slots the transfers filled (slot j at scratch[slot_base + j * slot_stride], slot `rank` unused).
// f16/bf16 are 16-bit patterns; they are widened to float, reduced in float and rounded once to
// nearest even at the end. MAX/MIN propagate NaN (any NaN operand gives NaN).

#define OP_SUM 0
#define OP_MEAN 1
#define OP_MAX 2
#define OP_MIN 3

#define GRID_STRIDE_LOOP(i, n) \
  for (ulong i = get_global_id(0); i < (n); i += get_global_size(0))

inline float max_nan(float acc, float value) {
  return (isnan(acc) || isnan(value)) ? NAN : (value > acc ? value : acc);
}

inline float min_nan(float acc, float value) {
  return (isnan(acc) || isnan(value)) ? NAN : (value < acc ? value : acc);
}

inline float bf16_to_float(ushort bits) { return as_float(((uint)bits) << 16); }

inline ushort float_to_bf16(float value) {
  uint bits = as_uint(value);
  if (isnan(value)) return (ushort)((bits >> 16) | 0x40u);  // quiet NaN, sign kept
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (ushort)(bits >> 16);
}

// One loop per op (the op test hoisted out of the element loop keeps the loop branch-free, which
// CPU runtimes need to vectorise it). Rank 0's value starts the fold; ranks 1 .. P-1 follow.
#define FOLD_LOOP(LOAD_OWN, LOAD_SLOT, STORE, COMBINE, FINISH)                   \
  GRID_STRIDE_LOOP(i, n) {                                                        \
    float acc = (rank == 0) ? LOAD_OWN(0) : LOAD_SLOT(0);                         \
    for (uint j = 1; j < ranks; ++j) {                                            \
      float value = (j == rank) ? LOAD_OWN(j) : LOAD_SLOT(j);                     \
      acc = COMBINE(acc, value);                                                  \
    }                                                                             \
    FINISH;                                                                       \
    STORE;                                                                        \
  }

#define ADD(a, b) ((a) + (b))
#define NOTHING (void)0
#define DIVIDE acc = acc / (float)ranks

#define REDUCE_BODY(LOAD_OWN, LOAD_SLOT, STORE)                                   \
  if (op == OP_MAX) {                                                             \
    FOLD_LOOP(LOAD_OWN, LOAD_SLOT, STORE, max_nan, NOTHING)                       \
  } else if (op == OP_MIN) {                                                      \
    FOLD_LOOP(LOAD_OWN, LOAD_SLOT, STORE, min_nan, NOTHING)                       \
  } else if (op == OP_MEAN) {                                                     \
    FOLD_LOOP(LOAD_OWN, LOAD_SLOT, STORE, ADD, DIVIDE)                            \
  } else {                                                                        \
    FOLD_LOOP(LOAD_OWN, LOAD_SLOT, STORE, ADD, NOTHING)                           \
  }

__kernel void collectives_reduce_f32(__global const float* own, ulong own_offset,
                                    __global const float* scratch, ulong slot_base,
                                    ulong slot_stride, uint rank, uint ranks,
                                    __global float* out, ulong out_offset, ulong n, int op) {
#define OWN_F32(j) own[own_offset + i]
#define SLOT_F32(j) scratch[slot_base + (j) * slot_stride + i]
  REDUCE_BODY(OWN_F32, SLOT_F32, out[out_offset + i] = acc)
}

__kernel void collectives_reduce_f16(__global const half* own, ulong own_offset,
                                    __global const half* scratch, ulong slot_base,
                                    ulong slot_stride, uint rank, uint ranks,
                                    __global half* out, ulong out_offset, ulong n, int op) {
#define OWN_F16(j) vload_half(own_offset + i, own)
#define SLOT_F16(j) vload_half(slot_base + (j) * slot_stride + i, scratch)
  REDUCE_BODY(OWN_F16, SLOT_F16, vstore_half_rte(acc, out_offset + i, out))
}

__kernel void collectives_reduce_bf16(__global const ushort* own, ulong own_offset,
                                     __global const ushort* scratch, ulong slot_base,
                                     ulong slot_stride, uint rank, uint ranks,
                                     __global ushort* out, ulong out_offset, ulong n, int op) {
#define OWN_BF16(j) bf16_to_float(own[own_offset + i])
#define SLOT_BF16(j) bf16_to_float(scratch[slot_base + (j) * slot_stride + i])
  REDUCE_BODY(OWN_BF16, SLOT_BF16, out[out_offset + i] = float_to_bf16(acc))
}
