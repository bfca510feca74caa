"""Host<->device transfers by path, for choosing each device's default (AETHERCL_READ_PATH) and
for the record: the seed read (read_gpu_to_host_blocking into ordinary memory) directly through
the vendor's path and through the driver's pinned ring (DMA into pinned memory, then a memcpy),
the seed write (staged through the pinned ring), and aethercl_write_async / read_async from and
into pinned memory (aethercl_host_alloc). Median microseconds per call and GB/s per size.

Usage: tools/aethercl bench transfers [--reps 50]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))

SIZES = [256, 4 << 10, 64 << 10, 1 << 20, 8 << 20]


def child(reps: int) -> dict:
    import numpy as np
    from aethercl import Device, HostBuffer, Stream
    device = Device(0)
    lib, gpu = device.lib, device.index
    biggest = max(SIZES)
    buffer = lib.check_handle("allocate_gpu_memory", gpu, biggest)
    host = np.ones(biggest, np.uint8)
    pinned = HostBuffer(device, biggest)
    stream = Stream(device)
    out = {}

    def timed(call):
        call()
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    def sync():
        lib.check("aethercl_synchronize", gpu)

    for size in SIZES:
        row = {}
        row["seed read"] = timed(lambda: lib.check(
            "read_gpu_to_host_blocking", gpu, buffer, 0, size, host.ctypes.data))
        row["seed write + sync"] = timed(lambda: (lib.check(
            "write_host_to_gpu_blocking", gpu, buffer, 0, size, host.ctypes.data), sync()))
        row["write_async pinned + sync"] = timed(lambda: (lib.check(
            "aethercl_write_async", gpu, buffer, 0, size, pinned.address, stream.handle),
            stream.synchronize()))
        row["read_async pinned + sync"] = timed(lambda: (lib.check(
            "aethercl_read_async", gpu, buffer, 0, size, pinned.address, stream.handle),
            stream.synchronize()))
        out[size] = row
    stream.destroy()
    pinned.free()
    lib.free_gpu_memory(gpu, buffer)
    device.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.reps)))
        return 0
    results = {}
    for path in ("direct", "pinned"):
        env = dict(os.environ, AETHERCL_READ_PATH=path)
        run = subprocess.run([sys.executable, __file__, "--child", "--reps", str(args.reps)],
                             env=env, check=True, capture_output=True, text=True)
        results[path] = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"{'size':>9} {'path':<34} {'us':>9} {'GB/s':>8}")
    for size in SIZES:
        key = str(size)
        rows = [("seed read, direct (vendor path)", results["direct"][key]["seed read"]),
                ("seed read, through the pinned ring", results["pinned"][key]["seed read"])]
        rows += [(name, seconds) for name, seconds in results["direct"][key].items()
                 if name != "seed read"]
        for name, seconds in rows:
            print(f"{size:>9} {name:<34} {1e6 * seconds:>9.1f} {size / seconds / 1e9:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
