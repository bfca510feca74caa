"""Streams, events and pinned host memory (ABI version 3) as Python objects.

`Stream` is a device stream; used as a context manager it is the calling thread's current stream
for its device (every call without a stream argument runs there), like torch.cuda.stream().
`Event` marks a point on a stream: query, wait on the host, make another stream wait, or time
two events of timing streams. `HostBuffer` is page-locked host memory with a NumPy view:
transfers between it and the device's buffers are asynchronous (Buffer.write/read with stream=)."""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence

import numpy as np

from .owned import OwnedHandle
from .structs import STREAM_TIMING


def resolve(lib, index: int, stream=None) -> Optional[int]:
    """The token a Python call passes for its `stream` argument: the stream's own when one is
    given (a Stream, its raw token, or Stream.default for the default stream), else the calling
    thread's current stream of device `index` (NULL when that is the default stream).

    The one place where "no stream" is decided: the C functions read a NULL stream as the default
    stream, while every Python call without one runs on the current stream, as the seed functions
    do. The current stream is asked for on every call (one C call, 1-2 us from Python): it is per
    thread and per device, and the driver may change it behind Python's back (destroying a stream
    makes its threads fall back to the default stream), so no cache could be trusted. An
    uninitialised device answers NULL here; the call that follows reports it."""
    if stream is None:
        return lib.cdll.aethercl_stream_current(index)
    if isinstance(stream, Stream):
        if stream.device.index != index:
            raise ValueError(f"{stream!r} belongs to device {stream.device.index}, not {index}")
        return stream.handle
    if type(stream) is int:
        return stream
    raise TypeError(f"expected a Stream, a stream token or None, not {type(stream).__name__}")


class Stream:
    """A stream of `device`; timing=True lets events recorded on it measure elapsed time."""

    def __init__(self, device, timing: bool = False, _handle: Optional[int] = None,
                 _owned: bool = True):
        self.device = device
        self.timing = bool(timing)
        self._owned = _owned
        self._saved: list = []
        if _handle is None and _owned:
            _handle = device.lib.check_handle("aethercl_stream_create", device.index,
                                              STREAM_TIMING if timing else 0)
        self.handle: Optional[int] = _handle

    @classmethod
    def default(cls, device) -> "Stream":
        """The device's default stream (NULL as a token); never destroyed."""
        return cls(device, _handle=None, _owned=False)

    @classmethod
    def current(cls, device) -> "Stream":
        """The calling thread's current stream of the device (not owned: destroy() is a no-op)."""
        lib = device.lib
        handle = lib.aethercl_stream_current(device.index)
        if handle is None and lib.last_error_code() != 0:
            raise lib.error("aethercl_stream_current")
        return cls(device, _handle=handle, _owned=False)

    def _set_current(self, handle: Optional[int]) -> None:
        self.device.lib.check("aethercl_stream_set_current", self.device.index, handle)

    def __enter__(self) -> "Stream":
        previous = Stream.current(self.device)
        self._set_current(self.handle)
        self._saved.append(previous.handle)
        return self

    def __exit__(self, *exc) -> None:
        self._set_current(self._saved.pop())

    def synchronize(self) -> None:
        self.device.lib.check("aethercl_stream_synchronize", self.device.index, self.handle)

    def record_event(self) -> "Event":
        return Event.record(self)

    def wait_event(self, event: "Event") -> None:
        """Later work on this stream waits for event (which may belong to another device)."""
        self.device.lib.check("aethercl_stream_wait_event", self.device.index, self.handle,
                              event._require())

    def destroy(self) -> None:
        handle, owned = self.handle, self._owned
        self._owned = False
        if owned and handle is not None:
            self.device.lib.check("aethercl_stream_destroy", self.device.index, handle)

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # interpreter shutdown or the driver already shut down
            pass

    def __repr__(self) -> str:
        name = "default" if self.handle is None else f"0x{self.handle:x}"
        return f"Stream({name}, device={self.device.index}{', timing' if self.timing else ''})"


class Event(OwnedHandle):
    """A recorded point on a stream; completes when the work issued before it has."""

    def __init__(self, device, handle: int):
        self.device = device
        self.handle: Optional[int] = handle

    @classmethod
    def record(cls, stream: Optional[Stream] = None, device=None) -> "Event":
        """Records on stream (or on the calling thread's current stream of device)."""
        device = stream.device if isinstance(stream, Stream) else device
        if device is None:
            raise ValueError("Event.record needs a stream or a device")
        handle = device.lib.check_handle("aethercl_event_record", device.index,
                                         resolve(device.lib, device.index, stream))
        return cls(device, handle)

    def _require(self) -> int:
        if self.handle is None:
            raise ValueError("the event has been destroyed")
        return self.handle

    def query(self) -> bool:
        done = ctypes.c_int(0)
        self.device.lib.check("aethercl_event_query", self._require(), ctypes.byref(done))
        return bool(done.value)

    def synchronize(self) -> None:
        self.device.lib.check("aethercl_event_synchronize", self._require())

    wait = synchronize

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds of device time from this event to end (both on timing streams)."""
        ms = ctypes.c_float(0.0)
        self.device.lib.check("aethercl_event_elapsed_ms", self._require(), end._require(),
                              ctypes.byref(ms))
        return float(ms.value)

    def _release(self, handle: int) -> None:
        self.device.lib.check("aethercl_event_destroy", handle)


class HostBuffer:
    """nbytes of page-locked host memory (aethercl_host_alloc) with NumPy views of it. Keep the
    memory untouched while an asynchronous transfer uses it; free() waits for the device's
    streams first."""

    def __init__(self, device, nbytes: int):
        self.device = device
        self.nbytes = int(nbytes)
        self.address: Optional[int] = device.lib.check_handle("aethercl_host_alloc",
                                                              device.index, self.nbytes)

    def numpy(self, dtype=np.uint8, shape: Optional[Sequence[int]] = None,
              offset: int = 0) -> np.ndarray:
        """A view of the memory (no copy); valid until free()."""
        if self.address is None:
            raise ValueError("the host buffer has been freed")
        dtype = np.dtype(dtype)
        count = (self.nbytes - int(offset)) // dtype.itemsize
        if shape is None:
            shape = (count,)
        need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset < 0 or int(offset) + need > self.nbytes:
            raise ValueError(f"a view of {need} bytes at {offset} exceeds {self.nbytes} bytes")
        raw = (ctypes.c_ubyte * need).from_address(self.address + int(offset))
        return np.frombuffer(raw, dtype=dtype).reshape(tuple(shape))

    def free(self) -> None:
        address, self.address = self.address, None
        if address is not None:
            self.device.lib.check("aethercl_host_free", address)

    def __enter__(self) -> "HostBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


__all__ = ["Event", "HostBuffer", "STREAM_TIMING", "Stream", "resolve"]
