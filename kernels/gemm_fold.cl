// The split-K GEMM's fold (driver/gemm/split_k.cpp): C = the sum of the float32 partial products
// of its k slices, added in slice order (so the result is fixed for a shape and device), then
// stored once in C's type (FOLD_C_TYPE: 0 float32, 1 float16, 2 bfloat16, rounded to nearest
// even as every GEMM kernel stores them). parts holds part_count dense m x n products; C is stored
// with leading dimension ldc from off_c. With GEMM_EPILOGUE (gemm_epilogue.cl) the fused epilogue
// is applied here, in the one store of C.
#ifndef FOLD_C_TYPE
#define FOLD_C_TYPE 0
#endif
#define GEMM_C_STORAGE_TYPE FOLD_C_TYPE
#include "gemm_c_storage.cl"
#include "gemm_epilogue.cl"

__kernel void gemm_fold_parts(__global const float* parts, __global gemm_c_t* c, ulong m, ulong n,
                              ulong ldc, ulong off_c, ulong part_count GEMM_EPI_ARGS) {
  const ulong count = m * n;
#if GEMM_EPILOGUE
  GEMM_EPI_ADVANCE(0, 0);
#endif
  for (ulong i = get_global_id(0); i < count; i += get_global_size(0)) {
    float sum = parts[i];
    for (ulong part = 1; part < part_count; ++part) sum += parts[part * count + i];
#if GEMM_EPILOGUE
    const ulong at = (i / n) * ldc + i % n;
    gemm_c_store(GEMM_EPI(sum, i % n, at), c, off_c + at);
#else
    gemm_c_store(sum, c, off_c + (i / n) * ldc + i % n);
#endif
  }
}
