"""Many devices from Python: a Communicator over initialised aethercl.Devices (rank i = the i-th)
with all_reduce / broadcast / all_gather / reduce_scatter on Buffers, and copy_peer; a
RankCommunicator for one rank of a communicator across processes (NCCL, bootstrapped from
unique_id())."""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence

import numpy as np

from . import ops
from ._calls import pointer, pointer_array
from .device import Buffer, Device, default_library
from .library import Library
from .structs import BF16, F16, F32, F64, I8, I32, I64, MAX, MEAN, MIN, SUM, U8  # noqa: F401

OPS = {"sum": SUM, "mean": MEAN, "max": MAX, "min": MIN}
_NUMPY_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}


def dtype_code(dtype) -> int:
    """An AETHERCL_* dtype code from a code, a NumPy dtype (float32, float16) or 'bf16'."""
    if isinstance(dtype, int):
        return dtype
    if dtype in ("bf16", "bfloat16"):
        return BF16
    return _NUMPY_DTYPES[np.dtype(dtype)]


# The largest buffer aethercl_comm_alloc hands out as engine memory (AETHERCL_ENGINE_IMPORT_BYTES'
# default): buckets of at most this size are reduced in place on the vendor engines.
ENGINE_BUCKET_BYTES = 256 << 20


def bucket_spans(sizes: Sequence[int], bucket_bytes: int, start: int = 0):
    """(item, offset in it, bucket, offset in the bucket, bytes) laying items of `sizes` bytes
    back to back over buckets of bucket_bytes from byte `start` of the first, an item cut where a
    bucket ends."""
    position = start
    for item, size in enumerate(sizes):
        done = 0
        while done < size:
            bucket, offset = divmod(position, bucket_bytes)
            nbytes = min(size - done, bucket_bytes - offset)
            yield item, done, bucket, offset, nbytes
            done += nbytes
            position += nbytes


def copy_spans(spans, items: Sequence[Buffer], buckets: Sequence[Buffer],
               into_buckets: bool) -> None:
    """The bytes bucket_spans laid out, copied from items into buckets (or back), by device
    copies on each item's device's default stream (aethercl_copy, which a graph captures)."""
    for item, offset, bucket, bucket_offset, nbytes in spans:
        buffer = items[item]
        if into_buckets:
            ops.copy(buffer.device, buckets[bucket], bucket_offset, buffer, offset, nbytes, None)
        else:
            ops.copy(buffer.device, buffer, offset, buckets[bucket], bucket_offset, nbytes, None)


def _tokens(buffers) -> ctypes.Array:
    return pointer_array(list(buffers))


class _CommunicatorToken:
    """A communicator token (self.lib, self.token): its collectives over this process's members'
    buffers (one per member, in rank order), aethercl_comm_alloc, and one close (also as a
    context manager)."""

    lib: Library
    token: Optional[int]

    def _live(self) -> int:
        if self.token is None:
            raise RuntimeError("the communicator is closed")
        return self.token

    def _alloc(self, rank: int, device: Device, nbytes: int, shape, dtype,
               label: Optional[str]) -> Buffer:
        handle = self.lib.check_handle("aethercl_comm_alloc", self._live(), rank, nbytes)
        return Buffer.adopt(device, handle, nbytes, shape, dtype, label)

    def _all_reduce(self, buffers, count: int, dtype, op) -> None:
        op = OPS.get(op, op) if isinstance(op, str) else op
        self.lib.check("aethercl_all_reduce", self._live(), _tokens(buffers), count,
                       dtype_code(dtype), op)

    def _broadcast(self, buffers, count: int, dtype, root: int) -> None:
        self.lib.check("aethercl_broadcast", self._live(), _tokens(buffers), count,
                       dtype_code(dtype), root)

    def _all_gather(self, send, recv, count: int, dtype) -> None:
        self.lib.check("aethercl_all_gather", self._live(), _tokens(send), _tokens(recv), count,
                       dtype_code(dtype))

    def _reduce_scatter(self, send, recv, count: int, dtype, op) -> None:
        op = OPS.get(op, op) if isinstance(op, str) else op
        self.lib.check("aethercl_reduce_scatter", self._live(), _tokens(send), _tokens(recv),
                       count, dtype_code(dtype), op)

    def close(self) -> None:
        token, self.token = self.token, None
        if token is not None:
            self.lib.check("aethercl_comm_destroy", token)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Communicator(_CommunicatorToken):
    """aethercl_comm_create over devices; closed by close() or as a context manager."""

    def __init__(self, devices: Sequence[Device], library: Optional[Library] = None):
        self.lib = library or (devices[0].lib if devices else default_library())
        self.devices = list(devices)
        indices = (ctypes.c_int * len(self.devices))(*[d.index for d in self.devices])
        self.token = self.lib.check_handle("aethercl_comm_create", len(self.devices), indices)

    @property
    def size(self) -> int:
        return len(self.devices)

    def alloc(self, rank: int, nbytes: int, shape=None, dtype=None,
              label: Optional[str] = None) -> Buffer:
        """nbytes on rank's device (aethercl_comm_alloc): where the communicator runs on the
        vendor engines, memory NCCL reduces in place, with no staging copies; elsewhere an
        ordinary buffer. Freed like any Buffer."""
        return self._alloc(rank, self.devices[rank], nbytes, shape, dtype, label)

    def all_reduce(self, buffers: Sequence[Buffer], count: int, dtype=F32, op=SUM) -> None:
        self._all_reduce(buffers, count, dtype, op)

    def broadcast(self, buffers: Sequence[Buffer], count: int, dtype=F32, root: int = 0) -> None:
        self._broadcast(buffers, count, dtype, root)

    def all_gather(self, send: Sequence[Buffer], recv: Sequence[Buffer], count: int,
                   dtype=F32) -> None:
        self._all_gather(send, recv, count, dtype)

    def reduce_scatter(self, send: Sequence[Buffer], recv: Sequence[Buffer], count: int,
                       dtype=F32, op=SUM) -> None:
        self._reduce_scatter(send, recv, count, dtype, op)


COMM_ID_BYTES = 128  # AETHERCL_COMM_ID_BYTES


def unique_id(library: Optional[Library] = None) -> bytes:
    """A new NCCL unique id (aethercl_comm_unique_id) for RankCommunicator: made by one process of
    the job, handed to every rank by the caller (e.g. mpi4py's bcast). Raises AetherCLError
    (NOT_IMPLEMENTED) without the vendor engines."""
    lib = library or default_library()
    out = ctypes.create_string_buffer(COMM_ID_BYTES)
    lib.check("aethercl_comm_unique_id", out, COMM_ID_BYTES)
    return out.raw


class RankCommunicator(_CommunicatorToken):
    """This process's rank of a communicator across processes (aethercl_comm_create_rank): device
    is global rank `rank` of `nranks`, joined through `uid` (unique_id() of one process, the same
    bytes on every rank). Creating it blocks until every rank has created its own. Its collectives
    take this process's buffer alone (not lists); sizes count all nranks ranks (all_gather's recv
    and reduce_scatter's send hold nranks * count elements); ops: sum and mean (NCCL's order).
    Every rank must call the same collectives in the same order. Closed by close() or as a
    context manager."""

    def __init__(self, device: Device, nranks: int, rank: int, uid: bytes,
                 library: Optional[Library] = None):
        self.lib = library or device.lib
        self.device, self.nranks, self.rank = device, nranks, rank
        uid = bytes(uid)
        self.token = self.lib.check_handle("aethercl_comm_create_rank", nranks, rank, uid,
                                           len(uid), device.index)

    @property
    def size(self) -> int:
        return self.nranks

    def alloc(self, nbytes: int, shape=None, dtype=None, label: Optional[str] = None) -> Buffer:
        """nbytes on this rank's device (aethercl_comm_alloc): memory NCCL reduces in place."""
        return self._alloc(0, self.device, nbytes, shape, dtype, label)

    def all_reduce(self, buffer: Buffer, count: int, dtype=F32, op=SUM) -> None:
        self._all_reduce([buffer], count, dtype, op)

    def broadcast(self, buffer: Buffer, count: int, dtype=F32, root: int = 0) -> None:
        self._broadcast([buffer], count, dtype, root)

    def all_gather(self, send: Buffer, recv: Buffer, count: int, dtype=F32) -> None:
        self._all_gather([send], [recv], count, dtype)

    def reduce_scatter(self, send: Buffer, recv: Buffer, count: int, dtype=F32, op=SUM) -> None:
        self._reduce_scatter([send], [recv], count, dtype, op)


def copy_peer(dst: Buffer, src: Buffer, nbytes: Optional[int] = None, dst_offset: int = 0,
              src_offset: int = 0) -> None:
    """nbytes (default: all of src) from src on its device to dst on its device."""
    nbytes = src.nbytes - src_offset if nbytes is None else nbytes
    dst.device.lib.check("aethercl_copy_peer", dst.device.index, pointer(dst), dst_offset,
                         src.device.index, pointer(src), src_offset, nbytes)


__all__ = ["BF16", "COMM_ID_BYTES", "Communicator", "ENGINE_BUCKET_BYTES", "F16", "F32", "MAX",
           "MEAN", "MIN", "RankCommunicator", "SUM", "bucket_spans", "copy_peer", "copy_spans", "dtype_code",
           "unique_id"]
