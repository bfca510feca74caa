"""Tiled matrix product with local memory: each work-group of TILE x TILE work-items stages a tile
of A and of B in __local memory (aethercl.Local) and accumulates C = A @ B for odd sizes.

    tools/aethercl python python_harness/examples/tiled_matmul.py [--device N] [--m M --n N --k K]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import aethercl  # noqa: E402

SOURCE = """
__kernel void matmul_tiled(__global const float* a, __global const float* b, __global float* c,
                           int m, int n, int k, __local float* tile_a, __local float* tile_b) {
  int tile = (int)get_local_size(0);
  int col = (int)get_global_id(0), row = (int)get_global_id(1);
  int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
  float acc = 0.0f;
  for (int t = 0; t < k; t += tile) {
    tile_a[ly * tile + lx] = (row < m && t + lx < k) ? a[row * k + t + lx] : 0.0f;
    tile_b[ly * tile + lx] = (col < n && t + ly < k) ? b[(t + ly) * n + col] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = 0; p < tile; ++p) acc += tile_a[ly * tile + p] * tile_b[p * tile + lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (row < m && col < n) c[row * n + col] = acc;
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--m", type=int, default=129)
    parser.add_argument("--n", type=int, default=67)
    parser.add_argument("--k", type=int, default=93)
    parser.add_argument("--tile", type=int, default=8)
    args = parser.parse_args()
    m, n, k, tile = args.m, args.n, args.k, args.tile
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)

    gpu = aethercl.Device(args.device)
    kernel = gpu.compile(SOURCE).kernel("matmul_tiled")
    A, B = gpu.buffer(a), gpu.buffer(b)
    C = gpu.empty((m, n), np.float32, label="C")
    groups = ((n + tile - 1) // tile, (m + tile - 1) // tile)
    gpu.dispatch(kernel, A, B, C, m, n, k, aethercl.Local(tile * tile, np.float32),
                 aethercl.Local(tile * tile, np.float32), groups=groups, local=(tile, tile))
    gpu.wait()
    c = np.asarray(C)

    # float32 products summed in k order: error below k * 2^-24 * sum |a||b| per element
    bound = k * 2.0**-23 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    error = np.abs(c - a.astype(np.float64) @ b)
    ok = bool(np.all(error <= bound))
    print(f"tiled matmul {m}x{k} @ {k}x{n} (tile {tile}) on {gpu.name}: max error "
          f"{error.max():.3g}: {'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
