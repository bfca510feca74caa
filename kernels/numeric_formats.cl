// Number formats shared by kernels (included with #include "numeric_formats.cl"): bf16 and f16
// held as 16-bit patterns (no cl_khr_fp16 needed), and rounding of float32 values to the
// precision of a GEMM compute mode. Every function exists for widths 1, 2, 4, 8 and 16
// (nf_round_tf32, nf_round_tf322, ... nf_round_tf3216).
//
// Rounding rules (the tensor-core kernels use the same ones, so both paths agree bit for bit on
// the inputs they multiply):
//   TF32: 10 explicit mantissa bits, round to nearest even (the rounding of PTX cvt.rn.tf32.f32,
//         one instruction on sm_90), overflow to +-inf; inf stays inf, NaN stays a NaN.
//   BF16: 7 mantissa bits, round to nearest even, overflow to +-inf, NaN stays a NaN.
//   FP16: IEEE binary16, round to nearest even (vstore_half_rte), overflow to +-inf.
#ifndef AETHERCL_NUMERIC_FORMATS
#define AETHERCL_NUMERIC_FORMATS

#define NF_DEFINE(S)                                                                         \
  inline float##S nf_round_tf32##S(float##S value) {                                         \
    const uint##S u = as_uint##S(value);                                                     \
    const uint##S special = select(u, u | 0x400000u, (u & 0x7fffffu) != 0u);                 \
    const uint##S kept =                                                                     \
        select(u + 0xfffu + ((u >> 13) & 1u), special, (u & 0x7f800000u) == 0x7f800000u);   \
    return as_float##S(kept & 0xffffe000u);                                                  \
  }                                                                                          \
  /* float32 bits of the bf16 nearest to value (low 16 bits zero). */                        \
  inline uint##S nf_bf16_bits##S(float##S value) {                                           \
    const uint##S u = as_uint##S(value);                                                     \
    const uint##S special = select(u, u | 0x400000u, (u & 0x7fffffu) != 0u);                 \
    const uint##S kept =                                                                     \
        select(u + 0x7fffu + ((u >> 16) & 1u), special, (u & 0x7f800000u) == 0x7f800000u);  \
    return kept & 0xffff0000u;                                                               \
  }                                                                                          \
  inline float##S nf_round_bf16##S(float##S value) {                                         \
    return as_float##S(nf_bf16_bits##S(value));                                              \
  }                                                                                          \
  inline ushort##S nf_to_bf16##S(float##S value) {                                           \
    return convert_ushort##S(nf_bf16_bits##S(value) >> 16);                                  \
  }                                                                                          \
  inline float##S nf_from_bf16##S(ushort##S bits) {                                          \
    return as_float##S(convert_uint##S(bits) << 16);                                         \
  }                                                                                          \
  /* The TF32 residual value - hi (hi = nf_round_tf32(value)), rounded to TF32: hi + residual */ \
  /* is value to about 22 bits (3xTF32). 0 where hi is infinite (no inf - inf NaN). */          \
  inline float##S nf_tf32_residual##S(float##S value, float##S hi) {                        \
    return select(nf_round_tf32##S(value - hi), (float##S)(0.0f), isinf(hi));                \
  }                                                                                          \
  inline float##S nf_round_f16##S(float##S value) {                                          \
    ushort bits[sizeof(float##S) / sizeof(float)];                                           \
    vstore_half##S##_rte(value, 0, (__private half*)bits);                                   \
    return vload_half##S(0, (__private const half*)bits);                                    \
  }

NF_DEFINE()
NF_DEFINE(2)
NF_DEFINE(4)
NF_DEFINE(8)
NF_DEFINE(16)
#undef NF_DEFINE

#endif  // AETHERCL_NUMERIC_FORMATS
