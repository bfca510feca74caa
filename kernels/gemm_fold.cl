// The split-K GEMM's fold (driver/gemm/split_k.cpp): C = the sum of the float32 partial products
// of its k slices, added in slice order (so the result is fixed for a shape and device).
// parts holds part_count dense m x n products; C is stored with leading dimension ldc from off_c.
__kernel void gemm_fold_parts(__global const float* parts, __global float* c, ulong m, ulong n,
                              ulong ldc, ulong off_c, ulong part_count) {
  const ulong count = m * n;
  for (ulong i = get_global_id(0); i < count; i += get_global_size(0)) {
    float sum = parts[i];
    for (ulong part = 1; part < part_count; ++part) sum += parts[part * count + i];
    c[off_c + (i / n) * ldc + i % n] = sum;
  }
}
