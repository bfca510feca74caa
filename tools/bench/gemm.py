"""GEMM GFLOP/s of execute_matmul_on_gpu next to CLBlast SGEMM on the same device, same run.
On a CPU device NumPy's float32 matmul (its BLAS, on the host's cores) is timed beside them.

Usage: tools/aethercl bench gemm [--sizes 128 256 512 1024 ...] [--reps 5] [--out DIR]
Writes gemm.json and gemm.png (GFLOP/s versus size, ours and CLBlast) into --out.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import statistics
import sys
import time
from pathlib import Path


def device_info(library: Path, gpu: int) -> dict:
    """The device's aethercl_device_info JSON (type, compute units), or {} when unavailable."""
    try:
        dll = ctypes.CDLL(str(library))
        dll.aethercl_device_info.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        dll.aethercl_device_info.restype = ctypes.c_size_t
        size = dll.aethercl_device_info(gpu, None, 0)
        text = ctypes.create_string_buffer(size + 1)
        dll.aethercl_device_info(gpu, text, size + 1)
        return json.loads(text.value)
    except (OSError, AttributeError, ValueError):
        return {}


def numpy_gflops(m: int, n: int, k: int, reps: int) -> float:
    """Median GFLOP/s of NumPy's float32 (m x k) @ (k x n) after one warm-up."""
    import numpy as np
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.matmul(a, b)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        np.matmul(a, b)
        times.append(time.perf_counter() - start)
    return 2.0 * m * n * k / statistics.median(times) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sizes", nargs="+", default=["128", "256", "512", "1024"])
    parser.add_argument("--out", default=None, help="folder for gemm.json and gemm.png")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    binary = build / "bench" / "bench_gemm"
    if not binary.exists():
        print("bench_gemm is not built: install libclblast-dev and rebuild", file=sys.stderr)
        return 1
    out = Path(args.out or build / "bench")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    on_cpu = device_info(build / "driver.so", args.gpu).get("type") == "cpu"
    header = f"{'M x N x K':<20} {'ours GFLOP/s':>13} {'CLBlast GFLOP/s':>16} {'ratio':>7}"
    print(header + (f" {'NumPy GFLOP/s':>14} {'ours/NumPy':>11}" if on_cpu else ""))
    for size in args.sizes:  # one process per size: a failure in one shape does not hide others
        result = subprocess.run([str(binary), str(build / "driver.so"), str(args.gpu),
                                 str(args.reps), size], capture_output=True, text=True)
        lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
        if not lines:
            print(f"{size:<20} failed: {result.stderr.strip()[-300:]}")
            continue
        row = json.loads(lines[-1])
        rows.append(row)
        ratio = row["ours_gflops"] / row["clblast_gflops"] if row["clblast_gflops"] else float("nan")
        line = (f"{row['m']}x{row['n']}x{row['k']:<12} {row['ours_gflops']:>13.1f} "
                f"{row['clblast_gflops']:>16.1f} {ratio:>7.2f}")
        if on_cpu:  # timed after the device run, so the two never share the cores
            row["numpy_gflops"] = numpy_gflops(row["m"], row["n"], row["k"], args.reps)
            line += f" {row['numpy_gflops']:>14.1f} {row['ours_gflops'] / row['numpy_gflops']:>11.2f}"
        print(line)
        if result.stderr.strip():
            print("   " + result.stderr.strip().splitlines()[-1][:200])
    (out / "gemm.json").write_text(json.dumps(rows, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in rows]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        ax.plot(labels, [r["ours_gflops"] for r in rows], "o-", label="AetherCL execute_matmul_on_gpu")
        ax.plot(labels, [r["clblast_gflops"] for r in rows], "s--", label="CLBlast SGEMM")
        if on_cpu:
            ax.plot(labels, [r["numpy_gflops"] for r in rows], "^:", label="NumPy matmul (host BLAS)")
        ax.set_ylabel("GFLOP/s")
        ax.set_xlabel("M x N x K")
        ax.set_title(f"SGEMM on {rows[0]['device'] if rows else '?'}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "gemm.png", dpi=120)
        print(f"plot: {out / 'gemm.png'}")
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
