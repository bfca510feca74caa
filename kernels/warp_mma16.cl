// Warp-level pieces of the 16-bit tensor-core kernels of attention_mma.cl: mma.sync m16n8k16 with
// float32 accumulators, ldmatrix, butterfly lane shuffles, and float32 rounded to the 16-bit format.
//   WM_KIND     2 bfloat16, 3 IEEE half (the numbering of gemm_mma.cl's MMA_KIND)
//   WM_EMULATE  1: the same operations in plain OpenCL C, exchanging through local scratch
//               between two barriers (every work-item of the group must reach every call), so
//               the kernels' layouts run on any device (PoCL); 0: inline PTX (NVIDIA, sm_80+).
// Local memory is addressed in bytes: WM_SHARED(p) is the address of __local p (PTX's shared
// window; 0 under emulation, where addresses are offsets into the wm_smem the kernel passes).
// Fragment layouts are PTX's: lane = 4 g + t holds A (rows g, g + 8; k 2t, 2t + 1, 2t + 8, 2t + 9),
// B (k 2t, 2t + 1, 2t + 8, 2t + 9; column g) and C (rows g, g + 8; columns 2t, 2t + 1).
#ifndef WARP_MMA16_CL
#define WARP_MMA16_CL

#include "numeric_formats.cl"

#if WM_KIND != 2 && WM_KIND != 3
#error "WM_KIND is 2 (bfloat16) or 3 (IEEE half)"
#endif

// value rounded to nearest even into the 16-bit format (overflow to +-inf, NaN stays NaN).
inline ushort wm_to16(float value) {
#if WM_KIND == 2
  return nf_to_bf16(value);
#else
  ushort bits;
  vstore_half_rte(value, 0, (__private half*)&bits);
  return bits;
#endif
}

#if WM_EMULATE
#define WM_SCRATCH_UINTS 6  // per work-item
#define WM_ARGS , __local const uchar* wm_smem, __local uint* wm_scratch
#define WM_PASS , wm_smem, wm_scratch
#define WM_SHARED(p) 0u

inline float wm_from16(uint bits) {
#if WM_KIND == 2
  return nf_from_bf16((ushort)bits);
#else
  const ushort value = (ushort)bits;
  return vload_half(0, (__private const half*)&value);
#endif
}

inline uint wm_pack(float lo, float hi) { return (uint)wm_to16(lo) | ((uint)wm_to16(hi) << 16); }

inline __local uint* wm_lanes(__local uint* wm_scratch) {
  return wm_scratch + (get_local_id(0) & ~31u) * WM_SCRATCH_UINTS;
}

// Lane L receives, of each 8x8 matrix q whose rows lanes 8q..8q+7 address, row L/4, columns
// 2(L%4) and 2(L%4)+1 (trans: rows 2(L%4) and 2(L%4)+1 of column L/4).
inline void wm_ldmatrix(uint addr, uint* r, const int trans WM_ARGS) {
  const uint lane = get_local_id(0) & 31u;
  __local uint* lanes = wm_lanes(wm_scratch);
  lanes[lane] = addr;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint q = 0; q < 4; ++q) {
    if (!trans) {
      r[q] = *(__local const uint*)(wm_smem + lanes[q * 8 + lane / 4] + (lane % 4) * 4);
    } else {
      const uint lo = *(__local const ushort*)(wm_smem + lanes[q * 8 + 2 * (lane % 4)] + (lane / 4) * 2);
      const uint hi = *(__local const ushort*)(wm_smem + lanes[q * 8 + 2 * (lane % 4) + 1] + (lane / 4) * 2);
      r[q] = lo | (hi << 16);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

// The value of lane (this lane ^ mask).
inline float wm_shfl_xor(float value, uint mask WM_ARGS) {
  const uint lane = get_local_id(0) & 31u;
  __local uint* lanes = wm_lanes(wm_scratch);
  lanes[lane] = as_uint(value);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float other = as_float(lanes[lane ^ mask]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return other;
}

// d += a * b for one m16 x n8 tile, summing k in ascending order.
inline void wm_mma(float* d, const uint* a, const uint* b WM_ARGS) {
  const uint lane = get_local_id(0) & 31u;
  __local uint* frags = wm_lanes(wm_scratch);
  for (uint e = 0; e < 4; ++e) frags[lane * 6 + e] = a[e];
  frags[lane * 6 + 4] = b[0];
  frags[lane * 6 + 5] = b[1];
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint g = lane / 4, t = lane % 4;
  for (uint e = 0; e < 4; ++e) {
    const uint row = g + (e / 2) * 8, col = 2 * t + (e % 2);
    float sum = d[e];
    for (uint k = 0; k < 16; ++k) {
      const uint a_bits = frags[((row % 8) * 4 + (k % 8) / 2) * 6 + (row / 8) + 2 * (k / 8)];
      const uint b_bits = frags[(col * 4 + (k % 8) / 2) * 6 + 4 + k / 8];
      const uint shift = (k % 2) * 16;
      sum += wm_from16((a_bits >> shift) & 0xffffu) * wm_from16((b_bits >> shift) & 0xffffu);
    }
    d[e] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

#else
#define WM_ARGS
#define WM_PASS
#define WM_SHARED(p) ((uint)(ulong)(p))

inline uint wm_pack(float lo, float hi) {
  uint packed;  // cvt puts its first source in the high half
#if WM_KIND == 2
  __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#else
  __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#endif
  return packed;
}

inline void wm_ldmatrix(uint addr, uint* r, const int trans) {
  if (trans) {
    __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
  } else {
    __asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
  }
}

inline float wm_shfl_xor(float value, uint mask) {
  float other;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n"
                       : "=f"(other) : "f"(value), "r"(mask));
  return other;
}

inline void wm_mma(float* d, const uint* a, const uint* b) {
#if WM_KIND == 2
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
#endif  // WM_EMULATE

#endif  // WARP_MMA16_CL
