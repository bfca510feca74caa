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

inline float combine(float acc, float value, int op) {
  if (op == OP_SUM || op == OP_MEAN) return acc + value;
  if (isnan(acc) || isnan(value)) return NAN;
  if (op == OP_MAX) return value > acc ? value : acc;
  return value < acc ? value : acc;
}

inline float bf16_to_float(ushort bits) { return as_float(((uint)bits) << 16); }

inline ushort float_to_bf16(float value) {
  uint bits = as_uint(value);
  if (isnan(value)) return (ushort)((bits >> 16) | 0x40u);  // quiet NaN, sign kept
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (ushort)(bits >> 16);
}

#define REDUCE_BODY(LOAD_OWN, LOAD_SLOT, STORE)                                   \
  GRID_STRIDE_LOOP(i, n) {                                                        \
    float acc = 0.0f;                                                             \
    for (uint j = 0; j < ranks; ++j) {                                            \
      float value = (j == rank) ? LOAD_OWN : LOAD_SLOT;                           \
      acc = (j == 0) ? value : combine(acc, value, op);                           \
    }                                                                             \
    if (op == OP_MEAN) acc = acc / (float)ranks;                                  \
    STORE;                                                                        \
  }

__kernel void collectives_reduce_f32(__global const float* own, ulong own_offset,
                                    __global const float* scratch, ulong slot_base,
                                    ulong slot_stride, uint rank, uint ranks,
                                    __global float* out, ulong out_offset, ulong n, int op) {
  REDUCE_BODY(own[own_offset + i], scratch[slot_base + j * slot_stride + i],
              out[out_offset + i] = acc)
}

__kernel void collectives_reduce_f16(__global const half* own, ulong own_offset,
                                    __global const half* scratch, ulong slot_base,
                                    ulong slot_stride, uint rank, uint ranks,
                                    __global half* out, ulong out_offset, ulong n, int op) {
  REDUCE_BODY(vload_half(own_offset + i, own),
              vload_half(slot_base + j * slot_stride + i, scratch),
              vstore_half_rte(acc, out_offset + i, out))
}

__kernel void collectives_reduce_bf16(__global const ushort* own, ulong own_offset,
                                     __global const ushort* scratch, ulong slot_base,
                                     ulong slot_stride, uint rank, uint ranks,
                                     __global ushort* out, ulong out_offset, ulong n, int op) {
  REDUCE_BODY(bf16_to_float(own[own_offset + i]),
              bf16_to_float(scratch[slot_base + j * slot_stride + i]),
              out[out_offset + i] = float_to_bf16(acc))
}
