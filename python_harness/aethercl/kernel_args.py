"""Python values as aethercl_launch arguments: each checked against the kernel's parameters
(count and kind, with messages naming the mistake) and turned into an aethercl_arg array.

A Buffer is passed as a buffer; aethercl.Local(nbytes) as local memory; a NumPy scalar
(np.float32(2.0), np.uint32(n)) as its exact bytes; a plain Python int/float/bool is typed from the
kernel's argument info (the driver builds programs with -cl-kernel-arg-info), e.g. `uint n` takes
a Python int as a 4-byte unsigned value; a vector parameter (float4) takes a sequence of its lanes;
`bytes` are passed as they are."""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from .abi import AetherclArg
from .buffer import Buffer
from .errors import KernelArgumentError
from .structs import ARG_BUFFER, ARG_LOCAL, ARG_SCALAR

_SCALAR_TYPES = {"char": np.int8, "uchar": np.uint8, "unsigned char": np.uint8,
                 "short": np.int16, "ushort": np.uint16, "unsigned short": np.uint16,
                 "int": np.int32, "uint": np.uint32, "unsigned int": np.uint32,
                 "long": np.int64, "ulong": np.uint64, "unsigned long": np.uint64,
                 "float": np.float32, "double": np.float64, "half": np.float16,
                 "bool": np.uint8}
_KIND_WORDS = {"buffer": "a buffer", "scalar": "a scalar", "local": "local memory"}


class Local:
    """Local (work-group shared) memory of `nbytes` bytes for a `__local T*` parameter;
    `Local(n, np.float32)` sizes it for n elements."""

    def __init__(self, count: int, dtype=None):
        count = int(count)
        self.nbytes = count * (np.dtype(dtype).itemsize if dtype is not None else 1)
        if self.nbytes <= 0:
            raise ValueError("local memory needs at least 1 byte")

    def __repr__(self) -> str:
        return f"Local({self.nbytes} bytes)"


def numpy_type(type_name: str, address_bits: int):
    """(NumPy scalar type, lanes, padded lanes) of an OpenCL value type, or None when unknown."""
    name = " ".join(w for w in type_name.split() if w not in ("const", "volatile", "restrict"))
    if name in ("size_t", "ptrdiff_t", "intptr_t", "uintptr_t"):
        unsigned = name in ("size_t", "uintptr_t")
        scalar = {(64, True): np.uint64, (64, False): np.int64, (32, True): np.uint32,
                  (32, False): np.int32}[(address_bits, unsigned)]
        return scalar, 1, 1
    digits = len(name) - len(name.rstrip("0123456789"))
    lanes = int(name[-digits:]) if digits else 1
    base = name[:-digits] if digits else name
    if base not in _SCALAR_TYPES or lanes not in (1, 2, 3, 4, 8, 16):
        return None
    return _SCALAR_TYPES[base], lanes, 4 if lanes == 3 else lanes


def describe(value) -> str:
    """What the caller passed, in the words of an error message ("a float", "a Buffer")."""
    if value is None:
        return "None"
    if isinstance(value, Buffer):
        return "a Buffer"
    if isinstance(value, Local):
        return f"local memory ({value!r})"
    if isinstance(value, np.ndarray):
        return f"a NumPy array ({value.dtype}, shape {value.shape})"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


class ArgumentChecker:
    """The parameters of one kernel (from aethercl_kernel_info) and the conversion of a call's
    arguments; refusals are KernelArgumentError (a TypeError: wrong count, kind or lane count, a
    type the kernel does not report) or OverflowError (a value that does not fit its type). Kinds
    are checked where OpenCL reported them ("arg_info"); the driver checks the rest."""

    def __init__(self, info: Dict[str, Any], address_bits: int):
        self.name = info["name"]
        self.count = int(info["num_args"])
        self.params = list(info.get("args") or [])
        self.address_bits = address_bits
        self._types: Dict[int, Any] = {}

    def _param(self, index: int) -> Dict[str, Any]:
        return self.params[index] if index < len(self.params) else {}

    def _where(self, index: int) -> str:
        return f"argument {index} of '{self.name}'"

    def _kind_of(self, value) -> str:
        if isinstance(value, Buffer):
            return "buffer"
        return "local" if isinstance(value, Local) else "scalar"

    def check(self, args: Sequence[Any]) -> None:
        if len(args) != self.count:
            raise KernelArgumentError(f"kernel '{self.name}' takes {self.count} argument"
                                      f"{'' if self.count == 1 else 's'}, got {len(args)}")
        for i, value in enumerate(args):
            param = self._param(i)
            expected, type_name = param.get("kind"), param.get("type")
            if value is None:
                raise KernelArgumentError(f"{self._where(i)} is None")
            if expected not in _KIND_WORDS or self._kind_of(value) == expected:
                continue
            hint = {"buffer": "; copy host data to the device first (dev.from_numpy)"
                              if isinstance(value, np.ndarray) else "",
                    "local": "; pass aethercl.Local(nbytes)"}.get(expected, "")
            raise KernelArgumentError(f"{self._where(i)} is {_KIND_WORDS[expected]} "
                                      f"({type_name}), got {describe(value)}{hint}")

    def _typed(self, index: int):
        """numpy_type of parameter index, with the integer range of one-lane integer types (a
        launch converts its scalars often: the lookups are cached)."""
        cached = self._types.get(index)
        if cached is None:
            typed = numpy_type(self._param(index).get("type") or "", self.address_bits)
            bounds = None
            if typed is not None and typed[1] == 1 and np.issubdtype(np.dtype(typed[0]),
                                                                     np.integer):
                info = np.iinfo(typed[0])
                bounds = (int(info.min), int(info.max), np.dtype(typed[0]).itemsize)
            cached = self._types[index] = (typed, bounds)
        return cached

    def scalar_bytes(self, index: int, value) -> bytes:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, np.generic):
            return value.tobytes()
        typed, bounds = self._typed(index)
        if bounds is not None and type(value) is int and bounds[0] <= value <= bounds[1]:
            return value.to_bytes(bounds[2], sys.byteorder, signed=bounds[0] < 0)
        type_name = self._param(index).get("type")
        if typed is None:
            raise KernelArgumentError(
                f"{self._where(index)}: the kernel does not report its type ({type_name!r}), so "
                f"{describe(value)} cannot be sized; pass a NumPy scalar such as "
                f"np.float32(...) or bytes")
        scalar, lanes, padded = typed
        try:
            values = np.atleast_1d(np.asarray(value))
        except (TypeError, ValueError):
            raise KernelArgumentError(f"{self._where(index)} is a {type_name}, got "
                                      f"{describe(value)}") from None
        if values.size != lanes or values.dtype.kind not in "biuf":
            raise KernelArgumentError(f"{self._where(index)} is a {type_name}: give {lanes} "
                                      f"number{'' if lanes == 1 else 's'}, got "
                                      f"{describe(value)}")
        if np.issubdtype(np.dtype(scalar), np.integer):
            info = np.iinfo(scalar)
            if np.any(values != np.floor(values)) or values.min() < info.min or \
                    values.max() > info.max:
                raise OverflowError(f"{self._where(index)}: {value!r} does not fit a "
                                    f"{type_name}")
        lanes_array = np.zeros(padded, dtype=scalar)
        lanes_array[:lanes] = values.astype(scalar)
        return lanes_array.tobytes()

    def marshal(self, args: Sequence[Any]) -> Tuple[ctypes.Array, List[Any]]:
        """The aethercl_arg array and the scalar payloads it points to (keep them alive)."""
        self.check(args)
        array = (AetherclArg * max(1, len(args)))()
        keep: List[Any] = []
        for i, value in enumerate(args):
            if isinstance(value, Buffer):
                array[i] = AetherclArg(ARG_BUFFER, 0, value._require_alive())
            elif isinstance(value, Local):
                array[i] = AetherclArg(ARG_LOCAL, value.nbytes, None)
            else:
                payload = self.scalar_bytes(i, value)
                data = (ctypes.c_char * max(1, len(payload))).from_buffer_copy(
                    payload or b"\0")
                keep.append(data)
                array[i] = AetherclArg(ARG_SCALAR, len(payload), ctypes.addressof(data))
        return array, keep


__all__ = ["ARG_BUFFER", "ARG_LOCAL", "ARG_SCALAR", "ArgumentChecker", "Local", "describe",
           "numpy_type"]
