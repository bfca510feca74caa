"""conv2d forward and backward throughput (aethercl_conv2d_forward / _backward: im2col + the GEMM
engine) next to the GEMM of the same shape run alone, ours and CLBlast's (bench_gemm, same
device, same run) — the im2col + CLBlast reference. GFLOP/s = 2 * n * c_out * oh * ow * (c_in /
groups) * kh * kw per pass (forward; the backward does two such products, counted as 2x).

Usage: tools/aethercl bench conv [--reps 5] [--cases ...]
A case is N,Cin,H,W,Cout,K,stride,pad,groups."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Device  # noqa: E402
from aethercl import train as T  # noqa: E402
from aethercl import train_types as TT  # noqa: E402

DEFAULT_CASES = ["16,32,32,32,32,3,1,1,1", "16,64,16,16,64,3,1,1,1", "16,64,16,16,128,1,1,0,1",
                 "16,64,16,16,64,3,1,1,64", "64,1,8,8,32,3,1,1,1"]


def timed(dev, reps, call) -> float:
    call()
    dev.synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        dev.synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cases", nargs="+", default=DEFAULT_CASES)
    args = parser.parse_args()
    dev = Device(args.gpu)
    rng = np.random.default_rng(0)
    gemm_binary = Path(args.build) / "bench" / "bench_gemm"
    print(f"{'case N,Cin,H,W,Cout,K,s,p,g':<30} {'fwd GF/s':>9} {'bwd GF/s':>9} "
          f"{'GEMM ours':>10} {'CLBlast':>9} {'fwd/CLBlast':>11}")
    for case in args.cases:
        n, c_in, h, w, c_out, k, stride, pad, groups = (int(v) for v in case.split(","))
        oh = (h + 2 * pad - k) // stride + 1
        ow = (w + 2 * pad - k) // stride + 1
        flops = 2.0 * n * c_out * oh * ow * (c_in // groups) * k * k
        x = dev.from_numpy(rng.standard_normal((n, c_in, h, w)).astype(np.float32))
        wt = dev.from_numpy(rng.standard_normal((c_out, c_in // groups, k, k)).astype(np.float32))
        y = dev.empty((n, c_out, oh, ow))
        dx, dw = dev.empty((n, c_in, h, w)), dev.empty((c_out, c_in // groups, k, k))
        desc = TT.Conv2dDesc(n=n, c_in=c_in, h=h, w=w, c_out=c_out, kernel_h=k, kernel_w=k,
                             stride_h=stride, stride_w=stride, pad_h=pad, pad_w=pad,
                             dilation_h=1, dilation_w=1, groups=groups, x=x, weight=wt, y=y,
                             dy=y, dx=dx, dweight=dw)
        forward = timed(dev, args.reps, lambda: T.conv2d_forward(dev, desc))
        backward = timed(dev, args.reps, lambda: T.conv2d_backward(dev, desc))
        ours = clblast = 0.0
        if gemm_binary.exists():  # the forward's GEMM: (c_out/g) x (n oh ow) x (c_in/g k k), g times
            shape = f"{c_out // groups}x{n * oh * ow}x{c_in // groups * k * k}"
            out = subprocess.run([str(gemm_binary), str(Path(args.build) / "driver.so"),
                                  str(args.gpu), str(args.reps), shape], capture_output=True,
                                 text=True)
            lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
            if lines:
                ours, clblast = lines[0]["ours_gflops"], lines[0]["clblast_gflops"]
        fwd, bwd = flops / forward / 1e9, 2 * flops / backward / 1e9
        ratio = f"{fwd / clblast:>11.2f}" if clblast else f"{'n/a':>11}"
        print(f"{case:<30} {fwd:>9.2f} {bwd:>9.2f} {ours:>10.2f} {clblast:>9.2f} {ratio}")
        for buffer in (x, wt, y, dx, dw):
            buffer.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
