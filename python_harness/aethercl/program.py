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
from .owned import OwnedHandle
from .streams import resolve


class Program(OwnedHandle):
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

    def _release(self, handle: int) -> None:
        self.device.lib.aethercl_program_destroy(handle)

    def __repr__(self) -> str:
        return f"Program(device={self.device.index}, handle={self.handle!r})"


class Kernel(OwnedHandle):
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

    def _release(self, handle: int) -> None:
        self.device.lib.aethercl_kernel_destroy(handle)

    def __repr__(self) -> str:
        return f"Kernel({self.info.get('name')!r}, args={self.info.get('num_args')})"


__all__ = ["AetherCLError", "Kernel", "Local", "Program"]
