"""Typed memory: float16 and bfloat16 buffers on any device (16-bit storage, no cl_khr_fp16),
a kernel that reads half storage with vload_half, device-side conversions (Buffer.astype), labels
and dtypes in the memory statistics, and the kernel log of what ran.

    tools/aethercl python python_harness/examples/typed_memory.py [--device N]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import aethercl  # noqa: E402

SOURCE = """
// half storage, float arithmetic: vload_half/vstore_half are core OpenCL, no cl_khr_fp16 needed
__kernel void scale_half(__global const half* x, __global half* y, float factor, uint n) {
  size_t i = get_global_id(0);
  if (i < n) vstore_half_rte(vload_half(i, x) * factor, i, y);
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    gpu = aethercl.Device(args.device)
    n = 4099
    values = np.random.default_rng(4).standard_normal(n).astype(np.float32)

    weights = gpu.buffer(values, dtype=np.float16, label="weights")        # rounded on the device
    scaled = gpu.empty((n,), np.float16, label="scaled")
    kernel = gpu.compile(SOURCE).kernel("scale_half")
    kernel(n, None, weights, scaled, 2.0, n)                               # 2.0 -> float, n -> uint
    half_ok = np.array_equal(np.asarray(scaled), values.astype(np.float16) * np.float16(2))

    brain = weights.astype(aethercl.bfloat16)                              # f16 -> bf16, on device
    brain.label = "weights_bf16"
    widened = brain.read()                                                 # float32 values
    bits = brain.to_numpy(dtype=np.uint16)                                 # the raw bf16 patterns
    # the expected patterns: float16 values (exact in float32) rounded to nearest even bf16
    f32_bits = values.astype(np.float16).astype(np.float32).view(np.uint32).astype(np.uint64)
    expect = ((f32_bits + 0x7FFF + ((f32_bits >> 16) & 1)) >> 16).astype(np.uint16)
    bf16_ok = np.array_equal(bits, expect) and \
        np.array_equal(widened, (bits.astype(np.uint32) << 16).view(np.float32))

    stats = gpu.memory_stats()
    shown = {b["label"]: b["dtype"] for b in stats["labelled_buffers"] if b["label"]}
    print("labelled buffers:", shown)
    for entry in gpu.kernel_log()[-3:]:
        print("launch:", entry["kernel"], "from", entry["entry_point"], "global", entry["global"])
    ok = half_ok and bf16_ok and shown.get("weights") == "f16" and \
        shown.get("weights_bf16") == "bf16"
    print(f"typed memory on {gpu.name}: {'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
