// The fused epilogue of the GEMM kernels (aethercl_gemm_fused; included by gemm.cl, gemm_mma.cl
// and gemm_fold.cl after gemm_c_storage.cl). Build option GEMM_EPILOGUE: 0 (or absent) none, and
// then this file defines nothing those kernels use; 1 bias, 2 bias + ReLU, 3 bias + GELU (erf),
// 4 bias + GELU (tanh form), 5 ReLU, 6 GELU (erf), 7 DGELU (v times GELU's slope at the value
// epi_pre holds: read, not written). With an epilogue every kernel takes
// GEMM_EPI_ARGS after its own arguments:
//   epi_bias, epi_off_bias, epi_bias_dtype  the bias (kinds 1-4): element epi_off_bias + column,
//                                           stored as 0 float32, 1 float16, 2 bfloat16
//   epi_pre, epi_has_pre, epi_off_pre       where epi_has_pre, the value before the activation,
//                                           stored like C (C's type, leading dimension and batch
//                                           stride) from element epi_off_pre
//   epi_res, epi_off_res, epi_has_res       where epi_has_res, a residual stored like C, added to
//                                           the epilogue's result (gemm_epi_residual)
// and each output v (alpha * sum + beta * C, float32) is stored as act(v + bias[column]), rounded
// once. The formulas are unary.cl's (aethercl_unary), so fused and unfused results agree.
#ifndef AETHERCL_GEMM_EPILOGUE_CL
#define AETHERCL_GEMM_EPILOGUE_CL

#ifndef GEMM_EPILOGUE
#define GEMM_EPILOGUE 0
#endif

#if GEMM_EPILOGUE
#if GEMM_EPILOGUE < 0 || GEMM_EPILOGUE > 7
#error "GEMM_EPILOGUE must be 0..7"
#endif

#define GEMM_EPI_ARGS                                                                       \
  , __global const uchar *epi_bias, ulong epi_off_bias, int epi_bias_dtype,                \
      __global gemm_c_t *epi_pre, ulong epi_off_pre, int epi_has_pre,                      \
      __global const gemm_c_t *epi_res, ulong epi_off_res, int epi_has_res
#define GEMM_EPI_PASS                                                                       \
  , epi_bias, epi_off_bias, epi_bias_dtype, epi_pre, epi_off_pre, epi_has_pre, epi_res,    \
      epi_off_res, epi_has_res
// The pre-activation and residual of batch item `batch`: C's batch stride from their offsets.
#define GEMM_EPI_ADVANCE(batch, stride_c)                                                    \
  epi_pre += epi_off_pre + (batch) * (stride_c);                                             \
  epi_res += epi_off_res + (batch) * (stride_c)
// v stored at element `at` of C (and of the advanced epi_pre and epi_res), in column `col`.
#define GEMM_EPI(v, col, at)                                                                 \
  gemm_epi_residual(gemm_epilogue((v), (ulong)(col), (ulong)(at), epi_bias, epi_off_bias,    \
                                  epi_bias_dtype, epi_pre, epi_has_pre),                     \
                    (ulong)(at), epi_res, epi_has_res)

#define GEMM_EPI_INV_SQRT2 0.70710678118654752440f
#define GEMM_EPI_SQRT_2_OVER_PI 0.79788456080286535588f
#define GEMM_EPI_GELU_TANH_C 0.044715f
#define GEMM_EPI_INV_SQRT_2PI 0.39894228040143267794f

inline float gemm_epi_bias(__global const uchar* bias, ulong at, int dtype) {
  if (dtype == 0) return ((__global const float*)bias)[at];
  if (dtype == 1) return vload_half(at, (__global const half*)bias);
  return nf_from_bf16(((__global const ushort*)bias)[at]);
}

inline float gemm_epi_act(float x) {
#if GEMM_EPILOGUE == 2 || GEMM_EPILOGUE == 5
  return x < 0.0f ? 0.0f : x;  // NaN stays NaN, as aethercl_unary's relu
#elif GEMM_EPILOGUE == 3 || GEMM_EPILOGUE == 6
  return 0.5f * x * (1.0f + erf(x * GEMM_EPI_INV_SQRT2));
#elif GEMM_EPILOGUE == 4
  const float inner = GEMM_EPI_SQRT_2_OVER_PI * (x + GEMM_EPI_GELU_TANH_C * x * x * x);
  return 0.5f * x * (1.0f + tanh(inner));
#else
  return x;
#endif
}

// v plus the bias of column col (kinds 1-4), the value before the activation.
inline float gemm_epi_pre_value(float v, ulong col, __global const uchar* bias, ulong off_bias,
                                int bias_dtype) {
#if GEMM_EPILOGUE <= 4
  v += gemm_epi_bias(bias, off_bias + col, bias_dtype);
#endif
  return v;
}
// For kernels that store the pre-activation themselves (gemm_mma.cl's 16-byte units).
#define GEMM_EPI_PRE_VALUE(v, col) gemm_epi_pre_value((v), (ulong)(col), epi_bias, epi_off_bias, \
                                                      epi_bias_dtype)

// GELU's slope at x (aethercl_unary_backward's formula).
inline float gemm_epi_gelu_slope(float x) {
  return 0.5f * (1.0f + erf(x * GEMM_EPI_INV_SQRT2)) + x * exp(-0.5f * x * x) * GEMM_EPI_INV_SQRT_2PI;
}

inline float gemm_epilogue(float v, ulong col, ulong at, __global const uchar* bias,
                           ulong off_bias, int bias_dtype, __global gemm_c_t* pre, int has_pre) {
#if GEMM_EPILOGUE == 7
  return v * gemm_epi_gelu_slope(gemm_c_load(pre, at));
#else
#if GEMM_EPILOGUE <= 4
  v += gemm_epi_bias(bias, off_bias + col, bias_dtype);
#endif
  if (has_pre) gemm_c_store(v, pre, at);
  return gemm_epi_act(v);
#endif
}

// The epilogue's result plus the residual's element at `at`, where there is one.
inline float gemm_epi_residual(float v, ulong at, __global const gemm_c_t* res, int has_res) {
  return has_res ? v + gemm_c_load(res, at) : v;
}
#else
#define GEMM_EPI_ARGS
#define GEMM_EPI_PASS
#endif

#endif
