// Storage formats, row addressing and causal key ranges shared by the attention kernels
// (attention.cl, the portable form; attention_mma.cl, the tensor-core form).
#ifndef ATTENTION_COMMON_CL
#define ATTENTION_COMMON_CL

#include "numeric_formats.cl"

#define ATT_F32 0
#define ATT_F16 1
#define ATT_BF16 2

inline float att_load(__global const uchar* p, ulong i, int dtype) {
  if (dtype == ATT_F16) return vload_half(0, (__global const half*)p + i);
  if (dtype == ATT_BF16) return nf_from_bf16(((__global const ushort*)p)[i]);
  return ((__global const float*)p)[i];
}

// Rounds once, to nearest even, as aethercl_convert does.
inline void att_store(__global uchar* p, ulong i, int dtype, float value) {
  if (dtype == ATT_F16) vstore_half_rte(value, 0, (__global half*)p + i);
  else if (dtype == ATT_BF16) ((__global ushort*)p)[i] = nf_to_bf16(value);
  else ((__global float*)p)[i] = value;
}

// Element offset of row s of head (b, h): layout 0 [batch, heads, seq, dim], 1 [batch, seq,
// heads, dim], 2 [batch, seq, 3, heads, dim] (q, k and v packed: each kernel first moves its q, k,
// v and gradient pointers to their part with att_part; o and dout are then layout 1).
inline ulong att_row(int layout, uint b, uint h, uint s, uint heads, uint seq, uint dim) {
  if (layout == 0) return (((ulong)b * heads + h) * seq + s) * dim;
  return (((ulong)b * seq + s) * (layout == 2 ? 3u * heads : heads) + h) * dim;
}

// The layout of o and dout (never packed).
inline int att_out_layout(int layout) { return min(layout, 1); }

// Part `part` (0 q, 1 k, 2 v) of a packed buffer; any other layout keeps its own buffer.
#define att_part(p, layout, part, heads, dim, dtype)                                          \
  ((layout) == 2 ? (p) + (ulong)(part) * (heads) * (dim) * ((dtype) == ATT_F32 ? 4u : 2u) : (p))

// Keys query row i sees: [0, att_key_end(i)). Causal: j <= i + seq_k - seq_q.
inline uint att_key_end(uint i, uint seq_q, uint seq_k, int causal) {
  if (!causal) return seq_k;
  const long end = (long)i + (long)seq_k - (long)seq_q + 1;
  return (uint)clamp(end, 0L, (long)seq_k);
}

// The first query row that sees key j (seq_q when none does).
inline uint att_query_begin(uint j, uint seq_q, uint seq_k, int causal) {
  if (!causal) return 0;
  const long begin = (long)j - (long)seq_k + (long)seq_q;
  return (uint)clamp(begin, 0L, (long)seq_q);
}

#endif  // ATTENTION_COMMON_CL
