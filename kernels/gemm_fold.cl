// The split-K GEMM's fold (driver/gemm/split_k.cpp): C = the sum of the float32 partial products
// of its k slices, added in slice order (so the result is fixed for a shape and device), then
// stored once in C's type (FOLD_C_TYPE: 0 float32, 1 float16, 2 bfloat16, rounded to nearest
// even as every GEMM kernel stores them). parts holds part_count dense m x n products; C is stored
// with leading dimension ldc from off_c.
#ifndef FOLD_C_TYPE
#define FOLD_C_TYPE 0
#endif
#define GEMM_C_STORAGE_TYPE FOLD_C_TYPE
#include "gemm_c_storage.cl"

__kernel void gemm_fold_parts(__global const float* parts, __global gemm_c_t* c, ulong m, ulong n,
                              ulong ldc, ulong off_c, ulong part_count) {
  const ulong count = m * n;
  for (ulong i = get_global_id(0); i < count; i += get_global_size(0)) {
    float sum = parts[i];
    for (ulong part = 1; part < part_count; ++part) sum += parts[part * count + i];
    gemm_c_store(sum, c, off_c + (i / n) * ldc + i % n);
  }
}
