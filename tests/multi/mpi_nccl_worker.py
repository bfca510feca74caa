"""One rank of tests/multi/test_mpi_nccl.py (run under mpirun): collectives of a communicator
across processes (aethercl_comm_create_rank) against float64, or aethercl.distributed's NCCL path
against its MPI path. Prints "RANK r OK <what>" lines; any failure raises (and MPI aborts)."""
from __future__ import annotations

import ctypes
import sys
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mpi4py import MPI  # noqa: E402

from aethercl import Library  # noqa: E402
from aethercl.collectives import RankCommunicator, unique_id  # noqa: E402
from aethercl.device import Buffer as DeviceBuffer, Device  # noqa: E402

F32, F16, BF16 = 0, 1, 2
SUM, MEAN, MAX = 0, 1, 2
NOT_IMPLEMENTED = 9
DTYPES = {F32: "f32", F16: "f16", BF16: "bf16"}
EPS = {F32: 2.0 ** -24, F16: 2.0 ** -11, BF16: 2.0 ** -8}
GUARD = 64
COUNTS = (1, 1003, 4099)


def storage(dtype):
    return {F32: np.float32, F16: np.float16, BF16: np.uint16}[dtype]


def widen(dtype, values):
    """float64 values of stored elements (bf16: the upper half of a float32)."""
    if dtype == BF16:
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


def inputs_of(rank, dtype, count, tag):
    """Rank rank's values: every rank can make every rank's (seeded by rank, dtype, count, tag)."""
    rng = np.random.default_rng(zlib.crc32(f"{rank}/{dtype}/{count}/{tag}".encode()))
    values = rng.standard_normal(count).astype(np.float32)
    if dtype == F32:
        return values
    if dtype == F16:
        return values.astype(np.float16)
    bits = values.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def within_bound(dtype, got, inputs, mean):
    """NCCL's bound of tests/multi/test_engine_collectives.py: 2 P eps sum |x_i|."""
    x = [widen(dtype, v) for v in inputs]
    exact = sum(x) / (len(x) if mean else 1)
    bound = 2 * len(x) * EPS[dtype] * sum(np.abs(v) for v in x)
    return bool(np.all(np.abs(widen(dtype, got) - exact) <= bound))


class Slot:
    """nbytes plus GUARD guard bytes on the device: an ordinary buffer or aethercl_comm_alloc's,
    poisoned with 0xFF (NaN in every dtype), guard 0x5A."""

    def __init__(self, lib, gpu, comm, nbytes, engine_memory):
        self.lib, self.gpu, self.nbytes = lib, gpu, nbytes
        if engine_memory:
            self.handle = lib.check_handle("aethercl_comm_alloc", comm, 0, nbytes + GUARD)
        else:
            self.handle = lib.check_handle("allocate_gpu_memory", gpu, nbytes + GUARD)
        self.write(b"\xff" * nbytes + b"\x5a" * GUARD)

    def write(self, data: bytes):
        self.lib.check("write_host_to_gpu_blocking", self.gpu, self.handle, 0, len(data), data)
        return self

    def read(self, dtype):
        out = ctypes.create_string_buffer(self.nbytes + GUARD)
        self.lib.check("read_gpu_to_host_blocking", self.gpu, self.handle, 0, len(out), out)
        assert out.raw[self.nbytes:] == b"\x5a" * GUARD, "guard bytes overwritten"
        return np.frombuffer(out.raw[:self.nbytes], dtype=storage(dtype)).copy()

    def free(self):
        self.lib.free_gpu_memory(self.gpu, self.handle)


def tokens(*slots):
    return (ctypes.c_void_p * len(slots))(*[s.handle for s in slots])


def same_everywhere(world, data: bytes, what):
    assert len(set(world.allgather(data))) == 1, f"{what}: ranks hold different bits"


def collectives(world, lib, gpu):
    rank, size = world.Get_rank(), world.Get_size()
    uid = world.bcast(unique_id(lib) if rank == 0 else None, root=0)
    device = Device(gpu, library=lib)
    rc = RankCommunicator(device, size, rank, uid)
    comm = rc.token
    for engine_memory in (False, True):
        kind = "comm_alloc" if engine_memory else "ordinary"
        for dtype in DTYPES:
            es = np.dtype(storage(dtype)).itemsize
            for count in COUNTS:
                for op in (SUM, MEAN):
                    tag = f"ar{kind}{op}"
                    inputs = [inputs_of(r, dtype, count, tag) for r in range(size)]
                    buf = Slot(lib, gpu, comm, count * es, engine_memory).write(
                        inputs[rank].tobytes())
                    lib.check("aethercl_all_reduce", comm, tokens(buf), count, dtype, op)
                    got = buf.read(dtype)
                    what = f"all_reduce {kind} {DTYPES[dtype]} {count} op {op}"
                    assert within_bound(dtype, got, inputs, op == MEAN), what
                    same_everywhere(world, got.tobytes(), what)
                    buf.free()
                    tag = f"rs{kind}{op}"
                    sends = [inputs_of(r, dtype, count * size, tag) for r in range(size)]
                    send = Slot(lib, gpu, comm, count * size * es, engine_memory).write(
                        sends[rank].tobytes())
                    recv = Slot(lib, gpu, comm, count * es, engine_memory)
                    lib.check("aethercl_reduce_scatter", comm, tokens(send), tokens(recv), count,
                              dtype, op)
                    block = [v[rank * count:(rank + 1) * count] for v in sends]
                    assert within_bound(dtype, recv.read(dtype), block, op == MEAN), \
                        f"reduce_scatter {kind} {DTYPES[dtype]} {count} op {op}"
                    send.free()
                    recv.free()
                for root in range(size):
                    data = inputs_of(root, dtype, count, f"bc{kind}")
                    buf = Slot(lib, gpu, comm, count * es, engine_memory)
                    if rank == root:
                        buf.write(data.tobytes())
                    lib.check("aethercl_broadcast", comm, tokens(buf), count, dtype, root)
                    assert buf.read(dtype).tobytes() == data.tobytes(), \
                        f"broadcast {kind} {DTYPES[dtype]} {count} root {root}"
                    buf.free()
                sends = [inputs_of(r, dtype, count, f"ag{kind}") for r in range(size)]
                send = Slot(lib, gpu, comm, count * es, engine_memory).write(sends[rank].tobytes())
                recv = Slot(lib, gpu, comm, count * size * es, engine_memory)
                lib.check("aethercl_all_gather", comm, tokens(send), tokens(recv), count, dtype)
                assert recv.read(dtype).tobytes() == np.concatenate(sends).tobytes(), \
                    f"all_gather {kind} {DTYPES[dtype]} {count}"
                send.free()
                recv.free()
        print(f"RANK {rank} OK collectives {kind}", flush=True)
    buf = Slot(lib, gpu, comm, 64, False)
    for op in (MAX, 3):
        if lib.aethercl_all_reduce(comm, tokens(buf), 16, F32, op) != 0:
            raise AssertionError(f"op {op} was not refused")
        assert lib.last_error_code() == NOT_IMPLEMENTED, lib.last_error()
        assert "across processes" in lib.last_error(), lib.last_error()
    buf.free()
    print(f"RANK {rank} OK max refused", flush=True)
    rc.close()
    world.Barrier()


def distributed_paths(world, lib):
    from aethercl import distributed
    ctx = distributed.init(library=lib, path="nccl")
    assert ctx.path == "nccl", ctx.why_mpi
    mpi_ctx = distributed.Context(ctx.comm, ctx.devices, ctx.timeout, path="mpi")
    assert mpi_ctx.path == "mpi"
    rank, size = ctx.rank, ctx.size
    shapes = [(3, 5), (1003,), (64, 7), (1,)]
    results = {}
    for name, context in (("nccl", ctx), ("mpi", mpi_ctx)):
        for op in ("sum", "mean"):
            grads = [DeviceBuffer.from_numpy(ctx.device, inputs_of(rank, F32, int(np.prod(s)),
                                                                   f"grad{i}").reshape(s))
                     for i, s in enumerate(shapes)]
            context.all_reduce(grads, op=op)
            results[name, op] = [g.to_numpy().ravel().copy() for g in grads]
            for g in grads:
                g.free()
    for op in ("sum", "mean"):
        for i, s in enumerate(shapes):
            inputs = [inputs_of(r, F32, int(np.prod(s)), f"grad{i}") for r in range(size)]
            for name in ("nccl", "mpi"):
                assert within_bound(F32, results[name, op][i], inputs, op == "mean"), \
                    (name, op, i)
            two = [results["mpi", op][i].astype(np.float64)]
            bound = 2 * 2 * size * EPS[F32] * sum(np.abs(widen(F32, v)) for v in inputs)
            assert np.all(np.abs(results["nccl", op][i] - two[0]) <= bound), (op, i)
            same_everywhere(world, results["nccl", op][i].tobytes(), f"nccl {op} {i}")
    # Buckets of 1,000 bytes (one engine import, 256 MiB, in use): the tensors are cut across
    # several, each reduced on its own, and every element comes out with the same bits.
    distributed.ENGINE_BUCKET_BYTES = 1000
    grads = [DeviceBuffer.from_numpy(ctx.device, inputs_of(rank, F32, int(np.prod(s)),
                                                           f"grad{i}").reshape(s))
             for i, s in enumerate(shapes)]
    ctx.all_reduce(grads, op="mean")
    assert len(ctx._buckets) > 1
    for i, g in enumerate(grads):
        assert g.to_numpy().ravel().tobytes() == results["nccl", "mean"][i].tobytes(), i
        g.free()
    params = [DeviceBuffer.from_numpy(ctx.device, inputs_of(rank, F32, 301, "param"))]
    ctx.broadcast(params, root=1 % size)
    assert params[0].to_numpy().tobytes() == inputs_of(1 % size, F32, 301, "param").tobytes()
    params[0].free()
    print(f"RANK {rank} OK distributed nccl == mpi", flush=True)
    mpi_ctx.staging.release()
    ctx.close()
    world.Barrier()


def main() -> int:
    world = MPI.COMM_WORLD
    lib = Library()
    count = lib.aethercl_device_count()
    local = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    gpu = local.Get_rank() % count
    local.Free()
    if sys.argv[1:] == ["collectives"]:
        collectives(world, lib, gpu)
    elif sys.argv[1:] == ["distributed"]:
        distributed_paths(world, lib)
    else:
        raise SystemExit(f"usage: {sys.argv[0]} collectives|distributed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - any failure ends the job
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
