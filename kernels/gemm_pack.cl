// Transposed dense copies of GEMM operands, for the warpgroup-MMA kernels (kernels/gemm_mma.cl
// with MMA_WGMMA=1), which read A and B with k contiguous: out[b][c][r] = in[b][r][c] for each
// rows x cols matrix. Elements are moved as bit patterns of PACK_ELEM bytes (4: float32, 2: f16 or
// bf16). Work-group (32, 8): a 32 x 32 tile through local memory, both sides coalesced.
#if PACK_ELEM == 4
typedef uint pack_t;
#else
typedef ushort pack_t;
#endif

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
    if (c < cols && r < rows) out[(ulong)c * out_ld + r] = tile[tx][i];
  }
}
