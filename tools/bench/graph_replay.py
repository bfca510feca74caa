"""Host cost per kernel of a graph replay against the same launches issued eagerly: N small
launches (execute_add_on_gpu on 1 element) called one by one from ctypes, against one
aethercl_graph_launch of a graph that recorded them, with the submission thread on and off, and on
the do-nothing driver_null.so (the ctypes floor: what a call costs with no library behind it).

Per kernel (median over rounds): the caller's time for the N eager calls / N, and for the one
replay call / N; an untimed synchronising read between rounds keeps the device from
back-pressuring the timed calls. Sustained: ROUNDS replays back to back plus the final drain, per
kernel (bounded by the device's throughput for tiny kernels). The ratio is replay / eager.

Usage: tools/aethercl bench graphs [--kernels N] [--rounds R] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from call_overhead import run  # noqa: E402  (one child process, its last line as JSON)


def measure(library: str, kernels: int, rounds: int) -> dict:
    lib = ctypes.CDLL(library)
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.initialize_gpu.argtypes = [i]
    lib.allocate_gpu_memory.argtypes = [i, ctypes.c_size_t]
    lib.allocate_gpu_memory.restype = p
    lib.execute_add_on_gpu.argtypes = [i, p, p, p, i]
    lib.read_gpu_to_host_blocking.argtypes = [i, p, ctypes.c_size_t, ctypes.c_size_t, p]
    lib.write_host_to_gpu_blocking.argtypes = lib.read_gpu_to_host_blocking.argtypes
    lib.aethercl_graph_capture_begin.argtypes = [i, p]
    lib.aethercl_graph_capture_end.argtypes = [i, p]
    lib.aethercl_graph_capture_end.restype = p
    lib.aethercl_graph_launch.argtypes = [p, p]
    lib.aethercl_graph_destroy.argtypes = [p]
    assert lib.initialize_gpu(0) == 1
    a, c = lib.allocate_gpu_memory(0, 4), lib.allocate_gpu_memory(0, 4)
    one = ctypes.c_float(1.0)
    lib.write_host_to_gpu_blocking(0, a, 0, 4, ctypes.byref(one))
    add, read, launch = lib.execute_add_on_gpu, lib.read_gpu_to_host_blocking, lib.aethercl_graph_launch
    for _ in range(kernels):  # the kernel built and the pool warm before anything is timed
        add(0, a, a, c, 1)
    read(0, c, 0, 4, ctypes.byref(one))
    assert lib.aethercl_graph_capture_begin(0, None) == 1
    for _ in range(kernels):
        add(0, a, a, c, 1)
    graph = lib.aethercl_graph_capture_end(0, None)
    assert graph
    assert launch(graph, None) == 1
    clock = time.perf_counter_ns
    eager, replay = [], []
    for _ in range(rounds):
        read(0, c, 0, 4, ctypes.byref(one))
        start = clock()
        for _ in range(kernels):
            add(0, a, a, c, 1)
        eager.append((clock() - start) / kernels)
        read(0, c, 0, 4, ctypes.byref(one))
        start = clock()
        launch(graph, None)
        replay.append((clock() - start) / kernels)
    read(0, c, 0, 4, ctypes.byref(one))
    start = clock()
    for _ in range(rounds):
        launch(graph, None)
    read(0, c, 0, 4, ctypes.byref(one))
    sustained = (clock() - start) / (rounds * kernels)
    lib.aethercl_graph_destroy(graph)
    return {"kernels": kernels, "rounds": rounds,
            "eager_us": statistics.median(eager) / 1e3,
            "replay_us": statistics.median(replay) / 1e3,
            "replay_sustained_us": sustained / 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--kernels", type=int, default=200, help="launches per graph (N)")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=3, metavar=("LIBRARY", "KERNELS", "ROUNDS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), int(args.child[2]))))
        return 0
    build = Path(args.build).resolve()
    real, null = str(build / "driver.so"), str(build / "driver_null.so")
    child = [sys.executable, __file__, "--child"]
    sizes = [str(args.kernels), str(args.rounds)]
    rows = [
        ("driver.so (device default)", run(child + [real] + sizes, {"AETHERCL_SYNC": "0"})),
        ("driver.so submit thread on", run(child + [real] + sizes,
                                           {"AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "1"})),
        ("driver.so submit thread off", run(child + [real] + sizes,
                                            {"AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "0"})),
        ("driver.so batches, thread on", run(child + [real] + sizes, {
            "AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "1",
            "AETHERCL_GRAPH_COMMAND_BUFFER": "0"})),
        ("driver.so batches, thread off", run(child + [real] + sizes, {
            "AETHERCL_SYNC": "0", "AETHERCL_SUBMIT_THREAD": "0",
            "AETHERCL_GRAPH_COMMAND_BUFFER": "0"})),
        ("driver_null.so", run(child + [null] + sizes, {})),
    ]
    floor = rows[-1][1]["eager_us"]
    print(f"{args.kernels} launches per graph, median of {args.rounds} rounds; host time per kernel")
    print(f"{'library':<30} {'eager us':>9} {'replay us':>10} {'replay/eager':>13} "
          f"{'eager/null':>11} {'sustained us':>13}")
    for library, r in rows:
        print(f"{library:<30} {r['eager_us']:>9.3f} {r['replay_us']:>10.3f} "
              f"{r['replay_us'] / r['eager_us']:>13.3f} {r['eager_us'] / floor:>11.2f} "
              f"{r['replay_sustained_us']:>13.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps([{"library": l, **r} for l, r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
