"""AetherCL from Python: the ctypes shim over the driver library (every exported symbol declared
from the ABI manifest), a typed layer (`Device`, `Buffer`, pool controls), the streams, events and pinned memory of ABI
version 3 (`Stream`, `Event`, `HostBuffer`),
graphs of version 4 (`aethercl.graph`, `Graph`), the many-device functions (`Communicator`,
`copy_peer`), your own kernels (`Device.compile` -> `Program`, `Kernel`, `Local`; typed buffers
with `bfloat16`; `aethercl.spirv`) and `aethercl.ops`, one
function per entry point (generated from the manifest by tools/gen_abi.py, like the status codes
of aethercl.status). Failed calls raise `AetherCLError` subclasses (`aethercl.errors`)."""
from __future__ import annotations

import re
from pathlib import Path


def _version() -> str:
    """The installed package's version, else (a checkout) the version in the C header."""
    try:
        from ._version import __version__ as installed  # written by the package build
        return installed
    except ImportError:
        header = Path(__file__).resolve().parents[2] / "include" / "aethercl" / "driver.h"
        try:
            match = re.search(r'#define AETHERCL_VERSION_STRING "([^"]+)"', header.read_text())
        except OSError:
            match = None
        return match.group(1) if match else "0+unknown"


__version__: str = _version()

from .errors import (  # noqa: E402
    AetherCLError, BuildFailedError, DeviceError, InternalError, InvalidArgumentError,
    InvalidHandleError, KernelArgumentError, NoDeviceError, NotInitializedError, OutOfMemoryError,
    OutOfRangeError, UnsupportedError)
from .library import Library, find_library  # noqa: E402
from .status import Status  # noqa: E402
from .abi import load_manifest, parse_manifest  # noqa: E402
from .device import (  # noqa: E402
    Buffer, Device, current_device, default_library, empty_cache, memory_stats,
    reset_peak_memory_stats)
from .streams import Event, HostBuffer, Stream  # noqa: E402
from .graphs import Graph, graph  # noqa: E402
from .collectives import Communicator, copy_peer  # noqa: E402
from .dtypes import bfloat16  # noqa: E402
from .program import Kernel, Local, Program  # noqa: E402
from . import dtypes, ops, spirv, status  # noqa: E402,F401

__all__ = ["AetherCLError", "Buffer", "BuildFailedError", "Communicator", "Device", "DeviceError",
           "Event", "Graph", "HostBuffer", "InternalError", "InvalidArgumentError", "InvalidHandleError",
           "Kernel", "KernelArgumentError", "Library", "Local", "Program", "bfloat16", "dtypes",
           "spirv",
           "NoDeviceError", "NotInitializedError", "OutOfMemoryError", "OutOfRangeError", "Status", "Stream",
           "UnsupportedError", "__version__", "copy_peer", "current_device", "default_library",
           "empty_cache", "find_library", "graph", "load_manifest", "memory_stats", "ops",
           "parse_manifest", "reset_peak_memory_stats", "status"]
