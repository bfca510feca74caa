"""Copy/compute overlap across streams: a host-to-device copy from pinned memory
(aethercl_write_async) on one stream and kernels on another, timed alone and issued together.
overlap = (copy alone + kernels alone) / together: 2.0 when they run fully side by side, 1.0 when
they run one after the other. The kernel work is sized to take about as long as the copy.

Usage: tools/aethercl bench overlap [--mib 256] [--reps 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Device, HostBuffer, Stream  # noqa: E402


def median_seconds(reps, run, settle) -> float:
    run()
    settle()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        settle()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--mib", type=int, default=256, help="bytes copied host to device")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    device = Device(args.gpu)
    lib, gpu = device.lib, device.index
    nbytes = args.mib << 20
    pinned = HostBuffer(device, nbytes)
    pinned.numpy()[:] = 1
    target = lib.check_handle("allocate_gpu_memory", gpu, nbytes)
    # The kernel side: gelu over n floats, repeated `launches` times (calibrated below).
    n = 16 << 20
    x = lib.check_handle("allocate_gpu_memory", gpu, n * 4)
    y = lib.check_handle("allocate_gpu_memory", gpu, n * 4)
    lib.check("aethercl_memset", gpu, x, 0, n * 4, 0, None)
    copy_stream, kernel_stream = Stream(device), Stream(device)

    def copy():
        lib.check("aethercl_write_async", gpu, target, 0, nbytes, pinned.address,
                  copy_stream.handle)

    launches = 1

    def kernels():
        with kernel_stream:
            for _ in range(launches):
                lib.check("execute_gelu_on_gpu", gpu, x, y, n)

    def settle():
        copy_stream.synchronize()
        kernel_stream.synchronize()

    copy_alone = median_seconds(args.reps, copy, settle)
    one = median_seconds(args.reps, kernels, settle)
    launches = max(1, round(copy_alone / one))
    kernels_alone = median_seconds(args.reps, kernels, settle)
    together = median_seconds(args.reps, lambda: (copy(), kernels()), settle)
    overlap = (copy_alone + kernels_alone) / together
    name = device.name
    print(f"device: {name}")
    print(f"copy alone     {1e3 * copy_alone:9.3f} ms  ({nbytes / copy_alone / 1e9:.1f} GB/s, "
          f"{args.mib} MiB from pinned memory, aethercl_write_async)")
    print(f"kernels alone  {1e3 * kernels_alone:9.3f} ms  ({launches} x gelu over {n} floats)")
    print(f"together       {1e3 * together:9.3f} ms  (copy on one stream, kernels on another)")
    print(f"overlap        {overlap:9.2f}   (sum alone / together: 2.0 = full, 1.0 = none)")
    copy_stream.destroy()
    kernel_stream.destroy()
    for handle in (target, x, y):
        lib.free_gpu_memory(gpu, handle)
    pinned.free()
    device.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
