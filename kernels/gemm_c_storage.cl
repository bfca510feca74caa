// How a GEMM kernel holds C (included by gemm.cl, gemm_mma.cl and gemm_fold.cl, after defining
// GEMM_C_STORAGE_TYPE from their build option: 0 float32, 1 float16, 2 bfloat16): the element type
// gemm_c_t and scalar float32 loads and stores, half precision rounded to nearest even
// (numeric_formats.cl's rules, which gemm.cl's vector forms follow too).
#ifndef AETHERCL_GEMM_C_STORAGE
#define AETHERCL_GEMM_C_STORAGE

#include "numeric_formats.cl"

#if GEMM_C_STORAGE_TYPE == 0
typedef float gemm_c_t;
#elif GEMM_C_STORAGE_TYPE == 1
typedef half gemm_c_t;
#elif GEMM_C_STORAGE_TYPE == 2
typedef ushort gemm_c_t;
#else
#error "GEMM_C_STORAGE_TYPE must be 0 (f32), 1 (f16) or 2 (bf16)"
#endif

inline void gemm_c_store(float value, __global gemm_c_t* c, ulong at) {
#if GEMM_C_STORAGE_TYPE == 0
  c[at] = value;
#elif GEMM_C_STORAGE_TYPE == 1
  vstore_half_rte(value, at, c);
#else
  c[at] = nf_to_bf16(value);
#endif
}

inline float gemm_c_load(__global const gemm_c_t* c, ulong at) {
#if GEMM_C_STORAGE_TYPE == 0
  return c[at];
#elif GEMM_C_STORAGE_TYPE == 1
  return vload_half(at, c);
#else
  return nf_from_bf16(c[at]);
#endif
}

#endif
