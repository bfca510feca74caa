// Layout of the warpgroup-MMA kernels' local-memory tiles (included by gemm_mma.cl, which reads
// them, and gemm_pack.cl, which writes their images): K-contiguous rows of row_bytes (64 or 32),
// 16-byte units XOR-swizzled as PTX's swizzle mode of that width.
#ifndef AETHERCL_WGMMA_LAYOUT
#define AETHERCL_WGMMA_LAYOUT

// Byte offset of unit `unit` of row `row`; the pattern is anchored at 512-byte (64-byte rows) or
// 256-byte (32-byte rows) boundaries.
inline uint wgmma_tile_offset(uint row, uint unit, const uint row_bytes) {
  return row_bytes == 64u ? row * 64u + ((unit ^ ((row >> 1) & 3u)) << 4)
                          : row * 32u + ((unit ^ ((row >> 2) & 1u)) << 4);
}

#endif
