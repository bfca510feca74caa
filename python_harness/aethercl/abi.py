"""The ABI manifest (abi/driver.abi) read at run time and turned into ctypes declarations."""
from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence



class AetherclArg(ctypes.Structure):
    """struct aethercl_arg of the header: one argument of aethercl_launch (passed by address)."""
    _fields_ = [("kind", ctypes.c_int), ("size", ctypes.c_size_t), ("value", ctypes.c_void_p)]


# C scalar spellings in the manifest -> ctypes types.
SCALARS = {
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "size_t": ctypes.c_size_t,
}
_STRUCT_NAME = re.compile(r"[A-Za-z_]\w*")


def _spelling(c_type: str) -> str:
    """One spelling per type: single spaces, '*' glued to what it follows ("void * const *" ->
    "void* const*")."""
    return " ".join(c_type.split()).replace(" *", "*")


def ctype_of(c_type: str):
    """The ctypes type of a manifest C type: None for void; scalars; char pointers as c_char_p;
    void pointers as c_void_p; pointers to scalars as POINTER(scalar); pointers to pointers (token
    and buffer arrays such as `void* const*`) as POINTER(c_void_p); pointers to a struct of the
    header (`const aethercl_gemm_desc*`) as c_void_p (passed by address). Anything else raises
    ValueError: an unknown type is an error, not a guess."""
    spelling = _spelling(c_type)
    if spelling == "void":
        return None
    if spelling in SCALARS:
        return SCALARS[spelling]
    if spelling.endswith("*"):
        pointee = spelling[:-1]
        if pointee.endswith(" const"):       # a const pointer: same ctypes type
            pointee = pointee[: -len(" const")]
        if pointee.startswith("const "):
            pointee = pointee[len("const "):]
        if pointee == "char":
            return ctypes.c_char_p
        if pointee == "void":
            return ctypes.c_void_p
        if pointee.endswith("*"):
            return ctypes.POINTER(ctypes.c_void_p)
        if pointee in SCALARS:
            return ctypes.POINTER(SCALARS[pointee])
        if _STRUCT_NAME.fullmatch(pointee):
            return ctypes.c_void_p
    raise ValueError(f"the ABI manifest uses C type {c_type!r}, which has no ctypes mapping")


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
        return ctype_of(self.return_type)

    @property
    def argtypes(self) -> list:
        return [ctype_of(p.c_type) for p in self.parameters]

    def prototype(self) -> str:
        params = ", ".join(f"{p.c_type} {p.name}" for p in self.parameters) or "void"
        return f"{self.return_type} {self.name}({params})"


def _parse_parameter(text: str) -> Parameter:
    text = " ".join(text.split())
    star = text.rfind("*")
    if star >= 0:
        return Parameter(_spelling(text[: star + 1]), text[star + 1 :].strip())
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
