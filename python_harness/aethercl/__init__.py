"""AetherCL ctypes shim: loads driver.so and declares every exported symbol from abi/driver.abi.
`Device`/`Buffer` (device.py) are a typed layer with NumPy in/out; `aethercl.ops` has one function
per entry point that raises AetherCLError with the driver's message."""
from .library import AetherCLError, Library, find_library  # noqa: F401
from .abi import load_manifest, parse_manifest  # noqa: F401
from .device import Buffer, Device, default_library  # noqa: F401
from . import ops  # noqa: F401
from .collectives import Communicator, copy_peer  # noqa: F401

__all__ = ["AetherCLError", "Buffer", "Communicator", "Device", "copy_peer", "Library", "default_library", "find_library",
           "load_manifest", "ops", "parse_manifest"]
