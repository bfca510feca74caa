"""Call conventions of the generated aethercl.ops wrappers: which library and gpu_index a device
argument means, and how Python values (Buffers, NumPy arrays, sequences, strings, ctypes objects)
become ctypes arguments. Hand-written; tools/gen_abi.py picks one converter per C parameter type."""
from __future__ import annotations

import ctypes
import os
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from .device import Buffer, Device, default_library
from .library import Library

# What each kind of C parameter accepts (the annotations of ops.py and ops.pyi).
DeviceLike = Union[Device, int]
Pointer = Union[Buffer, np.ndarray, ctypes._SimpleCData, ctypes.Array, ctypes.Structure, int, None]
PointerArray = Union[Sequence[Pointer], ctypes.Array, ctypes._Pointer, None]
ScalarArray = Union[Sequence[int], Sequence[float], np.ndarray, ctypes._SimpleCData, ctypes.Array,
                    ctypes._Pointer, None]
StructPointer = Union[ctypes.Structure, ctypes.Array, int, None]
TextArg = Union[str, bytes, os.PathLike, None]
CharBuffer = Union[ctypes.Array, bytes, None]


def target(dev: DeviceLike) -> Tuple[Library, int]:
    """(library, gpu_index) of a Device, or of an int index on the default library."""
    if isinstance(dev, Device):
        return dev.lib, dev.index
    return default_library(), int(dev)


def library(dev: DeviceLike) -> Library:
    """The library a call without gpu_index goes to (the Device's, or the default one)."""
    return dev.lib if isinstance(dev, Device) else default_library()


def index_of(dev: DeviceLike) -> int:
    """A device-index argument other than the first (e.g. the source of a peer copy)."""
    return dev.index if isinstance(dev, Device) else int(dev)


def pointer(value) -> Optional[int]:
    """A void* argument: a Buffer's handle, a raw handle or address (int), a NumPy array's data,
    a ctypes object's address (a c_void_p's value), None for NULL. Buffers and tokens are device
    handles, arrays and ctypes buffers host memory: the C function says which it expects."""
    if value is None or type(value) is int:
        return value
    if isinstance(value, Buffer):
        return value._require_alive()
    if isinstance(value, np.ndarray):
        return value.ctypes.data
    if isinstance(value, ctypes.c_void_p):
        return value.value
    if isinstance(value, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure)):
        return ctypes.addressof(value)
    if isinstance(value, (bytes, bytearray)):
        raise TypeError("pass a NumPy array or ctypes buffer, not bytes")
    return int(value)


def pointer_array(value):
    """A `void* const*` argument (one handle or token per device or item): a sequence of what
    pointer() accepts becomes a c_void_p array; a ctypes array or pointer, or None, passes as is."""
    if value is None or isinstance(value, (ctypes.Array, ctypes._Pointer)):
        return value
    items = [pointer(item) for item in value]
    return (ctypes.c_void_p * len(items))(*items)


def scalar_array(value, element):
    """A pointer-to-scalar argument (`const size_t*`, `int*`, `float*`): a sequence becomes a new
    ctypes array of `element`; a NumPy array of that element type passes its data; a ctypes
    scalar (an output cell, passed by reference), array or pointer, or None, passes as is."""
    if value is None or isinstance(value, (element, ctypes.Array, ctypes._Pointer)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype != np.dtype(element) or not value.flags.c_contiguous:
            raise TypeError(f"expected a C-contiguous {np.dtype(element)} array, "
                            f"got {value.dtype}")
        return value.ctypes.data_as(ctypes.POINTER(element))
    return (element * len(value))(*value)


def struct_pointer(value):
    """A pointer-to-struct argument (`const aethercl_gemm_desc*`): a ctypes Structure is passed
    by reference; a ctypes array of structures, an address (int) or None passes as is."""
    if isinstance(value, ctypes.Structure):
        return ctypes.byref(value)
    return value


def text(value) -> Optional[bytes]:
    """A `const char*` argument: str or path (UTF-8), bytes as is, None for NULL."""
    if value is None or isinstance(value, bytes):
        return value
    return os.fspath(value).encode("utf-8")


def text_result(value: Optional[bytes]) -> Optional[str]:
    return value.decode("utf-8", "replace") if value is not None else None


def checked_void(lib: Library, c_name: str, *args) -> None:
    """Calls a void entry point and raises AetherCLError if it recorded an error."""
    getattr(lib, c_name)(*args)
    if lib.last_error_code() != 0:
        raise lib.error(c_name)


def nullable(lib: Library, c_name: str, *args) -> Optional[int]:
    """Calls a pointer entry point whose NULL can be a valid answer; raises only when it recorded
    an error."""
    result = getattr(lib, c_name)(*args)
    if lib.last_error_code() != 0:
        raise lib.error(c_name)
    return result
