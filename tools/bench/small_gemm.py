"""The llm.py default model's matrix products (tiny: 16 x 64x16 by 16x16 and so on), per seed entry
point and shape: device time per call from the trace's per-kernel totals and the pipelined time per
call (a batch of calls, then one synchronisation), next to PyTorch (cuBLAS through torch.matmul,
CUDA events) on the same shapes where torch and a CUDA device are present.

Usage: tools/aethercl bench small-gemm [--calls 200] [--gpu 0]
AETHERCL_GEMM_PARAMS, when set, forces one parameter set for every shape (to compare choices).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Library  # noqa: E402

# (entry point, batch, M, N, K) as llm.py calls them with B, S, E, H, DK, DFF = 16, 64, 16, 4, 4, 256:
# the projections (B x S x E by E x E), the two feed-forward products, attention's two batched ones.
SHAPES = [
    ("matmul", 16, 64, 16, 16), ("matmul", 16, 64, 256, 16), ("matmul", 16, 64, 16, 256),
    ("matmul_batched", 64, 64, 64, 4), ("matmul_batched", 64, 64, 4, 64),
]


def operand_sizes(entry: str, batch: int, m: int, n: int, k: int):
    shared_b = entry == "matmul"  # execute_matmul_on_gpu multiplies every batch by one B
    return batch * m * k, (1 if shared_b else batch) * k * n, batch * m * n


def ours(lib, gpu: int, calls: int, trace_path: str):
    rows = []
    for entry, batch, m, n, k in SHAPES:
        sa, sb, sc = operand_sizes(entry, batch, m, n, k)
        rng = np.random.default_rng(0)
        handles = []
        for size in (sa, sb, sc, sc, sa, sb):  # a, b, c, dc, da, db
            h = lib.check_handle("allocate_gpu_memory", gpu, size * 4)
            data = rng.standard_normal(size).astype(np.float32)
            lib.check("write_host_to_gpu_blocking", gpu, h, 0, size * 4, data.ctypes.data)
            handles.append(h)
        a, b, c, dc, da, db = handles
        for direction in ("forward", "backward"):
            if direction == "forward":
                call = lambda: lib.check(f"execute_{entry}_on_gpu", gpu, a, b, c, batch, m, n, k)
            else:
                call = lambda: lib.check(f"execute_{entry}_backward_on_gpu", gpu, a, b, dc, da, db,
                                         batch, m, n, k)
            call()
            lib.check("aethercl_synchronize", gpu)
            lib.check("aethercl_trace_start", trace_path.encode())
            start = time.perf_counter()
            for _ in range(calls):
                call()
            lib.check("aethercl_synchronize", gpu)
            wall = (time.perf_counter() - start) / calls
            summary = json.loads(lib.json_call("aethercl_trace_summary"))
            lib.check("aethercl_trace_stop")
            device_ns = sum(kernel["total_ns"] for kernel in summary["kernels"]) / calls
            rows.append((entry, direction, batch, m, n, k, device_ns / 1e3, wall * 1e6))
        for h in handles:
            lib.free_gpu_memory(gpu, h)
    return rows


def pytorch(calls: int):
    """(entry, direction, batch, m, n, k) -> microseconds per call from CUDA events, or {}."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {}
    for entry, batch, m, n, k in SHAPES:
        a = torch.randn(batch, m, k, device="cuda")
        b = torch.randn(k, n, device="cuda") if entry == "matmul" else torch.randn(batch, k, n,
                                                                                  device="cuda")
        dc = torch.randn(batch, m, n, device="cuda")
        def forward():
            torch.matmul(a, b)
        def backward():
            torch.matmul(dc, b.transpose(-1, -2))
            if entry == "matmul":  # dB sums over the batch: (K x BM) by (BM x N)
                torch.matmul(a.reshape(-1, k).t(), dc.reshape(-1, n))
            else:
                torch.matmul(a.transpose(-1, -2), dc)
        for direction, fn in (("forward", forward), ("backward", backward)):
            fn()
            torch.cuda.synchronize()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            result[(entry, direction, batch, m, n, k)] = begin.elapsed_time(end) * 1e3 / calls
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    lib = Library()
    lib.check("initialize_gpu", args.gpu)
    with tempfile.TemporaryDirectory() as folder:
        rows = ours(lib, args.gpu, args.calls, os.path.join(folder, "trace.json"))
    lib.shutdown_driver()
    reference = pytorch(args.calls)
    forced = os.environ.get("AETHERCL_GEMM_PARAMS")
    print(f"GEMM parameters: {forced or 'the library default for each shape'}")
    print(f"{'entry':<16} {'pass':<9} {'batch x M x N x K':<20} {'device us':>10} "
          f"{'wall us':>8} {'torch us':>9} {'torch/ours':>10}")
    for entry, direction, batch, m, n, k, device_us, wall_us in rows:
        torch_us = reference.get((entry, direction, batch, m, n, k))
        ratio = f"{torch_us / wall_us:>10.2f}" if torch_us else f"{'-':>10}"
        torch_text = f"{torch_us:>9.2f}" if torch_us else f"{'-':>9}"
        print(f"{entry:<16} {direction:<9} {f'{batch}x{m}x{n}x{k}':<20} {device_us:>10.2f} "
              f"{wall_us:>8.2f} {torch_text} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
