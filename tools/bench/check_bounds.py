"""Cost of AETHERCL_CHECK_BOUNDS=1: loops of small ops timed with the variable off and on, in
alternating child processes (the library reads it once).

Loops, each per iteration: `add+sync` (execute_add_on_gpu on 256 floats, then aethercl_synchronize,
with 8 or 256 live buffers, whose guards every synchronize compares), `add` (the call alone,
synchronised every 256 calls: the launch-history cost), `alloc+free` (a 1 KiB buffer: the guard's
fill, and the free's check, which waits for the buffer's stream).

Usage: tools/aethercl bench bounds [--iterations N] [--rounds R] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def child(iterations: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
    from aethercl.library import find_library

    lib = ctypes.CDLL(os.environ.get("AETHERCL_LIBRARY") or str(find_library()))
    lib.initialize_gpu.argtypes = [ctypes.c_int]
    lib.allocate_gpu_memory.argtypes = [ctypes.c_int, ctypes.c_size_t]
    lib.allocate_gpu_memory.restype = ctypes.c_void_p
    lib.free_gpu_memory.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.execute_add_on_gpu.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int]
    lib.aethercl_synchronize.argtypes = [ctypes.c_int]
    assert lib.initialize_gpu(0) == 1
    clock = time.perf_counter_ns
    n = 256
    a, c = lib.allocate_gpu_memory(0, 4 * n), lib.allocate_gpu_memory(0, 4 * n)
    lib.aethercl_synchronize(0)
    results = {}

    def timed(name, body, count):
        for _ in range(count // 10):
            body()
        lib.aethercl_synchronize(0)
        start = clock()
        for _ in range(count):
            body()
        lib.aethercl_synchronize(0)
        results[name] = (clock() - start) / count / 1e3

    def add_sync():
        lib.execute_add_on_gpu(0, a, a, c, n)
        assert lib.aethercl_synchronize(0) == 1

    extra = []
    for live in (8, 256):
        while len(extra) + 2 < live:
            extra.append(lib.allocate_gpu_memory(0, 4 * n))
        timed(f"add+sync, {live} live buffers", add_sync, iterations)

    calls = [0]

    def add_only():
        lib.execute_add_on_gpu(0, a, a, c, n)
        calls[0] += 1
        if calls[0] % 256 == 0:
            lib.aethercl_synchronize(0)

    timed("add (sync every 256)", add_only, iterations * 4)

    def alloc_free():
        buffer = lib.allocate_gpu_memory(0, 1024)
        lib.free_gpu_memory(0, buffer)

    timed("alloc+free 1 KiB", alloc_free, iterations)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="off/on child pairs, alternated")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.iterations)))
        return
    runs = {"off": [], "on": []}
    for _ in range(args.rounds):
        for mode, value in (("off", "0"), ("on", "1")):
            env = dict(os.environ, AETHERCL_CHECK_BOUNDS=value)
            out = subprocess.run([sys.executable, __file__, "--child", "--iterations",
                                  str(args.iterations)], env=env, capture_output=True, text=True,
                                 check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    table = {}
    print(f"{'loop':32} {'off us':>9} {'on us':>9} {'on/off':>7}   (median of {args.rounds})")
    for name in runs["off"][0]:
        off = statistics.median(run[name] for run in runs["off"])
        on = statistics.median(run[name] for run in runs["on"])
        table[name] = {"off_us": off, "on_us": on, "ratio": on / off}
        print(f"{name:32} {off:9.2f} {on:9.2f} {on / off:7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"iterations": args.iterations,
                                               "rounds": args.rounds, "loops": table}, indent=1))


if __name__ == "__main__":
    main()
