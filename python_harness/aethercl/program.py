"""Your own kernels from Python: Device.compile(source) -> Program, program.kernel(name) -> Kernel,
and kernel(global_size, local_size, *args, stream=None) launches it (on the calling thread's
current stream unless stream= names one). What each argument may be: aethercl.kernel_args."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from .errors import AetherCLError
from .kernel_args import ArgumentChecker, Local
from .streams import Event, Stream, resolve


class Program:
    """A built program of one device (aethercl_program_create / _il / _binary)."""

    def __init__(self, device, handle: int):
        self.device = device
        self.handle: Optional[int] = handle

    def _require_alive(self) -> int:
        if self.handle is None:
            raise ValueError("the program has been destroyed")
        return self.handle

    def kernel(self, name: str) -> "Kernel":
        lib = self.device.lib
        handle = lib.check_handle("aethercl_kernel_create", self._require_alive(),
                                  name.encode("utf-8"))
        return Kernel(self, handle)

    def binary(self) -> bytes:
        """The device binary (aethercl_program_binary), reusable with Device.load_binary."""
        return self.device.lib.bytes_call("aethercl_program_binary", self._require_alive())

    def destroy(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self.device.lib.aethercl_program_destroy(handle)

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Program(device={self.device.index}, handle={self.handle!r})"


class Kernel:
    """One __kernel function of a Program. Calling it launches it (aethercl_launch)."""

    def __init__(self, program: Program, handle: int):
        self.program = program
        self.device = program.device
        self.handle: Optional[int] = handle
        self.info: Dict[str, Any] = json.loads(
            self.device.lib.json_call("aethercl_kernel_info", handle))
        device_info = self.device.info()
        self._arguments = ArgumentChecker(self.info, int(device_info.get("address_bits", 64)))
        self._item_limits = list(device_info.get("max_work_item_sizes") or [1 << 30] * 3)
        self._local_sizes: Dict[int, tuple] = {}

    @property
    def name(self) -> str:
        return self.info["name"]

    @property
    def num_args(self) -> int:
        return int(self.info["num_args"])

    def _require_alive(self) -> int:
        if self.handle is None:
            raise ValueError("the kernel has been destroyed")
        return self.handle

    def default_local_size(self, work_dim: int) -> tuple:
        """The work-group shape dispatch(groups=) uses without `local`: up to 256 work-items
        (fewer where the kernel or the device allows fewer), powers of two spread over the
        dimensions (256; 16 x 16; 8 x 8 x 4). A kernel whose local memory is sized for its group
        needs `local` given."""
        if work_dim not in self._local_sizes:
            budget = min(int(self.info.get("max_work_group_size") or 1), 256)
            local = [1] * work_dim
            grown = True
            while grown:
                grown = False
                for d in range(work_dim):
                    if np.prod(local) * 2 <= budget and local[d] * 2 <= self._item_limits[d]:
                        local[d] *= 2
                        grown = True
            self._local_sizes[work_dim] = tuple(local)
        return self._local_sizes[work_dim]

    def __call__(self, global_size: Union[int, Sequence[int]],
                 local_size: Union[None, int, Sequence[int]] = None, *args, stream=None) -> None:
        dims = (int(global_size),) if np.isscalar(global_size) else tuple(int(g) for g in global_size)
        work_dim = len(dims)
        global_array = (ctypes.c_size_t * max(1, work_dim))(*dims)
        local_array = None
        if local_size is not None:
            local = (int(local_size),) if np.isscalar(local_size) else tuple(
                int(v) for v in local_size)
            if len(local) != work_dim:
                raise ValueError(f"local_size {local} has {len(local)} dimensions, global_size "
                                 f"{dims} has {work_dim}")
            local_array = (ctypes.c_size_t * work_dim)(*local)
        array, keep = self._arguments.marshal(args)
        lib = self.device.lib
        stream_handle = resolve(lib, self.device.index, stream)
        result = lib.aethercl_launch(self.device.index, self._require_alive(), stream_handle,
                                     work_dim, global_array, local_array, len(args), array)
        del keep
        if result != 1:
            raise lib.error("aethercl_launch")

    def destroy(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self.device.lib.aethercl_kernel_destroy(handle)

    def __enter__(self) -> "Kernel":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Kernel({self.info.get('name')!r}, args={self.info.get('num_args')})"




class DeviceKernels:
    """The runtime half of Device (device.py mixes it in): your own kernels, buffers made from data
    or a size, dispatch/wait, streams, events and fences, the kernel log and interop handles.
    Expects `lib` and `index`."""

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
    def stream(self, timing: bool = False):
        """A new stream of this device (`with dev.stream():` makes it the thread's current one);
        timing=True lets events on it measure elapsed time."""
        return Stream(self, timing=timing)

    def event(self, stream=None):
        """An event recorded on stream (None: the calling thread's current stream)."""
        return Event.record(stream, device=self)

    def fence(self):
        """An event marking everything issued so far on the calling thread's current stream:
        fence().wait() waits for that work only, unlike wait(), which waits for the device."""
        return self.event()

    def kernel_log(self) -> list:
        """The most recent kernel launches, oldest first (aethercl_kernel_log)."""
        return json.loads(self.lib.json_call("aethercl_kernel_log", self.index))

    # ---- interop ----------------------------------------------------------------------------
    def cl_context(self) -> int:
        """The device's cl_context (an int address; the driver keeps ownership)."""
        return self.lib.check_handle("aethercl_cl_context", self.index)

    def cl_queue(self, stream=None) -> int:
        """The cl_command_queue of stream (None: the calling thread's current stream;
        Stream.default(dev) for the default stream's)."""
        return self.lib.check_handle("aethercl_cl_queue", self.index,
                                     resolve(self.lib, self.index, stream))

    # ---- memory -----------------------------------------------------------------------------
    def buffer(self, data=None, size: Optional[int] = None, dtype=None,
               label: Optional[str] = None):
        """`buffer(data)` copies an array to a new buffer (converted to dtype if given, on the
        device); `buffer(size=n, dtype=...)` allocates n elements (float32 by default)."""
        from . import dtypes
        from .device import Buffer
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


__all__ = ["AetherCLError", "DeviceKernels", "Kernel", "Local", "Program"]
