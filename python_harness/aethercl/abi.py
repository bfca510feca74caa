"""The ABI manifest (abi/driver.abi) read at run time and turned into ctypes declarations."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence



class AetherclArg(ctypes.Structure):
    """struct aethercl_arg of the header: one argument of aethercl_launch."""
    _fields_ = [("kind", ctypes.c_int), ("size", ctypes.c_size_t), ("value", ctypes.c_void_p)]


# C type spelling in the manifest -> ctypes type. Anything else is an error, not a guess.
C_TYPES = {
    "void": None,
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "float": ctypes.c_float,
    "size_t": ctypes.c_size_t,
    "unsigned long long": ctypes.c_uint64,
    "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p,
    "char*": ctypes.c_char_p,
    "const char*": ctypes.c_char_p,
    "int*": ctypes.POINTER(ctypes.c_int),
    "const size_t*": ctypes.POINTER(ctypes.c_size_t),
    "const aethercl_arg*": ctypes.POINTER(AetherclArg),
}


@dataclass(frozen=True)
class Parameter:
    c_type: str
    name: str


@dataclass(frozen=True)
class Symbol:
    version: str
    return_type: str
    name: str
    parameters: tuple

    @property
    def restype(self):
        return C_TYPES[self.return_type]

    @property
    def argtypes(self) -> list:
        return [C_TYPES[p.c_type] for p in self.parameters]

    def prototype(self) -> str:
        params = ", ".join(f"{p.c_type} {p.name}" for p in self.parameters) or "void"
        return f"{self.return_type} {self.name}({params})"


def _parse_parameter(text: str) -> Parameter:
    text = " ".join(text.split())
    star = text.rfind("*")
    if star >= 0:
        return Parameter(text[: star + 1].replace(" *", "*"), text[star + 1 :].strip())
    c_type, _, name = text.rpartition(" ")
    return Parameter(c_type, name)


def parse_manifest(text: str) -> List[Symbol]:
    symbols = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        version, return_type, name, params = (field.strip() for field in line.split("|"))
        parameters = () if params == "void" else tuple(
            _parse_parameter(p) for p in params.split(","))
        symbols.append(Symbol(version, return_type, name, parameters))
    return symbols


def find_manifest(library_path: Optional[str] = None) -> Path:
    """AETHERCL_MANIFEST, else driver.abi next to the library, else the source tree's abi/."""
    candidates = []
    if os.environ.get("AETHERCL_MANIFEST"):
        candidates.append(Path(os.environ["AETHERCL_MANIFEST"]))
    if library_path:
        candidates.append(Path(library_path).resolve().parent / "driver.abi")
    candidates.append(Path(__file__).resolve().parents[2] / "abi" / "driver.abi")
    candidates.append(Path(__file__).resolve().parent / "driver.abi")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("the ABI manifest driver.abi was not found; tried "
                            + ", ".join(str(c) for c in candidates))


def load_manifest(library_path: Optional[str] = None) -> List[Symbol]:
    return parse_manifest(find_manifest(library_path).read_text())


def declare(library: ctypes.CDLL, symbols: Sequence[Symbol]) -> None:
    """Sets restype and argtypes of every manifest symbol; a missing symbol raises."""
    for symbol in symbols:
        function = getattr(library, symbol.name)
        function.restype = symbol.restype
        function.argtypes = symbol.argtypes
