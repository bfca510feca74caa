"""ctypes mirrors of the version-3 training-op descriptors and enums of include/aethercl/driver.h.
Each descriptor class fills struct_size itself; `make(**fields)` accepts Buffers, raw handles or
None for the pointer fields."""
from __future__ import annotations

import ctypes

from ._calls import pointer as handle_of

# enum aethercl_reduce_op
SUM, MEAN, MAX, MIN, ARGMAX, ARGMIN, NO_REDUCTION = range(7)
# enum aethercl_rng_distribution
RNG_BITS, RNG_UNIFORM, RNG_NORMAL = range(3)
# enum aethercl_unary_op
UNARY_OPS = ("relu", "leaky_relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "exp", "log",
             "sqrt", "rsqrt", "abs", "neg", "add_scalar", "sub_scalar", "rsub_scalar",
             "mul_scalar", "div_scalar", "rdiv_scalar", "max_scalar", "min_scalar", "pow_scalar")
UNARY = {name: code for code, name in enumerate(UNARY_OPS)}
# enum aethercl_binary_op
BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
BINARY = {name: code for code, name in enumerate(BINARY_OPS)}
# enum aethercl_norm_kind, aethercl_optimizer_kind, aethercl_pool_kind
NORM_LAYER, NORM_RMS = 0, 1
OPTIMIZER_SGD, OPTIMIZER_ADAMW = 0, 1
POOL_MAX, POOL_AVG = 0, 1

_P = ctypes.c_void_p


class _Descriptor(ctypes.Structure):
    """Base: struct_size is set on construction; pointer fields take Buffers or handles."""

    def __init__(self, **fields):
        super().__init__()
        self.struct_size = ctypes.sizeof(self)
        for name, value in fields.items():
            self.set(name, value)

    def set(self, name, value):
        kinds = dict((f[0], f[1]) for f in self._fields_)
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
    _fields_ = [("struct_size", ctypes.c_size_t), ("ndim", ctypes.c_int),
                ("shape_a", ctypes.c_int * 4), ("shape_b", ctypes.c_int * 4),
                ("a", _P), ("b", _P), ("c", _P)]


class IndexDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ndim", ctypes.c_int), ("axis", ctypes.c_int),
                ("shape_a", ctypes.c_int * 4), ("shape_b", ctypes.c_int * 4), ("x", _P),
                ("index", _P), ("y", _P)]


class NormDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int), ("rows", ctypes.c_int),
                ("cols", ctypes.c_int), ("eps", ctypes.c_float), ("x", _P), ("gamma", _P),
                ("beta", _P), ("y", _P), ("dy", _P), ("dx", _P), ("dgamma", _P),
                ("dbeta", _P)]


class BatchNormDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t), ("n", ctypes.c_int), ("channels", ctypes.c_int),
                ("spatial", ctypes.c_int), ("training", ctypes.c_int),
                ("momentum", ctypes.c_float), ("eps", ctypes.c_float), ("x", _P),
                ("gamma", _P), ("beta", _P), ("running_mean", _P), ("running_var", _P),
                ("save_mean", _P), ("save_rstd", _P), ("y", _P), ("dy", _P), ("dx", _P),
                ("dgamma", _P), ("dbeta", _P)]


class OptimizerDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int),
                ("count", ctypes.c_size_t), ("param", _P), ("grad", _P), ("state1", _P),
                ("state2", _P), ("lr", ctypes.c_float), ("weight_decay", ctypes.c_float),
                ("momentum", ctypes.c_float), ("dampening", ctypes.c_float),
                ("nesterov", ctypes.c_int), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
                ("eps", ctypes.c_float), ("step", ctypes.c_int)]


class CrossEntropyDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t), ("rows", ctypes.c_int),
                ("classes", ctypes.c_int), ("ignore_index", ctypes.c_int),
                ("label_smoothing", ctypes.c_float), ("reduction", ctypes.c_int),
                ("logits", _P), ("targets", _P), ("loss", _P), ("grad", _P)]


class Conv2dDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_int) for name in (
            "n", "c_in", "h", "w", "c_out", "kernel_h", "kernel_w", "stride_h", "stride_w",
            "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "compute")] + [
        (name, _P) for name in ("x", "weight", "bias", "y", "dy", "dx", "dweight", "dbias")]


class Pool2dDesc(_Descriptor):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_int) for name in (
            "kind", "n", "channels", "h", "w", "kernel_h", "kernel_w", "stride_h", "stride_w",
            "pad_h", "pad_w", "count_include_pad")] + [
        (name, _P) for name in ("x", "y", "indices", "dy", "dx")]


DESCRIPTORS = {"aethercl_broadcast_desc": BroadcastDesc, "aethercl_norm_desc": NormDesc,
               "aethercl_batchnorm_desc": BatchNormDesc,
               "aethercl_optimizer_desc": OptimizerDesc,
               "aethercl_cross_entropy_desc": CrossEntropyDesc,
               "aethercl_conv2d_desc": Conv2dDesc, "aethercl_pool2d_desc": Pool2dDesc}
