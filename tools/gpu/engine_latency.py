"""Fixed cost of one collective on the vendor engines (tools/gpu/engine_latency.py): all-reduce
of 4 KiB .. 64 MiB per device on aethercl_comm_alloc buffers, per call with every device
synchronised after it, beside NCCL's all-reduce through PyTorch timed the same way (median us)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from aethercl import Communicator, Device, Library  # noqa: E402
from collectives import median_seconds  # noqa: E402


def median_us(call, sync, reps=30):
    return 1e6 * median_seconds(call, sync, reps)


def main() -> int:
    sizes = [4 << 10, 1 << 20, 64 << 20]
    lib = Library()
    devices = [Device(i, library=lib) for i in (0, 1)]
    os.environ["AETHERCL_PEER_PATH"] = "engine"
    comm = Communicator(devices)
    ours = {}
    for nbytes in sizes:
        bufs = [comm.alloc(r, nbytes) for r in range(2)]
        for b in bufs:
            b.write(bytes(nbytes))

        def sync():
            for d in devices:
                d.synchronize()
        ours[nbytes] = median_us(lambda: comm.all_reduce(bufs, nbytes // 4, op="sum"), sync)
        for b in bufs:
            b.free()
    comm.close()
    import torch
    import torch.cuda.nccl as nccl
    for nbytes in sizes:
        tensors = [torch.ones(nbytes // 4, device=f"cuda:{i}") for i in range(2)]

        def tsync():
            for i in range(2):
                torch.cuda.synchronize(i)
        ref = median_us(lambda: nccl.all_reduce(tensors), tsync)
        print(f"{nbytes >> 10:>8} KiB: ours {ours[nbytes]:8.1f} us, NCCL {ref:8.1f} us, "
              f"ratio {ref / ours[nbytes]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
