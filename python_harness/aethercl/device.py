"""Device, the typed layer over the raw library: initialise, info, synchronise, memory statistics
and pool controls, buffers (aethercl.buffer), your own kernels (compile -> aethercl.program),
dispatch, streams, events and fences, the kernel log and interop handles; a context manager."""
from __future__ import annotations

import json
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Type, Union

import numpy as np

from . import dtypes
from .buffer import Buffer
from .errors import AetherCLError
from .library import Library

if TYPE_CHECKING:
    from .graphs import Graph
from .kernel_args import Local
from .program import Kernel, Program
from .streams import Event, Stream, resolve

_DEFAULT_LIBRARY: Optional[Library] = None
_CURRENT = threading.local()  # .stack: the Devices of the enclosing `with` blocks


def default_library() -> Library:
    """The process-wide library (loaded once, like the ctypes clients do)."""
    global _DEFAULT_LIBRARY
    if _DEFAULT_LIBRARY is None:
        _DEFAULT_LIBRARY = Library()
    return _DEFAULT_LIBRARY


def current_device() -> Optional["Device"]:
    """The Device of this thread's innermost `with Device(...)` block, None outside one."""
    stack: List[Device] = getattr(_CURRENT, "stack", [])
    return stack[-1] if stack else None


class Device:
    """One visible device of the driver, selected by gpu_index (aethercl_device_count() order).

    As a context manager it is this thread's current_device() inside the block; leaving the
    block waits for the device's work (so a deferred device error is raised there, not later):

        with aethercl.Device(0) as dev:
            x = dev.from_numpy(array)
    """

    def __init__(self, index: int = 0, library: Optional[Library] = None,
                 initialize: bool = True) -> None:
        self.lib: Library = library if library is not None else default_library()
        self.index = int(index)
        if initialize:
            self.initialize()

    def initialize(self) -> "Device":
        """initialize_gpu(index); idempotent. Raises NoDeviceError for an index out of range."""
        self.lib.check("initialize_gpu", self.index)
        return self

    def shutdown(self) -> None:
        """Releases every device resource of the library (all devices); idempotent."""
        self.lib.shutdown_driver()

    def info(self) -> Dict[str, Any]:
        """The driver's description of the device (name, type, memory, extensions, ...)."""
        return json.loads(self.lib.json_call("aethercl_device_info", self.index))

    @property
    def name(self) -> str:
        """The OpenCL device name."""
        return str(self.info().get("name", "?"))

    def synchronize(self) -> None:
        """Waits for all work enqueued on the device; raises a deferred device error."""
        self.lib.check("aethercl_synchronize", self.index)

    def memory_stats(self) -> Dict[str, Any]:
        """The pool's statistics: bytes in use, reserved, cached, peak, live buffers, labels."""
        return json.loads(self.lib.json_call("aethercl_memory_stats", self.index))

    def empty_cache(self) -> None:
        """Returns the pool's cached (freed) blocks to OpenCL, like torch.cuda.empty_cache."""
        self.lib.check("aethercl_empty_cache", self.index)

    def reset_peak_memory_stats(self) -> None:
        """Restarts peak_bytes_reserved at the bytes reserved now."""
        self.lib.check("aethercl_reset_peak_memory_stats", self.index)

    def alloc(self, nbytes: int, label: Optional[str] = None) -> "Buffer":
        """An uninitialised buffer of nbytes bytes."""
        return Buffer(self, nbytes, label=label)

    def empty(self, shape: Sequence[int], dtype: Any = np.float32,
              label: Optional[str] = None) -> "Buffer":
        """An uninitialised buffer sized for an array of this shape and dtype."""
        shape = tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtypes.element_type(dtype).itemsize
        return Buffer(self, max(nbytes, 1), shape=shape, dtype=dtype, label=label, tag_dtype=True)

    def zeros(self, shape: Sequence[int], dtype: Any = np.float32,
              label: Optional[str] = None) -> "Buffer":
        """A buffer holding zeros of this shape and dtype."""
        return self.from_numpy(np.zeros(tuple(shape), dtype), label=label)

    def from_numpy(self, array: Any, label: Optional[str] = None) -> "Buffer":
        """A buffer holding a copy of the array (made C-contiguous)."""
        return Buffer.from_numpy(self, array, label=label)

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

    def load_spirv(self, path: str, options: str = "") -> Program:
        """Builds the SPIR-V module in the file at `path` (compile_il)."""
        with open(path, "rb") as f:
            return self.compile_il(f.read(), options)

    def load_binary(self, binary: bytes, options: str = "") -> Program:
        """Loads a device binary from Program.binary() (aethercl_program_create_binary)."""
        binary = bytes(binary)
        handle = self.lib.check_handle("aethercl_program_create_binary", self.index, binary,
                                       len(binary), (options or "").encode("utf-8"))
        return Program(self, handle)

    def dispatch(self, kernel: Kernel, *args: Any, global_size: Any = None, groups: Any = None,
                 local: Any = None, stream: Optional[Stream] = None) -> None:
        """Launches kernel over global_size work-items, or over `groups` work-groups of `local`
        work-items each (global = groups x local; without local, Kernel.default_local_size,
        refused with Local arguments), with args as Kernel.__call__ takes them, on stream (None:
        the current stream)."""
        if (global_size is None) == (groups is None):
            raise ValueError("give exactly one of global_size and groups")
        if groups is not None:
            g = (groups,) if np.isscalar(groups) else tuple(groups)
            if local is None:
                if any(isinstance(a, Local) for a in args):
                    raise ValueError("groups with aethercl.Local arguments needs local (the "
                                     "work-group size the local memory is sized for)")
                local = kernel.default_local_size(len(g))
            l_ = (local,) if np.isscalar(local) else tuple(local)
            if len(g) != len(l_):
                raise ValueError(f"groups {g} and local {l_} differ in dimensions")
            global_size = tuple(int(a) * int(b) for a, b in zip(g, l_))
        kernel(global_size, local, *args, stream=stream)

    def wait(self) -> None:
        """Waits for all work on the device (aethercl_synchronize)."""
        self.synchronize()

    # ---- streams and events -----------------------------------------------------------------
    def stream(self, timing: bool = False) -> Stream:
        """A new stream of this device (`with dev.stream():` makes it the thread's current one);
        timing=True lets events on it measure elapsed time."""
        return Stream(self, timing=timing)

    def event(self, stream: Optional[Stream] = None) -> Event:
        """An event recorded on stream (None: the calling thread's current stream)."""
        return Event.record(stream, device=self)

    def fence(self) -> Event:
        """An event marking everything issued so far on the calling thread's current stream:
        fence().wait() waits for that work only, unlike wait(), which waits for the device."""
        return self.event()

    def graph(self, stream: Optional[Stream] = None) -> "Graph":
        """A Graph capturing stream (None: the calling thread's current stream) inside a `with`
        block (aethercl.graph)."""
        from .graphs import Graph
        return Graph(self, stream)

    def kernel_log(self) -> list:
        """The most recent kernel launches, oldest first (aethercl_kernel_log)."""
        return json.loads(self.lib.json_call("aethercl_kernel_log", self.index))

    # ---- interop ----------------------------------------------------------------------------
    def cl_context(self) -> int:
        """The device's cl_context (an int address; the driver keeps ownership)."""
        return self.lib.check_handle("aethercl_cl_context", self.index)

    def cl_queue(self, stream: Optional[Stream] = None) -> int:
        """The cl_command_queue of stream (None: the calling thread's current stream;
        Stream.default(dev) for the default stream's)."""
        return self.lib.check_handle("aethercl_cl_queue", self.index,
                                     resolve(self.lib, self.index, stream))

    # ---- memory -----------------------------------------------------------------------------
    def buffer(self, data: Any = None, size: Optional[int] = None, dtype: Any = None,
               label: Optional[str] = None) -> Buffer:
        """`buffer(data)` copies an array to a new buffer (converted to dtype if given, on the
        device); `buffer(size=n, dtype=...)` allocates n elements (float32 by default)."""
        if (data is None) == (size is None):
            raise ValueError("give exactly one of data and size")
        if data is not None:
            array = np.asarray(data)
            if dtype is None or dtypes.normalize(dtype) == array.dtype:
                buffer = Buffer.from_numpy(self, array, label=label)
                try:
                    buffer.set_dtype(buffer.dtype)  # shown in memory statistics
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

    def __enter__(self) -> "Device":
        if not hasattr(_CURRENT, "stack"):
            _CURRENT.stack = []
        _CURRENT.stack.append(self)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], traceback: Optional[TracebackType]) -> None:
        _CURRENT.stack.pop()
        if exc_type is None:
            self.synchronize()

    def __repr__(self) -> str:
        return f"Device(index={self.index})"


DeviceLike = Union[Device, int]


def _device_of(device: Optional[DeviceLike]) -> Device:
    if isinstance(device, Device):
        return device
    if device is None:
        current = current_device()
        return current if current is not None else Device(0)
    return Device(int(device))


def empty_cache(device: Optional[DeviceLike] = None) -> None:
    """Returns a device pool's cached blocks to OpenCL (default: the current device, else 0)."""
    _device_of(device).empty_cache()


def reset_peak_memory_stats(device: Optional[DeviceLike] = None) -> None:
    """Restarts a device's peak memory statistic (default: the current device, else 0)."""
    _device_of(device).reset_peak_memory_stats()


def memory_stats(device: Optional[DeviceLike] = None) -> Dict[str, Any]:
    """A device's memory statistics (default: the current device, else 0)."""
    return _device_of(device).memory_stats()


__all__ = ["AetherCLError", "Buffer", "Device", "DeviceLike", "Kernel", "Local", "Program",
           "current_device", "default_library", "empty_cache", "memory_stats",
           "reset_peak_memory_stats"]
