"""Vector add with your own kernel: buffer from data, load kernel, dispatch, wait, read.

    tools/aethercl python python_harness/examples/vector_add.py [--device N] [--n N]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import aethercl  # noqa: E402

SOURCE = """
__kernel void vecadd(__global const float* a, __global const float* b, __global float* c,
                     uint n) {
  size_t i = get_global_id(0);
  if (i < n) c[i] = a[i] + b[i];
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--n", type=int, default=1_000_003)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    data_a = rng.standard_normal(n).astype(np.float32)
    data_b = rng.standard_normal(n).astype(np.float32)

    gpu = aethercl.Device(args.device)               # initialise the device
    kernel = gpu.compile(SOURCE).kernel("vecadd")    # load the kernel
    A = gpu.buffer(data_a)                           # CPU -> GPU
    B = gpu.buffer(data_b)
    C = gpu.buffer(size=n)                           # GPU only
    gpu.dispatch(kernel, A, B, C, n, groups=((n + 255) // 256,), local=(256,))
    gpu.wait()                                       # synchronise
    result = C.read()                                # GPU -> CPU

    ok = np.array_equal(result, data_a + data_b)     # one float32 rounding: exact
    print(f"vecadd of {n} floats on {gpu.name}: {'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
