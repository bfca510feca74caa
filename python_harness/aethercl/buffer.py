"""Buffer: a device allocation with an element type, NumPy in/out, conversions on the device, a
label, and deterministic free."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

import numpy as np

from . import dtypes
from .streams import resolve

if TYPE_CHECKING:
    from .device import Device


def _as_contiguous(array: Any) -> np.ndarray:
    return np.ascontiguousarray(array)


class Buffer:
    """A device allocation of `nbytes` bytes. `shape`/`dtype` are optional metadata that make
    to_numpy() default to the right array; a dtype no buffer can hold (complex, strings, objects:
    dtypes.element_type) raises TypeError before anything is allocated. With tag_dtype
    (Device.buffer, Device.empty, astype) a dtype the driver knows (float32, float16, bfloat16,
    float64, int32, int64, int8, uint8) is also set on the buffer (aethercl_buffer_set_dtype) and
    shows in memory statistics; frontends that allocate per step leave it off and pay no extra
    call. free() is idempotent; a context manager frees on exit, and a forgotten buffer is freed
    when it is garbage collected."""

    def __init__(self, device: "Device", nbytes: int, shape: Optional[Tuple[int, ...]] = None,
                 dtype: Any = None, label: Optional[str] = None,
                 tag_dtype: bool = False) -> None:
        self.device = device
        self.nbytes = int(nbytes)
        self.shape = tuple(shape) if shape is not None else None
        self._dtype: Any = dtypes.element_type(dtype) if dtype is not None else None
        self._label: Optional[str] = None
        self.handle: Optional[int] = None
        self.handle = device.lib.check_handle("allocate_gpu_memory", device.index, self.nbytes)
        try:
            if tag_dtype and self._dtype is not None:
                self.set_dtype(self._dtype)
            if label:
                self.label = label
        except BaseException:
            self.free()
            raise

    @classmethod
    def adopt(cls, device: "Device", handle: int, nbytes: int,
              shape: Optional[Tuple[int, ...]] = None, dtype: Any = None,
              label: Optional[str] = None) -> "Buffer":
        """A Buffer over a token some other call allocated on device (e.g.
        Communicator.alloc); it frees the token like any buffer."""
        self = cls.__new__(cls)
        self.device, self.nbytes, self.handle = device, int(nbytes), None
        self.shape = tuple(shape) if shape is not None else None
        self._dtype = dtypes.element_type(dtype) if dtype is not None else None
        self._label = None
        self.handle = handle
        if label:
            self.label = label
        return self

    @property
    def dtype(self):
        """The element type: a NumPy dtype, aethercl.bfloat16, or None (untyped bytes)."""
        return self._dtype

    def set_dtype(self, value) -> None:
        """Sets the element type; one the driver knows is also set on the buffer
        (aethercl_buffer_set_dtype, a call), where memory statistics show it. Buffers of
        Device.buffer, Device.empty and astype are tagged so."""
        value = dtypes.element_type(value) if value is not None else None
        if value is not None and dtypes.has_code(value):
            self.device.lib.check("aethercl_buffer_set_dtype", self.device.index,
                                  self._require_alive(), dtypes.code_of(value))
        self._dtype = value

    @classmethod
    def from_numpy(cls, device: "Device", array: Any, label: Optional[str] = None) -> "Buffer":
        """A new buffer holding a copy of the array, with its shape and dtype."""
        array = _as_contiguous(array)
        buffer = cls(device, max(array.nbytes, 1), shape=array.shape, dtype=array.dtype,
                     label=label)
        try:
            buffer.write(array)
        except BaseException:
            buffer.free()
            raise
        return buffer

    @property
    def alive(self) -> bool:
        """False once freed."""
        return self.handle is not None

    def _require_alive(self) -> int:
        if self.handle is None:
            raise ValueError("the buffer has been freed")
        return self.handle

    @property
    def label(self) -> Optional[str]:
        """The label memory statistics and error messages name the buffer by (None: none)."""
        return self._label

    @label.setter
    def label(self, text: Optional[str]) -> None:
        self.device.lib.check("aethercl_set_buffer_label", self.device.index,
                              self._require_alive(), (text or "").encode("utf-8"))
        self._label = text or None

    def write(self, array: Any, offset: int = 0, stream: Any = None) -> "Buffer":
        """Copies the bytes of `array` (made C-contiguous) to the buffer at byte `offset`.

        Without `stream`: the seed write (ordered on the thread's current stream; `array` is free
        again when this returns). With a Stream: aethercl_write_async on it; from a HostBuffer's
        memory the copy is asynchronous and the array must stay untouched until the stream has
        passed this point."""
        array = _as_contiguous(array)
        pointer = array.ctypes.data if array.nbytes else None
        if stream is None:
            self.device.lib.check("write_host_to_gpu_blocking", self.device.index,
                                  self._require_alive(), int(offset), array.nbytes, pointer)
        else:
            self.device.lib.check("aethercl_write_async", self.device.index,
                                  self._require_alive(), int(offset), array.nbytes, pointer,
                                  resolve(self.device.lib, self.device.index, stream))
        return self

    def read_into(self, out: np.ndarray, offset: int = 0, stream: Any = None) -> np.ndarray:
        """Reads len(out) bytes at byte `offset` into `out`. Without `stream`: the seed read (waits
        for every stream of the device). With a Stream: aethercl_read_async on it; into a
        HostBuffer's memory it returns at once and the data is there once the stream has passed
        this point, into other memory it returns after the data has arrived."""
        if not out.flags.c_contiguous:
            raise ValueError("read_into needs a C-contiguous array")
        pointer = out.ctypes.data if out.nbytes else None
        if stream is None:
            self.device.lib.check("read_gpu_to_host_blocking", self.device.index,
                                  self._require_alive(), int(offset), out.nbytes, pointer)
        else:
            self.device.lib.check("aethercl_read_async", self.device.index,
                                  self._require_alive(), int(offset), out.nbytes, pointer,
                                  resolve(self.device.lib, self.device.index, stream))
        return out

    def read(self, out: Optional[np.ndarray] = None, offset: int = 0,
             stream: Any = None) -> np.ndarray:
        """read_into(out) with `out` defaulting to a new array of the buffer's shape and dtype."""
        if out is None:
            return self.to_numpy(offset=offset) if stream is None else self.read_into(
                np.empty(self.shape or (self.nbytes - int(offset),),
                         self.dtype or np.uint8), offset, stream)
        return self.read_into(out, offset, stream)

    def to_numpy(self, shape: Optional[Sequence[int]] = None, dtype: Any = None,
                 offset: int = 0) -> np.ndarray:
        """The contents as an array of dtype (default: the buffer's; bfloat16 buffers give
        float32 values, exactly, and their raw patterns with dtype=np.uint16)."""
        widen_bf16 = dtype is None and self._dtype is dtypes.bfloat16
        if dtype is not None:
            dtype = np.dtype(dtype)
        elif self._dtype is not None:
            dtype = dtypes.storage_dtype(self._dtype)
        else:
            dtype = np.dtype(np.uint8)
        if shape is None:
            same = self._dtype is not None and dtype == dtypes.storage_dtype(self._dtype)
            shape = self.shape if self.shape is not None and same else (
                (self.nbytes - int(offset)) // dtype.itemsize,)
        out = self.read_into(np.empty(tuple(shape), dtype), offset)
        return dtypes.bf16_bits_to_float32(out) if widen_bf16 else out

    def __array__(self, dtype=None, copy=None):
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    def astype(self, dtype: Any, stream: Any = None) -> "Buffer":
        """A new buffer with every element converted to dtype on the device (aethercl_convert:
        nearest-even rounding, saturating integer conversions)."""
        if self._dtype is None:
            raise ValueError("astype needs a typed buffer (give the Buffer a dtype)")
        target = dtypes.normalize(dtype)
        count = self.nbytes // self._dtype.itemsize
        out = Buffer(self.device, max(1, count * target.itemsize), shape=self.shape,
                     dtype=target, tag_dtype=True)
        try:
            self.device.lib.check("aethercl_convert", self.device.index, self._require_alive(),
                                  dtypes.code_of(self._dtype), out.handle,
                                  dtypes.code_of(target), count,
                                  resolve(self.device.lib, self.device.index, stream))
        except BaseException:
            out.free()
            raise
        return out

    def cl_mem(self) -> int:
        """The cl_mem behind the buffer (interop; valid until the buffer is freed)."""
        return self.device.lib.check_handle("aethercl_cl_mem", self.device.index,
                                            self._require_alive())

    def copy_to(self, other: "Buffer", nbytes: Optional[int] = None) -> None:
        """Device-to-device copy of the first `nbytes` bytes (default: all of this buffer)."""
        self.device.lib.check("execute_clone_on_gpu", self.device.index, self._require_alive(),
                              other._require_alive(), self.nbytes if nbytes is None else nbytes)

    def clone(self) -> "Buffer":
        """A new buffer with a device-side copy of this one."""
        copy = Buffer(self.device, self.nbytes, shape=self.shape, dtype=self._dtype)
        self.copy_to(copy)
        return copy

    def free(self) -> None:
        """Returns the memory to the device pool; idempotent."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.device.lib.free_gpu_memory(self.device.index, handle)

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def __repr__(self) -> str:
        state = f"handle=0x{self.handle:x}" if self.handle is not None else "freed"
        extra = f", shape={self.shape}, dtype={self.dtype}" if self.shape is not None else ""
        return f"Buffer({self.nbytes} B{extra}, {state})"


__all__ = ["Buffer"]
