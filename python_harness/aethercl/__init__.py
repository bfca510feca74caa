"""AetherCL ctypes shim: loads driver.so and declares every exported symbol from abi/driver.abi."""
from .library import AetherCLError, Library, find_library  # noqa: F401
from .abi import load_manifest, parse_manifest  # noqa: F401

__all__ = ["AetherCLError", "Library", "find_library", "load_manifest", "parse_manifest"]
