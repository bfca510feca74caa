// Tensor-core GEMM for NVIDIA GPUs of compute capability 8.0 and later, through inline PTX:
// C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] with mma.sync (TF32 m16n8k8, BF16/FP16
// m16n8k16), fragments read with ldmatrix (32-bit elements use it as pairs of 16-bit ones), and
// a multi-stage cp.async pipeline from global to local memory. Only NVIDIA's OpenCL compiler
// builds this file; driver/gemm/tensor_core_gemm.cpp probes it at first use.
//
// Build options:
//   MMA_KIND          0 TF32, 1 3xTF32 (A and B float32), 2 BF16 (bf16 storage), 3 FP16 (f16)
//   MMA_C_TYPE        storage of C: 0 float32, 1 float16, 2 bfloat16
//   MMA_TRANS_A/B     1: A stored K x M (B stored N x K), row-major
//   MMA_BM, MMA_BN    output tile of one work-group (at least 64 x 64; BM 16 or 32 with A stored
//                     m x k); MMA_WM, MMA_WN that of one warp (multiples of 16); the work-group
//                     has (BM / WM) * (BN / WN) warps
//   MMA_STAGES        K-tiles in flight (local memory: STAGES * (BM + BN) * MMA_ROW_BYTES)
//   MMA_CHUNK         bytes per cp.async: 16, 8 or 4. The host guarantees that offsets, leading
//                     dimensions and batch strides of A and B are multiples of it (in bytes)
//   MMA_C_PAIRS       1: C's offset, leading dimension and batch stride are even: two columns per
//                     store (8 bytes of float32, 4 of 16-bit C)
//   MMA_C_STAGED      1 (16-bit C): C's rows, offset and batch stride are 16-byte multiples: the
//                     epilogue goes through local memory, rows of the tile at a time, and every
//                     work-item stores whole 16-byte units of C (the fragments' own stores reach
//                     16 bytes of a row per four work-items; float32 C's pairs 32, a whole
//                     sector, and staging them measured slower)
//   MMA_TF32_ROUND    TF32 inputs: 1 rounds in registers like numeric_formats.cl's
//                     nf_round_tf32 (nearest even); 0 leaves the dropped bits to the
//                     tensor core (truncation: faster, not the documented rounding)
//   MMA_CVT_RN        1 (sm_90 and later): that rounding is PTX cvt.rn.tf32.f32, one
//                     instruction, instead of three integer ones
//   MMA_NARROW        2 (BF16) or 3 (FP16), with MMA_KIND 0 on mma.sync: float32 operands are
//                     copied and read as for TF32, and each pair of TF32 k-steps' fragments is
//                     rounded to nearest even into one 16-bit fragment of an m16n8k16 MMA (no
//                     narrowing pass over the operands). The 16-bit fragment's k order is a
//                     permutation of the two steps' (the same for A and B, so the sum is the
//                     product's): its k pair (2t, 2t + 1) holds steps' k t and t + 4
//   MMA_BULK          1 (warpgroup MMA only): A and B come packed by gemm_pack.cl's
//                     gemm_pack_tiles, each K-tile of a block tile one contiguous image of its
//                     local-memory stage, which one work-item copies with cp.async.bulk; full and
//                     empty mbarriers per stage replace the work-group barrier (below)
//   MMA_ROW_BYTES     bytes of k per row of a K-tile: 64 (32 with MMA_BULK: smaller stages, more
//                     of them in the 48 KiB a work-group may have; 128 with mma.sync: half the
//                     barriers per k, and longer runs of each row of a K-contiguous operand)
// Work-group: MMA_GROUP_THREADS work-items in dimension 0; group (t, 0, z) computes output tile t of
// batch batch0 + z, tiles ordered in column bands of MMA_GROUP_M tiles for L2 reuse.
//
// Local memory holds each K-tile of A and B as 16-byte units (4 floats or 8 halves), XOR-swizzled
// so that ldmatrix, scalar fragment reads and cp.async writes are free of bank conflicts:
//   K-contiguous tiles (A, or B transposed: rows are m or n, each 64 bytes of k):
//       unit u of row r lives at unit u ^ ((r >> 1) & 3); with 128-byte rows at u ^ (r & 7)
//   MN-contiguous tiles (A transposed, or B: rows are k): unit u of row r lives at
//       u ^ ((r & 3) << 1) (32-bit elements) or u ^ (r & 7) (16-bit elements)
// with 32-byte rows (MMA_BULK), unit u of row r lives at u ^ ((r >> 2) & 1): PTX's 32-byte swizzle.
// Elements outside the operands are zero-filled by cp.async (src-size), or by the packing copy
// with MMA_BULK, so edges need no branches in the math; stores are masked. beta == 0 never reads C.
// GEMM_EPILOGUE (gemm_epilogue.cl): the fused epilogue, applied to each output in its store.
//
// MMA_BULK pipeline: the last warp's first lane fills stage kt % STAGES with K-tile kt (one bulk
// copy of A's block and one of B's, completing the stage's full barrier by their byte count) once
// the stage's empty barrier says every multiplying warp is done with K-tile kt - STAGES; the
// warpgroups wait on the full barrier, issue their MMAs, and arrive on the empty barrier of a
// stage once its MMAs have ended: K-tile kt's at once (MMA_WG_INFLIGHT=0), or kt - 1's while kt's
// run (1). No barrier of the whole work-group in the loop. 3xTF32 (MMA_KIND 1) runs only here:
// the packing splits each operand into its TF32 part and residual, both in the stage.

#include "numeric_formats.cl"
#include "wgmma_layout.cl"
#define GEMM_C_STORAGE_TYPE MMA_C_TYPE
#include "gemm_c_storage.cl"
#include "gemm_epilogue.cl"

#ifndef MMA_EMULATE
#define MMA_EMULATE 0
#endif
#ifndef MMA_CVT_RN
#define MMA_CVT_RN 0
#endif
#ifndef MMA_NARROW
#define MMA_NARROW 0
#endif
#if MMA_NARROW && (MMA_KIND != 0 || MMA_WGMMA || MMA_BULK || (MMA_NARROW != 2 && MMA_NARROW != 3))
#error "MMA_NARROW is 2 or 3, on float32 operands (MMA_KIND 0) with mma.sync"
#endif
#if MMA_EMULATE  // loops full of barriers stay loops: unrolling them makes PoCL compile for ages
#define MMA_UNROLL _Pragma("unroll 1")
#else
#define MMA_UNROLL _Pragma("unroll")
#endif

#if MMA_KIND <= 1
#define MMA_ELEM 4   // bytes per element of A and B
#define MMA_KSTEP 8  // k of one mma instruction
#else
#define MMA_ELEM 2
#define MMA_KSTEP 16
#endif
#ifndef MMA_BULK
#define MMA_BULK 0
#endif
#ifndef MMA_ROW_BYTES
#define MMA_ROW_BYTES 64
#endif
#define MMA_BK (MMA_ROW_BYTES / MMA_ELEM) // k per K-tile: MMA_ROW_BYTES per row
#define MMA_UNIT_ELEMS (16 / MMA_ELEM)    // elements per 16-byte unit
#ifndef MMA_WGMMA
#define MMA_WGMMA 0
#endif
#ifndef MMA_WG_INFLIGHT
#define MMA_WG_INFLIGHT 1
#endif
#if MMA_WGMMA
// Warpgroup MMA: a warpgroup of 4 warps per 64 rows, each warpgroup the whole BN columns.
#undef MMA_WM
#undef MMA_WN
#define MMA_WM 16
#define MMA_WN MMA_BN
#define MMA_WARPS_M (MMA_BM / 16)
#define MMA_WARPS_N 1
#else
#define MMA_WARPS_M (MMA_BM / MMA_WM)
#define MMA_WARPS_N (MMA_BN / MMA_WN)
#endif
#define MMA_THREADS (MMA_WARPS_M * MMA_WARPS_N * 32)  // the warps that multiply
// The work-group: with MMA_BULK one more warp, whose first lane issues the bulk copies.
#define MMA_GROUP_THREADS (MMA_THREADS + (MMA_BULK ? 32 : 0))
#define MMA_MI (MMA_WM / 16)              // m16 tiles per warp
#define MMA_NI (MMA_WN / 8)               // n8 tiles per warp
#define MMA_A_BYTES (MMA_BM * MMA_ROW_BYTES)  // one K-tile of A (BM x BK elements)
#define MMA_B_BYTES (MMA_BN * MMA_ROW_BYTES)
// 3xTF32 on the bulk pipeline: each operand's K-tile comes as its TF32 part, then its residual.
#define MMA_SPLIT (MMA_KIND == 1 && MMA_BULK)
#define MMA_A_STAGE (MMA_A_BYTES * (MMA_SPLIT ? 2 : 1))
#define MMA_B_STAGE (MMA_B_BYTES * (MMA_SPLIT ? 2 : 1))
#define MMA_STAGE_BYTES (MMA_A_STAGE + MMA_B_STAGE)
#ifndef MMA_GROUP_M
#define MMA_GROUP_M 8
#endif
#ifndef MMA_C_STAGED
#define MMA_C_STAGED 0
#endif
// The staged epilogue's tile rows: float32 values alpha * acc, MMA_EPI_PITCH floats apart (a
// multiple of 32 plus 8: the fragments' 8-byte writes of eight rows fall in distinct banks), as
// many rows at a time as the stages' local memory holds (at least 16: one warp tile's m16).
#define MMA_EPI_PITCH ((MMA_BN + 31) / 32 * 32 + 8)
#define MMA_EPI_FIT (MMA_STAGES * MMA_STAGE_BYTES / (MMA_EPI_PITCH * 4))
#define MMA_EPI_ROWS                                                                     \
  (MMA_EPI_FIT >= MMA_BM ? MMA_BM : MMA_EPI_FIT >= 64 ? 64 : MMA_EPI_FIT >= 32 ? 32 : 16)
#if MMA_C_STAGED && (MMA_EPI_FIT < 16 || MMA_C_TYPE == 0)
#error "the staged epilogue: 16-bit C, and local memory for 16 rows of the tile"
#endif

#if MMA_WM % 16 || (!MMA_WGMMA && MMA_WN % 16) || MMA_BM % MMA_WM || MMA_BN % MMA_WN
#error "warp tiles must be multiples of 16 and divide the block tile"
#endif
#if MMA_WGMMA && (MMA_BM % 64 || MMA_TRANS_A || !MMA_TRANS_B || (MMA_KIND == 1 && !MMA_BULK) || \
                  (MMA_BN != 64 && MMA_BN != 128 && MMA_BN != 256 &&                   \
                   (!MMA_BULK || (MMA_BN != 120 && MMA_BN != 248))))
#error "warpgroup MMA: BM a multiple of 64, BN 64, 128 or 256 (or 120, 248 with MMA_BULK), A and B K-contiguous, 3xTF32 only with MMA_BULK"
#endif
// An MN-contiguous tile's rows hold BM (or BN) elements: at least 8 swizzle units. A stored m x k
// (K-contiguous) may have skinny tiles of 16 or 32 rows (decode-like products).
#if MMA_BN < 64 || (MMA_BM < 64 && (MMA_TRANS_A || MMA_WGMMA || (MMA_BM != 16 && MMA_BM != 32)))
#error "block tiles need at least 64 rows and columns, or 16 or 32 rows with A stored m x k"
#endif
#if MMA_BULK && (!MMA_WGMMA || (MMA_ROW_BYTES != 32 && MMA_ROW_BYTES != 64))
#error "bulk copies: warpgroup MMA only, with 32- or 64-byte K-tile rows"
#endif
#if !MMA_BULK && MMA_ROW_BYTES != 64 && (MMA_ROW_BYTES != 128 || MMA_WGMMA || MMA_THREADS % 64)
#error "cp.async copies: 64-byte K-tile rows, or 128-byte ones for mma.sync with a multiple of 64 work-items"
#endif
#define MMA_KC_UNITS (MMA_ROW_BYTES / 16)  // 16-byte units per row of a K-contiguous tile
// A skinny A tile has fewer units than work-items: then only the first BM * KC_UNITS copy one each.
#if !MMA_BULK && (((MMA_BM * MMA_KC_UNITS) % MMA_THREADS &&                          \
                   MMA_THREADS % (MMA_BM * MMA_KC_UNITS)) ||                           \
                  (MMA_BN * MMA_KC_UNITS) % MMA_THREADS)
#error "every work-item must copy whole rows' worth of units (BM and BN multiples of THREADS / KC_UNITS, or a skinny BM that divides it)"
#endif
#if MMA_CHUNK != 16 && MMA_CHUNK != 8 && MMA_CHUNK != 4
#error "MMA_CHUNK must be 16, 8 or 4"
#endif

#if MMA_KIND <= 1
typedef float mma_elem_t;
#else
typedef ushort mma_elem_t;
#endif

// Byte offset of 16-byte unit `unit` of row `row` in a warpgroup-MMA tile (wgmma_layout.cl).
inline uint mma_wg_offset(uint row, uint unit) {
  return wgmma_tile_offset(row, unit, MMA_ROW_BYTES);
}

#if MMA_EMULATE
// ---- emulated warp instructions (MMA_EMULATE=1) ---------------------------------------------------
// The same wrappers in plain OpenCL C, so the layouts, swizzles and pipeline of this file can be
// tested on any device (PoCL): local memory is addressed by byte offsets, cp.async copies at once,
// and the warp-collective ldmatrix and mma exchange fragments through local scratch between two
// barriers (every call site is reached by the whole work-group). The tensor core's dropping of the
// low 13 bits of TF32 inputs is reproduced; sums run over k in ascending order.
#define MMA_SHARED(p) 0u
#define MMA_SCRATCH_ARGS , __local uchar* smem_bytes, __local uint* scratch
#define MMA_SCRATCH , smem_bytes, scratch

inline void mma_cp_async(uint dst, __global const mma_elem_t* src, uint src_bytes MMA_SCRATCH_ARGS) {
  __global const uchar* from = (__global const uchar*)src;
  for (uint i = 0; i < MMA_CHUNK; ++i) smem_bytes[dst + i] = i < src_bytes ? from[i] : 0;
}
inline void mma_cp_async_commit(void) {}
inline void mma_cp_async_wait(void) {}

inline uint mma_lds(uint addr MMA_SCRATCH_ARGS) { return *(__local const uint*)(smem_bytes + addr); }

inline ushort mma_lds16(uint addr, __local const uchar* smem_bytes) {
  return *(__local const ushort*)(smem_bytes + addr);
}

// Lane L receives, of each 8x8 matrix q whose rows lanes 8q..8q+7 address, row L/4, columns
// 2(L%4) and 2(L%4)+1 (transposed: rows 2(L%4), 2(L%4)+1 of column L/4).
inline void mma_ldmatrix_emulated(uint addr, uint* r, const int trans MMA_SCRATCH_ARGS) {
  const uint lane = get_local_id(0) & 31u;
  __local uint* lanes = scratch + (get_local_id(0) & ~31u) * 6u;
  lanes[lane] = addr;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint q = 0; q < 4; ++q) {
    if (!trans) {
      r[q] = mma_lds(lanes[q * 8 + lane / 4] + (lane % 4) * 4 MMA_SCRATCH);
    } else {
      const uint lo = mma_lds16(lanes[q * 8 + 2 * (lane % 4)] + (lane / 4) * 2, smem_bytes);
      const uint hi = mma_lds16(lanes[q * 8 + 2 * (lane % 4) + 1] + (lane / 4) * 2, smem_bytes);
      r[q] = lo | (hi << 16);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#define mma_ldmatrix_x4(addr, r) mma_ldmatrix_emulated((addr), (r), 0 MMA_SCRATCH)
#define mma_ldmatrix_x4_trans(addr, r) mma_ldmatrix_emulated((addr), (r), 1 MMA_SCRATCH)

// Element (row, k) of A and (k, col) of B from the fragments of all lanes (PTX fragment layouts).
inline float mma_input(uint bits, uint half_index) {
#if MMA_KIND <= 1
  return as_float(bits & 0xffffe000u);
#else
  const ushort value = (ushort)(half_index ? bits >> 16 : bits & 0xffffu);
#if MMA_KIND == 2
  return nf_from_bf16(value);
#else
  return vload_half(0, (__private const half*)&value);
#endif
#endif
}

inline void mma_tile_emulated(float* d, const uint* a, const uint* b MMA_SCRATCH_ARGS) {
  const uint lane = get_local_id(0) & 31u;
  __local uint* frags = scratch + (get_local_id(0) & ~31u) * 6u;
  for (uint e = 0; e < 4; ++e) frags[lane * 6 + e] = a[e];
  frags[lane * 6 + 4] = b[0];
  frags[lane * 6 + 5] = b[1];
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint g = lane / 4;
  const uint t = lane % 4;
  for (uint e = 0; e < 4; ++e) {
    const uint row = g + (e / 2) * 8;
    const uint col = 2 * t + (e % 2);
    float sum = d[e];
    for (uint k = 0; k < MMA_KSTEP; ++k) {
#if MMA_KIND <= 1
      const uint a_bits = frags[((row % 8) * 4 + k % 4) * 6 + (row / 8) + 2 * (k / 4)];
      const uint b_bits = frags[(col * 4 + k % 4) * 6 + 4 + k / 4];
#else
      const uint a_bits = frags[((row % 8) * 4 + (k % 8) / 2) * 6 + (row / 8) + 2 * (k / 8)];
      const uint b_bits = frags[(col * 4 + (k % 8) / 2) * 6 + 4 + k / 8];
#endif
      sum += mma_input(a_bits, k % 2) * mma_input(b_bits, k % 2);
    }
    d[e] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#define mma_tile(d, a, b) mma_tile_emulated((d), (a), (b) MMA_SCRATCH)

// Warpgroup MMA from local memory: both tiles K-contiguous with MMA_ROW_BYTES rows and the
// swizzle of mma_wg_offset (PTX's 64- or 32-byte swizzle mode); k-step ks starts ks * 32 bytes
// into each row.
// Each work-item sums its own accumulators (no exchange needed: both operands are in memory).
inline float mma_wg_input(__local const uchar* smem_bytes, uint tile, uint row, uint kbyte) {
  const uint at = tile + mma_wg_offset(row, kbyte >> 4) + (kbyte & 15u);
#if MMA_KIND <= 1
  return as_float(*(__local const uint*)(smem_bytes + at) & 0xffffe000u);
#else
  const ushort bits = *(__local const ushort*)(smem_bytes + at);
#if MMA_KIND == 2
  return nf_from_bf16(bits);
#else
  return vload_half(0, (__private const half*)&bits);
#endif
#endif
}
#define MMA_WG_FENCE()
#define MMA_WG_COMMIT_WAIT()
#define MMA_WG_COMMIT_WAIT_ONE()
#define MMA_WG_FENCE_ON(x)
#define MMA_WG_COMMIT_WAIT_ON(x)
#define mma_fence_proxy_async()
// x = A (64 rows at a_tile) x B^T (BN rows at b_tile) over one k-step, plus x unless scale is 0.
#define MMA_WG_STEP(a_tile, b_tile, ks) MMA_WG_PRODUCT(acc, a_tile, b_tile, ks, 1)
#define MMA_WG_PRODUCT(x, a_tile, b_tile, ks, scale)                                          \
  {                                                                                           \
    const uint q_ = (tid & 127u) >> 5;                                                        \
    for (uint j_ = 0; j_ < MMA_NI; ++j_)                                                      \
      for (uint e_ = 0; e_ < 4; ++e_) {                                                       \
        const uint row_ = q_ * 16u + (lane >> 2) + (e_ >> 1) * 8u;                            \
        const uint col_ = j_ * 8u + 2u * (lane & 3u) + (e_ & 1u);                             \
        float sum_ = (scale) ? x[0][j_][e_] : 0.0f;                                           \
        for (uint k_ = 0; k_ < MMA_KSTEP; ++k_) {                                             \
          const uint kbyte_ = (ks) * 32u + k_ * MMA_ELEM;                                     \
          sum_ += mma_wg_input(smem_bytes, (a_tile), row_, kbyte_) *                          \
                  mma_wg_input(smem_bytes, (b_tile), col_, kbyte_);                           \
        }                                                                                     \
        x[0][j_][e_] = sum_;                                                                  \
      }                                                                                       \
  }

#else
// ---- PTX wrappers -------------------------------------------------------------------------------
// Local addresses as 32-bit shared-window addresses, as PTX's .shared state space wants them.
#define MMA_SHARED(p) ((uint)(ulong)(p))
#define MMA_SCRATCH_ARGS
#define MMA_SCRATCH

inline void mma_cp_async(uint dst, __global const mma_elem_t* src, uint src_bytes) {
#if MMA_CHUNK == 16
  __asm__ __volatile__("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes) : "memory");
#elif MMA_CHUNK == 8
  __asm__ __volatile__("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes) : "memory");
#else
  __asm__ __volatile__("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes) : "memory");
#endif
}

inline void mma_cp_async_commit(void) {
  __asm__ __volatile__("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most MMA_STAGES - 2 committed groups are still in flight.
inline void mma_cp_async_wait(void) {
  __asm__ __volatile__("cp.async.wait_group %0;\n" ::"n"(MMA_STAGES - 2) : "memory");
}

inline uint mma_lds(uint addr) {
  uint value;
  __asm__ __volatile__("ld.shared.b32 %0, [%1];\n" : "=r"(value) : "r"(addr) : "memory");
  return value;
}

inline void mma_ldmatrix_x4(uint addr, uint* r) {
  __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

inline void mma_ldmatrix_x4_trans(uint addr, uint* r) {
  __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a * b for one m16 x n8 tile.
inline void mma_tile(float* d, const uint* a, const uint* b) {
#if MMA_KIND <= 1
  __asm__("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif MMA_KIND == 2
  __asm__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __asm__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}


#endif  // MMA_EMULATE

#if MMA_NARROW
// The 16-bit MMA and the rounding of fragment pairs come from warp_mma16.cl (its emulated form
// exchanges through the same scratch, six words per work-item).
#define WM_KIND MMA_NARROW
#define WM_EMULATE MMA_EMULATE
#include "warp_mma16.cl"
#define mma_tile16(d, a, b) wm_mma((d), (a), (b) MMA_SCRATCH)
#define mma_pack16(lo, hi) wm_pack(as_float(lo), as_float(hi))
#endif

#if MMA_WGMMA && !MMA_EMULATE
// ---- warpgroup MMA through PTX retargeted to sm_90a ---------------------------------------------
// NVIDIA's OpenCL compiler targets sm_90, which has no wgmma. These instructions are therefore
// written as PTX comments starting with MMA_SM90A; the driver (gemm/wgmma.cpp) takes the built
// program's PTX, removes that prefix, retargets it to sm_90a and loads it as a program binary.
// The register operands are filled in by the compiler as for any inline PTX.
#define MMA_SM90A "//AECL_SM90A "
// Asm operands of the accumulator array x (n8-tile j's four; eight tiles from j) and, per n8-tile
// j, their operand numbers (MMA_WG_Rj); MMA_WG_Dn and MMA_WG_ACCn(x) cover n columns.
#define MMA_WG_J(x, j) "+f"(x[0][j][0]), "+f"(x[0][j][1]), "+f"(x[0][j][2]), "+f"(x[0][j][3])
#define MMA_WG_J8(x, j) MMA_WG_J(x, j), MMA_WG_J(x, j + 1), MMA_WG_J(x, j + 2), \
  MMA_WG_J(x, j + 3), MMA_WG_J(x, j + 4), MMA_WG_J(x, j + 5), MMA_WG_J(x, j + 6), MMA_WG_J(x, j + 7)
#define MMA_WG_R0 "%0, %1, %2, %3"
#define MMA_WG_R1 "%4, %5, %6, %7"
#define MMA_WG_R2 "%8, %9, %10, %11"
#define MMA_WG_R3 "%12, %13, %14, %15"
#define MMA_WG_R4 "%16, %17, %18, %19"
#define MMA_WG_R5 "%20, %21, %22, %23"
#define MMA_WG_R6 "%24, %25, %26, %27"
#define MMA_WG_R7 "%28, %29, %30, %31"
#define MMA_WG_R8 "%32, %33, %34, %35"
#define MMA_WG_R9 "%36, %37, %38, %39"
#define MMA_WG_R10 "%40, %41, %42, %43"
#define MMA_WG_R11 "%44, %45, %46, %47"
#define MMA_WG_R12 "%48, %49, %50, %51"
#define MMA_WG_R13 "%52, %53, %54, %55"
#define MMA_WG_R14 "%56, %57, %58, %59"
#define MMA_WG_R15 "%60, %61, %62, %63"
#define MMA_WG_R16 "%64, %65, %66, %67"
#define MMA_WG_R17 "%68, %69, %70, %71"
#define MMA_WG_R18 "%72, %73, %74, %75"
#define MMA_WG_R19 "%76, %77, %78, %79"
#define MMA_WG_R20 "%80, %81, %82, %83"
#define MMA_WG_R21 "%84, %85, %86, %87"
#define MMA_WG_R22 "%88, %89, %90, %91"
#define MMA_WG_R23 "%92, %93, %94, %95"
#define MMA_WG_R24 "%96, %97, %98, %99"
#define MMA_WG_R25 "%100, %101, %102, %103"
#define MMA_WG_R26 "%104, %105, %106, %107"
#define MMA_WG_R27 "%108, %109, %110, %111"
#define MMA_WG_R28 "%112, %113, %114, %115"
#define MMA_WG_R29 "%116, %117, %118, %119"
#define MMA_WG_R30 "%120, %121, %122, %123"
#define MMA_WG_R31 "%124, %125, %126, %127"
#define MMA_WG_D64 "{" MMA_WG_R0 ", " MMA_WG_R1 ", " MMA_WG_R2 ", " MMA_WG_R3 ", " MMA_WG_R4 \
  ", " MMA_WG_R5 ", " MMA_WG_R6 ", " MMA_WG_R7 "}"
#define MMA_WG_ACC64(x) MMA_WG_J8(x, 0)
#define MMA_WG_IN_AB64 "%32, %33"
#define MMA_WG_LAST64 "34"
#define MMA_WG_D120 "{" MMA_WG_R0 ", " MMA_WG_R1 ", " MMA_WG_R2 ", " MMA_WG_R3 ", " MMA_WG_R4 \
  ", " MMA_WG_R5 ", " MMA_WG_R6 ", " MMA_WG_R7 ", " MMA_WG_R8 ", " MMA_WG_R9 ", " MMA_WG_R10 \
  ", " MMA_WG_R11 ", " MMA_WG_R12 ", " MMA_WG_R13 ", " MMA_WG_R14 "}"
#define MMA_WG_ACC120(x) MMA_WG_J8(x, 0), MMA_WG_J(x, 8), MMA_WG_J(x, 9), MMA_WG_J(x, 10), \
  MMA_WG_J(x, 11), MMA_WG_J(x, 12), MMA_WG_J(x, 13), MMA_WG_J(x, 14)
#define MMA_WG_IN_AB120 "%60, %61"
#define MMA_WG_LAST120 "62"
#define MMA_WG_D128 "{" MMA_WG_R0 ", " MMA_WG_R1 ", " MMA_WG_R2 ", " MMA_WG_R3 ", " MMA_WG_R4 \
  ", " MMA_WG_R5 ", " MMA_WG_R6 ", " MMA_WG_R7 ", " MMA_WG_R8 ", " MMA_WG_R9 ", " MMA_WG_R10 \
  ", " MMA_WG_R11 ", " MMA_WG_R12 ", " MMA_WG_R13 ", " MMA_WG_R14 ", " MMA_WG_R15 "}"
#define MMA_WG_ACC128(x) MMA_WG_J8(x, 0), MMA_WG_J8(x, 8)
#define MMA_WG_IN_AB128 "%64, %65"
#define MMA_WG_LAST128 "66"
#define MMA_WG_D248 "{" MMA_WG_R0 ", " MMA_WG_R1 ", " MMA_WG_R2 ", " MMA_WG_R3 ", " MMA_WG_R4 \
  ", " MMA_WG_R5 ", " MMA_WG_R6 ", " MMA_WG_R7 ", " MMA_WG_R8 ", " MMA_WG_R9 ", " MMA_WG_R10 \
  ", " MMA_WG_R11 ", " MMA_WG_R12 ", " MMA_WG_R13 ", " MMA_WG_R14 ", " MMA_WG_R15 \
  ", " MMA_WG_R16 ", " MMA_WG_R17 ", " MMA_WG_R18 ", " MMA_WG_R19 ", " MMA_WG_R20 \
  ", " MMA_WG_R21 ", " MMA_WG_R22 ", " MMA_WG_R23 ", " MMA_WG_R24 ", " MMA_WG_R25 \
  ", " MMA_WG_R26 ", " MMA_WG_R27 ", " MMA_WG_R28 ", " MMA_WG_R29 ", " MMA_WG_R30 "}"
#define MMA_WG_ACC248(x) MMA_WG_J8(x, 0), MMA_WG_J8(x, 8), MMA_WG_J8(x, 16), MMA_WG_J(x, 24), \
  MMA_WG_J(x, 25), MMA_WG_J(x, 26), MMA_WG_J(x, 27), MMA_WG_J(x, 28), MMA_WG_J(x, 29), \
  MMA_WG_J(x, 30)
#define MMA_WG_IN_AB248 "%124, %125"
#define MMA_WG_LAST248 "126"
#define MMA_WG_D256 "{" MMA_WG_R0 ", " MMA_WG_R1 ", " MMA_WG_R2 ", " MMA_WG_R3 ", " MMA_WG_R4 \
  ", " MMA_WG_R5 ", " MMA_WG_R6 ", " MMA_WG_R7 ", " MMA_WG_R8 ", " MMA_WG_R9 ", " MMA_WG_R10 \
  ", " MMA_WG_R11 ", " MMA_WG_R12 ", " MMA_WG_R13 ", " MMA_WG_R14 ", " MMA_WG_R15 \
  ", " MMA_WG_R16 ", " MMA_WG_R17 ", " MMA_WG_R18 ", " MMA_WG_R19 ", " MMA_WG_R20 \
  ", " MMA_WG_R21 ", " MMA_WG_R22 ", " MMA_WG_R23 ", " MMA_WG_R24 ", " MMA_WG_R25 \
  ", " MMA_WG_R26 ", " MMA_WG_R27 ", " MMA_WG_R28 ", " MMA_WG_R29 ", " MMA_WG_R30 \
  ", " MMA_WG_R31 "}"
#define MMA_WG_ACC256(x) MMA_WG_J8(x, 0), MMA_WG_J8(x, 8), MMA_WG_J8(x, 16), MMA_WG_J8(x, 24)
#define MMA_WG_IN_AB256 "%128, %129"
#define MMA_WG_LAST256 "130"

#define MMA_WG_STR_(x) #x
#define MMA_WG_STR(x) MMA_WG_STR_(x)
#if MMA_KIND <= 1
#define MMA_WG_SHAPE(n) "wgmma.mma_async.sync.aligned.m64n" MMA_WG_STR(n) "k8.f32.tf32.tf32 "
#define MMA_WG_IMM ", p, 1, 1;\n"
#elif MMA_KIND == 2
#define MMA_WG_SHAPE(n) "wgmma.mma_async.sync.aligned.m64n" MMA_WG_STR(n) "k16.f32.bf16.bf16 "
#define MMA_WG_IMM ", p, 1, 1, 0, 0;\n"
#else
#define MMA_WG_SHAPE(n) "wgmma.mma_async.sync.aligned.m64n" MMA_WG_STR(n) "k16.f32.f16.f16 "
#define MMA_WG_IMM ", p, 1, 1, 0, 0;\n"
#endif
#define MMA_WG_D_(n) MMA_WG_D##n
#define MMA_WG_D(n) MMA_WG_D_(n)
#define MMA_WG_ACC_(x, n) MMA_WG_ACC##n(x)
#define MMA_WG_ACC_N(x, n) MMA_WG_ACC_(x, n)
#define MMA_WG_ACC_OF(x) MMA_WG_ACC_N(x, MMA_BN)  // array x's accumulators as asm operands

// Shared-memory matrix descriptor: start address, leading byte offset 16 (unused with
// swizzling), stride byte offset of 8 rows, the swizzle mode of the row width (2: 64 bytes,
// 3: 32 bytes).
inline ulong mma_wg_desc(uint address) {
  return (ulong)((address & 0x3ffffu) >> 4) | ((ulong)1 << 16) |
         ((ulong)(8 * MMA_ROW_BYTES >> 4) << 32) | ((ulong)(MMA_ROW_BYTES == 64 ? 2 : 3) << 62);
}

#if MMA_BULK
// mbarriers (64-bit words in local memory, by shared-window address) and 1-D bulk copies.
inline void mma_bar_init(uint bar, uint count) {
  __asm__ __volatile__(MMA_SM90A "mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
                       "r"(count) : "memory");
}

// Makes the initialised barriers visible to the asynchronous copies (before the work-group
// barrier that publishes them).
inline void mma_bar_init_fence(void) {
  __asm__ __volatile__(MMA_SM90A "fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Returns when the barrier's phase of the given parity has completed.
inline void mma_bar_wait(uint bar, uint parity) {
  uint done = 0;
  do {
    __asm__ __volatile__(MMA_SM90A "{\n" MMA_SM90A ".reg .pred p;\n" MMA_SM90A
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n" MMA_SM90A
                         "selp.u32 %0, 1, 0, p;\n" MMA_SM90A "}\n"
                         : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

inline void mma_bar_arrive(uint bar) {
  __asm__ __volatile__(MMA_SM90A "mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar)
                       : "memory");
}

// The producer's arrival: the phase completes when `bytes` more have landed too.
inline void mma_bar_expect(uint bar, uint bytes) {
  __asm__ __volatile__(MMA_SM90A "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                       ::"r"(bar), "r"(bytes) : "memory");
}

inline void mma_bulk_copy(uint dst, __global const mma_elem_t* src, uint bytes, uint bar) {
  __asm__ __volatile__(MMA_SM90A "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
                       "bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src), "r"(bytes),
                       "r"(bar) : "memory");
}
#endif

inline void mma_fence_proxy_async(void) {
  __asm__ __volatile__("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The accumulators are operands of the fence and the wait too, so the compiler keeps every
// other access to them outside the asynchronous window.
#define MMA_WG_FENCE_ON(x) \
  __asm__ __volatile__(MMA_SM90A "wgmma.fence.sync.aligned;\n" : MMA_WG_ACC_OF(x) :: "memory")
#define MMA_WG_COMMIT_WAIT_ON(x)                                                          \
  __asm__ __volatile__(MMA_SM90A "wgmma.commit_group.sync.aligned;\n" MMA_SM90A           \
                       "wgmma.wait_group.sync.aligned 0;\n"                               \
                       : MMA_WG_ACC_OF(x)::"memory")
#define MMA_WG_FENCE() MMA_WG_FENCE_ON(acc)
#define MMA_WG_COMMIT_WAIT() MMA_WG_COMMIT_WAIT_ON(acc)
// Commits the k-steps just issued and waits for all but them: the previous K-tile's MMAs.
#define MMA_WG_COMMIT_WAIT_ONE()                                                          \
  __asm__ __volatile__(MMA_SM90A "wgmma.commit_group.sync.aligned;\n" MMA_SM90A           \
                       "wgmma.wait_group.sync.aligned 1;\n"                               \
                       : MMA_WG_ACC_OF(acc)::"memory")
// x = A (64 rows at shared address a_tile) x B^T (BN rows at b_tile) over k-step ks, plus x
// unless scale is 0.
#define MMA_WG_PRODUCT(x, a_tile, b_tile, ks, scale)                                            \
  __asm__ __volatile__(MMA_SM90A "{\n" MMA_SM90A ".reg .pred p;\n" MMA_SM90A               \
                       "setp.ne.b32 p, %" MMA_WG_LAST ", 0;\n" MMA_SM90A                      \
                       MMA_WG_SHAPE(MMA_BN) MMA_WG_D(MMA_BN) ", " MMA_WG_IN_AB MMA_WG_IMM     \
                       MMA_SM90A "}\n"                                                         \
                       : MMA_WG_ACC_OF(x)                                                     \
                       : "l"(mma_wg_desc((a_tile) + (ks) * 32u)),                               \
                         "l"(mma_wg_desc((b_tile) + (ks) * 32u)), "r"(scale))
#define MMA_WG_STEP(a_tile, b_tile, ks) MMA_WG_PRODUCT(acc, a_tile, b_tile, ks, 1)
// The operand numbers of the descriptors and of the scale-d flag, after the accumulators.
#define MMA_WG_IN_AB_(n) MMA_WG_IN_AB##n
#define MMA_WG_IN_AB_N(n) MMA_WG_IN_AB_(n)
#define MMA_WG_IN_AB MMA_WG_IN_AB_N(MMA_BN)
#define MMA_WG_LAST_(n) MMA_WG_LAST##n
#define MMA_WG_LAST_N(n) MMA_WG_LAST_(n)
#define MMA_WG_LAST MMA_WG_LAST_N(MMA_BN)
#endif  // MMA_WGMMA && !MMA_EMULATE

// ---- TF32 rounding (the tensor core reads the upper 19 bits and drops the low 13) --------------
// To nearest even, numeric_formats.cl's rule, before the tensor core drops the low bits: by
// cvt.rn.tf32.f32 with MMA_CVT_RN; else by adding just under half a TF32 unit plus the lowest
// kept bit, a NaN first made the canonical NaN (its payload could otherwise carry into the sign).
// The low bits of the result are not cleared.
inline uint mma_rne_tf32(uint u) {
#if MMA_CVT_RN
  uint rounded;
  __asm__("cvt.rn.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(as_float(u)));
  return rounded;
#else
  return as_float(u) == as_float(u) ? u + 0xfffu + ((u >> 13) & 1u) : 0x7fffffffu;
#endif
}

// MMA_TF32_ROUND 1: the documented rounding; 0: the tensor core's truncation alone.
inline uint mma_round_tf32(uint u) {
#if MMA_TF32_ROUND
  return mma_rne_tf32(u);
#else
  return u;
#endif
}

// 3xTF32: the TF32 part of u (exact: low bits cleared) and the rounded TF32 residual; a residual
// of 0 where the part is infinite or NaN (no inf - inf).
inline void mma_split_tf32(uint u, uint* hi, uint* lo) {
  const uint big = mma_rne_tf32(u) & 0xffffe000u;
  const uint small = mma_rne_tf32(as_uint(as_float(u) - as_float(big)));
  *hi = big;
  *lo = (big & 0x7f800000u) == 0x7f800000u ? 0u : small;
}

// ---- local-memory layout ------------------------------------------------------------------------
// Byte offset of 16-byte unit `unit` of row `row` in a K-contiguous tile (MMA_ROW_BYTES per row).
inline uint mma_kc_offset(uint row, uint unit) {
#if MMA_ROW_BYTES == 128
  return row * 128u + ((unit ^ (row & 7u)) << 4);
#else
  return row * 64u + ((unit ^ ((row >> 1) & 3u)) << 4);
#endif
}

// Byte offset of unit `unit` of row `row` in an MN-contiguous tile with `row_bytes` per row.
inline uint mma_mn_offset(uint row, uint unit, uint row_bytes) {
#if MMA_ELEM == 4
  return row * row_bytes + ((unit ^ ((row & 3u) << 1)) << 4);
#else
  return row * row_bytes + ((unit ^ (row & 7u)) << 4);
#endif
}

// Copying K-tiles of an operand into local memory. Work-item tid copies MMA_COPIES(rows, units)
// 16-byte units of each K-tile (`rows` rows of `units` units): the first is unit u = tid % units of
// tile row r0 = tid / units, the next ones MMA_ROW_STEP(units) rows further each. The swizzle of a
// row depends on its row modulo 8, which these steps (multiples of 8, or of 4 for 32-bit
// MN-contiguous tiles) keep, so the local offsets advance by a constant too. Only the operand row
// and column of the first unit, its global address and its local offset are kept per operand.
#define MMA_ROW_STEP(units) (MMA_THREADS / (units))
#define MMA_COPIES(rows, units) (((rows) * (units) + MMA_THREADS - 1) / MMA_THREADS)
// Whether the work-item of tile row r0 copies at all: a tile of fewer units than work-items
// (a skinny A tile) leaves the rest idle.
#define MMA_COPIES_ROW(rows, units, r0) ((rows) * (units) >= MMA_THREADS || (r0) < (rows))

typedef struct {
  ulong src;     // element offset of the first unit at K-tile 0 (row * ld + column)
  uint dst;      // its byte offset in the stage tile
  uint row;      // its operand row and column at K-tile 0
  uint col;
  uint tile_row; // its row within the tile
} mma_copier;

// kc: K-contiguous tile (rows are m or n, columns k); else rows are k, columns m or n.
inline mma_copier mma_copier_init(ulong ld, uint row0, uint col0, const uint units, const int kc,
                                  uint tid) {
  mma_copier c;
  const uint r0 = tid / units;
  const uint u = tid % units;
  c.row = row0 + r0;
  c.col = col0 + u * MMA_UNIT_ELEMS;
  c.src = (ulong)c.row * ld + c.col;
  c.tile_row = r0;
  c.dst = kc ? mma_kc_offset(r0, u) : mma_mn_offset(r0, u, units * 16u);
  return c;
}

// Issues the cp.async copies of K-tile kt into the stage tile at `tile`. Units outside the
// operand (row_limit rows, col_limit columns) are zero-filled; a unit across the column limit is
// copied in part.
inline void mma_copy_tile(const mma_copier* c, uint tile, uint kt, __global const mma_elem_t* x,
                          ulong ld, uint row_limit, uint col_limit, const uint rows,
                          const uint units, const int kc MMA_SCRATCH_ARGS) {
  const uint k0 = kt * MMA_BK;
  ulong src = c->src + (kc ? (ulong)k0 : (ulong)k0 * ld);
  uint row = c->row + (kc ? 0u : k0);
  const uint col = c->col + (kc ? k0 : 0u);
  uint dst = tile + c->dst;
  if (!MMA_COPIES_ROW(rows, units, c->tile_row)) return;
MMA_UNROLL
  for (uint copy = 0; copy < MMA_COPIES(rows, units); ++copy) {
MMA_UNROLL
    for (uint part = 0; part < 16u / MMA_CHUNK; ++part) {
      const uint gcol = col + part * (MMA_CHUNK / MMA_ELEM);
      const uint bytes = row < row_limit && gcol < col_limit
                             ? min((uint)MMA_CHUNK, (col_limit - gcol) * (uint)MMA_ELEM)
                             : 0u;
      mma_cp_async(dst + part * MMA_CHUNK, bytes ? x + src + part * (MMA_CHUNK / MMA_ELEM) : x,
                   bytes MMA_SCRATCH);
    }
    src += (ulong)MMA_ROW_STEP(units) * ld;
    row += MMA_ROW_STEP(units);
    dst += MMA_ROW_STEP(units) * units * 16u;
  }
}

// Rounds the 16-byte units mma_copy_tile copied for this work-item (tile at byte offset `tile`) to
// TF32 in place, as mma_round_tf32 rounds fragments.
inline void mma_round_copies(__local uchar* smem_bytes, uint tile, const mma_copier* c,
                             const uint rows, const uint units) {
  uint at = tile + c->dst;
  if (!MMA_COPIES_ROW(rows, units, c->tile_row)) return;
MMA_UNROLL
  for (uint copy = 0; copy < MMA_COPIES(rows, units); ++copy) {
    __local uint4* unit = (__local uint4*)(smem_bytes + at);
    uint4 v = *unit;
    v.x = mma_round_tf32(v.x);
    v.y = mma_round_tf32(v.y);
    v.z = mma_round_tf32(v.z);
    v.w = mma_round_tf32(v.w);
    *unit = v;
    at += MMA_ROW_STEP(units) * units * 16u;
  }
}

// ---- fragments ----------------------------------------------------------------------------------
// A fragments of m16 tile i (rows base .. base + 15 of the block tile) for k-step ks.
inline void mma_load_a(uint a_tile, uint base, uint ks, uint lane, uint* frag MMA_SCRATCH_ARGS) {
#if !MMA_TRANS_A
  const uint q = lane >> 3;
  const uint row = base + (q & 1u) * 8u + (lane & 7u);
  mma_ldmatrix_x4(a_tile + mma_kc_offset(row, ks * 2u + (q >> 1)), frag);
#elif MMA_ELEM == 2
  const uint q = lane >> 3;
  const uint row = ks * 16u + (q >> 1) * 8u + (lane & 7u);
  mma_ldmatrix_x4_trans(a_tile + mma_mn_offset(row, base / 8u + (q & 1u), MMA_BM * 2u), frag);
#else
  // 32-bit elements stored k-major: four scalar reads (no transposing ldmatrix for them).
  const uint g = lane >> 2;
  const uint t = lane & 3u;
#define MMA_A_AT(k, m) \
  (a_tile + mma_mn_offset((k), (m) >> 2, MMA_BM * 4u) + (((m) & 3u) << 2))
  const uint k0 = ks * 8u + t;
  frag[0] = mma_lds(MMA_A_AT(k0, base + g) MMA_SCRATCH);
  frag[1] = mma_lds(MMA_A_AT(k0, base + g + 8u) MMA_SCRATCH);
  frag[2] = mma_lds(MMA_A_AT(k0 + 4u, base + g) MMA_SCRATCH);
  frag[3] = mma_lds(MMA_A_AT(k0 + 4u, base + g + 8u) MMA_SCRATCH);
#undef MMA_A_AT
#endif
}

// B fragments of n8 tiles j and j + 1 (columns base .. base + 15 of the block tile) for k-step
// ks: frag[0..1] for tile j, frag[2..3] for tile j + 1.
inline void mma_load_b(uint b_tile, uint base, uint ks, uint lane, uint* frag MMA_SCRATCH_ARGS) {
#if MMA_TRANS_B
  const uint q = lane >> 3;
  const uint row = base + (q >> 1) * 8u + (lane & 7u);
  mma_ldmatrix_x4(b_tile + mma_kc_offset(row, ks * 2u + (q & 1u)), frag);
#elif MMA_ELEM == 2
  const uint q = lane >> 3;
  const uint row = ks * 16u + (q & 1u) * 8u + (lane & 7u);
  mma_ldmatrix_x4_trans(b_tile + mma_mn_offset(row, base / 8u + (q >> 1), MMA_BN * 2u), frag);
#else
  const uint g = lane >> 2;
  const uint t = lane & 3u;
#define MMA_B_AT(k, n) \
  (b_tile + mma_mn_offset((k), (n) >> 2, MMA_BN * 4u) + (((n) & 3u) << 2))
  const uint k0 = ks * 8u + t;
  frag[0] = mma_lds(MMA_B_AT(k0, base + g) MMA_SCRATCH);
  frag[1] = mma_lds(MMA_B_AT(k0 + 4u, base + g) MMA_SCRATCH);
  frag[2] = mma_lds(MMA_B_AT(k0, base + 8u + g) MMA_SCRATCH);
  frag[3] = mma_lds(MMA_B_AT(k0 + 4u, base + 8u + g) MMA_SCRATCH);
#undef MMA_B_AT
#endif
}

#if MMA_C_STAGED
// A barrier of the multiplying work-items (with MMA_BULK the copying warp has left; emulation
// keeps it in every barrier).
inline void mma_epilogue_barrier(void) {
#if MMA_EMULATE || !MMA_BULK
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  __asm__ __volatile__("bar.sync 1, %0;\n" ::"n"(MMA_THREADS) : "memory");
#endif
}
#endif

#if MMA_C_TYPE != 0
// The value of a 16-bit pattern of C's type (gemm_c_load's).
inline float mma_c_value(ushort bits) {
#if MMA_C_TYPE == 1
  return vload_half(0, (__private const half*)&bits);
#else
  return nf_from_bf16(bits);
#endif
}

// The 16-bit pattern gemm_c_store would write for value.
inline uint mma_c_bits(float value) {
#if MMA_C_TYPE == 1
  ushort bits;
  vstore_half_rte(value, 0, (__private half*)&bits);
  return bits;
#else
  return nf_to_bf16(value);
#endif
}
#endif

// ---- the kernel ---------------------------------------------------------------------------------
__kernel __attribute__((reqd_work_group_size(MMA_GROUP_THREADS, 1, 1))) void gemm_mma_product(
    __global const mma_elem_t* restrict a, __global const mma_elem_t* restrict b,
    __global gemm_c_t* restrict c, uint M, uint N, uint K, ulong lda, ulong ldb, ulong ldc,
    ulong off_a, ulong off_b, ulong off_c, ulong stride_a, ulong stride_b, ulong stride_c,
    float alpha, float beta, uint tiles_m, uint tiles_n, ulong batch0 GEMM_EPI_ARGS) {
  // 1024-byte aligned: the swizzle of the warpgroup MMA's descriptors is anchored there.
  __local uint4 smem[MMA_STAGES * MMA_STAGE_BYTES / 16] __attribute__((aligned(1024)));
  const uint smem_base = MMA_SHARED(smem);
#if MMA_EMULATE || MMA_WGMMA
  __local uchar* smem_bytes = (__local uchar*)smem;
#endif
#if MMA_BULK && !MMA_EMULATE
  __local ulong stage_barriers[2 * MMA_STAGES];  // full ones, then empty ones
#endif
#if MMA_EMULATE
  __local uint emulation_scratch[MMA_GROUP_THREADS * 6];
  __local uint* scratch = emulation_scratch;
#endif

  // Output tile: bands of MMA_GROUP_M tile rows, walked column by column.
  const uint pid = get_group_id(0);
  const uint band_tiles = MMA_GROUP_M * tiles_n;
  const uint band = pid / band_tiles;
  const uint first_m = band * MMA_GROUP_M;
  const uint band_rows = min(tiles_m - first_m, (uint)MMA_GROUP_M);
  const uint in_band = pid % band_tiles;
  const uint tile_m = first_m + in_band % band_rows;
  const uint tile_n = in_band / band_rows;
  const uint m0 = tile_m * MMA_BM;
  const uint n0 = tile_n * MMA_BN;

  const ulong batch = batch0 + get_group_id(2);
  a += off_a + batch * stride_a;
  b += off_b + batch * stride_b;
  c += off_c + batch * stride_c;
#if GEMM_EPILOGUE
  GEMM_EPI_ADVANCE(batch, stride_c);
#endif

  const uint tid = get_local_id(0);
  const uint lane = tid & 31u;
  const uint warp = tid >> 5;
  const uint wm0 = (warp / MMA_WARPS_N) * MMA_WM;  // warp tile within the block tile
  const uint wn0 = (warp % MMA_WARPS_N) * MMA_WN;

  float acc[MMA_MI][MMA_NI][4];
MMA_UNROLL
  for (int i = 0; i < MMA_MI; ++i)
MMA_UNROLL
    for (int j = 0; j < MMA_NI; ++j)
MMA_UNROLL
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const uint k_tiles = (K + MMA_BK - 1) / MMA_BK;

#if MMA_BULK
  // Packed operands: block tile t of A is k_tiles contiguous stage images of MMA_A_STAGE, one per
  // K-tile (B's likewise); the host's batch strides step between items.
  const uint wg_row = (tid >> 7) * 64u;  // the warpgroup's first row of the block tile
  __global const mma_elem_t* a_tiles = a + (ulong)tile_m * k_tiles * (MMA_A_STAGE / MMA_ELEM);
  __global const mma_elem_t* b_tiles = b + (ulong)tile_n * k_tiles * (MMA_B_STAGE / MMA_ELEM);
#if MMA_SPLIT
  // 3xTF32: each K-tile's three products (residuals first) are summed on the tensor cores from
  // zero into part, then added to acc with a rounding float32 addition: the tensor cores' own
  // float32 sums drop low bits, an error that would otherwise grow with k.
  float part[1][MMA_NI][4];
#define MMA_K_TILE(a_tile, b_tile)                                                              \
  {                                                                                             \
    MMA_WG_FENCE_ON(part);                                                                      \
    for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ++ks) {                                          \
      MMA_WG_PRODUCT(part, (a_tile) + MMA_A_BYTES, (b_tile), ks, ks == 0 ? 0 : 1);              \
      MMA_WG_PRODUCT(part, (a_tile), (b_tile) + MMA_B_BYTES, ks, 1);                            \
      MMA_WG_PRODUCT(part, (a_tile), (b_tile), ks, 1);                                          \
    }                                                                                           \
    MMA_WG_COMMIT_WAIT_ON(part);                                                                \
  }
#define MMA_ADD_PART()                                                                          \
  for (int j = 0; j < MMA_NI; ++j)                                                              \
    for (int e = 0; e < 4; ++e) acc[0][j][e] += part[0][j][e];
#endif
#if MMA_EMULATE
  // One stage, filled by every work-item between two work-group barriers.
  for (uint kt = 0; kt < k_tiles; ++kt) {
    barrier(CLK_LOCAL_MEM_FENCE);
    __global const uint* a_words =
        (__global const uint*)(a_tiles + (ulong)kt * (MMA_A_STAGE / MMA_ELEM));
    __global const uint* b_words =
        (__global const uint*)(b_tiles + (ulong)kt * (MMA_B_STAGE / MMA_ELEM));
    __local uint* words = (__local uint*)smem_bytes;
    for (uint i = tid; i < MMA_A_STAGE / 4; i += MMA_GROUP_THREADS) words[i] = a_words[i];
    for (uint i = tid; i < MMA_B_STAGE / 4; i += MMA_GROUP_THREADS) {
      words[MMA_A_STAGE / 4 + i] = b_words[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < MMA_THREADS) {
#if MMA_SPLIT
      MMA_K_TILE(wg_row * MMA_ROW_BYTES, MMA_A_STAGE)
      MMA_ADD_PART()
#else
      for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ++ks) {
        MMA_WG_STEP(wg_row * MMA_ROW_BYTES, MMA_A_BYTES, ks);
      }
#endif
    }
  }
#if !MMA_C_STAGED
  if (tid >= MMA_THREADS) return;
#endif
#else
  const uint full = MMA_SHARED(stage_barriers);
  const uint empty = full + 8u * MMA_STAGES;
  if (tid == 0) {
    for (uint s = 0; s < MMA_STAGES; ++s) {
      mma_bar_init(full + 8u * s, 1u);
      mma_bar_init(empty + 8u * s, MMA_THREADS / 32u);  // one arrival per multiplying warp
    }
    mma_bar_init_fence();
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (tid >= MMA_THREADS) {  // the copying warp: its first lane
    if (lane != 0) return;
    for (uint kt = 0; kt < k_tiles; ++kt) {
      const uint s = kt % MMA_STAGES;
      if (kt >= MMA_STAGES) mma_bar_wait(empty + 8u * s, (kt / MMA_STAGES - 1u) & 1u);
      const uint tile = smem_base + s * MMA_STAGE_BYTES;
      mma_bar_expect(full + 8u * s, MMA_STAGE_BYTES);
      mma_bulk_copy(tile, a_tiles + (ulong)kt * (MMA_A_STAGE / MMA_ELEM), MMA_A_STAGE,
                    full + 8u * s);
      mma_bulk_copy(tile + MMA_A_STAGE, b_tiles + (ulong)kt * (MMA_B_STAGE / MMA_ELEM),
                    MMA_B_STAGE, full + 8u * s);
    }
    return;
  }
  for (uint kt = 0; kt < k_tiles; ++kt) {
    const uint s = kt % MMA_STAGES;
    mma_bar_wait(full + 8u * s, (kt / MMA_STAGES) & 1u);
    const uint a_tile = smem_base + s * MMA_STAGE_BYTES + wg_row * MMA_ROW_BYTES;
    const uint b_tile = smem_base + s * MMA_STAGE_BYTES + MMA_A_STAGE;
#if MMA_SPLIT
    MMA_K_TILE(a_tile, b_tile)
    if (lane == 0) mma_bar_arrive(empty + 8u * s);
    MMA_ADD_PART()
#else
    MMA_WG_FENCE();
MMA_UNROLL
    for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ++ks) MMA_WG_STEP(a_tile, b_tile, ks);
#if MMA_WG_INFLIGHT
    MMA_WG_COMMIT_WAIT_ONE();  // this warp's MMAs of K-tile kt - 1 have ended
    if (kt > 0 && lane == 0) mma_bar_arrive(empty + 8u * ((kt - 1u) % MMA_STAGES));
#else
    MMA_WG_COMMIT_WAIT();      // those of K-tile kt: its stage is released at once
    if (lane == 0) mma_bar_arrive(empty + 8u * s);
#endif
#endif  // MMA_SPLIT
  }
#if MMA_WG_INFLIGHT && !MMA_SPLIT
  MMA_WG_COMMIT_WAIT();
#endif
#endif  // MMA_EMULATE
#else
  // A tile: BM rows of 4 units (K-contiguous), or BK rows of BM / UNIT_ELEMS units; B likewise.
#if MMA_TRANS_A
#define MMA_A_SHAPE MMA_BK, MMA_BM / MMA_UNIT_ELEMS, 0
  const mma_copier a_copier = mma_copier_init(lda, 0, m0, MMA_BM / MMA_UNIT_ELEMS, 0, tid);
#define MMA_A_LIMITS K, M
#else
#define MMA_A_SHAPE MMA_BM, MMA_KC_UNITS, 1
  const mma_copier a_copier = mma_copier_init(lda, m0, 0, MMA_KC_UNITS, 1, tid);
#define MMA_A_LIMITS M, K
#endif
#if MMA_TRANS_B
#define MMA_B_SHAPE MMA_BN, MMA_KC_UNITS, 1
  const mma_copier b_copier = mma_copier_init(ldb, n0, 0, MMA_KC_UNITS, 1, tid);
#define MMA_B_LIMITS N, K
#else
#define MMA_B_SHAPE MMA_BK, MMA_BN / MMA_UNIT_ELEMS, 0
  const mma_copier b_copier = mma_copier_init(ldb, 0, n0, MMA_BN / MMA_UNIT_ELEMS, 0, tid);
#define MMA_B_LIMITS K, N
#endif
#define MMA_LOAD_STAGE(stage, kt)                                                         \
  {                                                                                       \
    const uint a_tile = smem_base + (stage) * MMA_STAGE_BYTES;                            \
    mma_copy_tile(&a_copier, a_tile, (kt), a, lda, MMA_A_LIMITS, MMA_A_SHAPE MMA_SCRATCH); \
    mma_copy_tile(&b_copier, a_tile + MMA_A_BYTES, (kt), b, ldb, MMA_B_LIMITS,            \
                  MMA_B_SHAPE MMA_SCRATCH);                                               \
  }

MMA_UNROLL
  for (uint s = 0; s < MMA_STAGES - 1; ++s) {
    if (s < k_tiles) MMA_LOAD_STAGE(s, s)
    mma_cp_async_commit();
  }

#if MMA_WGMMA
  // MMA_WG_INFLIGHT 1: the MMAs of K-tile kt run while the work-group waits for, rounds and
  // releases the next tiles; a stage is refilled only after every warpgroup's MMAs on it ended
  // (wait_group 1 at iteration kt + 1, then the second barrier). 0: each K-tile's MMAs end before
  // the next copies are issued.
  const uint wg_row = (tid >> 7) * 64u;  // the warpgroup's first row of the block tile
  for (uint kt = 0; kt < k_tiles; ++kt) {
    mma_cp_async_wait();  // this work-item's copies of tile kt have landed
    const uint stage = (kt % MMA_STAGES) * MMA_STAGE_BYTES;
#if MMA_KIND == 0 && MMA_TF32_ROUND
    // The tensor cores read TF32 inputs from local memory: each work-item rounds what it copied.
    mma_round_copies(smem_bytes, stage, &a_copier, MMA_BM, MMA_KC_UNITS);
    mma_round_copies(smem_bytes, stage + MMA_A_BYTES, &b_copier, MMA_BN, MMA_KC_UNITS);
#endif
    mma_fence_proxy_async();        // copies and roundings visible to the tensor cores
    barrier(CLK_LOCAL_MEM_FENCE);   // everyone's
#if !MMA_WG_INFLIGHT
    const uint next = kt + MMA_STAGES - 1;
    if (next < k_tiles) MMA_LOAD_STAGE(next % MMA_STAGES, next)
    mma_cp_async_commit();
#endif
    const uint a_tile = smem_base + stage + wg_row * 64u;
    const uint b_tile = smem_base + stage + MMA_A_BYTES;
    MMA_WG_FENCE();
MMA_UNROLL
    for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ++ks) MMA_WG_STEP(a_tile, b_tile, ks);
#if MMA_WG_INFLIGHT
    MMA_WG_COMMIT_WAIT_ONE();       // this warpgroup's MMAs of tile kt - 1 have ended
    barrier(CLK_LOCAL_MEM_FENCE);   // everyone's: stage (kt - 1) is free
    const uint next = kt + MMA_STAGES - 1;
    if (next < k_tiles) MMA_LOAD_STAGE(next % MMA_STAGES, next)
    mma_cp_async_commit();
#else
    MMA_WG_COMMIT_WAIT();
#endif
  }
#if MMA_WG_INFLIGHT
  MMA_WG_COMMIT_WAIT();             // the last tile's MMAs (an empty group is committed first)
#endif
#else
  for (uint kt = 0; kt < k_tiles; ++kt) {
    mma_cp_async_wait();              // this work-item's copies of tile kt have landed
    barrier(CLK_LOCAL_MEM_FENCE);     // everyone's have, and stage (kt - 1) is free again
    const uint next = kt + MMA_STAGES - 1;
    if (next < k_tiles) MMA_LOAD_STAGE(next % MMA_STAGES, next)
    mma_cp_async_commit();            // possibly empty: keeps the group count uniform

    const uint a_tile = smem_base + (kt % MMA_STAGES) * MMA_STAGE_BYTES;
    const uint b_tile = a_tile + MMA_A_BYTES;
#define MMA_LOAD_FRAGS(ks, a_frag, b_frag)                                                   \
  {                                                                                           \
MMA_UNROLL                                                                                    \
    for (int i = 0; i < MMA_MI; ++i) mma_load_a(a_tile, wm0 + i * 16, (ks), lane, a_frag[i] MMA_SCRATCH); \
MMA_UNROLL                                                                                    \
    for (int j = 0; j < MMA_NI; j += 2) {                                                     \
      uint pair[4];                                                                           \
      mma_load_b(b_tile, wn0 + j * 8, (ks), lane, pair MMA_SCRATCH);                          \
      b_frag[j][0] = pair[0];                                                                 \
      b_frag[j][1] = pair[1];                                                                 \
      b_frag[j + 1][0] = pair[2];                                                             \
      b_frag[j + 1][1] = pair[3];                                                             \
    }                                                                                         \
  }
#if MMA_NARROW
    // Two TF32 k-steps (k 0-7 and 8-15 of the pair) make one 16-bit k16 step: per lane t, A's
    // (row, k t) and (row, k t + 4) of a step become one register, as B's (k t, col) and
    // (k t + 4, col), so both operands see the same order of k.
MMA_UNROLL
    for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ks += 2) {
      uint a_frag[MMA_MI][4], a_next[MMA_MI][4];
      uint b_frag[MMA_NI][2], b_next[MMA_NI][2];
      MMA_LOAD_FRAGS(ks, a_frag, b_frag)
      MMA_LOAD_FRAGS(ks + 1, a_next, b_next)
      uint a16[MMA_MI][4];
      uint b16[MMA_NI][2];
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i) {
        a16[i][0] = mma_pack16(a_frag[i][0], a_frag[i][2]);
        a16[i][1] = mma_pack16(a_frag[i][1], a_frag[i][3]);
        a16[i][2] = mma_pack16(a_next[i][0], a_next[i][2]);
        a16[i][3] = mma_pack16(a_next[i][1], a_next[i][3]);
      }
MMA_UNROLL
      for (int j = 0; j < MMA_NI; ++j) {
        b16[j][0] = mma_pack16(b_frag[j][0], b_frag[j][1]);
        b16[j][1] = mma_pack16(b_next[j][0], b_next[j][1]);
      }
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i)
MMA_UNROLL
        for (int j = 0; j < MMA_NI; ++j) mma_tile16(acc[i][j], a16[i], b16[j]);
    }
#else
MMA_UNROLL
    for (uint ks = 0; ks < MMA_BK / MMA_KSTEP; ++ks) {
      uint a_frag[MMA_MI][4];
      uint b_frag[MMA_NI][2];
      MMA_LOAD_FRAGS(ks, a_frag, b_frag)
#if MMA_KIND == 1
      uint a_lo[MMA_MI][4];
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i)
MMA_UNROLL
        for (int e = 0; e < 4; ++e) mma_split_tf32(a_frag[i][e], &a_frag[i][e], &a_lo[i][e]);
      // The three products of each k-step are summed on the tensor core from zero, then added
      // to the accumulator with a rounding float32 addition: tensor cores truncate the low bits
      // of their float32 sums, an error that would otherwise grow linearly with k.
MMA_UNROLL
      for (int j = 0; j < MMA_NI; ++j) {
        uint b_lo[2];
MMA_UNROLL
        for (int e = 0; e < 2; ++e) mma_split_tf32(b_frag[j][e], &b_frag[j][e], &b_lo[e]);
MMA_UNROLL
        for (int i = 0; i < MMA_MI; ++i) {
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_tile(part, a_lo[i], b_frag[j]);
          mma_tile(part, a_frag[i], b_lo);
          mma_tile(part, a_frag[i], b_frag[j]);
MMA_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][j][e] += part[e];
        }
      }
#else
#if MMA_KIND == 0
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i)
MMA_UNROLL
        for (int e = 0; e < 4; ++e) a_frag[i][e] = mma_round_tf32(a_frag[i][e]);
MMA_UNROLL
      for (int j = 0; j < MMA_NI; ++j)
MMA_UNROLL
        for (int e = 0; e < 2; ++e) b_frag[j][e] = mma_round_tf32(b_frag[j][e]);
#endif
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i)
MMA_UNROLL
        for (int j = 0; j < MMA_NI; ++j) mma_tile(acc[i][j], a_frag[i], b_frag[j]);
#endif
    }
#endif  // MMA_NARROW
#undef MMA_LOAD_FRAGS
  }
#endif  // MMA_WGMMA
#undef MMA_LOAD_STAGE
#endif  // MMA_BULK

  // Epilogue: each work-item holds rows g and g + 8, columns 2t and 2t + 1 of every mma tile.
  const uint g = lane >> 2;
  const uint t = lane & 3u;
#if MMA_C_STAGED
  // Rows r0 .. r0 + MMA_EPI_ROWS - 1 of the tile at a time: the fragments into local memory,
  // then units of 16 bytes of C (eight columns) per work-item, row by row.
  // The arithmetic is the other epilogue's: alpha * acc, plus beta * C, rounded once.
  __local float* staged = (__local float*)smem;
#define MMA_EPI_UNIT 8  // 16-bit values per unit
#define MMA_EPI_UNITS (MMA_EPI_ROWS * (MMA_BN / MMA_EPI_UNIT))
  for (uint r0 = 0; r0 < MMA_BM; r0 += MMA_EPI_ROWS) {
    mma_epilogue_barrier();  // the stages (or the previous rows) are read
    if (tid < MMA_THREADS) {
MMA_UNROLL
      for (int i = 0; i < MMA_MI; ++i) {
MMA_UNROLL
        for (int half_row = 0; half_row < 2; ++half_row) {
          const uint row = wm0 + i * 16 + g + half_row * 8 - r0;
          if (row >= MMA_EPI_ROWS) continue;  // (wraps below r0 too)
MMA_UNROLL
          for (int j = 0; j < MMA_NI; ++j) {
            *(__local float2*)(staged + row * MMA_EPI_PITCH + wn0 + j * 8 + 2 * t) =
                (float2)(alpha * acc[i][j][half_row * 2], alpha * acc[i][j][half_row * 2 + 1]);
          }
        }
      }
    }
    mma_epilogue_barrier();
    for (uint u = tid; u < MMA_EPI_UNITS && tid < MMA_THREADS; u += MMA_THREADS) {
      const uint row = u / (MMA_BN / MMA_EPI_UNIT);
      const uint col = u % (MMA_BN / MMA_EPI_UNIT) * MMA_EPI_UNIT;
      const uint grow = m0 + r0 + row;
      const uint gcol = n0 + col;
      if (r0 + row >= MMA_BM || grow >= M || gcol >= N) continue;
      __local const float* from = staged + row * MMA_EPI_PITCH + col;
      const ulong at = (ulong)grow * ldc + gcol;
      float v[MMA_EPI_UNIT];
MMA_UNROLL
      for (int e = 0; e < MMA_EPI_UNIT; ++e) v[e] = from[e];
      if (gcol + MMA_EPI_UNIT > N) {  // the unit across N: element by element
        for (uint e = 0; e < N - gcol; ++e) {
#if GEMM_EPILOGUE
          const float out = beta != 0.0f ? v[e] + beta * gemm_c_load(c, at + e) : v[e];
          gemm_c_store(GEMM_EPI(out, gcol + e, at + e), c, at + e);
#else
          gemm_c_store(beta != 0.0f ? v[e] + beta * gemm_c_load(c, at + e) : v[e], c, at + e);
#endif
        }
        continue;
      }
      __global uint4* unit = (__global uint4*)(c + at);
      if (beta != 0.0f) {
MMA_UNROLL
        for (int e = 0; e < MMA_EPI_UNIT; ++e) v[e] += beta * gemm_c_load(c, at + e);
      }
#if GEMM_EPILOGUE == 7
      {  // DGELU: the pre-activation read as one 16-byte unit
        const uint4 pre_unit = *(__global const uint4*)(epi_pre + at);
        const uint pre_words[4] = {pre_unit.x, pre_unit.y, pre_unit.z, pre_unit.w};
MMA_UNROLL
        for (int e = 0; e < MMA_EPI_UNIT; ++e) {
          const ushort bits = (ushort)(pre_words[e / 2] >> (16 * (e % 2)));
          v[e] *= gemm_epi_gelu_slope(mma_c_value(bits));
        }
      }
#elif GEMM_EPILOGUE
      // The pre-activation as one 16-byte unit too (element by element it took more time than
      // the product on the GPT's feed-forward layer).
MMA_UNROLL
      for (int e = 0; e < MMA_EPI_UNIT; ++e) v[e] = GEMM_EPI_PRE_VALUE(v[e], gcol + e);
      if (epi_has_pre) {
        uint pre_words[4];
MMA_UNROLL
        for (int w = 0; w < 4; ++w) {
          pre_words[w] = mma_c_bits(v[2 * w]) | (mma_c_bits(v[2 * w + 1]) << 16);
        }
        *(__global uint4*)(epi_pre + at) =
            (uint4)(pre_words[0], pre_words[1], pre_words[2], pre_words[3]);
      }
MMA_UNROLL
      for (int e = 0; e < MMA_EPI_UNIT; ++e) v[e] = gemm_epi_act(v[e]);
#endif
#if GEMM_EPILOGUE
      if (epi_has_res) {
MMA_UNROLL
        for (int e = 0; e < MMA_EPI_UNIT; ++e) v[e] += gemm_c_load(epi_res, at + e);
      }
#endif
      uint words[4];
MMA_UNROLL
      for (int w = 0; w < 4; ++w) words[w] = mma_c_bits(v[2 * w]) | (mma_c_bits(v[2 * w + 1]) << 16);
      *unit = (uint4)(words[0], words[1], words[2], words[3]);
    }
  }
#undef MMA_EPI_UNIT
#undef MMA_EPI_UNITS
#else
MMA_UNROLL
  for (int i = 0; i < MMA_MI; ++i) {
MMA_UNROLL
    for (int half_row = 0; half_row < 2; ++half_row) {
      const uint row = m0 + wm0 + i * 16 + g + half_row * 8;
      if (row >= M) continue;
MMA_UNROLL
      for (int j = 0; j < MMA_NI; ++j) {
        const uint col = n0 + wn0 + j * 8 + 2 * t;
        const ulong at = (ulong)row * ldc + col;
        float v0 = alpha * acc[i][j][half_row * 2];
        float v1 = alpha * acc[i][j][half_row * 2 + 1];
#if MMA_C_PAIRS
        if (col + 1 < N) {  // both columns in one store (at is even)
#if MMA_C_TYPE == 0
          __global float2* pair = (__global float2*)(c + at);
          if (beta != 0.0f) {
            const float2 old = *pair;
            v0 += beta * old.x;
            v1 += beta * old.y;
          }
#if GEMM_EPILOGUE
          v0 = GEMM_EPI(v0, col, at);
          v1 = GEMM_EPI(v1, col + 1, at + 1);
#endif
          *pair = (float2)(v0, v1);
#else
          if (beta != 0.0f) {
            v0 += beta * gemm_c_load(c, at);
            v1 += beta * gemm_c_load(c, at + 1);
          }
#if GEMM_EPILOGUE
          v0 = GEMM_EPI(v0, col, at);
          v1 = GEMM_EPI(v1, col + 1, at + 1);
#endif
          *(__global uint*)(c + at) = mma_c_bits(v0) | (mma_c_bits(v1) << 16);
#endif
          continue;
        }
#endif
        if (col < N) {
          if (beta != 0.0f) v0 += beta * gemm_c_load(c, at);
#if GEMM_EPILOGUE
          v0 = GEMM_EPI(v0, col, at);
#endif
          gemm_c_store(v0, c, at);
        }
        if (col + 1 < N) {
          if (beta != 0.0f) v1 += beta * gemm_c_load(c, at + 1);
#if GEMM_EPILOGUE
          v1 = GEMM_EPI(v1, col + 1, at + 1);
#endif
          gemm_c_store(v1, c, at + 1);
        }
      }
    }
  }
#endif  // MMA_C_STAGED
}
