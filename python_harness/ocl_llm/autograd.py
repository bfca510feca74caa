"""Reverse-mode autograd: the grad mode, FunctionContext and one backward context per operation
(section 9 of the OCL-LLM documentation), and the topological walk backward() uses.

Parents are strong references, so every node of a graph lives until backward has run. Contexts
create their gradients next to their inputs (tensor.new_empty / new_zeros / new_tensor: the same
runtime and device) and call the driver through aethercl.ops on that device."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from aethercl import ops

if TYPE_CHECKING:
    from .tensor import OclTensor


class GradMode:
    """Whether operations record graphs (the frontend's one switch: no_grad turns it off)."""

    def __init__(self):
        self.enabled = True


grad_mode = GradMode()


def is_grad_enabled() -> bool:
    return grad_mode.enabled


class NoGradContext:
    """`with OclTensor.no_grad():` — operations inside record no graph."""

    def __enter__(self):
        self._previous = grad_mode.enabled
        grad_mode.enabled = False
        return self

    def __exit__(self, *exc):
        grad_mode.enabled = self._previous


class FunctionContext:
    """Remembers the inputs of one operation; backward(grad_output) returns one gradient (an
    OclTensor or None) per parent."""

    def __init__(self, *parents: "OclTensor"):
        self.parents: Tuple["OclTensor", ...] = parents
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
    return tensor.new_empty(tensor.shape) if wanted else None


def _ptr(tensor: Optional["OclTensor"]) -> Optional[int]:
    return tensor.data.ptr if tensor is not None else None


class MatMulBackwardContext(FunctionContext):
    """a (B,M,K) or (M,K) times a shared b (K,N): execute_matmul_backward_on_gpu."""

    def backward(self, g):
        a, b = self.parents
        B, M, N, K = self.saved_data
        da, db = _grad_like(a, self.needs(0)), _grad_like(b, self.needs(1))
        if da is not None or db is not None:
            ops.matmul_backward(g.device, a.data.ptr, b.data.ptr, g.data.ptr, _ptr(da), _ptr(db),
                                B, M, N, K)
        return da, db


class MatMulBatchedBackwardContext(FunctionContext):
    """(B,M,K) times (B,K,N): execute_matmul_batched_backward_on_gpu."""

    def backward(self, g):
        a, b = self.parents
        B, M, N, K = self.saved_data
        da, db = _grad_like(a, self.needs(0)), _grad_like(b, self.needs(1))
        if da is not None or db is not None:
            ops.matmul_batched_backward(g.device, a.data.ptr, b.data.ptr, g.data.ptr, _ptr(da),
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
            db = b.new_empty(b.shape)
            ops.reduce_sum(g.device, g.data.ptr, db.data.ptr, B, M, N)
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
            ops.mul_backward(g.device, g.data.ptr, a.data.ptr, b.data.ptr, _ptr(da), _ptr(db),
                             a.numel)
        return da, db


class ScalarMulBackwardContext(FunctionContext):
    """x * s, done as x * constant tensor: dx = dy * constant (mul_backward with dB = NULL)."""

    def backward(self, g):
        (x,) = self.parents
        constant, _scalar = self.saved_data
        dx = x.new_empty(x.shape)
        ops.mul_backward(g.device, g.data.ptr, x.data.ptr, constant.ptr, dx.data.ptr, None,
                         x.numel)
        return (dx,)


class GeluBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        dx = x.new_empty(x.shape)
        ops.gelu_backward(g.device, x.data.ptr, g.data.ptr, dx.data.ptr, x.numel)
        return (dx,)


class SoftmaxBackwardContext(FunctionContext):
    """Saves the output's buffer (not the output tensor, which would make a reference cycle)."""

    def backward(self, g):
        (x,) = self.parents
        y_buffer, rows, cols = self.saved_data
        dx = x.new_empty(x.shape)
        ops.softmax_backward(g.device, g.data.ptr, y_buffer.ptr, dx.data.ptr, rows, cols)
        return (dx,)


class LayerNormBackwardContext(FunctionContext):
    """Uses the forward input itself (kept alive by the strong parent reference)."""

    def backward(self, g):
        (x,) = self.parents
        rows, cols, eps = self.saved_data
        dx = x.new_empty(x.shape)
        ops.layernorm_backward(g.device, g.data.ptr, x.data.ptr, dx.data.ptr, rows, cols, eps)
        return (dx,)


class TransposeBackwardContext(FunctionContext):
    """2-D transpose: execute_transpose_backward_on_gpu with the forward input's dimensions."""

    def backward(self, g):
        (x,) = self.parents
        rows, cols = x.shape
        dx = x.new_empty(x.shape)
        ops.transpose_backward(g.device, g.data.ptr, dx.data.ptr, rows, cols)
        return (dx,)


class BatchedTransposeLastTwoBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        b_flat, d1, d2 = self.saved_data
        dx = x.new_empty(x.shape)
        ops.transpose_batched(g.device, g.data.ptr, dx.data.ptr, b_flat, d2, d1)
        return (dx,)


class Transpose12BatchedBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        B, D1, D2, D3 = self.saved_data
        dx = x.new_empty(x.shape)
        ops.transpose_12_batched(g.device, g.data.ptr, dx.data.ptr, B, D2, D1, D3)
        return (dx,)


class TransposeCPUFallbackBackwardContext(FunctionContext):
    """Any other axis swap goes through the host (read, np.transpose, write), both ways."""

    def backward(self, g):
        (x,) = self.parents
        (axes,) = self.saved_data
        host = g.to_host().transpose(np.argsort(axes))
        return (x.new_tensor(np.ascontiguousarray(host)),)


class ReshapeBackwardContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        return (g._view(x.shape),)


class EmbeddingBackwardContext(FunctionContext):
    """dW starts at zero and execute_embedding_backward_gpu scatter-adds dO rows into it."""

    def backward(self, g):
        (weight,) = self.parents
        ids_buffer, b, s, d, v = self.saved_data
        dw = weight.new_zeros(weight.shape)
        ops.embedding_backward(g.device, g.data.ptr, ids_buffer.ptr, dw.data.ptr, b, s, d, v)
        return (dw,)


_final_gradient_observer: Optional[Callable[["OclTensor"], None]] = None


@contextmanager
def observe_final_gradients(callback: Callable[["OclTensor"], None]) -> Iterator[None]:
    """Within the block, backward() calls callback(leaf) for every grad-requiring leaf (a
    parameter) as soon as its gradient is complete: right after the last operation that used it
    has been differentiated (its gradient's work enqueued). Data parallelism packs and reduces a
    layer's gradients from there while the backward pass goes on."""
    global _final_gradient_observer
    previous, _final_gradient_observer = _final_gradient_observer, callback
    try:
        yield
    finally:
        _final_gradient_observer = previous


def final_gradient_observer() -> Optional[Callable[["OclTensor"], None]]:
    return _final_gradient_observer


def leaves_completed(walk: Sequence["OclTensor"]) -> Dict[int, List["OclTensor"]]:
    """For a backward walk (nodes in the order they are differentiated): position -> the leaves
    whose last use is that node, in the order of its parents."""
    last: Dict[int, Tuple[int, "OclTensor"]] = {}
    for position, node in enumerate(walk):
        if node._ctx is None:
            continue
        for parent in node._ctx.parents:
            if parent.requires_grad and parent._ctx is None:
                last.pop(id(parent), None)   # re-inserted: dict order follows the last use
                last[id(parent)] = (position, parent)
    completed: Dict[int, List["OclTensor"]] = {}
    for position, leaf in last.values():
        completed.setdefault(position, []).append(leaf)
    return completed


def topological_order(root: "OclTensor") -> List["OclTensor"]:
    """Nodes reachable from root through grad-requiring parents, every node after its parents."""
    order: List["OclTensor"] = []
    visited = set()
    stack: List[Tuple["OclTensor", bool]] = [(root, False)]
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
