"""The 16-bit copies of a float32 weight that a 16-bit Linear multiplies by (ocl_llm.mixed): W
(in, out) rounded once into W16 (in, out) and its transpose W16T (out, in), in one kernel of the
frontend's own (aethercl user kernels, so a captured step replays it). The forward product reads
W16T and the backward's dx reads W16: each is then the layout the tensor-core kernels take without
repacking (measured on an H200: tools/gpu/mixed_products.py). packed_weight_copies does the same
for several weights of one shape side by side (a fused QKV projection's). copies_of makes the
copies of many such groups in a few launches (JOBS weights each), and `prepared` makes a model's
copies that way before its forward, which packed_weight_copies then hands out: each launch of
the GPT step's costs the device about 6 us whatever its size (H200)."""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Sequence, Tuple

from aethercl import dtypes

from .tensor import OclTensor

# Rounding as aethercl_convert: nearest even, overflow to +-inf, NaN the quiet NaN of its sign.
# Job j copies weight w<j> (rows x cols) into columns [part cols, (part + 1) cols) of h<j> (rows x
# parts cols) and rows [part cols, (part + 1) cols) of t<j> (parts cols x rows); its 64 x 64
# tiles are the work-groups first<j> .. first<j+1> - 1, column tiles fastest. A work-item moves
# four adjacent values per load and store (16-byte float32 loads, 8-byte 16-bit stores; the
# transpose through local memory) where the job's rows and columns are multiples of four, one
# at a time otherwise: 32 x 32 tiles of one value per store ran at 0.7 TB/s on an H200.
JOBS = 16
_JOB_ARGS = ", ".join(
    f"__global const uint* w{j}, __global ushort* h{j}, __global ushort* t{j}, uint rows{j}, "
    f"uint cols{j}, uint part{j}, uint parts{j}, uint first{j}" for j in range(JOBS))
_PICK = "\n".join(
    f"  if ({j} < jobs && group >= first{j}) {{ w = w{j}; h = h{j}; t = t{j}; rows = rows{j}; "
    f"cols = cols{j}; part = part{j}; parts = parts{j}; first = first{j}; }}" for j in range(JOBS))
SOURCE = r"""
#define TILE 64
#define LANES 16   // work-items along each side of a tile: four values each, four passes

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

__kernel __attribute__((reqd_work_group_size(LANES, LANES, 1)))
void weight_copies(""" + _JOB_ARGS + r""", uint jobs) {
  __local ushort tile[TILE][TILE + 2];
  const uint group = get_group_id(0);
  __global const uint* w = w0;
  __global ushort* h = h0;
  __global ushort* t = t0;
  uint rows = rows0, cols = cols0, part = part0, parts = parts0, first = first0;
""" + _PICK + r"""
  const uint across = (cols + TILE - 1) / TILE, at = group - first;
  const ulong ld = (ulong)parts * cols, col0 = (ulong)part * cols;
  const uint c0 = at % across * TILE, r0 = at / across * TILE;
  const uint lx = get_local_id(0), ly = get_local_id(1);
  const int fours = cols % 4 == 0 && rows % 4 == 0;
  for (uint pass = 0; pass < TILE / LANES; ++pass) {   // rows ly + 16 pass, columns 4 lx ..
    const uint tr = ly + LANES * pass, r = r0 + tr, c = c0 + 4 * lx;
    ushort v[4] = {0, 0, 0, 0};
    if (r < rows && c < cols) {
      __global const uint* from = w + (ulong)r * cols + c;
      __global ushort* to = h + (ulong)r * ld + col0 + c;
      if (fours) {
        const uint4 u = vload4(0, from);
        v[0] = TO_16(u.x); v[1] = TO_16(u.y); v[2] = TO_16(u.z); v[3] = TO_16(u.w);
        vstore4((ushort4)(v[0], v[1], v[2], v[3]), 0, to);
      } else {
        for (uint e = 0; e < 4 && c + e < cols; ++e) to[e] = v[e] = TO_16(from[e]);
      }
    }
    for (uint e = 0; e < 4; ++e) tile[tr][4 * lx + e] = v[e];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint pass = 0; pass < TILE / LANES; ++pass) {   // columns ly + 16 pass, rows 4 lx ..
    const uint tc = ly + LANES * pass, c = c0 + tc, r = r0 + 4 * lx;
    if (c >= cols || r >= rows) continue;
    __global ushort* to = t + (col0 + c) * rows + r;
    if (fours) {
      vstore4((ushort4)(tile[4 * lx][tc], tile[4 * lx + 1][tc], tile[4 * lx + 2][tc],
                        tile[4 * lx + 3][tc]), 0, to);
    } else {
      for (uint e = 0; e < 4 && r + e < rows; ++e) to[e] = tile[4 * lx + e][tc];
    }
  }
}
"""
TILE, LANES = 64, 16


def _kernel(runtime, dtype):
    key = ("weight_copies", dtypes.code_of(dtype))
    kernel = runtime.programs.get(key)
    if kernel is None:
        rounding = "to_bf16" if dtype is dtypes.bfloat16 else "to_f16"
        program = runtime.device.compile(SOURCE, f"-DTO_16={rounding}")
        kernel = runtime.programs[key] = program.kernel("weight_copies")
    return kernel


def _check_group(weights: Sequence[OclTensor]) -> None:
    if not 1 <= len(weights) <= 3 or any(w.shape != weights[0].shape for w in weights):
        raise ValueError("packed_weight_copies takes one to three weights of one shape, got "
                         f"{[w.shape for w in weights]}")


def copies_of(groups: Sequence[Sequence[OclTensor]], dtype) -> List[Tuple[OclTensor, OclTensor]]:
    """packed_weight_copies of each group (one to three float32 weights of one shape), all in
    ceil(weights / JOBS) launches."""
    for weights in groups:
        _check_group(weights)
    out, jobs = [], []
    for weights in groups:
        rows, cols = weights[0].shape
        parts = len(weights)
        w16 = weights[0].new_empty((rows, parts * cols), dtype)
        w16t = weights[0].new_empty((parts * cols, rows), dtype)
        out.append((w16, w16t))
        if rows and cols:
            jobs += [(w, w16, w16t, rows, cols, z, parts) for z, w in enumerate(weights)]
    for begin in range(0, len(jobs), JOBS):
        _launch(jobs[begin:begin + JOBS], dtype)
    return out


def _launch(jobs, dtype) -> None:
    args, first = [], 0
    for w, w16, w16t, rows, cols, z, parts in jobs:
        args += [w.data, w16.data, w16t.data, rows, cols, z, parts, first]
        first += -(-cols // TILE) * -(-rows // TILE)
    args += args[:8] * (JOBS - len(jobs))   # unused slots: never picked (j >= jobs)
    _kernel(jobs[0][0].runtime, dtype)((first * LANES, LANES, 1), (LANES, LANES, 1), *args,
                                       len(jobs))


def _key(weights: Sequence[OclTensor], dtype) -> Tuple:
    return (dtypes.code_of(dtype),) + tuple(id(w) for w in weights)


@contextlib.contextmanager
def prepared(groups: Sequence[Sequence[OclTensor]], dtype) -> Iterator[None]:
    """Within the block, packed_weight_copies of one of these groups (same weights, same order,
    same dtype) returns the copies made on entry, all in a few launches; any other group is
    copied as before. The copies are those of the weights' values on entry: the block must not
    change them (a model's forward, whose backward then reads the same copies)."""
    if not groups:
        yield
        return
    runtime = groups[0][0].runtime
    previous: Dict = runtime.weight_copies
    made = dict(previous)
    made.update((_key(g, dtype), c) for g, c in zip(groups, copies_of(groups, dtype)))
    runtime.weight_copies = made
    try:
        yield
    finally:
        runtime.weight_copies = previous


def weight_copies(W: OclTensor, dtype) -> Tuple[OclTensor, OclTensor]:
    """(W16, W16T): W (rows, cols) float32 rounded to dtype (bf16 or f16), as it is and
    transposed; outside autograd (the 16-bit Linear routes W's gradient itself)."""
    return packed_weight_copies([W], dtype)


def packed_weight_copies(weights: Sequence[OclTensor], dtype) -> Tuple[OclTensor, OclTensor]:
    """(W16, W16T) of one to three float32 weights of one shape (rows, cols) side by side: W16
    (rows, parts * cols) holds weight z in columns [z cols, (z + 1) cols), W16T (parts * cols,
    rows) its transpose in rows [z cols, (z + 1) cols); one launch (none inside `prepared` for
    its groups)."""
    _check_group(weights)
    copies = weights[0].runtime.weight_copies.get(_key(weights, dtype))
    if copies is not None:
        return copies
    return copies_of([weights], dtype)[0]
