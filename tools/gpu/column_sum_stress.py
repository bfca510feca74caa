"""Repeats two-level column sums (execute_reduce_sum_gpu over chunks of rows, folded by each
column tile's last work-group in the same launch) many times on shapes taken in turn, and checks
every result bit for bit against the first one of its shape: a lost hand-off between work-groups
(an ordering bug, counters not left zero) shows up as a different sum. Also from threads on
streams of their own, each with its own counters.

Usage (on the GPU machine, after tools/gpu/env.sh): python3 tools/gpu/column_sum_stress.py
    [--iterations 2000] [--threads 2]
"""
from __future__ import annotations

import argparse
import ctypes
import sys
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402

SHAPES = [(4096, 512), (4096, 1536), (8192, 768), (4096, 2048), (70001, 3)]


def run(lib, gpu, iterations, stream, rng, failures, label):
    if stream is not None:
        lib.check("aethercl_stream_set_current", gpu, stream)
    buffers = []
    for rows, cols in SHAPES:
        x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
        src = lib.check_handle("allocate_gpu_memory", gpu, x.nbytes)
        dst = lib.check_handle("allocate_gpu_memory", gpu, cols * 4)
        lib.check("write_host_to_gpu_blocking", gpu, src, 0, x.nbytes, x.ctypes.data_as(ctypes.c_void_p))
        buffers.append((rows, cols, src, dst))
    first = {}
    for i in range(iterations):
        rows, cols, src, dst = buffers[i % len(buffers)]
        lib.check("execute_reduce_sum_gpu", gpu, src, dst, 1, rows, cols)
        out = np.empty(cols, np.float32)
        lib.check("read_gpu_to_host_blocking", gpu, dst, 0, cols * 4, out.ctypes.data_as(ctypes.c_void_p))
        key = (rows, cols)
        if key not in first:
            first[key] = out.copy()
        elif not np.array_equal(out.view(np.uint32), first[key].view(np.uint32)):
            failures.append(f"{label}: iteration {i}, {rows} x {cols}: "
                            f"{int((out != first[key]).sum())} columns differ")
    for _, _, src, dst in buffers:
        lib.free_gpu_memory(gpu, src)
        lib.free_gpu_memory(gpu, dst)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gpu", type=int, default=0)
    args = parser.parse_args()
    lib = Library()
    lib.check("initialize_gpu", args.gpu)
    failures: list = []
    run(lib, args.gpu, args.iterations, None, np.random.default_rng(0), failures, "default stream")
    streams = [lib.check_handle("aethercl_stream_create", args.gpu, 0) for _ in range(args.threads)]
    workers = [threading.Thread(target=run, args=(lib, args.gpu, args.iterations, s,
                                                  np.random.default_rng(1 + k), failures,
                                                  f"thread {k}"))
               for k, s in enumerate(streams)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for s in streams:
        lib.check("aethercl_stream_destroy", args.gpu, s)
    lib.shutdown_driver()
    print(f"{args.iterations} sums on the default stream and {args.iterations} on each of "
          f"{args.threads} threads' streams: {len(failures)} differing results")
    for line in failures[:20]:
        print(" ", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
