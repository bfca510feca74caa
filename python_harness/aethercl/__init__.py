"""AetherCL ctypes shim: loads driver.so and declares every exported symbol from abi/driver.abi.
`Device`/`Buffer` (device.py) are a typed layer with NumPy in/out; `Program`/`Kernel`/`Local`
(program.py) run your own kernels; `aethercl.spirv` turns OpenCL C into SPIR-V with clang;
`aethercl.ops` has one function per entry point that raises AetherCLError with the driver's
message (generated from the manifest by tools/gen_abi.py, like the status codes of
aethercl.status)."""
from .library import AetherCLError, Library, find_library  # noqa: F401
from .abi import load_manifest, parse_manifest  # noqa: F401
from .dtypes import bfloat16  # noqa: F401
from .device import Buffer, Device, default_library  # noqa: F401
from .status import Status  # noqa: F401
from .dtypes import bfloat16  # noqa: F401
from .program import Kernel, Local, Program  # noqa: F401
from . import dtypes, ops, spirv, status  # noqa: F401

__all__ = ["AetherCLError", "Buffer", "Device", "Kernel", "Library", "Local", "Program", "Status",
           "bfloat16", "default_library", "dtypes", "find_library", "load_manifest", "ops",
           "parse_manifest", "spirv", "status"]
