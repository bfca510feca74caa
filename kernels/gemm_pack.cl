// Copies of GEMM operands for the warpgroup-MMA kernels (kernels/gemm_mma.cl with MMA_WGMMA=1):
// dense ones for the cp.async form, stage images for the bulk-copy form (gemm_pack_tiles*, at the
// end of this file). The warpgroup kernels read A and B with k contiguous: gemm_pack_transpose writes
// out[b][c][r] = in[b][r][c] for each rows x cols matrix, gemm_pack_copy out[b][r][c] = in[b][r][c].
// Elements are moved as bit patterns of PACK_ELEM bytes (4: float32, 2: f16 or bf16); with
// PACK_ROUND_TF32=1 float32 values are rounded to TF32 on the way (the tensor cores then read
// them exactly, so the kernel needs no rounding of its own). Work-group (32, 8): a 32 x 32 tile,
// through local memory where it is transposed; both sides coalesced. With PACK_NARROW (1: bf16,
// 2: f16; PACK_ELEM=2) the tiles are read as float32 and written rounded to nearest even into
// that 16-bit format: gemm_pack_narrow_pair (at the end) narrows both float32 operands of a BF16
// or FP16 product in one launch.
#if PACK_ELEM == 4
typedef uint pack_t;
#else
typedef ushort pack_t;
#endif
#ifndef PACK_ROUND_TF32
#define PACK_ROUND_TF32 0
#endif
#ifndef PACK_NARROW
#define PACK_NARROW 0
#endif
#if PACK_NARROW
#include "numeric_formats.cl"  // the rounding rules every GEMM path shares
typedef float pack_in_t;
#else
typedef pack_t pack_in_t;
#endif

// float32 bits rounded to TF32: to nearest even (numeric_formats.cl's TF32 rule); a NaN becomes
// the canonical NaN.
inline uint pack_round_tf32(uint u) {
  return as_float(u) == as_float(u) ? (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u : 0x7fffffffu;
}

// An element as the build options say: rounded to TF32 with PACK_ROUND_TF32=1, to bf16 or f16
// with PACK_NARROW, else as it is.
inline pack_t pack_value(pack_in_t u) {
#if PACK_NARROW == 1
  return nf_to_bf16(u);
#elif PACK_NARROW == 2
  ushort bits[1];
  vstore_half_rte(u, 0, (__private half*)bits);
  return bits[0];
#elif PACK_ROUND_TF32
  return pack_round_tf32(u);
#else
  return u;
#endif
}

// The 32 x 32 tile at column c0, row r0 of in (rows x cols, leading dimension ld) written to out
// transposed (out_ld >= rows), through tile; work-group (32, 8), every work-item of it calls.
inline void pack_transpose_tile(__global const pack_in_t* in, __global pack_t* out, uint rows,
                                uint cols, ulong ld, ulong out_ld, uint c0, uint r0,
                                __local pack_in_t (*tile)[33]) {
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

// The same tile written as it is (out_ld >= cols).
inline void pack_copy_tile(__global const pack_in_t* in, __global pack_t* out, uint rows,
                           uint cols, ulong ld, ulong out_ld, uint c0, uint r0) {
  const uint c = c0 + get_local_id(0);
  for (uint i = get_local_id(1); i < 32; i += 8) {
    const uint r = r0 + i;
    if (r < rows && c < cols) out[(ulong)r * out_ld + c] = pack_value(in[(ulong)r * ld + c]);
  }
}

// Group (x, y, z) moves the tile at column 32x, row 32y of batch item batch0 + z. in: rows x cols
// with leading dimension ld, item b at offset + b * stride; out: cols x rows with leading
// dimension out_ld (>= rows), item b at b * out_stride.
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_transpose(
    __global const pack_in_t* restrict in, __global pack_t* restrict out, uint rows, uint cols,
    ulong ld, ulong offset, ulong stride, ulong out_ld, ulong out_stride, ulong batch0) {
  __local pack_in_t tile[32][33];
  const ulong item = batch0 + get_group_id(2);
  pack_transpose_tile(in + offset + item * stride, out + item * out_stride, rows, cols, ld, out_ld,
                      get_group_id(0) * 32, get_group_id(1) * 32, tile);
}

// Group (x, y, z) copies the tile at column 32x, row 32y of batch item batch0 + z, arguments as
// gemm_pack_transpose; out: rows x cols with leading dimension out_ld (>= cols).
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_copy(
    __global const pack_in_t* restrict in, __global pack_t* restrict out, uint rows, uint cols,
    ulong ld, ulong offset, ulong stride, ulong out_ld, ulong out_stride, ulong batch0) {
  const ulong item = batch0 + get_group_id(2);
  pack_copy_tile(in + offset + item * stride, out + item * out_stride, rows, cols, ld, out_ld,
                 get_group_id(0) * 32, get_group_id(1) * 32);
}

// The packed layout of gemm_mma.cl's MMA_BULK kernels: the operand as `rows` x `depth` (its k),
// cut into tiles of PACK_TILE_ROWS rows and K-tiles of PACK_ROW_BYTES bytes of k, each (tile t,
// K-tile kt) one contiguous image of a local-memory stage at ((t * k_tiles) + kt) *
// PACK_TILE_ROWS * PACK_ROW_BYTES bytes, its rows swizzled as gemm_mma.cl's mma_wg_offset;
// elements beyond rows or depth are zero. With PACK_SPLIT_TF32=1 (float32, for 3xTF32) an image
// holds the values' TF32 parts, then their residuals rounded to TF32, each a part of that size.
// in: row-major rows x depth with leading dimension ld, or
// (PACK_K_MAJOR=1) depth x rows; item b at offset + b * stride. out: item b at b * out_stride.
// gemm_pack_tiles: group (x, y, z) packs k PACK_KW * x .. + PACK_KW - 1 of rows 32y .. 32y + 31
// of item batch0 + z (those within the padded tiles) through local memory, every work-item one
// 16-byte unit.
#ifdef PACK_TILE_ROWS
#if PACK_NARROW
#error "the stage-image kernels move stored bit patterns only"
#endif
#include "wgmma_layout.cl"
#ifndef PACK_SPLIT_TF32
#define PACK_SPLIT_TF32 0
#endif
#define PACK_UNIT (16 / PACK_ELEM)          // elements per 16-byte unit
#define PACK_PART_BYTES (PACK_TILE_ROWS * PACK_ROW_BYTES)
#define PACK_IMAGE_BYTES (PACK_PART_BYTES * (PACK_SPLIT_TF32 ? 2 : 1))
#define PACK_KW (8 * PACK_UNIT)             // k per group: 8 units of each of 32 rows
#define PACK_BK (PACK_ROW_BYTES / PACK_ELEM)  // k per K-tile

// Whether the unit of row r starting at k (a multiple of PACK_UNIT) lies in the padded tiles,
// and its byte offset in the item's images.
inline bool pack_in_images(uint r, uint k, uint rows, uint k_tiles) {
  return r < (rows + PACK_TILE_ROWS - 1) / PACK_TILE_ROWS * PACK_TILE_ROWS &&
         k < k_tiles * PACK_BK;
}

inline ulong pack_image_offset(uint r, uint k, uint k_tiles) {
  return ((ulong)(r / PACK_TILE_ROWS) * k_tiles + k / PACK_BK) * PACK_IMAGE_BYTES +
         wgmma_tile_offset(r % PACK_TILE_ROWS, k % PACK_BK / PACK_UNIT, PACK_ROW_BYTES);
}

// The unit of `count` stored elements from `from` (contiguous), zero beyond count: one 16-byte
// load when it is whole (the caller guarantees 16-byte alignment then).
inline uint4 pack_load_unit(__global const pack_t* from, uint count) {
  if (count >= PACK_UNIT) return *(__global const uint4*)from;
  uint words[4] = {0u, 0u, 0u, 0u};
  for (uint e = 0; e < count; ++e) {
    words[e * PACK_ELEM / 4] |= (uint)from[e] << (e * PACK_ELEM % 4 * 8);
  }
  return (uint4)(words[0], words[1], words[2], words[3]);
}

// The unit of PACK_UNIT consecutive elements of a local-memory row.
inline uint4 pack_local_unit(__local const pack_t* from) {
  uint words[4];
  for (uint w = 0; w < 4; ++w) {
#if PACK_ELEM == 4
    words[w] = from[w];
#else
    words[w] = (uint)from[2 * w] | ((uint)from[2 * w + 1] << 16);
#endif
  }
  return (uint4)(words[0], words[1], words[2], words[3]);
}

inline uint4 pack_round_unit(uint4 v) {
#if PACK_ELEM == 4
  return (uint4)(pack_value(v.x), pack_value(v.y), pack_value(v.z), pack_value(v.w));
#else
  return v;
#endif
}

#if PACK_SPLIT_TF32
// The TF32 part of a float32 (pack_round_tf32) and its residual rounded the same way (zero where
// the part is infinite or NaN: no inf - inf).
inline uint pack_tf32_high(uint u) { return pack_round_tf32(u); }

inline uint pack_tf32_low(uint u) {
  const uint high = pack_round_tf32(u);
  if ((high & 0x7f800000u) == 0x7f800000u) return 0u;
  return pack_round_tf32(as_uint(as_float(u) - as_float(high)));
}
#endif

// Writes one unit of values (rounded as the build options say) at byte `at` of an image.
inline void pack_store_unit(__global uchar* out_bytes, ulong at, uint4 v) {
#if PACK_SPLIT_TF32
  *(__global uint4*)(out_bytes + at) = (uint4)(pack_tf32_high(v.x), pack_tf32_high(v.y),
                                               pack_tf32_high(v.z), pack_tf32_high(v.w));
  *(__global uint4*)(out_bytes + at + PACK_PART_BYTES) = (uint4)(
      pack_tf32_low(v.x), pack_tf32_low(v.y), pack_tf32_low(v.z), pack_tf32_low(v.w));
#else
  *(__global uint4*)(out_bytes + at) = pack_round_unit(v);
#endif
}

// The same layout from a row-major operand (PACK_K_MAJOR=0) whose rows start at 16-byte
// multiples (ld, offset and stride): a permutation of 16-byte units, work-item (u, r, z) moving
// unit u (k = u * PACK_UNIT ..) of row r of item batch0 + z without local memory.
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_tiles_rows(
    __global const pack_t* restrict in, __global pack_t* restrict out, uint rows, uint depth,
    ulong ld, ulong offset, ulong stride, uint k_tiles, ulong out_stride, ulong batch0) {
  const uint k = get_global_id(0) * PACK_UNIT;
  const uint r = get_global_id(1);
  if (!pack_in_images(r, k, rows, k_tiles)) return;
  const ulong item = batch0 + get_group_id(2);
  in += offset + item * stride + (ulong)r * ld;
  const uint4 v = r < rows ? pack_load_unit(in + k, k < depth ? depth - k : 0u) : (uint4)(0u);
  pack_store_unit((__global uchar*)(out + item * out_stride), pack_image_offset(r, k, k_tiles), v);
}

// The same layout from a k-major operand (PACK_K_MAJOR=1: depth x rows) whose rows of k start at
// 16-byte multiples: every work-item loads PACK_UNIT consecutive operand rows at one k as one
// 16-byte unit, and group (x, y, z) transposes rows PACK_COLUMN_ROWS * y .. and k 32x .. 32x + 31
// through local memory.
#define PACK_COLUMN_ROWS (8 * PACK_UNIT)
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_tiles_columns(
    __global const pack_t* restrict in, __global pack_t* restrict out, uint rows, uint depth,
    ulong ld, ulong offset, ulong stride, uint k_tiles, ulong out_stride, ulong batch0) {
  // [row][k]; 33 columns put the eight rows a warp's stores reach (PACK_UNIT apart) in
  // different banks
  __local pack_t tile[PACK_COLUMN_ROWS][33];
  const ulong item = batch0 + get_group_id(2);
  in += offset + item * stride;
  const uint k0 = get_group_id(0) * 32;
  const uint r0 = get_group_id(1) * PACK_COLUMN_ROWS;
  const uint id = get_local_id(1) * 32 + get_local_id(0);
  {
    const uint kl = id / 8;
    const uint r = r0 + id % 8 * PACK_UNIT;
    const uint k = k0 + kl;
    const uint4 v = k < depth ? pack_load_unit(in + (ulong)k * ld + r, r < rows ? rows - r : 0u)
                              : (uint4)(0u);
    const uint words[4] = {v.x, v.y, v.z, v.w};
    for (uint e = 0; e < PACK_UNIT; ++e) {
      tile[id % 8 * PACK_UNIT + e][kl] =
          (pack_t)(words[e * PACK_ELEM / 4] >> (e * PACK_ELEM % 4 * 8));
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint row = id / (32 / PACK_UNIT);
  const uint k = id % (32 / PACK_UNIT) * PACK_UNIT;
  if (!pack_in_images(r0 + row, k0 + k, rows, k_tiles)) return;
  pack_store_unit((__global uchar*)(out + item * out_stride),
                  pack_image_offset(r0 + row, k0 + k, k_tiles), pack_local_unit(&tile[row][k]));
}

__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_tiles(
    __global const pack_t* restrict in, __global pack_t* restrict out, uint rows, uint depth,
    ulong ld, ulong offset, ulong stride, uint k_tiles, ulong out_stride, ulong batch0) {
  __local pack_t tile[32][PACK_KW + 1];  // [row][k]
  const ulong item = batch0 + get_group_id(2);
  in += offset + item * stride;
  __global uchar* out_bytes = (__global uchar*)(out + item * out_stride);
  const uint k0 = get_group_id(0) * PACK_KW;
  const uint r0 = get_group_id(1) * 32;
  const uint tx = get_local_id(0);
  const uint ty = get_local_id(1);
#if PACK_K_MAJOR
  for (uint i = ty; i < PACK_KW; i += 8) {
    const uint r = r0 + tx;
    const uint k = k0 + i;
    tile[tx][i] = r < rows && k < depth ? in[(ulong)k * ld + r] : (pack_t)0;
  }
#else
  for (uint i = ty; i < 32; i += 8) {
    for (uint j = tx; j < PACK_KW; j += 32) {
      const uint r = r0 + i;
      const uint k = k0 + j;
      tile[i][j] = r < rows && k < depth ? in[(ulong)r * ld + k] : (pack_t)0;
    }
  }
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint id = ty * 32 + tx;
  const uint row = id / 8;
  const uint k = id % 8 * PACK_UNIT;
  if (!pack_in_images(r0 + row, k0 + k, rows, k_tiles)) return;
  pack_store_unit(out_bytes, pack_image_offset(r0 + row, k0 + k, k_tiles),
                  pack_local_unit(&tile[row][k]));
}
#endif

#if PACK_NARROW
// Both operands of a product narrowed in one launch (gemm/narrow_operands.cpp): work-group g of a
// one-dimensional grid of (32, 8) groups moves a tile of operand 0 while g < groups0, else of
// operand 1 (g - groups0); an operand's groups run over its items, then tile rows, then tile
// columns. Each operand is copied or transposed as gemm_pack_copy and gemm_pack_transpose do,
// with the same arguments; mode: PACK_NARROW_COPY (32 x 32 tiles), PACK_NARROW_TRANSPOSE
// (32 x 32), PACK_NARROW_COPY4 (32 x 128 tiles, four columns per work-item with 16-byte loads:
// the caller guarantees ld, offset and stride are multiples of four elements).
#define PACK_NARROW_COPY 0
#define PACK_NARROW_TRANSPOSE 1
#define PACK_NARROW_COPY4 2
inline void pack_narrow_tile(__global const float* in, __global ushort* out, uint rows, uint cols,
                             ulong ld, ulong offset, ulong stride, ulong out_ld, ulong out_stride,
                             uint mode, ulong group, __local float (*tile)[33]) {
  const uint width = mode == PACK_NARROW_COPY4 ? 128 : 32;
  const ulong across = (cols + width - 1) / width;
  const ulong tiles = across * ((rows + 31) / 32);
  const ulong item = group / tiles;
  const ulong at = group % tiles;
  const uint c0 = (uint)(at % across) * width;
  const uint r0 = (uint)(at / across) * 32;
  in += offset + item * stride;
  out += item * out_stride;
  const uint tx = get_local_id(0);
  const uint ty = get_local_id(1);
  if (mode == PACK_NARROW_COPY4) {
    const uint c = c0 + tx * 4;
    for (uint i = ty; i < 32; i += 8) {
      const uint r = r0 + i;
      if (r >= rows || c >= cols) continue;
      __global const float* from = in + (ulong)r * ld + c;
      __global ushort* to = out + (ulong)r * out_ld + c;
      if (c + 4 <= cols) {
        const float4 v = vload4(0, from);
        vstore4((ushort4)(pack_value(v.x), pack_value(v.y), pack_value(v.z), pack_value(v.w)), 0,
                to);
      } else {
        for (uint e = 0; c + e < cols; ++e) to[e] = pack_value(from[e]);
      }
    }
    return;
  }
  if (mode == PACK_NARROW_COPY) {
    pack_copy_tile(in, out, rows, cols, ld, out_ld, c0, r0);
  } else {
    pack_transpose_tile(in, out, rows, cols, ld, out_ld, c0, r0, tile);
  }
}

__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_pack_narrow_pair(
    __global const float* restrict in0, __global ushort* restrict out0, uint rows0, uint cols0,
    ulong ld0, ulong offset0, ulong stride0, ulong out_ld0, ulong out_stride0, uint mode0,
    ulong groups0, __global const float* restrict in1, __global ushort* restrict out1, uint rows1,
    uint cols1, ulong ld1, ulong offset1, ulong stride1, ulong out_ld1, ulong out_stride1,
    uint mode1) {
  __local float tile[32][33];
  const ulong group = get_group_id(0);
  if (group < groups0) {
    pack_narrow_tile(in0, out0, rows0, cols0, ld0, offset0, stride0, out_ld0, out_stride0,
                     mode0, group, tile);
  } else {
    pack_narrow_tile(in1, out1, rows1, cols1, ld1, offset1, stride1, out_ld1, out_stride1,
                     mode1, group - groups0, tile);
  }
}
#endif
