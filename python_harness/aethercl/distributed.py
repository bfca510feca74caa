"""Many machines through MPI (mpi4py): one process per device, initialised from the MPI
environment. The C library never links MPI; this module is the only place that touches it.

    from aethercl import distributed
    ctx = distributed.init()                 # rank, size, local rank -> device, initialise it
    ctx.broadcast(param_buffers)             # rank 0's initial parameters everywhere
    ctx.all_reduce(grad_buffers, op="mean")  # after backward, before the optimizer step

Two paths move the gradients; ctx.path says which one init() took:

- "nccl": where every rank has the vendor engines (libcuda.so.1 and libnccl.so.2 with
  ncclCommInitRank) serving its device, and one device per rank. init() decides collectively:
  every rank creates a one-rank NCCL communicator as a probe and the ranks agree through an MPI
  allreduce of the outcome (so no rank waits in NCCL for a peer that cannot come). Rank 0 then
  makes NCCL's unique id, MPI broadcasts it, and every rank creates its rank of one communicator
  across processes (aethercl.collectives.RankCommunicator). all_reduce / broadcast pack the
  buffers into flat device buckets of at most 256 MiB (aethercl_comm_alloc: memory NCCL reduces
  in place) with device copies, run one NCCL collective per bucket and unpack: no host round
  trip. Sums follow NCCL's
  order (equal to the MPI path's within NCCL's bound, not bit for bit).
- "mpi": gradients travel through one flat float32 host buffer per call (one MPI_Allreduce with
  MPI_IN_PLACE instead of one per tensor); it is page-locked memory from aethercl_host_alloc when
  the library exports it, else ordinary memory. Taken where NCCL is not available on every rank
  (AETHERCL_VENDOR_ENGINES=0 forces it), with init(path="mpi"), and for devices_per_rank > 1: a
  process that drives several devices reduces hierarchically: its devices all-reduce among
  themselves with an aethercl communicator, one device's result crosses MPI, and the process
  broadcasts it back to its devices.

Every collective runs under a watchdog: if it has not finished after `timeout` seconds (a peer
died or hangs), the process prints which collective and rank timed out and exits with status 3,
so mpirun tears the job down instead of hanging. A Python exception inside a step should end in
abort(), which prints the message and calls MPI_Abort."""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from contextlib import contextmanager
from typing import List, Optional, Sequence

import numpy as np

from .collectives import (ENGINE_BUCKET_BYTES, Communicator, RankCommunicator, bucket_spans,
                          copy_spans, unique_id)
from .device import Buffer, Device, default_library
from .library import Library

DEFAULT_TIMEOUT_S = float(os.environ.get("AETHERCL_MPI_TIMEOUT", "300"))


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError("aethercl.distributed needs mpi4py (tools/aethercl setup installs it "
                          "with Open MPI)") from error
    return MPI


class HostStaging:
    """A flat float32 host array of at least `count` elements, page-locked when the driver can."""

    def __init__(self, lib: Library, device_index: int):
        self.lib, self.device_index = lib, device_index
        self.array = np.empty(0, np.float32)
        self._pinned = None
        self.pinned = hasattr(lib.cdll, "aethercl_host_alloc")

    def take(self, count: int) -> np.ndarray:
        if self.array.size >= count:
            return self.array[:count]
        self.release()
        if self.pinned:
            pointer = self.lib.aethercl_host_alloc(self.device_index, count * 4)
            if pointer:
                self._pinned = pointer
                self.array = np.ctypeslib.as_array((ctypes.c_float * count).from_address(pointer))
                return self.array
            self.pinned = False
        self.array = np.empty(count, np.float32)
        return self.array

    def release(self) -> None:
        if self._pinned is not None:
            self.array = np.empty(0, np.float32)
            self.lib.aethercl_host_free(self._pinned)
            self._pinned = None


class Context:
    """This process's place in the MPI job and its device(s); path is "nccl" or "mpi" (see the
    module's docstring), why_mpi says why NCCL was not taken ("" on the NCCL path)."""

    def __init__(self, mpi_comm, devices: List[Device], timeout: float, path: str = "auto"):
        self.mpi = _mpi()
        self.comm = mpi_comm
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()
        local = mpi_comm.Split_type(self.mpi.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = local.Get_rank()
        self.local_size = local.Get_size()
        local.Free()
        self.devices = devices
        self.timeout = timeout
        self.local_comm = Communicator(devices) if len(devices) > 1 else None
        self.staging = HostStaging(devices[0].lib, devices[0].index)
        self.rank_comm: Optional[RankCommunicator] = None
        self._buckets: List[Buffer] = []   # the NCCL path's, from aethercl_comm_alloc
        if path not in ("auto", "nccl", "mpi"):
            raise ValueError(f"path {path!r}: auto, nccl or mpi")
        self.path, self.why_mpi = "mpi", "init(path='mpi')"
        if path != "mpi":
            self._try_nccl(required=path == "nccl")

    # ---- the NCCL path -----------------------------------------------------------------------
    def _try_nccl(self, required: bool) -> None:
        lib = self.device.lib
        why = ""
        if len(self.devices) > 1:
            why = f"{len(self.devices)} devices per rank (the NCCL path takes one)"
        elif not lib.has("aethercl_comm_create_rank"):
            why = "the library lacks aethercl_comm_create_rank"
        else:
            try:   # a one-rank communicator: every check create_rank makes, without waiting
                with RankCommunicator(self.device, 1, 0, unique_id(lib)):
                    pass
            except Exception as error:  # noqa: BLE001 - any failure means: not on this rank
                why = str(error)
        whys = self.comm.allgather(why)
        failed = [(r, w) for r, w in enumerate(whys) if w]
        if failed:
            self.why_mpi = "; ".join(f"rank {r}: {w}" for r, w in failed)
            if required:
                raise RuntimeError(f"path='nccl' but NCCL is not available on every rank "
                                   f"({self.why_mpi})")
            return
        uid = unique_id(lib) if self.rank == 0 else None
        uid = self.comm.bcast(uid, root=0)
        with self.watchdog("ncclCommInitRank (aethercl_comm_create_rank)"):
            self.rank_comm = RankCommunicator(self.device, self.size, self.rank, uid)
        self.path, self.why_mpi = "nccl", ""

    def _buckets_for(self, nbytes: int) -> List[Buffer]:
        """Buckets of equal size, each at most ENGINE_BUCKET_BYTES (one engine import, reduced in
        place), holding nbytes together."""
        count = -(-nbytes // ENGINE_BUCKET_BYTES)
        per_bucket = -(-nbytes // count)
        size = (per_bucket + 3) // 4 * 4   # whole float32s
        if len(self._buckets) != count or self._buckets[0].nbytes < size:
            self._free_buckets()
            self._buckets = [self.rank_comm.alloc(size, label="distributed bucket")
                             for _ in range(count)]
        return self._buckets

    def _free_buckets(self) -> None:
        for bucket in self._buckets:
            bucket.free()
        self._buckets = []

    def _nccl_collective(self, buffers: Sequence[Buffer], what: str, run) -> None:
        """buffers packed into the buckets (device copies on the default stream, aethercl_copy:
        a multi-device copy_peer per tensor costs several times the host time), run(bucket,
        float32 elements) on each, and unpacked."""
        total = sum(b.nbytes for b in buffers)
        if total == 0:
            return
        buckets = self._buckets_for(total)
        size = buckets[0].nbytes
        spans = list(bucket_spans([b.nbytes for b in buffers], size))
        copy_spans(spans, buffers, buckets, into_buckets=True)
        with self.watchdog(what):
            for bucket in range(len(buckets)):
                run(buckets[bucket], min(size, total - bucket * size) // 4)
        copy_spans(spans, buffers, buckets, into_buckets=False)

    @property
    def device(self) -> Device:
        return self.devices[0]

    @property
    def world_devices(self) -> int:
        return self.size * len(self.devices)

    # ---- watchdog and abort ------------------------------------------------------------------
    @contextmanager
    def watchdog(self, what: str):
        def expire():
            sys.stderr.write(f"[aethercl.distributed] rank {self.rank}: {what} did not finish "
                             f"within {self.timeout:.0f} s (a peer died or hangs); exiting so "
                             f"mpirun ends the job\n")
            sys.stderr.flush()
            os._exit(3)
        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def abort(self, message: str, code: int = 1) -> None:
        sys.stderr.write(f"[aethercl.distributed] rank {self.rank}: {message}; aborting the job\n")
        sys.stderr.flush()
        self.comm.Abort(code)

    # ---- collectives over lists of buffers (one list per local device) ------------------------
    def _flatten(self, buffers: Sequence[Buffer]) -> np.ndarray:
        counts = [b.nbytes // 4 for b in buffers]
        flat = self.staging.take(sum(counts))
        start = 0
        for buffer, count in zip(buffers, counts):
            buffer.read_into(flat[start:start + count])
            start += count
        return flat

    def _unflatten(self, flat: np.ndarray, buffers: Sequence[Buffer]) -> None:
        start = 0
        for buffer in buffers:
            count = buffer.nbytes // 4
            buffer.write(flat[start:start + count])
            start += count

    def _local(self, per_device: Sequence[Sequence[Buffer]]) -> List[List[Buffer]]:
        if len(self.devices) == 1 and per_device and isinstance(per_device[0], Buffer):
            return [list(per_device)]
        lists = [list(buffers) for buffers in per_device]
        if len(lists) != len(self.devices):
            raise ValueError(f"{len(lists)} buffer lists for {len(self.devices)} local devices")
        return lists

    def all_reduce(self, buffers, op: str = "mean") -> None:
        """float32 buffers, reduced over every device of the job (sum or mean), in place: on the
        NCCL path one ncclAllReduce per device bucket, else one MPI_Allreduce of host memory."""
        lists = self._local(buffers)
        if op not in ("sum", "mean"):
            raise ValueError(f"op {op!r}: sum or mean")
        if self.rank_comm is not None:
            self._nccl_collective(lists[0], "ncclAllReduce", lambda bucket, count:
                                  self.rank_comm.all_reduce(bucket, count, op=op))
            return
        if self.local_comm is not None:
            for tensors in zip(*lists):
                self.local_comm.all_reduce(tensors, tensors[0].nbytes // 4, op="sum")
        flat = self._flatten(lists[0])
        with self.watchdog("MPI_Allreduce"):
            self.comm.Allreduce(self.mpi.IN_PLACE, flat, op=self.mpi.SUM)
        if op == "mean":   # the sum divided by the device count, as AETHERCL_MEAN does
            np.divide(flat, np.float32(self.world_devices), out=flat)
        elif op != "sum":
            raise ValueError(f"op {op!r}: sum or mean")
        self._unflatten(flat, lists[0])
        if self.local_comm is not None:
            for tensors in zip(*lists):
                self.local_comm.broadcast(tensors, tensors[0].nbytes // 4, root=0)

    def broadcast(self, buffers, root: int = 0) -> None:
        """float32 buffers of rank `root`'s first device to every device of the job (on the NCCL
        path one ncclBroadcast per device bucket, else MPI_Bcast of host memory)."""
        lists = self._local(buffers)
        if self.rank_comm is not None:
            self._nccl_collective(lists[0], "ncclBroadcast", lambda bucket, count:
                                  self.rank_comm.broadcast(bucket, count, root=root))
            return
        flat = self._flatten(lists[0]) if self.rank == root else self.staging.take(
            sum(b.nbytes // 4 for b in lists[0]))
        with self.watchdog("MPI_Bcast"):
            self.comm.Bcast(flat, root=root)
        self._unflatten(flat, lists[0])
        if self.local_comm is not None:
            for tensors in zip(*lists):
                self.local_comm.broadcast(tensors, tensors[0].nbytes // 4, root=0)

    def barrier(self) -> None:
        with self.watchdog("MPI_Barrier"):
            self.comm.Barrier()

    def close(self) -> None:
        self._free_buckets()
        if self.rank_comm is not None:
            self.rank_comm.close()
            self.rank_comm = None
        if self.local_comm is not None:
            self.local_comm.close()
        self.staging.release()


def init(devices_per_rank: int = 1, library: Optional[Library] = None,
         timeout: float = DEFAULT_TIMEOUT_S, path: str = "auto") -> Context:
    """Joins the MPI job (mpi4py initialises MPI) and initialises this process's devices: local
    rank r drives devices r*devices_per_rank ... (+devices_per_rank-1) of the visible list, modulo
    the device count (so several ranks may share one device, as on a laptop's CPU; on a GPU
    machine one rank per GPU: local rank r drives GPU r). path: "auto" (NCCL where every rank can,
    else MPI), "nccl" (raises RuntimeError where a rank cannot) or "mpi"; AETHERCL_DISTRIBUTED_PATH
    gives the default. The chosen path is ctx.path."""
    MPI = _mpi()
    lib = library or default_library()
    count = lib.aethercl_device_count()
    if count < 1:
        raise RuntimeError("no OpenCL device visible to this rank")
    comm = MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    local_rank = local.Get_rank()
    local.Free()
    first = local_rank * devices_per_rank
    indices = [(first + i) % count for i in range(devices_per_rank)]
    if len(set(indices)) != len(indices):
        raise ValueError(f"{devices_per_rank} devices per rank but only {count} visible")
    devices = [Device(i, library=lib) for i in indices]
    _abort_on_uncaught_exception(comm)
    if path == "auto":
        path = os.environ.get("AETHERCL_DISTRIBUTED_PATH", "auto")
    return Context(comm, devices, timeout, path)


def _abort_on_uncaught_exception(comm) -> None:
    """An exception nobody catches would otherwise end this rank in MPI_Finalize while its peers
    wait in a collective: print it and MPI_Abort the job instead."""
    previous = sys.excepthook

    def hook(kind, value, trace):
        previous(kind, value, trace)
        sys.stderr.write(f"[aethercl.distributed] rank {comm.Get_rank()}: uncaught "
                         f"{kind.__name__}; aborting the job\n")
        sys.stderr.flush()
        comm.Abort(1)
    sys.excepthook = hook


__all__ = ["Context", "HostStaging", "init"]
