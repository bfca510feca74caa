"""Collectives bandwidth: all-reduce bus bandwidth on both peer paths next to the peer-copy
bandwidth between the first two devices, measured in the same run (and NCCL's all-reduce and
PyTorch's device-to-device copy when PyTorch sees two CUDA GPUs).

Usage: tools/aethercl bench collectives [--mib 16,64,256] [--reps 10] [--devices 0,1]
        [--paths engine,device,host] [--json out.json]

--paths names AETHERCL_PEER_PATH values: engine (CUDA + NCCL through the vendor engines, where they
load: AETHERCL_LIBNCCL may name the libnccl.so.2 PyTorch ships), device, host, auto; and
engine-buffers: the engine path on buffers from aethercl_comm_alloc, which NCCL reduces in place
(sizes above one engine import, 256 MiB, as buckets of at most that size, one all-reduce each, as
ocl_llm's data-parallel gradients go). With the NCCL
reference available, each path's all-reduce bus bandwidth is also printed as a ratio of NCCL's.

Bus bandwidth follows NCCL's convention: 2 (P-1)/P x bytes / time for an all-reduce of `bytes`
per device over P devices (for P = 2 simply bytes / time), so it compares directly with the copy
bandwidth of one link. Times are medians of --reps calls, each followed by aethercl_synchronize on
every device. The first call of each size is a warm-up (kernel build, scratch allocation)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Communicator, Device, Library  # noqa: E402
from aethercl.collectives import copy_peer  # noqa: E402


from aethercl.collectives import ENGINE_BUCKET_BYTES as BUCKET_BYTES  # noqa: E402


def median_seconds(call, sync, reps) -> float:
    """The median of reps calls, each timed until sync() returns, after one untimed call."""
    call()
    sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def median_time(devices, reps, call) -> float:
    """median_seconds with every device synchronised after each call."""
    def sync():
        for d in devices:
            d.synchronize()
    return median_seconds(call, sync, reps)


def torch_references(mib_list, reps):
    """NCCL all-reduce bus bandwidth and the cuda:0 -> cuda:1 copy bandwidth through PyTorch, or
    a reason why not."""
    try:
        import torch
        import torch.cuda.nccl as nccl
    except Exception as error:  # noqa: BLE001 - any import problem means "not available"
        return {"unavailable": f"PyTorch not importable: {error}"}
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return {"unavailable": "PyTorch sees fewer than two CUDA devices"}
    out = {}
    for mib in mib_list:
        n = mib * (1 << 20) // 4
        tensors = [torch.ones(n, device=f"cuda:{i}") for i in range(2)]
        dst = torch.empty(n, device="cuda:1")

        def sync():
            for i in range(2):
                torch.cuda.synchronize(i)
        t_reduce = median_seconds(lambda: nccl.all_reduce(tensors), sync, reps)
        t_copy = median_seconds(lambda: dst.copy_(tensors[0]), sync, reps)
        out[str(mib)] = {"nccl_all_reduce_busbw_gbs": n * 4 / t_reduce / 1e9,
                         "torch_copy_gbs": n * 4 / t_copy / 1e9}
        del tensors, dst
        torch.cuda.empty_cache()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", default="16,64", help="comma-separated MiB per device")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--devices", default=None, help="device indices (default: all, max 8)")
    parser.add_argument("--paths", default="device,host")
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    lib = Library()
    count = lib.aethercl_device_count()
    indices = ([int(i) for i in args.devices.split(",")] if args.devices
               else list(range(min(count, 8))))
    if len(indices) < 2:
        print(f"collectives need two devices; {count} visible (PoCL: POCL_DEVICES='pthread "
              f"pthread')", file=sys.stderr)
        return 1
    devices = [Device(i, library=lib) for i in indices]
    mib_list = [int(m) for m in args.mib.split(",")]
    P = len(devices)
    results = {"devices": [d.name for d in devices], "sizes": {}}
    print(f"devices: {', '.join(f'{i}: {d.name}' for i, d in zip(indices, devices))}")
    print(f"{'MiB':>6} {'path':>14} {'copy 0->1 GB/s':>15} {'all-reduce busbw GB/s':>22} "
          f"{'ratio':>6}")
    for mib in mib_list:
        nbytes = mib << 20
        bufs = [d.alloc(nbytes) for d in devices]
        for b in bufs:
            b.write(bytes(nbytes))
        row = {}
        for path in args.paths.split(","):
            in_place = path == "engine-buffers"
            os.environ["AETHERCL_PEER_PATH"] = "engine" if in_place else path
            try:
                comm = Communicator(devices)
            except Exception as error:  # noqa: BLE001 - e.g. device path without shared context
                row[path] = {"unavailable": str(error)}
                print(f"{mib:>6} {path:>14} unavailable: {error}")
                continue
            buckets = [bufs]
            if in_place:
                count = -(-nbytes // BUCKET_BYTES)
                buckets = [[comm.alloc(r, nbytes // count) for r in range(P)]
                           for _ in range(count)]
                for bucket in buckets:
                    for b in bucket:
                        b.write(bytes(b.nbytes))

            def reduce_all():
                for bucket in buckets:
                    comm.all_reduce(bucket, bucket[0].nbytes // 4, op="sum")
            t_copy = median_time(devices[:2], args.reps,
                                 lambda: [copy_peer(b[1], b[0]) for b in buckets])
            t_reduce = median_time(devices, args.reps, reduce_all)
            if in_place:
                for bucket in buckets:
                    for b in bucket:
                        b.free()
            comm.close()
            copy_gbs = nbytes / t_copy / 1e9
            busbw = 2 * (P - 1) / P * nbytes / t_reduce / 1e9
            row[path] = {"copy_gbs": copy_gbs, "all_reduce_busbw_gbs": busbw,
                         "all_reduce_ms": t_reduce * 1e3, "ratio": busbw / copy_gbs}
            print(f"{mib:>6} {path:>14} {copy_gbs:>15.2f} {busbw:>22.2f} {busbw / copy_gbs:>6.2f}")
        os.environ.pop("AETHERCL_PEER_PATH", None)
        for b in bufs:
            b.free()
        results["sizes"][str(mib)] = row
    if not args.no_torch:
        results["torch"] = torch_references(mib_list, args.reps)
        if "unavailable" in results["torch"]:
            print(f"NCCL reference: {results['torch']['unavailable']}")
        else:
            for mib, ref in results["torch"].items():
                print(f"{mib:>6}    NCCL all-reduce busbw {ref['nccl_all_reduce_busbw_gbs']:.2f} "
                      f"GB/s; PyTorch copy cuda:0->cuda:1 {ref['torch_copy_gbs']:.2f} GB/s")
            print(f"{'MiB':>6} {'path':>14} {'all-reduce / NCCL':>18} {'copy / PyTorch copy':>20}")
            for mib, row in results["sizes"].items():
                ref = results["torch"].get(mib)
                for path, measured in row.items():
                    if ref is None or "all_reduce_busbw_gbs" not in measured:
                        continue
                    measured["vs_nccl"] = (measured["all_reduce_busbw_gbs"]
                                           / ref["nccl_all_reduce_busbw_gbs"])
                    measured["copy_vs_torch"] = measured["copy_gbs"] / ref["torch_copy_gbs"]
                    print(f"{mib:>6} {path:>14} {measured['vs_nccl']:>18.2f} "
                          f"{measured['copy_vs_torch']:>20.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
