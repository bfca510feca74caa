"""AetherCL ctypes shim: loads driver.so and declares every exported symbol from abi/driver.abi.
`Device`/`Buffer` (device.py) are a typed layer with NumPy in/out; `Program`/`Kernel`/`Local`
(program.py) run your own kernels; `aethercl.ops` has one function per entry point that raises
AetherCLError with the driver's message; `aethercl.spirv` turns OpenCL C into SPIR-V with clang."""
from .library import AetherCLError, Library, find_library  # noqa: F401
from .abi import load_manifest, parse_manifest  # noqa: F401
from .dtypes import bfloat16  # noqa: F401
from .device import Buffer, Device, default_library  # noqa: F401
from .program import Kernel, Local, Program  # noqa: F401
from . import dtypes, spirv  # noqa: F401
from . import ops  # noqa: F401

__all__ = ["AetherCLError", "Buffer", "Device", "Kernel", "Library", "Local", "Program",
           "bfloat16", "default_library", "find_library", "load_manifest", "ops",
           "parse_manifest"]
