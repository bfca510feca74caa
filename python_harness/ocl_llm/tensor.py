"""OclTensor: a float32 (or int32, or 16-bit float: ocl_llm.mixed) tensor in a GPUBuffer with
reverse-mode autograd. Every operation runs on the device of its input through aethercl.ops;
results and gradients are created on the same runtime, gradients in their tensor's dtype."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from aethercl import Device, dtypes, ops
from aethercl import train as train_ops
from aethercl.streams import resolve

from .autograd import (AddBackwardContext, AddBroadcastPEBackwardContext,
                       BatchedTransposeLastTwoBackwardContext, FunctionContext,
                       GeluBackwardContext, LayerNormBackwardContext,
                       MatMulBackwardContext, MatMulBatchedBackwardContext, MulBackwardContext,
                       NoGradContext, ReshapeBackwardContext, ScalarMulBackwardContext,
                       SoftmaxBackwardContext, Transpose12BatchedBackwardContext,
                       TransposeBackwardContext, TransposeCPUFallbackBackwardContext,
                       final_gradient_observer, grad_mode, leaves_completed, topological_order)
from .buffer import GPUBuffer, constant_buffer
from .config import FP_TYPE, numel
from .runtime import Runtime


class OclTensor:
    """A tensor on the device. `data` is its GPUBuffer (views share one), `grad` its accumulated
    gradient once backward has reached it, `_ctx` the operation that produced it."""

    NoGradContext = NoGradContext

    @staticmethod
    def no_grad() -> NoGradContext:
        return NoGradContext()

    def __init__(self, data: Optional[np.ndarray], requires_grad: bool = False,
                 _gpu_buffer: Optional[GPUBuffer] = None, _shape=None, dtype=FP_TYPE,
                 runtime: Optional[Runtime] = None):
        host = None
        dtype = dtypes.normalize(dtype)
        sixteen = is_16bit(dtype)
        if data is not None:
            host = np.ascontiguousarray(data, dtype=np.float32 if sixteen else dtype)
            shape = host.shape
        else:
            shape = tuple(int(s) for s in _shape)
        self.shape: Tuple[int, ...] = tuple(shape)
        self.dtype = dtype
        self.numel = numel(self.shape)
        self.nbytes = self.numel * self.dtype.itemsize
        if _gpu_buffer is None:
            _gpu_buffer = GPUBuffer(self.nbytes, tag="tensor", dtype=self.dtype, runtime=runtime)
        self.data: GPUBuffer = _gpu_buffer
        if host is not None and host.nbytes:
            if sixteen:   # rounded on the device, to nearest even
                wide = OclTensor(host, runtime=self.runtime)
                convert_into(wide, self)
                wide.free_memory()
            else:
                self.data.write(host)
        self.requires_grad = bool(requires_grad) and grad_mode.enabled
        self.grad: Optional[OclTensor] = None
        self._ctx: Optional[FunctionContext] = None
        # The same values in a 16-bit format, written by the kernel that wrote these (a float32
        # gradient's copy for 16-bit branches: ocl_llm.mixed's LayerNorm backward), or None.
        self.rounded_copy: Optional[OclTensor] = None

    # --- construction ---------------------------------------------------------------------------
    @staticmethod
    def empty(shape, requires_grad: bool = False, dtype=FP_TYPE,
              runtime: Optional[Runtime] = None) -> "OclTensor":
        return OclTensor(None, requires_grad=requires_grad, _shape=tuple(shape), dtype=dtype,
                         runtime=runtime)

    @staticmethod
    def zeros(shape, requires_grad: bool = False, runtime: Optional[Runtime] = None,
              dtype=FP_TYPE) -> "OclTensor":
        """Zeros filled on the device (aethercl_memset on the current stream: no upload, so it
        can be recorded into a graph)."""
        out = OclTensor.empty(shape, requires_grad=requires_grad, dtype=dtype, runtime=runtime)
        if out.nbytes:
            lib = out.device.lib
            lib.check("aethercl_memset", out.device.index, out.data.ptr, 0, out.nbytes, 0,
                      resolve(lib, out.device.index))
        return out

    def new_empty(self, shape, dtype=None) -> "OclTensor":
        """An uninitialised tensor of this tensor's dtype (or dtype) on its runtime."""
        return OclTensor.empty(shape, dtype=self.dtype if dtype is None else dtype,
                               runtime=self.runtime)

    def new_zeros(self, shape) -> "OclTensor":
        return OclTensor.zeros(shape, runtime=self.runtime, dtype=self.dtype)

    def new_tensor(self, host: np.ndarray) -> "OclTensor":
        """A float32 tensor holding `host`, on this tensor's runtime."""
        return OclTensor(host, runtime=self.runtime)

    def _view(self, shape) -> "OclTensor":
        """Same buffer, other shape, no autograd link."""
        return OclTensor(None, _gpu_buffer=self.data, _shape=tuple(shape), dtype=self.dtype)

    @property
    def runtime(self) -> Runtime:
        return self.data.runtime

    @property
    def device(self) -> Device:
        return self.data.device

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
            self.grad = self.new_zeros(self.shape)
        return self.grad.data

    def get_grad_tensor(self) -> Optional["OclTensor"]:
        return self.grad

    def zero_grad(self) -> None:
        self.grad = None

    def _accumulate_grad(self, incoming: "OclTensor") -> None:
        if incoming.numel != self.numel:
            raise ValueError(f"gradient of {incoming.shape} for a tensor of {self.shape}")
        if incoming.dtype != self.dtype:   # a float32 gradient reaching a 16-bit tensor, ...
            copy = incoming.rounded_copy
            if copy is not None and copy.dtype == self.dtype:
                incoming = copy
            else:
                converted = self.new_empty(incoming.shape)
                convert_into(incoming, converted)
                incoming = converted
        if self.grad is None:
            # Gradient buffers are never written after creation, so adopting one is safe.
            self.grad = incoming if incoming.shape == self.shape else incoming._view(self.shape)
            if self.grad._ctx is not None or self.grad.requires_grad:
                self.grad = self.grad._view(self.shape)
            return
        total = self.new_empty(self.shape)
        if is_16bit(self.dtype):
            add_typed(self.grad, incoming, total)
        else:
            ops.add(self.device, self.grad.data.ptr, incoming.data.ptr, total.data.ptr,
                    self.numel)
        self.grad = total

    def backward(self, gradient=None, retain_graph: bool = False) -> None:
        """Reverse-mode pass from this tensor. Without retain_graph the graph is released as it is
        walked (contexts and intermediate gradients dropped), so its buffers are freed."""
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad")
        if gradient is None:
            if self.numel != 1:
                raise RuntimeError("backward() without a gradient needs a one-element tensor")
            gradient = self.new_tensor(np.ones(self.shape, FP_TYPE))
        elif isinstance(gradient, np.ndarray):
            gradient = self.new_tensor(gradient.astype(FP_TYPE).reshape(self.shape))
        walk = list(reversed(topological_order(self)))
        observer = final_gradient_observer()
        completed = leaves_completed(walk) if observer is not None else {}
        self._accumulate_grad(gradient)
        for position, node in enumerate(walk):
            ctx = node._ctx
            if ctx is None:
                continue
            if node.grad is not None:
                ctx.apply_gradients(ctx.backward(node.grad))
            if not retain_graph:
                node._ctx = None
                node.grad = None
            for leaf in completed.get(position, ()):
                observer(leaf)

    # --- host access ----------------------------------------------------------------------------
    def to_host(self) -> np.ndarray:
        """The values as a NumPy array (16-bit tensors widened to float32, exactly)."""
        if self.dtype is dtypes.bfloat16:
            return dtypes.bf16_bits_to_float32(self.data.read(self.shape, np.uint16))
        if is_16bit(self.dtype):
            return self.data.read(self.shape, self.dtype).astype(np.float32)
        return self.data.read(self.shape, self.dtype)

    def detach(self) -> "OclTensor":
        return self._view(self.shape)

    def clone(self) -> "OclTensor":
        copy = OclTensor(None, _gpu_buffer=self.data.clone(), _shape=self.shape, dtype=self.dtype)
        copy.requires_grad = self.requires_grad
        if self.grad is not None:
            copy.grad = OclTensor(None, _gpu_buffer=self.grad.data.clone(), _shape=self.shape,
                                  dtype=self.grad.dtype)
        return copy

    def free_memory(self) -> None:
        self.data.free()
        self.grad = None
        self._ctx = None

    # --- helpers for ops ------------------------------------------------------------------------
    def _result(self, shape, ctx: Optional[FunctionContext], dtype=None) -> "OclTensor":
        out = self.new_empty(shape, dtype)
        if ctx is not None and grad_mode.enabled and any(p.requires_grad for p in ctx.parents):
            out.requires_grad = True
            out._ctx = ctx
        return out

    # --- operations -----------------------------------------------------------------------------
    def to(self, dtype) -> "OclTensor":
        """This tensor in another float format (aethercl_convert, rounding to nearest even);
        itself when it has that format already. Gradients flow back converted."""
        dtype = dtypes.normalize(dtype)
        if dtype == self.dtype:
            return self
        out = self._result(self.shape, ConvertBackwardContext(self), dtype)
        convert_into(self, out)
        return out

    def float(self) -> "OclTensor":
        return self.to(np.float32)

    def matmul(self, other: "OclTensor") -> "OclTensor":
        if is_16bit(self.dtype) or is_16bit(other.dtype):
            return self.float().matmul(other.float())
        a, b = self, other
        if a.ndim in (2, 3) and b.ndim == 2:
            if a.shape[-1] != b.shape[0]:
                raise ValueError(f"matmul {a.shape} @ {b.shape}")
            B = a.shape[0] if a.ndim == 3 else 1
            M, K, N = a.shape[-2], a.shape[-1], b.shape[1]
            ctx = MatMulBackwardContext(a, b)
            ctx.save_for_backward(B, M, N, K)
            out = self._result(a.shape[:-1] + (N,), ctx)
            ops.matmul(self.device, a.data.ptr, b.data.ptr, out.data.ptr, B, M, N, K)
            return out
        if a.ndim >= 3 and b.ndim == a.ndim and a.shape[:-2] == b.shape[:-2]:
            if a.shape[-1] != b.shape[-2]:
                raise ValueError(f"matmul {a.shape} @ {b.shape}")
            B = numel(a.shape[:-2])
            M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
            ctx = MatMulBatchedBackwardContext(a, b)
            ctx.save_for_backward(B, M, N, K)
            out = self._result(a.shape[:-1] + (N,), ctx)
            ops.matmul_batched(self.device, a.data.ptr, b.data.ptr, out.data.ptr, B, M, N, K)
            return out
        raise ValueError(f"unsupported matmul shapes {a.shape} @ {b.shape}")

    __matmul__ = matmul

    def add(self, other) -> "OclTensor":
        """Equal shapes (execute_add_on_gpu), a bias of the last axis broadcast over the rest
        (execute_broadcast_add_gpu), or a Python number (a cached constant tensor)."""
        if isinstance(other, (int, float)):
            other = OclTensor(None, _shape=self.shape,
                              _gpu_buffer=constant_buffer(self.runtime, self.numel, float(other)))
        if not isinstance(other, OclTensor):
            raise TypeError(f"cannot add {type(other).__name__} to an OclTensor")
        if is_16bit(self.dtype) or is_16bit(other.dtype):
            return self._add_typed(other)
        if other.shape == self.shape:
            ctx = AddBackwardContext(self, other)
            out = self._result(self.shape, ctx)
            ops.add(self.device, self.data.ptr, other.data.ptr, out.data.ptr, self.numel)
            return out
        n = self.shape[-1] if self.ndim else 1
        if other.numel == n and all(s == 1 for s in other.shape[:-1]) and other.shape[-1] == n:
            # bias (1,N) or (N,) broadcast over (..., M, N)
            M = self.shape[-2] if self.ndim >= 2 else 1
            B = numel(self.shape[:-2]) if self.ndim >= 3 else 1
            ctx = AddBackwardContext(self, other)
            ctx.save_for_backward(B, M, n)
            out = self._result(self.shape, ctx)
            ops.broadcast_add(self.device, self.data.ptr, other.data.ptr, out.data.ptr, B, M, n)
            return out
        raise ValueError(f"unsupported broadcast {self.shape} + {other.shape}")

    __add__ = add

    def _add_typed(self, other: "OclTensor") -> "OclTensor":
        """self + other where either is 16-bit (aethercl_binary reads each in its format): the
        result is float32 unless both have the same 16-bit format, as PyTorch promotes."""
        if other.shape != self.shape:
            return self.float().add(other.float())
        dtype = self.dtype if self.dtype == other.dtype else np.dtype(np.float32)
        ctx = AddBackwardContext(self, other)
        out = self._result(self.shape, ctx, dtype)
        add_typed(self, other, out)
        return out

    def _add_broadcast_pe(self, table: GPUBuffer) -> "OclTensor":
        """self (..., S, E) + table[s, e] (a constant holding at least S*E floats)."""
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float()._add_broadcast_pe(table)
        S, E = self.shape[-2], self.shape[-1]
        B = numel(self.shape[:-2])
        ctx = AddBroadcastPEBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.add_broadcast_pe(self.device, self.data.ptr, table.ptr, out.data.ptr, B, S, E)
        return out

    def mul(self, other: "OclTensor") -> "OclTensor":
        if not isinstance(other, OclTensor):
            return self.mul_scalar(float(other))
        if is_16bit(self.dtype) or is_16bit(other.dtype):
            return self.float().mul(other.float())
        if other.shape != self.shape:
            raise ValueError(f"mul needs equal shapes, got {self.shape} * {other.shape}")
        ctx = MulBackwardContext(self, other)
        out = self._result(self.shape, ctx)
        ops.mul(self.device, self.data.ptr, other.data.ptr, out.data.ptr, self.numel)
        return out

    __mul__ = mul

    def mul_scalar(self, scalar: float) -> "OclTensor":
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float().mul_scalar(scalar)
        constant = constant_buffer(self.runtime, self.numel, scalar)
        ctx = ScalarMulBackwardContext(self)
        ctx.save_for_backward(constant, float(scalar))
        out = self._result(self.shape, ctx)
        ops.mul(self.device, self.data.ptr, constant.ptr, out.data.ptr, self.numel)
        return out

    def div_scalar(self, scalar: float) -> "OclTensor":
        return self.mul_scalar(1.0 / float(scalar))

    def gelu(self) -> "OclTensor":
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float().gelu()
        ctx = GeluBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.gelu(self.device, self.data.ptr, out.data.ptr, self.numel)
        return out

    def softmax(self, dim: int = -1) -> "OclTensor":
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float().softmax(dim)
        if dim not in (-1, self.ndim - 1):
            raise ValueError("softmax runs over the last axis only")
        cols = self.shape[-1]
        rows = self.numel // cols
        ctx = SoftmaxBackwardContext(self)
        out = self._result(self.shape, ctx)
        ops.softmax(self.device, self.data.ptr, out.data.ptr, rows, cols)
        ctx.save_for_backward(out.data, rows, cols)
        return out

    def layer_norm(self, eps: float = 1e-5) -> "OclTensor":
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float().layer_norm(eps)
        cols = self.shape[-1]
        rows = self.numel // cols
        ctx = LayerNormBackwardContext(self)
        ctx.save_for_backward(rows, cols, float(eps))
        out = self._result(self.shape, ctx)
        ops.layernorm(self.device, self.data.ptr, out.data.ptr, rows, cols, eps)
        return out

    def transpose(self, dim0: int, dim1: int) -> "OclTensor":
        if is_16bit(self.dtype):   # the float32 kernels below read float32 only
            return self.float().transpose(dim0, dim1)
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
            ops.transpose(self.device, self.data.ptr, out.data.ptr, self.shape[0], self.shape[1])
            return out
        if (d0, d1) == (nd - 2, nd - 1):
            b_flat = numel(self.shape[:-2])
            ctx = BatchedTransposeLastTwoBackwardContext(self)
            ctx.save_for_backward(b_flat, self.shape[-2], self.shape[-1])
            out = self._result(shape, ctx)
            ops.transpose_batched(self.device, self.data.ptr, out.data.ptr, b_flat,
                                  self.shape[-2], self.shape[-1])
            return out
        if nd == 4 and (d0, d1) == (1, 2):
            ctx = Transpose12BatchedBackwardContext(self)
            ctx.save_for_backward(*self.shape)
            out = self._result(shape, ctx)
            ops.transpose_12_batched(self.device, self.data.ptr, out.data.ptr, *self.shape)
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
            known = numel([s for s in shape if s != -1])
            shape[shape.index(-1)] = self.numel // known
        shape = tuple(shape)
        if numel(shape) != self.numel:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        out = self._view(shape)
        if grad_mode.enabled and self.requires_grad:
            out.requires_grad = True
            out._ctx = ReshapeBackwardContext(self)
        return out


class Parameter(OclTensor):
    """A trainable leaf tensor (requires_grad=True by default)."""

    def __init__(self, data: np.ndarray, requires_grad: bool = True, name: str = "param",
                 runtime: Optional[Runtime] = None):
        super().__init__(data, requires_grad=requires_grad, runtime=runtime)
        self.requires_grad = bool(requires_grad)
        self.name = name
        self.data.rename(name)


def is_16bit(dtype) -> bool:
    """Whether dtype is a 16-bit float format (bfloat16 or float16)."""
    return dtype is dtypes.bfloat16 or dtype == np.dtype(np.float16)


def convert_into(src: OclTensor, dst: OclTensor) -> None:
    """dst = src converted element by element to dst's format (aethercl_convert)."""
    device = src.device
    device.lib.check("aethercl_convert", device.index, src.data.ptr, dtypes.code_of(src.dtype),
                     dst.data.ptr, dtypes.code_of(dst.dtype), src.numel,
                     resolve(device.lib, device.index))


def add_typed(a: OclTensor, b: OclTensor, out: OclTensor) -> None:
    """out = a + b for equal shapes, each in its own format (aethercl_binary)."""
    desc = train_ops.broadcast_desc((a.numel,), (b.numel,), a.data.ptr, b.data.ptr, out.data.ptr)
    train_ops.binary(a.device, "add", desc)


class ConvertBackwardContext(FunctionContext):
    """y = x in another format: dx = dy converted back to x's format."""

    def backward(self, g):
        (x,) = self.parents
        dx = x.new_empty(x.shape)
        convert_into(g, dx)
        return (dx,)
