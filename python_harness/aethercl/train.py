"""Convenience layer over the generated wrappers of the version-3 training ops (aethercl.ops):
op codes by name ("relu", "mul"), defaults for stream (None: the calling thread's current stream
of the device, through streams.resolve; the generated wrappers pass None on as C's NULL, the
default stream) and rarely used arguments, a broadcast descriptor built from two NumPy-style
shapes, and Python lists for the clipping arrays. Buffer arguments take Buffers, raw handles or
None; descriptors are the ctypes classes of train_types."""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence

from . import ops as _ops
from . import train_types as T
from ._calls import DeviceLike, target
from ._calls import pointer as handle_of
from .streams import resolve

_h = handle_of


def _stream(dev: DeviceLike, stream) -> Optional[int]:
    """The stream token of a call on dev: stream's own, else the thread's current stream."""
    return resolve(*target(dev), stream)


def _status(dev: DeviceLike, c_name: str, *args) -> None:
    """Calls the generated wrapper of c_name (ops.ENTRY_POINTS) with the C arguments after gpu_index."""
    python_name = _BY_C_NAME[c_name]
    getattr(_ops, python_name)(dev, *args)


_BY_C_NAME = {c: py for py, c in _ops.ENTRY_POINTS.items()}


def _wraps(c_name: str):
    def mark(function):
        function.c_name = c_name
        return function
    return mark


def _desc_address(desc) -> int:
    if isinstance(desc, T._Descriptor):
        return desc.address
    if desc is None:
        return None
    return int(desc)


@_wraps("aethercl_rng_fill")
def rng_fill(dev: DeviceLike, buffer, count: int, distribution: int, a: float = 0.0,
             b: float = 1.0, seed: int = 0, offset: int = 0, stream=None) -> None:
    _status(dev, "aethercl_rng_fill", _h(buffer), int(count), int(distribution), float(a),
            float(b), int(seed), int(offset), _stream(dev, stream))


@_wraps("aethercl_dropout")
def dropout(dev: DeviceLike, x, y, mask, count: int, p: float, seed: int, offset: int,
            stream=None) -> None:
    _status(dev, "aethercl_dropout", _h(x), _h(y), _h(mask), int(count), float(p), int(seed),
            int(offset), _stream(dev, stream))


@_wraps("aethercl_dropout_backward")
def dropout_backward(dev: DeviceLike, dy, mask, dx, count: int, p: float, stream=None) -> None:
    _status(dev, "aethercl_dropout_backward", _h(dy), _h(mask), _h(dx), int(count), float(p),
            _stream(dev, stream))


def _op(table, op):
    return table[op] if isinstance(op, str) else int(op)


@_wraps("aethercl_unary")
def unary(dev: DeviceLike, op, x, y, count: int, alpha: float = 0.0, stream=None) -> None:
    _status(dev, "aethercl_unary", _op(T.UNARY, op), _h(x), _h(y), int(count), float(alpha),
            _stream(dev, stream))


@_wraps("aethercl_unary_backward")
def unary_backward(dev: DeviceLike, op, x, dy, dx, count: int, alpha: float = 0.0,
                   stream=None) -> None:
    _status(dev, "aethercl_unary_backward", _op(T.UNARY, op), _h(x), _h(dy), _h(dx), int(count),
            float(alpha), _stream(dev, stream))


def broadcast_desc(shape_a: Sequence[int], shape_b: Sequence[int], a=None, b=None,
                   c=None) -> T.BroadcastDesc:
    """Pads the shorter shape with leading 1s (NumPy's rule) and fills the descriptor."""
    ndim = max(len(shape_a), len(shape_b), 1)
    pad = lambda s: [1] * (ndim - len(s)) + [int(v) for v in s]  # noqa: E731
    shape_a, shape_b = pad(shape_a), pad(shape_b)
    return T.BroadcastDesc(ndim=ndim, shape_a=shape_a + [1] * (4 - ndim),
                           shape_b=shape_b + [1] * (4 - ndim), a=a, b=b, c=c)


@_wraps("aethercl_binary")
def binary(dev: DeviceLike, op, desc, stream=None) -> None:
    _status(dev, "aethercl_binary", _op(T.BINARY, op), _desc_address(desc), _stream(dev, stream))


@_wraps("aethercl_binary_backward")
def binary_backward(dev: DeviceLike, op, desc, dc, da, db, stream=None) -> None:
    _status(dev, "aethercl_binary_backward", _op(T.BINARY, op), _desc_address(desc), _h(dc),
            _h(da), _h(db), _stream(dev, stream))


def _shape_array(shape):
    if shape is None:
        return None
    return (ctypes.c_int * max(len(shape), 1))(*[int(s) for s in shape])


@_wraps("aethercl_reduce")
def reduce(dev: DeviceLike, op: int, x, y, shape: Optional[Sequence[int]], axis: int,
           stream=None, ndim: Optional[int] = None) -> None:
    ndim = len(shape) if ndim is None else ndim
    _status(dev, "aethercl_reduce", int(op), _h(x), _h(y), int(ndim), _shape_array(shape),
            int(axis), _stream(dev, stream))


@_wraps("aethercl_reduce_backward")
def reduce_backward(dev: DeviceLike, op: int, x, dy, dx, shape: Optional[Sequence[int]],
                    axis: int, stream=None, ndim: Optional[int] = None) -> None:
    ndim = len(shape) if ndim is None else ndim
    _status(dev, "aethercl_reduce_backward", int(op), _h(x), _h(dy), _h(dx), int(ndim),
            _shape_array(shape), int(axis), _stream(dev, stream))


def _descriptor_call(c_name: str):
    def call(dev: DeviceLike, desc, stream=None) -> None:
        _status(dev, c_name, _desc_address(desc), _stream(dev, stream))
    call.__name__ = c_name[len("aethercl_"):]
    call.__doc__ = f"{c_name}(gpu_index, desc, stream)"
    return _wraps(c_name)(call)


norm_forward = _descriptor_call("aethercl_norm_forward")
norm_backward = _descriptor_call("aethercl_norm_backward")
batchnorm_forward = _descriptor_call("aethercl_batchnorm_forward")
batchnorm_backward = _descriptor_call("aethercl_batchnorm_backward")
optimizer_step = _descriptor_call("aethercl_optimizer_step")
cross_entropy = _descriptor_call("aethercl_cross_entropy")

def optimizer_desc_array(descs: Sequence["T.OptimizerDesc"]) -> ctypes.Array:
    """A contiguous C array of the descriptors (copies), as aethercl_optimizer_step_multi reads."""
    array = (T.OptimizerDesc * max(len(descs), 1))()
    for slot, desc in zip(array, descs):
        ctypes.pointer(slot)[0] = desc
    return array


@_wraps("aethercl_optimizer_step_multi")
def optimizer_step_multi(dev: DeviceLike, descs, stream=None) -> None:
    """aethercl_optimizer_step_multi over a sequence of OptimizerDesc (or an array made by
    optimizer_desc_array)."""
    array = descs if isinstance(descs, ctypes.Array) else optimizer_desc_array(descs)
    count = len(array) if isinstance(descs, ctypes.Array) else len(descs)
    _status(dev, "aethercl_optimizer_step_multi", ctypes.addressof(array) if count else None,
            count, _stream(dev, stream))
conv2d_forward = _descriptor_call("aethercl_conv2d_forward")
conv2d_backward = _descriptor_call("aethercl_conv2d_backward")
pool2d_forward = _descriptor_call("aethercl_pool2d_forward")
pool2d_backward = _descriptor_call("aethercl_pool2d_backward")
gather = _descriptor_call("aethercl_gather")
scatter_add = _descriptor_call("aethercl_scatter_add")
attention_forward = _descriptor_call("aethercl_attention_forward")
attention_backward = _descriptor_call("aethercl_attention_backward")


def index_desc(shape_x: Sequence[int], shape_index: Sequence[int], axis: int, x=None, index=None,
               y=None) -> T.IndexDesc:
    """The descriptor of gather / scatter_add: x has shape_x, index and y have shape_index (equal
    to shape_x but along axis)."""
    ndim = len(shape_x)
    pad = lambda s: [int(v) for v in s] + [1] * (4 - len(s))  # noqa: E731
    return T.IndexDesc(ndim=ndim, axis=int(axis), shape_a=pad(shape_x), shape_b=pad(shape_index),
                       x=x, index=index, y=y)


@_wraps("aethercl_clip_grad_norm")
def clip_grad_norm(dev: DeviceLike, grads: Sequence, counts: Sequence[int], max_norm: float,
                   total_norm=None, stream=None) -> None:
    n = len(grads)
    grad_array = (ctypes.c_void_p * max(n, 1))(*[handle_of(g) for g in grads])
    count_array = (ctypes.c_size_t * max(n, 1))(*[int(c) for c in counts])
    _status(dev, "aethercl_clip_grad_norm", n, grad_array, count_array, float(max_norm),
            _h(total_norm), _stream(dev, stream))


@_wraps("aethercl_mse_loss")
def mse_loss(dev: DeviceLike, pred, target, loss, grad, count: int, reduction: int = T.MEAN,
             stream=None) -> None:
    _status(dev, "aethercl_mse_loss", _h(pred), _h(target), _h(loss), _h(grad), int(count),
            int(reduction), _stream(dev, stream))


__all__ = [name for name in dir() if not name.startswith("_") and name not in (
    "annotations", "ctypes", "Optional", "Sequence", "DeviceLike", "T", "handle_of", "resolve",
    "target")]
