"""A kernel shipped as SPIR-V: OpenCL C compiled to SPIR-V with Debian's clang + llvm-spirv
(aethercl.spirv), written to a .spv file and loaded with Device.load_spirv. A device without IL
support (PoCL here, NVIDIA's OpenCL) answers AETHERCL_NOT_IMPLEMENTED; the example then says so and
runs the same kernel from source, so it completes everywhere. docs/DEVICES.md lists which devices
took SPIR-V.

    tools/aethercl python python_harness/examples/spirv_kernel.py [--device N] [--spv FILE]
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import aethercl  # noqa: E402
from aethercl import spirv  # noqa: E402

SOURCE = """
__kernel void saxpy(__global const float* x, __global float* y, float alpha, uint n) {
  size_t i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i] + y[i];
}
"""
NOT_IMPLEMENTED = 9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--spv", default=None, help="where to write the module (default: temp)")
    args = parser.parse_args()
    gpu = aethercl.Device(args.device)

    try:
        module = spirv.compile_to_spirv(SOURCE)
    except spirv.SpirvToolsMissing as missing:  # a machine without Debian's clang + llvm-spirv
        print(f"no SPIR-V module: {missing}")
        module = None
    program = None
    if module is not None:
        with tempfile.TemporaryDirectory(prefix="aethercl-") as scratch:
            path = Path(args.spv or Path(scratch) / "saxpy.spv")
            path.write_bytes(module)
            print(f"SPIR-V module: {path} ({len(module)} bytes)")
            try:
                program = gpu.load_spirv(path)
                origin = "SPIR-V"
            except aethercl.AetherCLError as error:
                if error.code != NOT_IMPLEMENTED:
                    raise
                print(f"this device takes no SPIR-V: {error.message}")
    if program is None:
        program = gpu.compile(SOURCE)
        origin = "OpenCL C source (fallback)"
    kernel = program.kernel("saxpy")

    n = 10_007
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    X, Y = gpu.buffer(x), gpu.buffer(y)
    kernel(n, None, X, Y, np.float32(0.5), n)
    gpu.wait()
    ok = np.array_equal(Y.read(), np.float32(0.5) * x + y)  # scale by 0.5 is exact: one rounding
    print(f"saxpy from {origin} on {gpu.name}: {'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
