// Layout kernels: tiled (batched) 2-D transpose and the axis-1/2 swap of a 4-D tensor, in a GPU form
// (local-memory tiles, one element per item) and a CPU form (whole blocks and rows per item in
// float8 registers). Indices are 64-bit; every kernel works with any 1-D work-group size.

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

// CPU form of layout_transpose_tiled: one work-item per 8x8 block, transposed in registers (no
// local memory, no barriers); blocks on the bottom and right edges go element by element.
#define COLUMN8(k) (float8)(a0.s##k, a1.s##k, a2.s##k, a3.s##k, a4.s##k, a5.s##k, a6.s##k, a7.s##k)
__kernel void layout_transpose_blocks(__global const float* in, __global float* out, ulong batches,
                                      ulong rows, ulong cols) {
  const ulong blocks_r = (rows + 7) / 8, blocks_c = (cols + 7) / 8;
  const ulong per_batch = blocks_r * blocks_c, total = batches * per_batch, matrix = rows * cols;
  for (ulong t = get_global_id(0); t < total; t += get_global_size(0)) {
    const ulong b = t / per_batch, rem = t % per_batch;
    const ulong r0 = rem / blocks_c * 8, c0 = rem % blocks_c * 8;
    __global const float* src = in + b * matrix;
    __global float* dst = out + b * matrix;
    if (r0 + 8 <= rows && c0 + 8 <= cols) {
      __global const float* s = src + r0 * cols + c0;
      const float8 a0 = vload8(0, s), a1 = vload8(0, s + cols), a2 = vload8(0, s + 2 * cols),
                   a3 = vload8(0, s + 3 * cols), a4 = vload8(0, s + 4 * cols),
                   a5 = vload8(0, s + 5 * cols), a6 = vload8(0, s + 6 * cols),
                   a7 = vload8(0, s + 7 * cols);
      __global float* d = dst + c0 * rows + r0;
      vstore8(COLUMN8(0), 0, d);
      vstore8(COLUMN8(1), 0, d + rows);
      vstore8(COLUMN8(2), 0, d + 2 * rows);
      vstore8(COLUMN8(3), 0, d + 3 * rows);
      vstore8(COLUMN8(4), 0, d + 4 * rows);
      vstore8(COLUMN8(5), 0, d + 5 * rows);
      vstore8(COLUMN8(6), 0, d + 6 * rows);
      vstore8(COLUMN8(7), 0, d + 7 * rows);
    } else {
      for (ulong r = r0; r < min(rows, r0 + 8); ++r) {
        for (ulong c = c0; c < min(cols, c0 + 8); ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

// CPU form of layout_transpose_12: one work-item per output run of D3 elements, copied in float8.
__kernel void layout_transpose_12_runs(__global const float* in, __global float* out, ulong d1,
                                       ulong d2, ulong d3, ulong runs) {
  for (ulong o = get_global_id(0); o < runs; o += get_global_size(0)) {
    const ulong i = o % d1, rest = o / d1;
    const ulong j = rest % d2, b = rest / d2;
    __global const float* src = in + ((b * d1 + i) * d2 + j) * d3;
    __global float* dst = out + o * d3;
    ulong k = 0;
    for (; k + 8 <= d3; k += 8) vstore8(vload8(0, src + k), 0, dst + k);
    for (; k < d3; ++k) dst[k] = src[k];
  }
}
