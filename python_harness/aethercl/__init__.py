"""AetherCL ctypes shim: loads driver.so and declares every exported symbol from abi/driver.abi.
`Device`/`Buffer` (device.py) are a typed layer with NumPy in/out; `Stream`/`Event`/`HostBuffer`
(streams.py) the streams, events and pinned memory of ABI version 3; `Communicator`/`copy_peer`
(collectives.py) the many-device functions; `aethercl.ops` has one
function per entry point that raises AetherCLError with the driver's message (generated from the
manifest by tools/gen_abi.py, like the status codes of aethercl.status)."""
from .library import AetherCLError, Library, find_library  # noqa: F401
from .abi import load_manifest, parse_manifest  # noqa: F401
from .device import Buffer, Device, default_library  # noqa: F401
from .streams import Event, HostBuffer, Stream  # noqa: F401
from .status import Status  # noqa: F401
from . import ops, status  # noqa: F401
from .collectives import Communicator, copy_peer  # noqa: F401

__all__ = ["AetherCLError", "Buffer", "Communicator", "Device", "Event", "HostBuffer", "Library",
           "Status", "Stream", "copy_peer", "default_library", "find_library", "load_manifest",
           "ops", "parse_manifest", "status"]
