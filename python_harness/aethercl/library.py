"""Finding and loading the driver library, with every manifest symbol declared and failures
raised as exceptions of aethercl.errors."""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

from . import abi
from .errors import AetherCLError, error_for

PACKAGE_DIR = Path(__file__).resolve().parent
# A checkout: python_harness/aethercl -> the repository root.
CHECKOUT_ROOT = PACKAGE_DIR.parents[1]

if sys.platform == "win32":
    LIBRARY_NAMES = ("driver.dll",)
else:
    # The build folder has driver.so (a link); the pip package carries the real file under its
    # SONAME (wheels cannot hold links).
    LIBRARY_NAMES = ("driver.so", "libaethercl.so.0", "driver.dll")

    @property
    def status(self):
        """The code as an aethercl.status.Status member (the plain int for an unknown code)."""
        return status.as_status(self.code)


def candidate_paths() -> List[Path]:
    """Where the library is looked for, in order: AETHERCL_LIBRARY, AETHERCL_BUILD_DIR, this
    package's own folder (an installed package), the checkout's build/, ./build."""
    paths: List[Path] = []
    if os.environ.get("AETHERCL_LIBRARY"):
        paths.append(Path(os.environ["AETHERCL_LIBRARY"]))
    directories: List[Path] = []
    if os.environ.get("AETHERCL_BUILD_DIR"):
        directories.append(Path(os.environ["AETHERCL_BUILD_DIR"]))
    directories += [PACKAGE_DIR, CHECKOUT_ROOT / "build", Path.cwd() / "build"]
    for directory in directories:
        paths.extend(directory / name for name in LIBRARY_NAMES)
    return paths


def find_library() -> Path:
    """The first existing candidate_paths() entry; FileNotFoundError listing them otherwise."""
    for path in candidate_paths():
        if path.is_file():
            return path
    raise FileNotFoundError(
        "the AetherCL library was not found; `pip install .` in the checkout, build it with "
        "`tools/aethercl build`, or set AETHERCL_LIBRARY. Tried: "
        + ", ".join(map(str, candidate_paths())))


class Library:
    """The loaded driver: raw ctypes functions (declared from the manifest) plus error helpers.
    Attribute access falls through to the ctypes library (`lib.initialize_gpu(0)`)."""

    def __init__(self, path: Optional[os.PathLike] = None) -> None:
        self.path: Path = Path(path) if path else find_library()
        self.cdll = ctypes.CDLL(str(self.path))
        self.symbols: List[abi.Symbol] = abi.load_manifest(str(self.path))
        abi.declare(self.cdll, self.symbols)
        self._declared = {symbol.name for symbol in self.symbols}

    def _function(self, name: str) -> Any:
        """The ctypes function of a manifest symbol. A name the manifest lacks is refused even when
        the library exports it: ctypes would pass its pointers as 32-bit ints (a stale driver.abi
        beside a newer library crashed that way)."""
        if name not in self._declared:
            raise AttributeError(f"{name} is not in the ABI manifest read for {self.path} (a "
                                 f"driver.abi older than the library?)")
        return getattr(self.cdll, name)

    def has(self, name: str) -> bool:
        """Whether the manifest declares `name` and the loaded library exports it (an older
        library lacks the newer functions)."""
        return name in self._declared and hasattr(self.cdll, name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._function(name)

    def last_error(self) -> str:
        """aethercl_last_error() of this thread, decoded."""
        return self.cdll.aethercl_last_error().decode("utf-8", "replace")

    def last_error_code(self) -> int:
        """aethercl_last_error_code() of this thread."""
        return int(self.cdll.aethercl_last_error_code())

    def error(self, function: str) -> AetherCLError:
        """The exception for this thread's last failure (its class follows the status code)."""
        return error_for(function, self.last_error_code(), self.last_error())

    def check(self, function: str, *args: Any) -> int:
        """Calls an int entry point and raises AetherCLError unless it returns exactly 1."""
        result = self._function(function)(*args)
        if result != 1:
            raise self.error(function)
        return result

    def check_handle(self, function: str, *args: Any) -> Any:
        """Calls a pointer/address entry point and raises AetherCLError when it returns 0/NULL."""
        result = self._function(function)(*args)
        if not result:
            raise self.error(function)
        return result

    def json_call(self, function: str, *args: Any) -> str:
        """Calls a size_t (char* buffer, size_t capacity) JSON entry point and returns the text.
        The text may grow between sizing and filling (the kernel log, under other threads): then
        it asks again with the new size."""
        call = self._function(function)
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

    def bytes_call(self, function: str, *args: Any) -> bytes:
        """Calls a size_t (void* out, size_t capacity) entry point (NULL out sizes it) and returns
        the bytes."""
        size = self._function(function)(*args, None, 0)
        if size == 0:
            raise self.error(function)
        buffer = ctypes.create_string_buffer(size)
        written = self._function(function)(*args, buffer, size)
        if written != size:
            raise self.error(function)
        return buffer.raw

    def __repr__(self) -> str:
        return f"Library({str(getattr(self, 'path', '?'))!r})"


__all__ = ["AetherCLError", "LIBRARY_NAMES", "Library", "candidate_paths", "find_library"]
