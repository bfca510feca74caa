"""Sum reduction in two launches: a work-group tree reduction in local memory produces one partial
sum per group, then one group reduces the partials. Shows aethercl.Local and Python scalars typed
from the kernel's argument info (`uint n` takes a plain int).

    tools/aethercl python python_harness/examples/reduction.py [--device N] [--n N]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import aethercl  # noqa: E402

SOURCE = """
__kernel void partial_sums(__global const float* x, __global float* partial, uint n,
                           __local float* scratch) {
  size_t lid = get_local_id(0), size = get_local_size(0);
  float sum = 0.0f;
  for (size_t i = get_global_id(0); i < n; i += get_global_size(0)) sum += x[i];
  scratch[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t stride = size / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] += scratch[lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[get_group_id(0)] = scratch[0];
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--n", type=int, default=1_000_001)
    args = parser.parse_args()
    n = args.n
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)

    gpu = aethercl.Device(args.device)
    kernel = gpu.compile(SOURCE).kernel("partial_sums")
    local = 1
    while local * 2 <= min(256, kernel.info["max_work_group_size"]):
        local *= 2                                   # a power of two for the tree
    groups = 64
    X = gpu.buffer(x)
    partial = gpu.buffer(size=groups)
    total = gpu.buffer(size=1)
    kernel(groups * local, local, X, partial, n, aethercl.Local(local, np.float32))
    kernel(local, local, partial, total, groups, aethercl.Local(local, np.float32))
    result = float(total.read()[0])

    # float32 partial sums of n terms: error below n * 2^-23 * sum |x|
    reference = float(np.sum(x, dtype=np.float64))
    bound = n * 2.0**-23 * float(np.sum(np.abs(x), dtype=np.float64))
    ok = abs(result - reference) <= bound
    print(f"sum of {n} floats on {gpu.name}: {result:.6f} (float64: {reference:.6f}): "
          f"{'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
