"""The 16-bit copies of a float32 weight that a 16-bit Linear multiplies by (ocl_llm.mixed): W
(in, out) rounded once into W16 (in, out) and its transpose W16T (out, in), in one kernel of the
frontend's own (aethercl user kernels, so a captured step replays it). The forward product reads
W16T and the backward's dx reads W16: each is then the layout the tensor-core kernels take without
repacking (measured on an H200: tools/gpu/mixed_products.py). packed_weight_copies does the same
for several weights of one shape side by side (a fused QKV projection's), in one launch."""
from __future__ import annotations

from typing import Sequence, Tuple

from aethercl import dtypes

from .tensor import OclTensor

# Rounding as aethercl_convert: nearest even, overflow to +-inf, NaN the quiet NaN of its sign.
# Tiles of 32 x 32 through local memory keep both stores coalesced (a 64 x 64 tile of two columns
# per item measured slower on an H200: 9.0 against 7.3 us per weight of the GPT step).
SOURCE = r"""
#define TILE 32
#define ROWS_PER_PASS 8

inline ushort to_bf16(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)(((u >> 16) & 0x8000u) | 0x7fc0u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline ushort to_f16(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)(((u >> 16) & 0x8000u) | 0x7e00u);
  ushort bits[1];
  vstore_half_rte(as_float(u), 0, (__private half*)bits);
  return bits[0];
}

// Weight z of w0, w1, w2 (rows x cols each) into columns [z cols, (z + 1) cols) of w16 (rows x
// parts cols) and rows [z cols, (z + 1) cols) of w16t (parts cols x rows).
__kernel __attribute__((reqd_work_group_size(TILE, ROWS_PER_PASS, 1)))
void weight_copies(__global const uint* w0, __global const uint* w1, __global const uint* w2,
                   __global ushort* w16, __global ushort* w16t, uint rows, uint cols) {
  __local ushort tile[TILE][TILE + 1];
  const uint z = get_global_id(2), parts = get_global_size(2);
  __global const uint* w = z == 0 ? w0 : z == 1 ? w1 : w2;
  const ulong ld = (ulong)parts * cols, col0 = (ulong)z * cols;
  const uint c0 = get_group_id(0) * TILE, r0 = get_group_id(1) * TILE;
  const uint lx = get_local_id(0), ly = get_local_id(1);
  for (uint dy = ly; dy < TILE; dy += ROWS_PER_PASS) {
    const uint r = r0 + dy, c = c0 + lx;
    ushort v = 0;
    if (r < rows && c < cols) {
      v = TO_16(w[(ulong)r * cols + c]);
      w16[(ulong)r * ld + col0 + c] = v;
    }
    tile[dy][lx] = v;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint dy = ly; dy < TILE; dy += ROWS_PER_PASS) {
    const uint c = c0 + dy, r = r0 + lx;
    if (c < cols && r < rows) w16t[(col0 + c) * rows + r] = tile[lx][dy];
  }
}
"""
TILE, ROWS_PER_PASS = 32, 8


def _kernel(runtime, dtype):
    key = ("weight_copies", dtypes.code_of(dtype))
    kernel = runtime.programs.get(key)
    if kernel is None:
        rounding = "to_bf16" if dtype is dtypes.bfloat16 else "to_f16"
        program = runtime.device.compile(SOURCE, f"-DTO_16={rounding}")
        kernel = runtime.programs[key] = program.kernel("weight_copies")
    return kernel


def weight_copies(W: OclTensor, dtype) -> Tuple[OclTensor, OclTensor]:
    """(W16, W16T): W (rows, cols) float32 rounded to dtype (bf16 or f16), as it is and
    transposed; outside autograd (the 16-bit Linear routes W's gradient itself)."""
    return packed_weight_copies([W], dtype)


def packed_weight_copies(weights: Sequence[OclTensor], dtype) -> Tuple[OclTensor, OclTensor]:
    """(W16, W16T) of one to three float32 weights of one shape (rows, cols) side by side: W16
    (rows, parts * cols) holds weight z in columns [z cols, (z + 1) cols), W16T (parts * cols,
    rows) its transpose in rows [z cols, (z + 1) cols); one launch."""
    if not 1 <= len(weights) <= 3 or any(w.shape != weights[0].shape for w in weights):
        raise ValueError("packed_weight_copies takes one to three weights of one shape, got "
                         f"{[w.shape for w in weights]}")
    rows, cols = weights[0].shape
    parts = len(weights)
    w16 = weights[0].new_empty((rows, parts * cols), dtype)
    w16t = weights[0].new_empty((parts * cols, rows), dtype)
    if rows and cols:
        groups = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE)
        w0, w1, w2 = (weights[min(z, parts - 1)].data for z in range(3))
        _kernel(weights[0].runtime, dtype)((groups[0] * TILE, groups[1] * ROWS_PER_PASS, parts),
                                           (TILE, ROWS_PER_PASS, 1), w0, w1, w2, w16.data,
                                           w16t.data, rows, cols)
    return w16, w16t
