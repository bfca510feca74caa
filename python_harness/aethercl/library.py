"""Finding and loading driver.so, with every manifest symbol declared and errors as exceptions."""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Iterable, List, Optional

from . import abi, status

LIBRARY_NAMES = ("driver.so", "driver.dll") if sys.platform != "win32" else ("driver.dll",)


class AetherCLError(RuntimeError):
    """A driver call failed; carries the driver's status code and aethercl_last_error()."""

    def __init__(self, function: str, code: int, message: str):
        super().__init__(message or f"{function} failed ({status.describe(code)})")
        self.function = function
        self.code = code
        self.message = message

    @property
    def status(self):
        """The code as an aethercl.status.Status member (the plain int for an unknown code)."""
        return status.as_status(self.code)


def candidate_paths() -> List[Path]:
    """AETHERCL_LIBRARY, the build folder (AETHERCL_BUILD_DIR or ./build), next to the package."""
    paths: List[Path] = []
    if os.environ.get("AETHERCL_LIBRARY"):
        paths.append(Path(os.environ["AETHERCL_LIBRARY"]))
    build_dirs: Iterable[Path] = []
    if os.environ.get("AETHERCL_BUILD_DIR"):
        build_dirs = [Path(os.environ["AETHERCL_BUILD_DIR"])]
    root = Path(__file__).resolve().parents[2]
    build_dirs = list(build_dirs) + [root / "build", Path.cwd() / "build"]
    package_dir = Path(__file__).resolve().parent
    for directory in build_dirs + [package_dir, package_dir.parent]:
        paths.extend(directory / name for name in LIBRARY_NAMES)
    return paths


def find_library() -> Path:
    for path in candidate_paths():
        if path.is_file():
            return path
    raise FileNotFoundError("driver.so not found; build it with `tools/aethercl build` or set "
                            "AETHERCL_LIBRARY. Tried: " + ", ".join(map(str, candidate_paths())))


class Library:
    """The loaded driver: raw ctypes functions (declared from the manifest) plus error helpers."""

    def __init__(self, path: Optional[os.PathLike] = None):
        self.path = Path(path) if path else find_library()
        self.cdll = ctypes.CDLL(str(self.path))
        self.symbols = abi.load_manifest(str(self.path))
        abi.declare(self.cdll, self.symbols)

    def __getattr__(self, name):
        return getattr(self.cdll, name)

    def last_error(self) -> str:
        return self.cdll.aethercl_last_error().decode("utf-8", "replace")

    def last_error_code(self) -> int:
        return self.cdll.aethercl_last_error_code()

    def error(self, function: str) -> AetherCLError:
        return AetherCLError(function, self.last_error_code(), self.last_error())

    def check(self, function: str, *args) -> int:
        """Calls an int entry point and raises AetherCLError unless it returns exactly 1."""
        result = getattr(self.cdll, function)(*args)
        if result != 1:
            raise self.error(function)
        return result

    def check_handle(self, function: str, *args):
        """Calls a pointer/address entry point and raises AetherCLError when it returns 0/NULL."""
        result = getattr(self.cdll, function)(*args)
        if not result:
            raise self.error(function)
        return result

    def json_call(self, function: str, *args) -> str:
        """Calls a size_t (char* buffer, size_t capacity) JSON entry point and returns the text.
        The text may grow between sizing and filling (the kernel log, under other threads): then
        it asks again with the new size."""
        call = getattr(self.cdll, function)
        size = call(*args, None, 0)
        while True:
            if size == 0:
                raise self.error(function)
            buffer = ctypes.create_string_buffer(size + 1)
            full = call(*args, buffer, size + 1)
            if full == 0:
                raise self.error(function)
            if full <= size:
                return buffer.value.decode("utf-8")
            size = full

    def bytes_call(self, function: str, *args) -> bytes:
        """Calls a size_t (void* out, size_t capacity) entry point (NULL out sizes it) and returns
        the bytes."""
        size = getattr(self.cdll, function)(*args, None, 0)
        if size == 0:
            raise self.error(function)
        buffer = ctypes.create_string_buffer(size)
        written = getattr(self.cdll, function)(*args, buffer, size)
        if written != size:
            raise self.error(function)
        return buffer.raw
