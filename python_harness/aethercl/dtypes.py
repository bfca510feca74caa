"""Element types of typed memory: NumPy dtypes <-> the driver's aethercl_dtype codes, and bfloat16.

NumPy has no bfloat16, so `aethercl.bfloat16` stands for it: a bf16 Buffer stores 16-bit patterns
(the top half of a float32), `to_numpy()` widens them to float32 (exactly), `to_numpy(np.uint16)`
returns the raw patterns, and `Buffer.astype(aethercl.bfloat16)` / `Device.buffer(data,
dtype=aethercl.bfloat16)` round float data to bf16 on the device (nearest even)."""
from __future__ import annotations

from typing import Union

import numpy as np

from .structs import BF16, F16, F32, F64, I8, I32, I64, U8  # noqa: F401 (aethercl_dtype)


class BFloat16Type:
    """The bfloat16 element type (a stand-in for the dtype NumPy lacks)."""
    name = "bfloat16"
    itemsize = 2
    storage = np.dtype(np.uint16)

    def __repr__(self) -> str:
        return "aethercl.bfloat16"

    def __eq__(self, other) -> bool:
        return isinstance(other, BFloat16Type) or other in ("bfloat16", "bf16")

    def __hash__(self) -> int:
        return hash("bfloat16")


bfloat16 = BFloat16Type()
DType = Union[np.dtype, BFloat16Type]

_CODES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(np.float64): F64,
          np.dtype(np.int32): I32, np.dtype(np.int64): I64, np.dtype(np.int8): I8,
          np.dtype(np.uint8): U8}
NAMES = {F32: "f32", F16: "f16", BF16: "bf16", F64: "f64", I32: "i32", I64: "i64", I8: "i8",
         U8: "u8"}


def normalize(dtype) -> DType:
    """A NumPy dtype, or `bfloat16` for "bfloat16"/"bf16"/aethercl.bfloat16."""
    if isinstance(dtype, BFloat16Type) or (isinstance(dtype, str) and dtype in ("bfloat16", "bf16")):
        return bfloat16
    return np.dtype(dtype)


def element_type(dtype) -> DType:
    """normalize(dtype) for a type a buffer can hold: a float of 2, 4 or 8 bytes, bfloat16, an
    integer of 1 to 8 bytes, or bool (one byte; OpenCL C reads it as uchar). Others (complex,
    float128, strings, objects, records, dates) raise TypeError where the buffer is made, as
    OpenCL has no such element type."""
    dtype = normalize(dtype)
    if dtype is bfloat16 or (dtype.kind == "f" and dtype.itemsize in (2, 4, 8)) or \
            (dtype.kind in "iu" and dtype.itemsize <= 8) or dtype.kind == "b":
        return dtype
    hint = " (store complex values as pairs of floats: array.view(np.float32))" \
        if dtype.kind == "c" else ""
    raise TypeError(f"a buffer cannot hold {dtype}: element types are float16/32/64, bfloat16, "
                    f"(u)int8/16/32/64 and bool{hint}")


def code_of(dtype) -> int:
    """The aethercl_dtype code; ValueError for a type the driver does not know."""
    dtype = normalize(dtype)
    if dtype is bfloat16:
        return BF16
    try:
        return _CODES[dtype]
    except KeyError:
        raise ValueError(f"{dtype} is not a driver dtype (float32, float16, bfloat16, float64, "
                         f"int32, int64, int8, uint8)") from None


def has_code(dtype) -> bool:
    try:
        code_of(dtype)
        return True
    except (TypeError, ValueError):
        return False


def storage_dtype(dtype) -> np.dtype:
    """The NumPy dtype whose bytes a buffer of `dtype` holds (uint16 for bfloat16)."""
    dtype = normalize(dtype)
    return bfloat16.storage if dtype is bfloat16 else dtype


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Exact widening of bf16 patterns to float32."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


__all__ = ["BF16", "BFloat16Type", "F16", "F32", "F64", "I32", "I64", "I8", "NAMES", "U8",
           "bf16_bits_to_float32", "bfloat16", "code_of", "element_type", "has_code", "normalize",
           "storage_dtype"]
