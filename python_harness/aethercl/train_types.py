"""The version-3 training-op descriptors and enums of include/aethercl/driver.h, their layouts and
codes from the generated aethercl.structs. Each descriptor class fills struct_size itself;
`make(**fields)` accepts Buffers, raw handles or None for the pointer fields."""
from __future__ import annotations

import ctypes
import functools

from . import structs
from ._calls import pointer as handle_of
from .structs import (ARGMAX, ARGMIN, MAX, MEAN, MIN, NO_REDUCTION, NORM_LAYER,  # noqa: F401
                      NORM_RMS, OPTIMIZER_ADAMW, OPTIMIZER_SGD, POOL_AVG, POOL_MAX, RNG_BITS,
                      RNG_NORMAL, RNG_UNIFORM, SUM)


def _codes(enum: str, prefix: str) -> dict:
    """{"relu": 0, ...}: an enum of the header by lower-case name, in code order."""
    values = structs.ENUMS[enum]
    return {name[len(prefix):].lower(): values[name] for name in sorted(values, key=values.get)}


UNARY = _codes("aethercl_unary_op", "UNARY_")
UNARY_OPS = tuple(UNARY)
BINARY = _codes("aethercl_binary_op", "BINARY_")
BINARY_OPS = tuple(BINARY)

_P = ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def _field_kinds(cls) -> dict:
    """{field name: ctypes type} of a descriptor class (set() runs per field of every call)."""
    return {f[0]: f[1] for f in cls._fields_}


class _Descriptor(ctypes.Structure):
    """Base: struct_size is set on construction; pointer fields take Buffers or handles."""

    def __init__(self, **fields):
        super().__init__()
        self.struct_size = ctypes.sizeof(self)
        for name, value in fields.items():
            self.set(name, value)

    def set(self, name, value):
        kinds = _field_kinds(type(self))
        if name not in kinds:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        if kinds[name] is _P:
            value = handle_of(value)
        elif isinstance(getattr(self, name), ctypes.Array):
            value = (kinds[name]._type_ * kinds[name]._length_)(*value)
        setattr(self, name, value)
        return self

    @property
    def address(self) -> int:
        return ctypes.addressof(self)


class BroadcastDesc(_Descriptor):
    _fields_ = structs.BroadcastDesc._fields_


class IndexDesc(_Descriptor):
    _fields_ = structs.IndexDesc._fields_


class NormDesc(_Descriptor):
    _fields_ = structs.NormDesc._fields_


class BatchNormDesc(_Descriptor):
    _fields_ = structs.BatchNormDesc._fields_


class OptimizerDesc(_Descriptor):
    _fields_ = structs.OptimizerDesc._fields_


class CrossEntropyDesc(_Descriptor):
    _fields_ = structs.CrossEntropyDesc._fields_


class Conv2dDesc(_Descriptor):
    _fields_ = structs.Conv2dDesc._fields_


class Pool2dDesc(_Descriptor):
    _fields_ = structs.Pool2dDesc._fields_


class AttentionDesc(_Descriptor):
    _fields_ = structs.AttentionDesc._fields_


DESCRIPTORS = {"aethercl_broadcast_desc": BroadcastDesc, "aethercl_norm_desc": NormDesc,
               "aethercl_batchnorm_desc": BatchNormDesc,
               "aethercl_optimizer_desc": OptimizerDesc,
               "aethercl_cross_entropy_desc": CrossEntropyDesc,
               "aethercl_conv2d_desc": Conv2dDesc, "aethercl_pool2d_desc": Pool2dDesc,
               "aethercl_attention_desc": AttentionDesc}
