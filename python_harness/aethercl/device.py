"""Typed layer over the raw library: a Device (initialise, info, synchronise, memory statistics,
your own kernels, the kernel log, interop) and a Buffer (a device allocation with an element type,
NumPy in/out, conversions, a label, and deterministic free).

The runtime reads like this (vector add; python_harness/examples/ has more):

    dev = aethercl.Device(0)
    kernel = dev.compile(SOURCE).kernel("vecadd")      # or dev.load_spirv("vecadd.spv")
    A = dev.buffer(data_a)                             # CPU -> GPU
    B = dev.buffer(data_b)
    C = dev.buffer(size=n)                             # GPU only (float32 by default)
    dev.dispatch(kernel, A, B, C, np.uint32(n), global_size=n)
    dev.wait()
    result = C.read()                                  # GPU -> CPU
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from . import dtypes
from .library import AetherCLError, Library
from .program import Kernel, Local, Program

_DEFAULT_LIBRARY: Optional[Library] = None


def default_library() -> Library:
    """The process-wide library (loaded once, like the ctypes clients do)."""
    global _DEFAULT_LIBRARY
    if _DEFAULT_LIBRARY is None:
        _DEFAULT_LIBRARY = Library()
    return _DEFAULT_LIBRARY


class Device:
    """One visible device of the driver, selected by gpu_index."""

    def __init__(self, index: int = 0, library: Optional[Library] = None,
                 initialize: bool = True):
        self.lib = library if library is not None else default_library()
        self.index = int(index)
        if initialize:
            self.initialize()

    def initialize(self) -> "Device":
        self.lib.check("initialize_gpu", self.index)
        return self

    def shutdown(self) -> None:
        """Releases every device resource of the library (all devices); idempotent."""
        self.lib.shutdown_driver()

    def info(self) -> Dict[str, Any]:
        return json.loads(self.lib.json_call("aethercl_device_info", self.index))

    @property
    def name(self) -> str:
        return str(self.info().get("name", "?"))

    def synchronize(self) -> None:
        self.lib.check("aethercl_synchronize", self.index)

    def memory_stats(self) -> Dict[str, Any]:
        return json.loads(self.lib.json_call("aethercl_memory_stats", self.index))

    # ---- your own kernels -------------------------------------------------------------------
    def compile(self, source: str, options: str = "") -> Program:
        """Builds OpenCL C source (aethercl_program_create); a build error raises AetherCLError
        with the compiler's log."""
        handle = self.lib.check_handle("aethercl_program_create", self.index,
                                       source.encode("utf-8"), (options or "").encode("utf-8"))
        return Program(self, handle)

    def compile_il(self, il: bytes, options: str = "") -> Program:
        """Builds a SPIR-V module (aethercl_program_create_il); devices without IL support raise
        AetherCLError with code 9 (AETHERCL_NOT_IMPLEMENTED)."""
        il = bytes(il)
        handle = self.lib.check_handle("aethercl_program_create_il", self.index, il, len(il),
                                       (options or "").encode("utf-8"))
        return Program(self, handle)

    def load_spirv(self, path, options: str = "") -> Program:
        with open(path, "rb") as f:
            return self.compile_il(f.read(), options)

    def load_binary(self, binary: bytes, options: str = "") -> Program:
        """Loads a device binary from Program.binary() (aethercl_program_create_binary)."""
        binary = bytes(binary)
        handle = self.lib.check_handle("aethercl_program_create_binary", self.index, binary,
                                       len(binary), (options or "").encode("utf-8"))
        return Program(self, handle)

    def dispatch(self, kernel: Kernel, *args, global_size=None, groups=None, local=None,
                 stream=None) -> None:
        """Launches kernel over global_size work-items, or over `groups` work-groups of `local`
        work-items each (global = groups x local), with args as Kernel.__call__ takes them."""
        if (global_size is None) == (groups is None):
            raise ValueError("give exactly one of global_size and groups")
        if groups is not None:
            if local is None:
                raise ValueError("groups needs local (the work-group size)")
            g = (groups,) if np.isscalar(groups) else tuple(groups)
            l_ = (local,) if np.isscalar(local) else tuple(local)
            if len(g) != len(l_):
                raise ValueError(f"groups {g} and local {l_} differ in dimensions")
            global_size = tuple(int(a) * int(b) for a, b in zip(g, l_))
        kernel(global_size, local, *args, stream=stream)

    def wait(self) -> None:
        """Waits for all work on the device (aethercl_synchronize)."""
        self.synchronize()

    def kernel_log(self) -> list:
        """The most recent kernel launches, oldest first (aethercl_kernel_log)."""
        return json.loads(self.lib.json_call("aethercl_kernel_log", self.index))

    # ---- interop ----------------------------------------------------------------------------
    def cl_context(self) -> int:
        """The device's cl_context (an int address; the driver keeps ownership)."""
        return self.lib.check_handle("aethercl_cl_context", self.index)

    def cl_queue(self, stream=None) -> int:
        """The cl_command_queue of stream (None: the default stream)."""
        return self.lib.check_handle("aethercl_cl_queue", self.index,
                                     getattr(stream, "handle", stream))

    # ---- memory -----------------------------------------------------------------------------
    def buffer(self, data=None, size: Optional[int] = None, dtype=None,
               label: Optional[str] = None) -> "Buffer":
        """`buffer(data)` copies an array to a new buffer (converted to dtype if given, on the
        device); `buffer(size=n, dtype=...)` allocates n elements (float32 by default)."""
        if (data is None) == (size is None):
            raise ValueError("give exactly one of data and size")
        if data is not None:
            array = np.asarray(data)
            if dtype is None or dtypes.normalize(dtype) == array.dtype:
                buffer = Buffer.from_numpy(self, array, label=label)
                try:
                    buffer.dtype = buffer.dtype  # shown in memory statistics
                except BaseException:
                    buffer.free()
                    raise
                return buffer
            with Buffer.from_numpy(self, array) as source:
                converted = source.astype(dtype)
            if label:
                converted.label = label
            return converted
        return self.empty((int(size),), np.float32 if dtype is None else dtype, label=label)

    def alloc(self, nbytes: int, label: Optional[str] = None) -> "Buffer":
        return Buffer(self, nbytes, label=label)

    def empty(self, shape: Sequence[int], dtype=np.float32,
              label: Optional[str] = None) -> "Buffer":
        shape = tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtypes.normalize(dtype).itemsize
        return Buffer(self, max(nbytes, 1), shape=shape, dtype=dtype, label=label, tag_dtype=True)

    def zeros(self, shape: Sequence[int], dtype=np.float32,
              label: Optional[str] = None) -> "Buffer":
        return self.from_numpy(np.zeros(tuple(shape), dtype), label=label)

    def from_numpy(self, array, label: Optional[str] = None) -> "Buffer":
        return Buffer.from_numpy(self, array, label=label)

    def __repr__(self) -> str:
        return f"Device(index={self.index})"


def _as_contiguous(array) -> np.ndarray:
    return np.ascontiguousarray(array)


class Buffer:
    """A device allocation of `nbytes` bytes. `shape`/`dtype` are optional metadata that make
    to_numpy() default to the right array; with tag_dtype (Device.buffer, Device.empty, astype) a
    dtype the driver knows (float32, float16, bfloat16, float64, int32, int64, int8, uint8) is also
    set on the buffer (aethercl_buffer_set_dtype) and shows in memory statistics; frontends that
    allocate per step leave it off and pay no extra call. free() is idempotent; a context manager frees on exit, and a
    forgotten buffer is freed when it is garbage collected."""

    def __init__(self, device: Device, nbytes: int, shape: Optional[Tuple[int, ...]] = None,
                 dtype=None, label: Optional[str] = None, tag_dtype: bool = False):
        self.device = device
        self.nbytes = int(nbytes)
        self.shape = tuple(shape) if shape is not None else None
        self._dtype = dtypes.normalize(dtype) if dtype is not None else None
        self._label = None
        self.handle: Optional[int] = None
        self.handle = device.lib.check_handle("allocate_gpu_memory", device.index, self.nbytes)
        try:
            if tag_dtype and self._dtype is not None:
                self.dtype = self._dtype  # tells the driver too (one call)
            if label:
                self.label = label
        except BaseException:
            self.free()
            raise

    @property
    def dtype(self):
        """The element type: a NumPy dtype, aethercl.bfloat16, or None (untyped bytes). Assigning
        one the driver knows also sets it on the buffer (aethercl_buffer_set_dtype), where memory
        statistics show it; buffers of Device.buffer, Device.empty and astype are tagged so."""
        return self._dtype

    @dtype.setter
    def dtype(self, value) -> None:
        value = dtypes.normalize(value) if value is not None else None
        if value is not None and dtypes.has_code(value):
            self.device.lib.check("aethercl_buffer_set_dtype", self.device.index,
                                  self._require_alive(), dtypes.code_of(value))
        self._dtype = value

    @classmethod
    def from_numpy(cls, device: Device, array, label: Optional[str] = None) -> "Buffer":
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
        return self.handle is not None

    def _require_alive(self) -> int:
        if self.handle is None:
            raise ValueError("the buffer has been freed")
        return self.handle

    @property
    def label(self) -> Optional[str]:
        return self._label

    @label.setter
    def label(self, text: Optional[str]) -> None:
        self.device.lib.check("aethercl_set_buffer_label", self.device.index,
                              self._require_alive(), (text or "").encode("utf-8"))
        self._label = text or None

    def write(self, array, offset: int = 0) -> "Buffer":
        """Copies the bytes of `array` (made C-contiguous) to the buffer at byte `offset`."""
        array = _as_contiguous(array)
        self.device.lib.check("write_host_to_gpu_blocking", self.device.index,
                              self._require_alive(), int(offset), array.nbytes,
                              array.ctypes.data if array.nbytes else None)
        return self

    def read_into(self, out: np.ndarray, offset: int = 0) -> np.ndarray:
        if not out.flags.c_contiguous:
            raise ValueError("read_into needs a C-contiguous array")
        self.device.lib.check("read_gpu_to_host_blocking", self.device.index,
                              self._require_alive(), int(offset), out.nbytes,
                              out.ctypes.data if out.nbytes else None)
        return out

    def to_numpy(self, shape: Optional[Sequence[int]] = None, dtype=None,
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

    def read(self) -> np.ndarray:
        """GPU -> CPU: the whole buffer as an array of its dtype (see to_numpy)."""
        return self.to_numpy()

    def __array__(self, dtype=None, copy=None):
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    def astype(self, dtype, stream=None) -> "Buffer":
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
                                  getattr(stream, "handle", stream))
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
        copy = Buffer(self.device, self.nbytes, shape=self.shape, dtype=self._dtype)
        self.copy_to(copy)
        return copy

    def free(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self.device.lib.free_gpu_memory(self.device.index, handle)

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def __repr__(self) -> str:
        state = f"handle=0x{self.handle:x}" if self.handle is not None else "freed"
        extra = f", shape={self.shape}, dtype={self.dtype}" if self.shape is not None else ""
        return f"Buffer({self.nbytes} B{extra}, {state})"


__all__ = ["AetherCLError", "Buffer", "Device", "Kernel", "Local", "Program", "default_library"]
