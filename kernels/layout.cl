// Layout kernels: tiled (batched) 2-D transpose and the axis-1/2 swap of a 4-D tensor.
// Indices are 64-bit; every kernel works with any 1-D work-group size the host picks.

#define TILE 16

// out[b, c, r] = in[b, r, c] for in (batches, rows, cols), out (batches, cols, rows).
// Each work-group walks 16x16 tiles (grid-stride over all tiles of all batches), staging one tile
// in local memory (+1 column of padding against bank conflicts) so that both the reads and the
// writes run along contiguous addresses. Work-group sizes below 256 loop over the tile.
__kernel void layout_transpose_tiled(__global const float* in, __global float* out, ulong batches,
                              ulong rows, ulong cols) {
  __local float tile[TILE][TILE + 1];
  const uint lsize = (uint)get_local_size(0);
  const uint lid = (uint)get_local_id(0);
  const uint tx = min(lsize, (uint)TILE);
  const uint ty = min(lsize / tx, (uint)TILE);
  const bool active = lid < tx * ty;
  const uint lx = lid % tx;
  const uint ly = lid / tx;

  const ulong tiles_r = (rows + TILE - 1) / TILE;
  const ulong tiles_c = (cols + TILE - 1) / TILE;
  const ulong per_batch = tiles_r * tiles_c;
  const ulong total = batches * per_batch;
  const ulong matrix = rows * cols;

  for (ulong t = get_group_id(0); t < total; t += get_num_groups(0)) {
    const ulong b = t / per_batch;
    const ulong rem = t - b * per_batch;
    const ulong tr = rem / tiles_c;
    const ulong r0 = tr * TILE;
    const ulong c0 = (rem - tr * tiles_c) * TILE;
    __global const float* src = in + b * matrix;
    __global float* dst = out + b * matrix;

    if (active) {
      for (uint y = ly; y < TILE; y += ty) {
        for (uint x = lx; x < TILE; x += tx) {
          const ulong r = r0 + y;
          const ulong c = c0 + x;
          if (r < rows && c < cols) tile[y][x] = src[r * cols + c];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active) {
      for (uint y = ly; y < TILE; y += ty) {
        for (uint x = lx; x < TILE; x += tx) {
          const ulong out_row = c0 + y;  // an input column
          const ulong out_col = r0 + x;  // an input row
          if (out_row < cols && out_col < rows) dst[out_row * rows + out_col] = tile[x][y];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// out[b, j, i, k] = in[b, i, j, k] for in (B, D1, D2, D3), out (B, D2, D1, D3); grid-stride over
// the output so writes are contiguous and reads move in runs of D3.
__kernel void layout_transpose_12(__global const float* in, __global float* out, ulong d1, ulong d2,
                           ulong d3, ulong total) {
  for (ulong o = get_global_id(0); o < total; o += get_global_size(0)) {
    const ulong k = o % d3;
    ulong rest = o / d3;
    const ulong i = rest % d1;
    rest /= d1;
    const ulong j = rest % d2;
    const ulong b = rest / d2;
    out[o] = in[((b * d1 + i) * d2 + j) * d3 + k];
  }
}
