"""GEMM GFLOP/s of execute_matmul_on_gpu next to CLBlast SGEMM on the same device, same run.

Usage: tools/aethercl bench gemm [--sizes 128 256 512 1024 ...] [--reps 5] [--out DIR]
Writes gemm.json and gemm.png (GFLOP/s versus size, ours and CLBlast) into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


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
    print(f"{'M x N x K':<20} {'ours GFLOP/s':>13} {'CLBlast GFLOP/s':>16} {'ratio':>7}")
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
        print(f"{row['m']}x{row['n']}x{row['k']:<12} {row['ours_gflops']:>13.1f} "
              f"{row['clblast_gflops']:>16.1f} {ratio:>7.2f}")
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
