"""Per-call cost of execute_add_on_gpu on 1 element, from C and from ctypes, on the real driver
(async with the device's default, with the submission thread forced on and off, and with
AETHERCL_SYNC=1 finishing every call) and on the do-nothing driver_null.so, and the cost of the
kernel log (the C call with AETHERCL_KERNEL_LOG=1 and =0, alternated).
Median/p90: calls timed in bursts of 256 with an untimed synchronising read between bursts (the
cost a caller pays per call). Sustained: back-to-back calls plus the final drain, per call (bounded
by the device's throughput for tiny kernels).

Usage: tools/aethercl bench calls [--calls N]   (prints a table; --json FILE writes the figures)
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


def measure_ctypes(library: str, calls: int) -> dict:
    lib = ctypes.CDLL(library)
    lib.initialize_gpu.argtypes = [ctypes.c_int]
    lib.allocate_gpu_memory.argtypes = [ctypes.c_int, ctypes.c_size_t]
    lib.allocate_gpu_memory.restype = ctypes.c_void_p
    lib.execute_add_on_gpu.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int]
    lib.read_gpu_to_host_blocking.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                              ctypes.c_size_t, ctypes.c_void_p]
    lib.write_host_to_gpu_blocking.argtypes = lib.read_gpu_to_host_blocking.argtypes
    assert lib.initialize_gpu(0) == 1
    a, c = lib.allocate_gpu_memory(0, 4), lib.allocate_gpu_memory(0, 4)
    one = ctypes.c_float(1.0)
    lib.write_host_to_gpu_blocking(0, a, 0, 4, ctypes.byref(one))
    add = lib.execute_add_on_gpu
    for _ in range(1000):
        add(0, a, a, c, 1)
    lib.read_gpu_to_host_blocking(0, c, 0, 4, ctypes.byref(one))
    clock = time.perf_counter_ns
    read = lib.read_gpu_to_host_blocking
    samples = []
    for i in range(calls):
        if i % 256 == 0:  # bursts: the device never back-pressures the timed calls
            read(0, c, 0, 4, ctypes.byref(one))
        start = clock()
        add(0, a, a, c, 1)
        samples.append(clock() - start)
    start_all = clock()
    for _ in range(calls):
        add(0, a, a, c, 1)
    read(0, c, 0, 4, ctypes.byref(one))
    wall = clock() - start_all
    samples.sort()
    return {"calls": calls, "median_us": samples[calls // 2] / 1e3,
            "p90_us": samples[calls * 9 // 10] / 1e3, "sustained_per_call_us": wall / calls / 1e3}


def run(command, env_extra) -> dict:
    env = dict(os.environ, **env_extra)
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_ctypes(args.child[0], int(args.child[1]))))
        return 0
    build = Path(args.build).resolve()
    real, null = str(build / "driver.so"), str(build / "driver_null.so")
    c_bench = str(build / "bench" / "bench_call_overhead")
    py = [sys.executable, __file__, "--child"]
    calls = str(args.calls)
    thread_on = {"AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "1"}
    thread_off = {"AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "0"}
    rows = [
        ("C", "driver.so (async)", run([c_bench, real, calls], {"AETHERCL_SYNC": "0"})),
        ("C", "driver.so submit thread on", run([c_bench, real, calls], thread_on)),
        ("C", "driver.so submit thread off", run([c_bench, real, calls], thread_off)),
        ("C", "driver.so AETHERCL_SYNC=1", run([c_bench, real, calls], {"AETHERCL_SYNC": "1"})),
        ("C", "driver_null.so", run([c_bench, null, calls], {})),
        ("ctypes", "driver.so (async)", run(py + [real, calls], {"AETHERCL_SYNC": "0"})),
        ("ctypes", "driver.so submit thread on", run(py + [real, calls], thread_on)),
        ("ctypes", "driver.so submit thread off", run(py + [real, calls], thread_off)),
        ("ctypes", "driver.so AETHERCL_SYNC=1", run(py + [real, calls], {"AETHERCL_SYNC": "1"})),
        ("ctypes", "driver_null.so", run(py + [null, calls], {})),
    ]
    print(f"{'caller':<8} {'library':<30} {'median us':>10} {'p90 us':>9} {'sustained us':>13}")
    for caller, library, r in rows:
        print(f"{caller:<8} {library:<30} {r['median_us']:>10.2f} {r['p90_us']:>9.2f} "
              f"{r['sustained_per_call_us']:>13.2f}")
    # The kernel log's cost: the same C call with the log on (default) and off, alternated five
    # times each so machine noise hits both alike; the best median of each is compared.
    log_runs = {"on": [], "off": []}
    for _ in range(5):
        for state, value in (("on", "1"), ("off", "0")):
            log_runs[state].append(run([c_bench, real, str(args.calls)],
                                       {"AETHERCL_SYNC": "0", "AETHERCL_KERNEL_LOG": value}))
    best = {state: min(r["median_us"] for r in runs) for state, runs in log_runs.items()}
    sustained = {state: min(r["sustained_per_call_us"] for r in runs)
                 for state, runs in log_runs.items()}
    print(f"kernel log (C, best of 5): median {best['on']:.3f} us on vs {best['off']:.3f} us off "
          f"({best['on'] - best['off']:+.3f} us, {100 * (best['on'] / best['off'] - 1):+.1f} %); "
          f"sustained {sustained['on']:.3f} vs {sustained['off']:.3f} us")
    rows += [("C", "driver.so log on (best of 5)", min(log_runs["on"], key=lambda r: r["median_us"])),
             ("C", "driver.so log off (best of 5)",
              min(log_runs["off"], key=lambda r: r["median_us"]))]
    for caller in ("C", "ctypes"):
        by = {lib: r for c, lib, r in rows if c == caller}
        print(f"{caller}: async median {by['driver.so (async)']['median_us']:.2f} us = "
              f"{by['driver.so (async)']['median_us'] / by['driver.so AETHERCL_SYNC=1']['median_us']:.2f}x "
              f"of finish-every-call; frontend floor (null) {by['driver_null.so']['median_us']:.2f} us")
    if args.json:
        Path(args.json).write_text(json.dumps([{"caller": c, "library": l, **r} for c, l, r in rows],
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
