"""OCL-LLM frontend on the AetherCL driver: GPUBuffer, OclTensor with autograd, layers, SimpleModel,
AdamOptimizer, TinyTokenizer, GPU cross entropy, checkpoints and the training command line.

Written from the OCL-LLM frontend's documented interface and the calls of docs/ABI.md §7. Unlike the
original frontend the autograd graph holds strong references and backward walks it in topological
order, so every parameter trains and every backward entry point runs. Everything in a training step
stays on the device except the token ids going up and the per-row losses coming back.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from aethercl import AetherCLError, Device, Library, ops  # noqa: E402

FP_TYPE = np.float32
IDX_TYPE = np.int32
BUNDLED_CORPUS = HERE / "data" / "corpus.txt"
CHECKPOINT_FORMAT = "ocl-llm-aethercl/1"

DEFAULT_CONFIG: Dict[str, Any] = {
    # model (docs/ABI.md §7.6)
    "max_len": 64, "batch_size": 16, "embed_dim": 16, "num_heads": 4, "d_ff": 256,
    "num_layers": 6, "causal": True,
    # optimisation
    "lr": 3e-4, "betas": [0.9, 0.999], "eps": 1e-8, "wd": 0.02, "num_epochs": 20,
    "max_steps": None, "val_split": 0.1, "seed": 1234, "init_seed": 42,
    # evaluation and output
    "eval_every": 500, "eval_batches": 8, "sample_length": 200, "temperature": 0.8,
    "data_file": "input.txt", "checkpoint_filename": "test_model.npz",
    "time_limit_s": None,
}

_DEVICE: Optional[Device] = None


def _dev() -> Device:
    if _DEVICE is None or not OclTensor._ocl_initialized:
        raise RuntimeError("the driver is not initialised; call ocl_initialize() first")
    return _DEVICE


def _numel(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


# =================================================================================================
# GPUBuffer
# =================================================================================================

class GPUBuffer:
    """One device allocation. `ptr` is the driver handle (an int), None once freed."""

    _live: "weakref.WeakSet[GPUBuffer]" = weakref.WeakSet()

    def __init__(self, size_in_bytes: int, tag: str = "buffer", _init_zeros: bool = False,
                 dtype=FP_TYPE):
        self.size = int(size_in_bytes)
        self.tag = tag
        self.dtype = np.dtype(dtype)
        self.ptr: Optional[int] = None
        self._allocated = False
        try:
            self.ptr = ops.allocate(_dev(), max(self.size, 1))
        except AetherCLError as error:
            raise MemoryError(f"allocate_gpu_memory({self.size}) for '{tag}': {error}") from error
        self._allocated = True
        GPUBuffer._live.add(self)
        if _init_zeros and self.size:
            self.write(np.zeros(self.size // self.dtype.itemsize, self.dtype))

    def write(self, host_data: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(host_data)
        if offset + data.nbytes > self.size:
            raise ValueError(f"write of {data.nbytes} B at {offset} exceeds buffer '{self.tag}' "
                             f"of {self.size} B")
        ops.write(_dev(), self.ptr, offset, data.nbytes, data)

    def read(self, shape, dtype=FP_TYPE, offset: int = 0) -> np.ndarray:
        out = np.empty(shape, dtype)
        if offset + out.nbytes > self.size:
            raise ValueError(f"read of {out.nbytes} B at {offset} exceeds buffer '{self.tag}' "
                             f"of {self.size} B")
        ops.read(_dev(), self.ptr, offset, out.nbytes, out)
        return out

    def clone(self) -> "GPUBuffer":
        copy = GPUBuffer(self.size, tag=self.tag + "_clone", dtype=self.dtype)
        if self.size:
            ops.clone(_dev(), self.ptr, copy.ptr, self.size)
        return copy

    def free(self) -> None:
        if self._allocated:
            self._allocated = False
            ptr, self.ptr = self.ptr, None
            if OclTensor._ocl_initialized and _DEVICE is not None:
                ops.free(_DEVICE, ptr)

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown
            pass


# =================================================================================================
# Autograd contexts (section 9 of the documentation). Parents are strong references.
# =================================================================================================

class FunctionContext:
    """Remembers the inputs of one operation; backward(grad_output) returns one gradient (an
    OclTensor or None) per parent."""

    def __init__(self, *parents: "OclTensor"):
        self.parents: Tuple[OclTensor, ...] = parents
        self.saved_data: Tuple[Any, ...] = ()

    def save_for_backward(self, *items) -> None:
        self.saved_data = items

    def unpack_saved_data(self) -> Tuple[Any, ...]:
        return self.saved_data

    def needs(self, index: int) -> bool:
        return self.parents[index].requires_grad

    def apply_gradients(self, grads: Sequence[Optional["OclTensor"]]) -> None:
        for parent, grad in zip(self.parents, grads):
            if grad is not None and parent.requires_grad:
                parent._accumulate_grad(grad)

    def backward(self, grad_output: "OclTensor") -> Sequence[Optional["OclTensor"]]:
        raise NotImplementedError


def _grad_like(tensor: "OclTensor", wanted: bool) -> Optional["OclTensor"]:
    return OclTensor.empty(tensor.shape) if wanted else None


def _ptr(tensor: Optional["OclTensor"]) -> Optional[int]:
    return tensor.data.ptr if tensor is not None else None


class MatMulBackwardContext(FunctionContext):
    """a (B,M,K) or (M,K) times a shared b (K,N): execute_matmul_backward_on_gpu."""

    def backward(self, g):
        a, b = self.parents
        B, M, N, K = self.saved_data
        da, db = _grad_like(a, self.needs(0)), _grad_like(b, self.needs(1))
        if da is not None or db is not None:
            ops.matmul_backward(_dev(), a.data.ptr, b.data.ptr, g.data.ptr, _ptr(da), _ptr(db),
                                B, M, N, K)
        return da, db


class MatMulBatchedBackwardContext(FunctionContext):
    """(B,M,K) times (B,K,N): execute_matmul_batched_backward_on_gpu."""

    def backward(self, g):
        a, b = self.parents
        B, M, N, K = self.saved_data
        da, db = _grad_like(a, self.needs(0)), _grad_like(b, self.needs(1))
        if da is not None or db is not None:
            ops.matmul_batched_backward(_dev(), a.data.ptr, b.data.ptr, g.data.ptr, _ptr(da),
                                        _ptr(db), B, M, N, K)
        return da, db


class AddBackwardContext(FunctionContext):
    """Equal shapes: the gradient passes to both inputs unchanged. With a bias b of N elements
    broadcast over (B,M,N), b's gradient is execute_reduce_sum_gpu over B and M."""

    def backward(self, g):
        a, b = self.parents
        if not self.saved_data:
            return g, g
        B, M, N = self.saved_data
        db = None
        if self.needs(1):
            db = OclTensor.empty(b.shape)
            ops.reduce_sum(_dev(), g.data.ptr, db.data.ptr, B, M, N)
        return g, db


class AddBroadcastPEBackwardContext(FunctionContext):
    """x + table (positional encoding, attention mask): the table is a constant."""

    def backward(self, g):
        return (g,)


class MulBackwardContext(FunctionContext):
    def backward(self, g):
        a, b = self.parents
        da, db = _grad_like(a, self.needs(0)), _grad_like(b, self.needs(1))
        if da is not None or db is not None:
            ops.mul_backward(_dev(), g.data.ptr, a.data.ptr, b.data.ptr, _ptr(da), _ptr(db),
                             a.numel)
        return da, db


class ScalarMulBackwardContext(FunctionContext):
    """x * s, done as x * constant tensor: dx = dy * constant (mul_backward with dB = NULL)."""

    def backward(self, g):
        (x,) = self.parents
        constant, _scalar = self.saved_data
        dx = OclTensor.empty(x.shape)
        ops.mul_backward(_dev(), g.data.ptr, x.data.ptr, constant.ptr, dx.data.ptr, None, x.numel)
        return (dx,)


class GeluBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        dx = OclTensor.empty(x.shape)
        ops.gelu_backward(_dev(), x.data.ptr, g.data.ptr, dx.data.ptr, x.numel)
        return (dx,)


class SoftmaxBackwardContext(FunctionContext):
    """Saves the output's buffer (not the output tensor, which would make a reference cycle)."""

    def backward(self, g):
        (x,) = self.parents
        y_buffer, rows, cols = self.saved_data
        dx = OclTensor.empty(x.shape)
        ops.softmax_backward(_dev(), g.data.ptr, y_buffer.ptr, dx.data.ptr, rows, cols)
        return (dx,)


class LayerNormBackwardContextRevised(FunctionContext):
    """Uses the forward input itself (kept alive by the strong parent reference)."""

    def backward(self, g):
        (x,) = self.parents
        rows, cols, eps = self.saved_data
        dx = OclTensor.empty(x.shape)
        ops.layernorm_backward(_dev(), g.data.ptr, x.data.ptr, dx.data.ptr, rows, cols, eps)
        return (dx,)


class TransposeBackwardContext(FunctionContext):
    """2-D transpose: execute_transpose_backward_on_gpu with the forward input's dimensions."""

    def backward(self, g):
        (x,) = self.parents
        rows, cols = x.shape
        dx = OclTensor.empty(x.shape)
        ops.transpose_backward(_dev(), g.data.ptr, dx.data.ptr, rows, cols)
        return (dx,)


class BatchedTransposeLastTwoBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        b_flat, d1, d2 = self.saved_data
        dx = OclTensor.empty(x.shape)
        ops.transpose_batched(_dev(), g.data.ptr, dx.data.ptr, b_flat, d2, d1)
        return (dx,)


class Transpose12BatchedBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        B, D1, D2, D3 = self.saved_data
        dx = OclTensor.empty(x.shape)
        ops.transpose_12_batched(_dev(), g.data.ptr, dx.data.ptr, B, D2, D1, D3)
        return (dx,)


class TransposeCPUFallbackBackwardContext(FunctionContext):
    """Any other axis swap goes through the host (read, np.transpose, write), both ways."""

    def backward(self, g):
        (x,) = self.parents
        (axes,) = self.saved_data
        host = g.to_host().transpose(np.argsort(axes))
        return (OclTensor(np.ascontiguousarray(host)),)


class ReshapeBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        return (g._view(x.shape),)


class EmbeddingBackwardContext(FunctionContext):
    """dW starts at zero and execute_embedding_backward_gpu scatter-adds dO rows into it."""

    def backward(self, g):
        (weight,) = self.parents
        ids_buffer, b, s, d, v = self.saved_data
        dw = OclTensor.zeros(weight.shape)
        ops.embedding_backward(_dev(), g.data.ptr, ids_buffer.ptr, dw.data.ptr, b, s, d, v)
        return (dw,)


# =================================================================================================
# OclTensor
# =================================================================================================

_CONSTANTS: Dict[Tuple[int, float], GPUBuffer] = {}


def _constant_buffer(numel: int, value: float) -> GPUBuffer:
    """A cached device buffer of `numel` copies of `value` (scalar multiplies, masks, ones)."""
    key = (int(numel), float(value))
    buffer = _CONSTANTS.get(key)
    if buffer is None or not buffer._allocated:
        buffer = GPUBuffer(numel * 4, tag=f"const_{value:g}")
        buffer.write(np.full(numel, value, FP_TYPE))
        _CONSTANTS[key] = buffer
    return buffer


_MASKS: Dict[int, GPUBuffer] = {}
MASK_VALUE = -1e9


def _causal_mask(seq_len: int) -> GPUBuffer:
    """(S,S) additive mask: 0 where key <= query, MASK_VALUE above the diagonal."""
    buffer = _MASKS.get(seq_len)
    if buffer is None or not buffer._allocated:
        mask = np.triu(np.full((seq_len, seq_len), MASK_VALUE, FP_TYPE), k=1)
        buffer = GPUBuffer(mask.nbytes, tag=f"causal_mask_{seq_len}")
        buffer.write(mask)
        _MASKS[seq_len] = buffer
    return buffer


class OclTensor:
    """A float32 (or int32) tensor on the device with reverse-mode autograd."""

    _ocl_initialized = False
    _enable_grad = True

    class NoGradContext:
        def __enter__(self):
            self._previous = OclTensor._enable_grad
            OclTensor._enable_grad = False
            return self

        def __exit__(self, *exc):
            OclTensor._enable_grad = self._previous

    @staticmethod
    def no_grad() -> "OclTensor.NoGradContext":
        return OclTensor.NoGradContext()

    def __init__(self, data: Optional[np.ndarray], requires_grad: bool = False,
                 _gpu_buffer: Optional[GPUBuffer] = None, _shape=None, dtype=FP_TYPE):
        host = None
        if data is not None:
            host = np.ascontiguousarray(data, dtype=dtype)
            shape = host.shape
        else:
            shape = tuple(int(s) for s in _shape)
        self.shape: Tuple[int, ...] = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.numel = _numel(self.shape)
        self.nbytes = self.numel * self.dtype.itemsize
        if _gpu_buffer is None:
            _gpu_buffer = GPUBuffer(self.nbytes, tag="tensor", dtype=self.dtype)
        self.data: GPUBuffer = _gpu_buffer
        if host is not None and host.nbytes:
            self.data.write(host)
        self.requires_grad = bool(requires_grad) and OclTensor._enable_grad
        self.grad: Optional[OclTensor] = None
        self._ctx: Optional[FunctionContext] = None

    # --- construction ---------------------------------------------------------------------------
    @staticmethod
    def empty(shape, requires_grad: bool = False, dtype=FP_TYPE) -> "OclTensor":
        return OclTensor(None, requires_grad=requires_grad, _shape=tuple(shape), dtype=dtype)

    @staticmethod
    def zeros(shape, requires_grad: bool = False) -> "OclTensor":
        return OclTensor(np.zeros(tuple(shape), FP_TYPE), requires_grad=requires_grad)

    def _view(self, shape) -> "OclTensor":
        """Same buffer, other shape, no autograd link."""
        return OclTensor(None, _gpu_buffer=self.data, _shape=tuple(shape), dtype=self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def _grad_buffer(self) -> Optional[GPUBuffer]:
        return self.grad.data if self.grad is not None else None

    def __repr__(self) -> str:
        return (f"OclTensor(shape={self.shape}, requires_grad={self.requires_grad}, "
                f"op={type(self._ctx).__name__ if self._ctx else None})")

    # --- gradients ------------------------------------------------------------------------------
    def _ensure_grad_buffer(self) -> GPUBuffer:
        if self.grad is None:
            self.grad = OclTensor.zeros(self.shape)
        return self.grad.data

    def get_grad_tensor(self) -> Optional["OclTensor"]:
        return self.grad

    def zero_grad(self) -> None:
        self.grad = None

    def _accumulate_grad(self, incoming: "OclTensor") -> None:
        if incoming.numel != self.numel:
            raise ValueError(f"gradient of {incoming.shape} for a tensor of {self.shape}")
        if self.grad is None:
            # Gradient buffers are never written after creation, so adopting one is safe.
            self.grad = incoming if incoming.shape == self.shape else incoming._view(self.shape)
            if self.grad._ctx is not None or self.grad.requires_grad:
                self.grad = self.grad._view(self.shape)
            return
        total = OclTensor.empty(self.shape)
        ops.add(_dev(), self.grad.data.ptr, incoming.data.ptr, total.data.ptr, self.numel)
        self.grad = total

    def backward(self, gradient=None, retain_graph: bool = False) -> None:
        """Reverse-mode pass from this tensor. Without retain_graph the graph is released as it is
        walked (contexts and intermediate gradients dropped), so its buffers are freed."""
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad")
        if gradient is None:
            if self.numel != 1:
                raise RuntimeError("backward() without a gradient needs a one-element tensor")
            gradient = OclTensor(np.ones(self.shape, FP_TYPE))
        elif isinstance(gradient, np.ndarray):
            gradient = OclTensor(gradient.astype(FP_TYPE).reshape(self.shape))
        order = _topological_order(self)
        self._accumulate_grad(gradient)
        for node in reversed(order):
            ctx = node._ctx
            if ctx is None:
                continue
            if node.grad is not None:
                ctx.apply_gradients(ctx.backward(node.grad))
            if not retain_graph:
                node._ctx = None
                node.grad = None

    # --- host access ----------------------------------------------------------------------------
    def to_host(self) -> np.ndarray:
        return self.data.read(self.shape, self.dtype)

    def detach(self) -> "OclTensor":
        return self._view(self.shape)

    def clone(self) -> "OclTensor":
        copy = OclTensor(None, _gpu_buffer=self.data.clone(), _shape=self.shape, dtype=self.dtype)
        copy.requires_grad = self.requires_grad
        if self.grad is not None:
            copy.grad = OclTensor(None, _gpu_buffer=self.grad.data.clone(), _shape=self.shape)
        return copy

    def free_memory(self) -> None:
        self.data.free()
        self.grad = None
        self._ctx = None

    # --- helpers for ops ------------------------------------------------------------------------
    def _result(self, shape, ctx: Optional[FunctionContext]) -> "OclTensor":
        out = OclTensor.empty(shape)
        if ctx is not None and OclTensor._enable_grad and any(
                p.requires_grad for p in ctx.parents):
            out.requires_grad = True
            out._ctx = ctx
        return out

    # --- operations -----------------------------------------------------------------------------
    def matmul(self, other: "OclTensor") -> "OclTensor":
        a, b = self, other
        if a.ndim in (2, 3) and b.ndim == 2:
            if a.shape[-1] != b.shape[0]:
                raise ValueError(f"matmul {a.shape} @ {b.shape}")
            B = a.shape[0] if a.ndim == 3 else 1
            M, K, N = a.shape[-2], a.shape[-1], b.shape[1]
            ctx = MatMulBackwardContext(a, b)
            ctx.save_for_backward(B, M, N, K)
            out = self._result(a.shape[:-1] + (N,), ctx)
            ops.matmul(_dev(), a.data.ptr, b.data.ptr, out.data.ptr, B, M, N, K)
            return out
        if a.ndim >= 3 and b.ndim == a.ndim and a.shape[:-2] == b.shape[:-2]:
            if a.shape[-1] != b.shape[-2]:
                raise ValueError(f"matmul {a.shape} @ {b.shape}")
            B = _numel(a.shape[:-2])
            M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
            ctx = MatMulBatchedBackwardContext(a, b)
            ctx.save_for_backward(B, M, N, K)
            out = self._result(a.shape[:-1] + (N,), ctx)
            ops.matmul_batched(_dev(), a.data.ptr, b.data.ptr, out.data.ptr, B, M, N, K)
            return out
        raise ValueError(f"unsupported matmul shapes {a.shape} @ {b.shape}")

    __matmul__ = matmul

    def add(self, other) -> "OclTensor":
        """Equal shapes (execute_add_on_gpu), a bias of the last axis broadcast over the rest
        (execute_broadcast_add_gpu), or a Python number (a cached constant tensor)."""
        if isinstance(other, (int, float)):
            other = OclTensor(None, _gpu_buffer=_constant_buffer(self.numel, float(other)),
                              _shape=self.shape)
        if not isinstance(other, OclTensor):
            raise TypeError(f"cannot add {type(other).__name__} to an OclTensor")
        if other.shape == self.shape:
            ctx = AddBackwardContext(self, other)
            out = self._result(self.shape, ctx)
            ops.add(_dev(), self.data.ptr, other.data.ptr, out.data.ptr, self.numel)
            return out
        n = self.shape[-1] if self.ndim else 1
        if other.numel == n and all(s == 1 for s in other.shape[:-1]) and other.shape[-1] == n:
            # bias (1,N) or (N,) broadcast over (..., M, N)
            M = self.shape[-2] if self.ndim >= 2 else 1
            B = _numel(self.shape[:-2]) if self.ndim >= 3 else 1
            ctx = AddBackwardContext(self, other)
            ctx.save_for_backward(B, M, n)
            out = self._result(self.shape, ctx)
            ops.broadcast_add(_dev(), self.data.ptr, other.data.ptr, out.data.ptr, B, M, n)
            return out
        raise ValueError(f"unsupported broadcast {self.shape} + {other.shape}")

    __add__ = add

    def _add_broadcast_pe(self, table: GPUBuffer) -> "OclTensor":
        """self (..., S, E) + table[s, e] (a constant holding at least S*E floats)."""
        S, E = self.shape[-2], self.shape[-1]
        B = _numel(self.shape[:-2])
        ctx = AddBroadcastPEBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.add_broadcast_pe(_dev(), self.data.ptr, table.ptr, out.data.ptr, B, S, E)
        return out

    def mul(self, other: "OclTensor") -> "OclTensor":
        if not isinstance(other, OclTensor):
            return self.mul_scalar(float(other))
        if other.shape != self.shape:
            raise ValueError(f"mul needs equal shapes, got {self.shape} * {other.shape}")
        ctx = MulBackwardContext(self, other)
        out = self._result(self.shape, ctx)
        ops.mul(_dev(), self.data.ptr, other.data.ptr, out.data.ptr, self.numel)
        return out

    __mul__ = mul

    def mul_scalar(self, scalar: float) -> "OclTensor":
        constant = _constant_buffer(self.numel, scalar)
        ctx = ScalarMulBackwardContext(self)
        ctx.save_for_backward(constant, float(scalar))
        out = self._result(self.shape, ctx)
        ops.mul(_dev(), self.data.ptr, constant.ptr, out.data.ptr, self.numel)
        return out

    def div_scalar(self, scalar: float) -> "OclTensor":
        return self.mul_scalar(1.0 / float(scalar))

    def gelu(self) -> "OclTensor":
        ctx = GeluBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.gelu(_dev(), self.data.ptr, out.data.ptr, self.numel)
        return out

    def softmax(self, dim: int = -1) -> "OclTensor":
        if dim not in (-1, self.ndim - 1):
            raise ValueError("softmax runs over the last axis only")
        cols = self.shape[-1]
        rows = self.numel // cols
        ctx = SoftmaxBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.softmax(_dev(), self.data.ptr, out.data.ptr, rows, cols)
        ctx.save_for_backward(out.data, rows, cols)
        return out

    def layer_norm(self, eps: float = 1e-5) -> "OclTensor":
        cols = self.shape[-1]
        rows = self.numel // cols
        ctx = LayerNormBackwardContextRevised(self)
        ctx.save_for_backward(rows, cols, float(eps))
        out = self._result(self.shape, ctx)
        ops.layernorm(_dev(), self.data.ptr, out.data.ptr, rows, cols, eps)
        return out

    def transpose(self, dim0: int, dim1: int) -> "OclTensor":
        nd = self.ndim
        d0, d1 = sorted((dim0 % nd, dim1 % nd))
        if d0 == d1:
            return self
        axes = list(range(nd))
        axes[d0], axes[d1] = axes[d1], axes[d0]
        shape = tuple(self.shape[i] for i in axes)
        if nd == 2:
            ctx = TransposeBackwardContext(self)
            out = self._result(shape, ctx)
            ops.transpose(_dev(), self.data.ptr, out.data.ptr, self.shape[0], self.shape[1])
            return out
        if (d0, d1) == (nd - 2, nd - 1):
            b_flat = _numel(self.shape[:-2])
            ctx = BatchedTransposeLastTwoBackwardContext(self)
            ctx.save_for_backward(b_flat, self.shape[-2], self.shape[-1])
            out = self._result(shape, ctx)
            ops.transpose_batched(_dev(), self.data.ptr, out.data.ptr, b_flat, self.shape[-2],
                                  self.shape[-1])
            return out
        if nd == 4 and (d0, d1) == (1, 2):
            ctx = Transpose12BatchedBackwardContext(self)
            ctx.save_for_backward(*self.shape)
            out = self._result(shape, ctx)
            ops.transpose_12_batched(_dev(), self.data.ptr, out.data.ptr, *self.shape)
            return out
        ctx = TransposeCPUFallbackBackwardContext(self)
        ctx.save_for_backward(tuple(axes))
        out = self._result(shape, ctx)
        out.data.write(np.ascontiguousarray(self.to_host().transpose(axes)))
        return out

    @property
    def T(self) -> "OclTensor":
        return self.transpose(-2, -1)

    def reshape(self, *shape) -> "OclTensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(int(s) for s in shape)
        if shape.count(-1) == 1:
            known = _numel([s for s in shape if s != -1])
            shape[shape.index(-1)] = self.numel // known
        shape = tuple(shape)
        if _numel(shape) != self.numel:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        out = self._view(shape)
        if OclTensor._enable_grad and self.requires_grad:
            out.requires_grad = True
            out._ctx = ReshapeBackwardContext(self)
        return out


def _topological_order(root: OclTensor) -> List[OclTensor]:
    """Nodes reachable from root through grad-requiring parents, every node after its parents."""
    order: List[OclTensor] = []
    visited = set()
    stack: List[Tuple[OclTensor, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        if node._ctx is not None:
            for parent in node._ctx.parents:
                if parent.requires_grad and id(parent) not in visited:
                    stack.append((parent, False))
    return order


# =================================================================================================
# Layers
# =================================================================================================

class Parameter(OclTensor):
    """A trainable leaf tensor (requires_grad=True by default)."""

    def __init__(self, data: np.ndarray, requires_grad: bool = True, name: str = "param"):
        super().__init__(data, requires_grad=requires_grad)
        self.requires_grad = bool(requires_grad)
        self.name = name
        self.data.tag = name


class Linear:
    """y = x @ W + b with W (in, out) and b (1, out)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "linear"):
        rng = rng if rng is not None else np.random.default_rng()
        std = 1.0 / math.sqrt(in_features)
        self.W = Parameter((rng.standard_normal((in_features, out_features)) * std)
                           .astype(FP_TYPE), name=name + ".W")
        self.b = Parameter(np.zeros((1, out_features), FP_TYPE), name=name + ".b") if bias else None

    def __call__(self, x: OclTensor) -> OclTensor:
        y = x.matmul(self.W)
        return y.add(self.b) if self.b is not None else y

    def parameters(self) -> List[Parameter]:
        return [self.W] + ([self.b] if self.b is not None else [])


class Embedding:
    """Token embedding on the device: execute_embedding_lookup_gpu / _backward_gpu."""

    def __init__(self, vocab_size: int, embed_dim: int,
                 rng: Optional[np.random.Generator] = None, name: str = "embedding"):
        rng = rng if rng is not None else np.random.default_rng()
        self.vocab_size, self.embed_dim = vocab_size, embed_dim
        self.weight_param = Parameter(rng.standard_normal((vocab_size, embed_dim))
                                      .astype(FP_TYPE), name=name + ".weight")
        self.weight_param._is_embedding_weight = True
        self.weight_param._associated_layer = self

    def __call__(self, input_ids: np.ndarray) -> OclTensor:
        ids = np.ascontiguousarray(input_ids, dtype=IDX_TYPE)
        if ids.ndim == 1:
            ids = ids[None, :]
        b, s = ids.shape
        ids_buffer = GPUBuffer(ids.nbytes, tag="token_ids", dtype=IDX_TYPE)
        ids_buffer.write(ids)
        ctx = EmbeddingBackwardContext(self.weight_param)
        ctx.save_for_backward(ids_buffer, b, s, self.embed_dim, self.vocab_size)
        out = self.weight_param._result((b, s, self.embed_dim), ctx)
        ops.embedding_lookup(_dev(), ids_buffer.ptr, self.weight_param.data.ptr, out.data.ptr,
                             b, s, self.embed_dim, self.vocab_size)
        return out

    @property
    def weight_host(self) -> np.ndarray:
        return self.weight_param.to_host()

    def parameters(self) -> List[Parameter]:
        return [self.weight_param]


class GeLUActivation:
    def __call__(self, x: OclTensor) -> OclTensor:
        return x.gelu()


class LayerNorm:
    """Normalisation without affine parameters (as the documented model)."""

    def __init__(self, eps: float = 1e-5):
        self.eps = eps

    def __call__(self, x: OclTensor) -> OclTensor:
        return x.layer_norm(self.eps)


class PositionalEncoding:
    """Sinusoidal table kept on the device (pe_gpu_full); added with execute_add_broadcast_pe_gpu,
    which reads the first S*E floats of the table, i.e. rows 0..S-1."""

    def __init__(self, max_len: int, embed_dim: int):
        position = np.arange(max_len)[:, None]
        div = np.exp(np.arange(0, embed_dim, 2) * (-math.log(10000.0) / embed_dim))
        pe = np.zeros((max_len, embed_dim), np.float64)
        pe[:, 0::2] = np.sin(position * div)
        pe[:, 1::2] = np.cos(position * div)[:, : embed_dim // 2]
        self.max_len, self.embed_dim = max_len, embed_dim
        self.pe_gpu_full = GPUBuffer(max_len * embed_dim * 4, tag="pe_table")
        self.pe_gpu_full.write(pe.astype(FP_TYPE))

    def __call__(self, x: OclTensor) -> OclTensor:
        if x.shape[-2] > self.max_len:
            raise ValueError(f"sequence of {x.shape[-2]} exceeds max_len {self.max_len}")
        return x._add_broadcast_pe(self.pe_gpu_full)

    def free_memory(self) -> None:
        self.pe_gpu_full.free()


class MultiHeadAttention:
    """Self-attention: bias-free Q/K/V, heads split with transpose_12, K^T with transpose_batched,
    scores and P.V with matmul_batched, an optional causal mask, output projection with bias."""

    def __init__(self, embed_dim: int, num_heads: int, causal: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "attn"):
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.d_k = embed_dim // num_heads
        self.causal = causal
        self.q = Linear(embed_dim, embed_dim, bias=False, rng=rng, name=name + ".q")
        self.k = Linear(embed_dim, embed_dim, bias=False, rng=rng, name=name + ".k")
        self.v = Linear(embed_dim, embed_dim, bias=False, rng=rng, name=name + ".v")
        self.o = Linear(embed_dim, embed_dim, bias=True, rng=rng, name=name + ".o")

    def _split(self, t: OclTensor, B: int, S: int) -> OclTensor:
        H, dk = self.num_heads, self.d_k
        return t.reshape(B, S, H, dk).transpose(1, 2).reshape(B * H, S, dk)

    def __call__(self, x: OclTensor) -> OclTensor:
        B, S, E = x.shape
        H, dk = self.num_heads, self.d_k
        q = self._split(self.q(x), B, S)
        k = self._split(self.k(x), B, S)
        v = self._split(self.v(x), B, S)
        scores = q.matmul(k.transpose(-2, -1)).mul_scalar(1.0 / math.sqrt(dk))
        if self.causal:
            scores = scores._add_broadcast_pe(_causal_mask(S))
        probs = scores.softmax(-1)
        context = probs.matmul(v).reshape(B, H, S, dk).transpose(1, 2).reshape(B, S, E)
        return self.o(context)

    def parameters(self) -> List[Parameter]:
        return self.q.parameters() + self.k.parameters() + self.v.parameters() + \
            self.o.parameters()


class TransformerBlock:
    """Pre-LN block: x + MHA(LN(x)), then x + W2 GELU(W1 LN(x) + b1) + b2."""

    def __init__(self, embed_dim: int, num_heads: int, d_ff: int, causal: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "block"):
        self.ln1, self.ln2 = LayerNorm(), LayerNorm()
        self.attn = MultiHeadAttention(embed_dim, num_heads, causal, rng, name + ".attn")
        self.ff1 = Linear(embed_dim, d_ff, rng=rng, name=name + ".ff1")
        self.ff2 = Linear(d_ff, embed_dim, rng=rng, name=name + ".ff2")
        self.act = GeLUActivation()

    def __call__(self, x: OclTensor) -> OclTensor:
        x = x.add(self.attn(self.ln1(x)))
        return x.add(self.ff2(self.act(self.ff1(self.ln2(x)))))

    def parameters(self) -> List[Parameter]:
        # documented order: Wq, Wk, Wv, Wo, bo, W1, b1, W2, b2
        return self.attn.parameters() + self.ff1.parameters() + self.ff2.parameters()


class SimpleModel:
    """Embedding -> positional encoding -> transformer blocks -> LayerNorm -> Linear to vocab."""

    def __init__(self, config: Dict[str, Any]):
        self.config = dict(config)
        rng = np.random.default_rng(config.get("init_seed", 42))
        E, V = config["embed_dim"], config["vocab_size"]
        self.embedding = Embedding(V, E, rng=rng)
        self.pos_encoding = PositionalEncoding(config["max_len"], E)
        self.blocks = [TransformerBlock(E, config["num_heads"], config["d_ff"],
                                        config.get("causal", True), rng, f"block{i}")
                       for i in range(config["num_layers"])]
        self.final_norm = LayerNorm()
        self.output_layer = Linear(E, V, rng=rng, name="output")
        # Small output weights: the initial prediction is nearly uniform (loss close to ln V).
        self.output_layer.W.data.write((rng.standard_normal((E, V)) * 0.02).astype(FP_TYPE))
        self.training = True

    def __call__(self, input_ids: np.ndarray, mask=None) -> OclTensor:
        x = self.pos_encoding(self.embedding(input_ids))
        for block in self.blocks:
            x = block(x)
        return self.output_layer(self.final_norm(x))

    def parameters(self) -> List[Parameter]:
        params = self.embedding.parameters()
        for block in self.blocks:
            params += block.parameters()
        return params + self.output_layer.parameters()

    def num_parameters(self) -> int:
        return sum(p.numel for p in self.parameters())

    def train(self) -> None:
        self.training = True

    def eval(self) -> None:
        self.training = False

    def state_dict(self) -> Dict[str, np.ndarray]:
        return {f"param_{i}": p.to_host() for i, p in enumerate(self.parameters())}

    def load_state_dict(self, state_dict: Dict[str, np.ndarray]) -> None:
        params = self.parameters()
        if len(state_dict) != len(params):
            raise ValueError(f"state has {len(state_dict)} tensors, the model {len(params)}")
        for i, p in enumerate(params):
            value = np.asarray(state_dict[f"param_{i}"], FP_TYPE)
            if value.shape != p.shape:
                raise ValueError(f"param_{i} ({p.name}): {value.shape} vs {p.shape}")
            p.data.write(value)

    def free_memory(self) -> None:
        for p in self.parameters():
            p.free_memory()
        self.pos_encoding.free_memory()


class AdamOptimizer:
    """Adam with coupled L2 weight decay through execute_adam_update_on_gpu; m and v on the
    device."""

    def __init__(self, parameters: Sequence[Parameter], lr: float = 3e-4,
                 betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.parameters = list(parameters)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.t = 0
        self.m = [GPUBuffer(p.nbytes, tag=f"adam_m_{i}", _init_zeros=True)
                  for i, p in enumerate(self.parameters)]
        self.v = [GPUBuffer(p.nbytes, tag=f"adam_v_{i}", _init_zeros=True)
                  for i, p in enumerate(self.parameters)]

    def zero_grad(self) -> None:
        for p in self.parameters:
            p.zero_grad()

    def step(self) -> int:
        """One update of every parameter that has a gradient; returns how many were updated."""
        self.t += 1
        b1, b2 = self.betas
        updated = 0
        for p, m, v in zip(self.parameters, self.m, self.v):
            if p.grad is None:
                continue
            ops.adam_update(_dev(), p.data.ptr, p.grad.data.ptr, m.ptr, v.ptr, p.numel, self.t,
                            self.lr, b1, b2, self.eps, self.weight_decay)
            updated += 1
        return updated

    def state_dict(self) -> Dict[str, Any]:
        return {"t": self.t,
                "m": {f"state_{i}": m.read(p.shape) for i, (p, m) in
                      enumerate(zip(self.parameters, self.m))},
                "v": {f"state_{i}": v.read(p.shape) for i, (p, v) in
                      enumerate(zip(self.parameters, self.v))}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.t = int(state["t"])
        for i, (p, m, v) in enumerate(zip(self.parameters, self.m, self.v)):
            m.write(np.asarray(state["m"][f"state_{i}"], FP_TYPE).reshape(p.shape))
            v.write(np.asarray(state["v"][f"state_{i}"], FP_TYPE).reshape(p.shape))

    def free_memory(self) -> None:
        for buffer in self.m + self.v:
            buffer.free()


# =================================================================================================
# Tokenizer
# =================================================================================================

TOKENIZER_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789 .,!?'\"-()\n") + list("äöüß")
UNK_DISPLAY = "_"


class TinyTokenizer:
    """Lower-cased characters: <pad> = 0, the 51 documented characters = 1..51, <unk> = 52."""

    def __init__(self, vocab: Optional[Dict[str, int]] = None,
                 inv_vocab: Optional[Dict[int, str]] = None):
        if vocab is None:
            vocab = {"<pad>": 0}
            for ch in TOKENIZER_CHARS:
                vocab[ch] = len(vocab)
            vocab["<unk>"] = len(vocab)
        self.vocab = dict(vocab)
        self.inv_vocab = {int(k): v for k, v in (inv_vocab or
                                                 {i: c for c, i in self.vocab.items()}).items()}
        self.pad_id = self.vocab["<pad>"]
        self.unk_id = self.vocab["<unk>"]
        self.vocab_size = len(self.vocab)

    def encode(self, text: str, max_len: Optional[int] = None) -> List[int]:
        ids = [self.vocab.get(ch, self.unk_id) for ch in text.lower()]
        if max_len is not None:
            ids = ids[:max_len] + [self.pad_id] * max(0, max_len - len(ids))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.pad_id:
                continue
            out.append(UNK_DISPLAY if i == self.unk_id else self.inv_vocab.get(i, UNK_DISPLAY))
        return "".join(out)

    def get_vocab(self) -> Dict[str, int]:
        return dict(self.vocab)

    def get_inv_vocab(self) -> Dict[int, str]:
        return dict(self.inv_vocab)


# =================================================================================================
# Initialisation, shutdown, loss
# =================================================================================================

OPTIONAL_KERNELS = ["execute_matmul_batched_on_gpu", "execute_matmul_batched_backward_on_gpu",
                    "execute_transpose_batched_gpu", "execute_transpose_12_batched_gpu",
                    "execute_reduce_sum_gpu", "execute_add_broadcast_pe_gpu",
                    "execute_embedding_lookup_gpu", "execute_embedding_backward_gpu",
                    "execute_log_softmax_stable_gpu", "execute_cross_entropy_loss_grad_gpu",
                    "execute_broadcast_add_gpu"]


def ocl_initialize(device_index: int = 0, library: Optional[Library] = None,
                   verbose: bool = True) -> Device:
    """initialize_gpu(device_index) and the frontend's global state; idempotent."""
    global _DEVICE
    if _DEVICE is not None and OclTensor._ocl_initialized and _DEVICE.index == device_index:
        return _DEVICE
    _DEVICE = Device(device_index, library=library)
    OclTensor._ocl_initialized = True
    if verbose:
        info = _DEVICE.info()
        print(f"[ocl] device {device_index}: {info.get('name')} ({info.get('platform')}, "
              f"{info.get('type')}, {info.get('compute_units')} compute units)")
        missing = [k for k in OPTIONAL_KERNELS if not hasattr(_DEVICE.lib.cdll, k)]
        print("[ocl] optional kernels: " + ("all present" if not missing else
                                            "missing " + ", ".join(missing)))
    return _DEVICE


def release_all() -> int:
    """Frees every live frontend buffer (constants included) without shutting the driver down;
    returns how many were freed."""
    freed = 0
    for buffer in list(GPUBuffer._live):
        if buffer._allocated:
            buffer.free()
            freed += 1
    _CONSTANTS.clear()
    _MASKS.clear()
    return freed


def ocl_shutdown(model: Optional[SimpleModel] = None, optimizer: Optional[AdamOptimizer] = None,
                 shutdown_driver: bool = True) -> None:
    """Frees the optimizer states, the model and every registered buffer, then shuts the driver
    down (later GPUBuffer.__del__ calls are no-ops)."""
    global _DEVICE
    if not OclTensor._ocl_initialized:
        return
    if optimizer is not None:
        optimizer.free_memory()
    if model is not None:
        model.free_memory()
    release_all()
    device = _DEVICE
    if shutdown_driver:
        OclTensor._ocl_initialized = False
        _DEVICE = None
        if device is not None:
            device.shutdown()


def cross_entropy_loss_and_backward(logits: OclTensor, target_ids: np.ndarray,
                                    pad_id: int = 0) -> float:
    """Mean cross entropy over the targets that are not padding, computed on the device with
    log_softmax + cross_entropy. If logits require grad, the gradient (probabilities minus one-hot)
    is zeroed on padding rows, divided by the number of valid targets and back-propagated; the
    per-row weights are broadcast on the device by a K=1 matmul against a ones row."""
    B, S, V = logits.shape
    rows = B * S
    targets = np.ascontiguousarray(target_ids, dtype=IDX_TYPE).reshape(rows)
    valid = targets != pad_id
    num_valid = int(valid.sum())
    dev = _dev()
    log_probs = GPUBuffer(rows * V * 4, tag="log_probs")
    target_buffer = GPUBuffer(rows * 4, tag="targets", dtype=IDX_TYPE)
    target_buffer.write(targets)
    grad = OclTensor.empty((B, S, V))
    loss_rows = GPUBuffer(rows * 4, tag="loss_per_row")
    ops.log_softmax(dev, logits.data.ptr, log_probs.ptr, B, S, V)
    ops.cross_entropy_loss_grad(dev, log_probs.ptr, target_buffer.ptr, grad.data.ptr,
                                loss_rows.ptr, B, S, V)
    losses = loss_rows.read((rows,))
    mean = float(losses[valid].astype(np.float64).sum() / num_valid) if num_valid else 0.0
    if logits.requires_grad and OclTensor._enable_grad and num_valid:
        weights = OclTensor((valid / num_valid).astype(FP_TYPE).reshape(1, rows, 1))
        ones = _constant_buffer(V, 1.0)
        row_scale = OclTensor.empty((rows, V))
        ops.matmul(dev, weights.data.ptr, ones.ptr, row_scale.data.ptr, 1, rows, V, 1)
        scaled = OclTensor.empty((B, S, V))
        ops.mul(dev, grad.data.ptr, row_scale.data.ptr, scaled.data.ptr, rows * V)
        logits.backward(scaled)
    for buffer in (log_probs, target_buffer, loss_rows):
        buffer.free()
    return mean


# =================================================================================================
# Checkpoints: arrays in .npz (no pickle), metadata as JSON (inside the .npz and beside it)
# =================================================================================================

def _json_sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def save_checkpoint(path, model: SimpleModel, optimizer: AdamOptimizer, tokenizer: TinyTokenizer,
                    config: Dict[str, Any], progress: Dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    params = model.parameters()
    arrays: Dict[str, np.ndarray] = {}
    for key, value in model.state_dict().items():
        arrays[key] = value
    opt = optimizer.state_dict()
    for i in range(len(params)):
        arrays[f"adam_m_{i}"] = opt["m"][f"state_{i}"]
        arrays[f"adam_v_{i}"] = opt["v"][f"state_{i}"]
    metadata = {
        "format": CHECKPOINT_FORMAT,
        "config": config,
        "optimizer": {"t": opt["t"], "lr": optimizer.lr, "betas": list(optimizer.betas),
                      "eps": optimizer.eps, "weight_decay": optimizer.weight_decay},
        "tokenizer": {"vocab": tokenizer.get_vocab(),
                      "inv_vocab": {str(k): v for k, v in tokenizer.get_inv_vocab().items()}},
        "progress": progress,
        "parameters": [{"name": p.name, "shape": list(p.shape)} for p in params],
    }
    text = json.dumps(metadata, indent=1)
    arrays["metadata_json"] = np.array(text)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    _json_sidecar(path).write_text(text)
    return path


def read_checkpoint(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(metadata, arrays) of a checkpoint, without touching the device."""
    with np.load(Path(path), allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    metadata = json.loads(str(arrays.pop("metadata_json")))
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    return metadata, arrays


def load_checkpoint(path) -> Tuple[SimpleModel, AdamOptimizer, TinyTokenizer, Dict[str, Any],
                                   Dict[str, Any]]:
    """Rebuilds model, optimizer (t, m, v) and tokenizer; returns them with config and progress.
    Needs an initialised driver."""
    metadata, arrays = read_checkpoint(path)
    config = metadata["config"]
    tok = metadata["tokenizer"]
    tokenizer = TinyTokenizer(tok["vocab"], {int(k): v for k, v in tok["inv_vocab"].items()})
    model = SimpleModel(config)
    n = len(model.parameters())
    model.load_state_dict({f"param_{i}": arrays[f"param_{i}"] for i in range(n)})
    o = metadata["optimizer"]
    optimizer = AdamOptimizer(model.parameters(), lr=o["lr"], betas=o["betas"], eps=o["eps"],
                              weight_decay=o["weight_decay"])
    optimizer.load_state_dict({"t": o["t"],
                               "m": {f"state_{i}": arrays[f"adam_m_{i}"] for i in range(n)},
                               "v": {f"state_{i}": arrays[f"adam_v_{i}"] for i in range(n)}})
    return model, optimizer, tokenizer, config, metadata["progress"]


# =================================================================================================
# Data, training, sampling
# =================================================================================================

class TextData:
    """The encoded corpus cut into blocks; every k-th block (k = 1/val_split) is held out for
    validation, so both parts sample the whole corpus. Training windows start at every position of
    the training text; the order of epoch e is a permutation seeded by (seed, e), so any step's
    batch can be recomputed (which makes resuming exact)."""

    def __init__(self, ids: np.ndarray, seq_len: int, batch_size: int, val_split: float,
                 seed: int):
        ids = np.asarray(ids, IDX_TYPE)
        block = max(16 * (seq_len + 1), 1024)
        period = max(2, int(round(1.0 / val_split))) if val_split > 0 else 0
        blocks = [ids[i:i + block] for i in range(0, len(ids), block)]
        held = [i for i in range(len(blocks)) if period and i % period == period - 1]
        if period and not held and len(blocks) > 1:
            held = [len(blocks) - 1]
        self.train_ids = np.concatenate([b for i, b in enumerate(blocks) if i not in held])
        self.val_ids = (np.concatenate([blocks[i] for i in held]) if held
                        else np.zeros(0, IDX_TYPE))
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.num_windows = len(self.train_ids) - seq_len
        if self.num_windows < batch_size or len(self.val_ids) < seq_len + 1:
            raise ValueError(f"corpus of {len(ids)} tokens is too small for windows of {seq_len}")
        self.steps_per_epoch = math.ceil(self.num_windows / batch_size)
        self._order_epoch, self._order = -1, None

    def _windows(self, source: np.ndarray, starts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        idx = starts[:, None] + np.arange(self.seq_len + 1)[None, :]
        block = source[idx]
        return np.ascontiguousarray(block[:, :-1]), np.ascontiguousarray(block[:, 1:])

    def train_batch(self, epoch: int, step: int) -> Tuple[np.ndarray, np.ndarray]:
        if self._order_epoch != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._order, self._order_epoch = rng.permutation(self.num_windows), epoch
        starts = self._order[step * self.batch_size:(step + 1) * self.batch_size]
        return self._windows(self.train_ids, starts)

    def val_batches(self, max_batches: int) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Fixed validation batches of non-overlapping windows spread over the held-out text."""
        count = (len(self.val_ids) - 1) // self.seq_len
        starts = np.arange(count) * self.seq_len
        want = min(len(starts), max_batches * self.batch_size)
        starts = starts[np.linspace(0, len(starts) - 1, want).astype(np.int64)]
        return [self._windows(self.val_ids, starts[i:i + self.batch_size])
                for i in range(0, len(starts), self.batch_size)]


def train_step(model: SimpleModel, optimizer: AdamOptimizer, inputs: np.ndarray,
               targets: np.ndarray) -> float:
    """zero_grad, forward, GPU loss + backward, Adam step (skipped for a non-finite loss)."""
    optimizer.zero_grad()
    logits = model(inputs)
    loss = cross_entropy_loss_and_backward(logits, targets)
    del logits
    if math.isfinite(loss):
        optimizer.step()
    return loss


def evaluate(model: SimpleModel, batches: Sequence[Tuple[np.ndarray, np.ndarray]]) -> float:
    model.eval()
    total, count = 0.0, 0
    with OclTensor.no_grad():
        for inputs, targets in batches:
            logits = model(inputs)
            n = int((targets != 0).sum())
            total += cross_entropy_loss_and_backward(logits, targets) * n
            count += n
            del logits
    model.train()
    return total / max(count, 1)


def generate(model: SimpleModel, tokenizer: TinyTokenizer, prompt: str, length: int,
             temperature: float = 0.8, seed: int = 0) -> str:
    """Samples `length` characters after `prompt` (context cut to max_len, batch of one)."""
    rng = np.random.default_rng(seed)
    max_len = model.config["max_len"]
    ids = [i for i in tokenizer.encode(prompt) if i != tokenizer.pad_id] or [tokenizer.vocab[" "]]
    V = model.config["vocab_size"]
    model.eval()
    with OclTensor.no_grad():
        for _ in range(length):
            context = np.asarray(ids[-max_len:], IDX_TYPE)[None, :]
            logits = model(context)
            S = context.shape[1]
            last = logits.data.read((V,), offset=(S - 1) * V * 4).astype(np.float64)
            del logits
            last[tokenizer.pad_id] = -np.inf
            if temperature <= 0:
                nxt = int(np.argmax(last))
            else:
                z = (last - last.max()) / temperature
                p = np.exp(z)
                nxt = int(rng.choice(V, p=p / p.sum()))
            ids.append(nxt)
    model.train()
    return tokenizer.decode(ids)


class ProgressBar:
    """One status line (step, loss, tokens/s, ETA): redrawn in place on a terminal, printed every
    `every` steps otherwise. Plain text on stderr."""

    def __init__(self, total: int, stream=None, width: int = 24):
        self.total, self.width = max(total, 1), width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = max(1, self.total // 25)
        self.start = time.perf_counter()
        self.last_line = ""

    def update(self, step: int, loss: float, tokens: int, val: Optional[float] = None,
               force: bool = False) -> None:
        elapsed = time.perf_counter() - self.start
        rate = tokens / elapsed if elapsed > 0 else 0.0
        eta = elapsed / step * (self.total - step) if step else 0.0
        filled = int(self.width * step / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        line = (f"step {step:>5}/{self.total} [{bar}] loss {loss:6.3f}"
                + (f" val {val:6.3f}" if val is not None else "")
                + f" | {rate:7.0f} tok/s | ETA {_format_seconds(eta)}")
        self.last_line = line
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif force or step % self.every == 0 or step == self.total:
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + " " * len(self.last_line) + "\r")
        self.stream.write(text + "\n")
        if self.tty and self.last_line:
            self.stream.write(self.last_line)
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def plot_losses(history: Dict[str, List[List[float]]], path) -> Optional[Path]:
    """Writes the loss curves (training per step, smoothed; validation per evaluation) as a PNG
    with matplotlib's Agg backend. Returns None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[ocl] matplotlib is not installed: no loss curve", file=sys.stderr)
        return None
    path = Path(path)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    train = np.asarray(history.get("train", []), np.float64).reshape(-1, 2)
    val = np.asarray(history.get("val", []), np.float64).reshape(-1, 2)
    if len(train):
        ax.plot(train[:, 0], train[:, 1], color="#9ecae1", linewidth=0.8, label="training (step)")
        k = max(1, len(train) // 40)
        if k > 1:
            smooth = np.convolve(train[:, 1], np.ones(k) / k, mode="valid")
            ax.plot(train[k - 1:, 0], smooth, color="#3182bd", linewidth=1.6,
                    label=f"training ({k}-step mean)")
    if len(val):
        ax.plot(val[:, 0], val[:, 1], "o-", color="#e6550d", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross entropy (nats per character)")
    ax.set_title("OCL-LLM on AetherCL: loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _read_corpus(data_file: str) -> Tuple[str, str]:
    path = Path(data_file)
    if not path.is_file():
        if data_file == DEFAULT_CONFIG["data_file"] and BUNDLED_CORPUS.is_file():
            print(f"[ocl] {data_file} not found; using the bundled corpus {BUNDLED_CORPUS}")
            path = BUNDLED_CORPUS
        else:
            raise FileNotFoundError(f"data file {data_file} not found")
    return path.read_text(encoding="utf-8"), str(path)


def train(config: Dict[str, Any], gpu_id: int = 0, load_checkpoint_path: Optional[str] = None,
          save_dir: str = "checkpoints", plot_path: Optional[str] = None,
          sample_prompt: Optional[str] = "the ", stream=None,
          shutdown: bool = True) -> Dict[str, Any]:
    """The training job: data, model, epochs of steps with periodic validation, best-checkpoint
    saving, a loss curve and a generated sample. Returns a summary dict."""
    out = stream if stream is not None else sys.stdout
    ocl_initialize(gpu_id)
    model = optimizer = None
    try:
        progress: Dict[str, Any] = {"epoch": 0, "step_in_epoch": 0, "global_step": 0,
                                    "best_val_loss": None, "history": {"train": [], "val": []}}
        if load_checkpoint_path and Path(load_checkpoint_path).is_file():
            model, optimizer, tokenizer, saved_config, progress = load_checkpoint(
                load_checkpoint_path)
            keep = ("max_steps", "num_epochs", "eval_every", "eval_batches", "sample_length",
                    "temperature", "data_file", "checkpoint_filename", "time_limit_s")
            config = dict(saved_config, **{k: config[k] for k in keep if k in config})
            print(f"[ocl] resumed {load_checkpoint_path} at step {progress['global_step']} "
                  f"(epoch {progress['epoch']}, Adam t={optimizer.t})", file=out)
        else:
            if load_checkpoint_path:
                print(f"[ocl] checkpoint {load_checkpoint_path} not found; starting fresh",
                      file=out)
            tokenizer = TinyTokenizer()
            config = dict(config, vocab_size=tokenizer.vocab_size)
            model = SimpleModel(config)
            optimizer = AdamOptimizer(model.parameters(), lr=config["lr"],
                                      betas=config["betas"], eps=config["eps"],
                                      weight_decay=config["wd"])
        text, data_path = _read_corpus(config["data_file"])
        data = TextData(np.asarray(tokenizer.encode(text), IDX_TYPE), config["max_len"],
                        config["batch_size"], config["val_split"], config["seed"])
        val_batches = data.val_batches(config["eval_batches"])
        total_steps = config["num_epochs"] * data.steps_per_epoch
        if config.get("max_steps"):
            total_steps = min(total_steps, int(config["max_steps"]))
        print(f"[ocl] corpus {data_path}: {len(text):,} characters, "
              f"{len(data.train_ids):,} training / {len(data.val_ids):,} validation tokens; "
              f"{data.steps_per_epoch} steps per epoch", file=out)
        print(f"[ocl] model: {config['num_layers']} layers, embed {config['embed_dim']}, "
              f"{config['num_heads']} heads, d_ff {config['d_ff']}, context {config['max_len']}, "
              f"vocabulary {config['vocab_size']}, {model.num_parameters():,} parameters in "
              f"{len(model.parameters())} tensors; batch {config['batch_size']}, "
              f"lr {config['lr']}, {total_steps} steps", file=out)
        history = progress["history"]
        checkpoint_path = Path(save_dir) / config["checkpoint_filename"]
        best = progress.get("best_val_loss")
        if not history["val"]:
            v0 = evaluate(model, val_batches)
            history["val"].append([progress["global_step"], v0])
            print(f"[ocl] validation loss before training: {v0:.4f}", file=out)
        first_step = progress["global_step"]
        bar = ProgressBar(total_steps - first_step, stream=sys.stderr)
        tokens = 0
        time_limited = False
        loss = float("nan")
        val = history["val"][-1][1]
        epoch, in_epoch = progress["epoch"], progress["step_in_epoch"]
        while progress["global_step"] < total_steps:
            if in_epoch >= data.steps_per_epoch:
                epoch, in_epoch = epoch + 1, 0
            inputs, targets = data.train_batch(epoch, in_epoch)
            loss = train_step(model, optimizer, inputs, targets)
            in_epoch += 1
            progress["global_step"] += 1
            progress["epoch"], progress["step_in_epoch"] = epoch, in_epoch
            step = progress["global_step"]
            tokens += inputs.size
            history["train"].append([step, loss])
            limit = config.get("time_limit_s")
            time_limited = bool(limit) and time.perf_counter() - bar.start > limit
            done = step == total_steps or time_limited
            if step % config["eval_every"] == 0 or done:
                val = evaluate(model, val_batches)
                history["val"].append([step, val])
                if best is None or val < best:
                    best = progress["best_val_loss"] = val
                    save_checkpoint(checkpoint_path, model, optimizer, tokenizer, config,
                                    progress)
                bar.update(step - first_step, loss, tokens, val, force=True)
            else:
                bar.update(step - first_step, loss, tokens, val)
            if time_limited:
                bar.message(f"[ocl] time limit of {limit:.0f} s reached after {step} steps")
                break
        bar.close()
        elapsed = time.perf_counter() - bar.start
        summary: Dict[str, Any] = {
            "steps": progress["global_step"] - first_step, "seconds": elapsed,
            "tokens_per_second": tokens / elapsed if elapsed > 0 else 0.0,
            "first_val_loss": history["val"][0][1], "last_val_loss": history["val"][-1][1],
            "best_val_loss": best, "last_train_loss": loss,
            "checkpoint": str(checkpoint_path) if checkpoint_path.is_file() else None,
            "config": config, "time_limited": time_limited,
        }
        if plot_path:
            summary["plot"] = str(plot_losses(history, plot_path) or "")
        if sample_prompt is not None and config.get("sample_length", 0) > 0:
            summary["sample"] = generate(model, tokenizer, sample_prompt,
                                         config["sample_length"], config["temperature"],
                                         seed=config["seed"])
        return summary
    finally:
        if shutdown:
            ocl_shutdown(model, optimizer)


def build_arg_parser(defaults: Dict[str, Any] = DEFAULT_CONFIG,
                     description: str = "Train the OCL-LLM model on the AetherCL driver.",
                     save_dir: str = "checkpoints") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--gpu_id", type=int, default=0, help="device index (gpu_index of every call)")
    p.add_argument("--load_checkpoint", default=None, help="resume from this .npz checkpoint")
    p.add_argument("--save_dir", default=save_dir, help="directory for the best checkpoint")
    p.add_argument("--data_file", default=defaults["data_file"], help="UTF-8 training text")
    p.add_argument("--epochs", type=int, default=defaults["num_epochs"])
    p.add_argument("--steps", type=int, default=defaults["max_steps"],
                   help="stop after this many steps in total (default: all epochs)")
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        p.add_argument(f"--{name}", type=int, default=defaults[name])
    p.add_argument("--lr", type=float, default=defaults["lr"])
    p.add_argument("--wd", type=float, default=defaults["wd"], help="coupled L2 weight decay")
    p.add_argument("--eval_every", type=int, default=defaults["eval_every"])
    p.add_argument("--eval_batches", type=int, default=defaults["eval_batches"])
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--no_causal", action="store_true",
                   help="no attention mask (as the original model; the model can then peek at "
                        "the next character and its samples are meaningless)")
    p.add_argument("--sample_length", type=int, default=defaults["sample_length"])
    p.add_argument("--checkpoint_filename", default=defaults["checkpoint_filename"])
    p.add_argument("--plot", default=None, help="write the loss curve PNG here")
    return p


def config_from_args(args: argparse.Namespace, defaults: Dict[str, Any] = DEFAULT_CONFIG
                     ) -> Dict[str, Any]:
    config = dict(defaults)
    config.update(data_file=args.data_file, num_epochs=args.epochs, max_steps=args.steps,
                  lr=args.lr, wd=args.wd, eval_every=args.eval_every,
                  eval_batches=args.eval_batches, seed=args.seed, causal=not args.no_causal,
                  sample_length=args.sample_length,
                  checkpoint_filename=args.checkpoint_filename)
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        config[name] = getattr(args, name)
    return config


def print_summary(summary: Dict[str, Any], stream=None) -> None:
    out = stream if stream is not None else sys.stdout
    first, last = summary["first_val_loss"], summary["last_val_loss"]
    drop = (first - last) / first * 100 if first else 0.0
    print(f"[ocl] {summary['steps']} steps in {summary['seconds']:.1f} s "
          f"({summary['tokens_per_second']:.0f} tokens/s); validation loss {first:.4f} -> "
          f"{last:.4f} ({drop:.1f} % lower), best {summary['best_val_loss']:.4f}", file=out)
    if summary.get("checkpoint"):
        print(f"[ocl] checkpoint: {summary['checkpoint']} (+ .json metadata)", file=out)
    if summary.get("plot"):
        print(f"[ocl] loss curve: {summary['plot']}", file=out)
    if summary.get("sample") is not None:
        print("[ocl] sample:\n" + summary["sample"], file=out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_arg_parser().parse_args(argv)
    config = config_from_args(args)
    try:
        summary = train(config, gpu_id=args.gpu_id, load_checkpoint_path=args.load_checkpoint,
                        save_dir=args.save_dir, plot_path=args.plot)
    except (AetherCLError, MemoryError, FileNotFoundError, ValueError) as error:
        print(f"[ocl] error: {error}", file=sys.stderr)
        return 1
    print_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
