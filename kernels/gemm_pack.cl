// Dense copies of GEMM operands for the warpgroup-MMA kernels (kernels/gemm_mma.cl with
// MMA_WGMMA=1), which read A and B with k contiguous: gemm_pack_transpose writes
// out[b][c][r] = in[b][r][c] for each rows x cols matrix, gemm_pack_copy out[b][r][c] = in[b][r][c].
// Elements are moved as bit patterns of PACK_ELEM bytes (4: float32, 2: f16 or bf16); with
// PACK_ROUND_TF32=1 float32 values are rounded to TF32 on the way (the tensor cores then read
// them exactly, so the kernel needs no rounding of its own). Work-group (32, 8): a 32 x 32 tile,
// through local memory where it is transposed; both sides coalesced.
#if PACK_ELEM == 4
typedef uint pack_t;
#else
typedef ushort pack_t;
#endif
#ifndef PACK_ROUND_TF32
#define PACK_ROUND_TF32 0
#endif

// To nearest with ties away from zero (numeric_formats.cl's TF32 rule); a NaN becomes the
// canonical NaN.
inline pack_t pack_value(pack_t u) {
#if PACK_ROUND_TF32
  return as_float(u) == as_float(u) ? (u + 0x1000u) & 0xffffe000u : 0x7fffffffu;
#else
  return u;
#endif
}

// Group (x, y, z) moves the tile at column 32x, row 32y of batch item batch0 + z. in: rows x cols
// with leading dimension ld, item b at offset + b * stride; out: cols x rows with leading
// dimension out_ld (>= rows), item b at b * out_stride.
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_transpose(
    __global const pack_t* restrict in, __global pack_t* restrict out, uint rows, uint cols,
    ulong ld, ulong offset, ulong stride, ulong out_ld, ulong out_stride, ulong batch0) {
  __local pack_t tile[32][33];
  const ulong item = batch0 + get_group_id(2);
  in += offset + item * stride;
  out += item * out_stride;
  const uint c0 = get_group_id(0) * 32;
  const uint r0 = get_group_id(1) * 32;
  const uint tx = get_local_id(0);
  const uint ty = get_local_id(1);
  for (uint i = ty; i < 32; i += 8) {
    const uint r = r0 + i;
    const uint c = c0 + tx;
    if (r < rows && c < cols) tile[i][tx] = in[(ulong)r * ld + c];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint i = ty; i < 32; i += 8) {
    const uint c = c0 + i;
    const uint r = r0 + tx;
    if (c < cols && r < rows) out[(ulong)c * out_ld + r] = pack_value(tile[tx][i]);
  }
}

// Group (x, y, z) copies the tile at column 32x, row 32y of batch item batch0 + z, arguments as
// gemm_pack_transpose; out: rows x cols with leading dimension out_ld (>= cols).
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_copy(
    __global const pack_t* restrict in, __global pack_t* restrict out, uint rows, uint cols,
    ulong ld, ulong offset, ulong stride, ulong out_ld, ulong out_stride, ulong batch0) {
  const ulong item = batch0 + get_group_id(2);
  in += offset + item * stride;
  out += item * out_stride;
  const uint c = get_group_id(0) * 32 + get_local_id(0);
  for (uint i = get_local_id(1); i < 32; i += 8) {
    const uint r = get_group_id(1) * 32 + i;
    if (r < rows && c < cols) out[(ulong)r * out_ld + c] = pack_value(in[(ulong)r * ld + c]);
  }
}
