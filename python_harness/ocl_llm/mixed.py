"""16-bit activations (ocl_llm.runtime.set_activation_precision), as PyTorch's autocast keeps
them: Linear multiplies a 16-bit input by 16-bit copies of its float32 weight, made in the forward
pass (so a captured step makes them too; ocl_llm.weight_copies), and writes a 16-bit output with
the bias and GELU applied in the product's store; its backward writes dx in 16 bits and dW, db in
float32 straight from the 16-bit operands (no 16-bit weight gradient is rounded). Attention's
bias-free q, k and v projections run as one product into a packed [.., 3 * out] tensor
(qkv_linear), which the fused attention reads as it is (layout 2); the feed-forward pair
(feed_forward) is one node whose backward multiplies by GELU's slope in the second product's
store (the DGELU epilogue) instead of a separate kernel. linear() and feed_forward() can also add
a residual connection in the product's store (the float32 sum written at once, no add kernel);
the model does so only where asked (ocl_llm.fused's "residual" path). LayerNorm normalises the
float32 residual stream into 16 bits (add_layer_norm: with the residual add before it in the same
kernel) and returns a float32 dx, the residual connection's gradient added in the same kernel and
a 16-bit copy written beside it for the branches. Every result is computed in float32 and
rounded once.
"""
from __future__ import annotations

import ctypes
from typing import Optional, Tuple

from aethercl import dtypes
from aethercl import train as train_ops
from aethercl.gemm import COMPUTE_DEFAULT, F32, gemm_desc, gemm_epilogue
from aethercl.streams import resolve

from .autograd import AddBackwardContext, FunctionContext
from .runtime import Runtime
from .tensor import OclTensor, convert_into, is_16bit
from .weight_copies import packed_weight_copies, weight_copies

def activation_dtype(runtime: Runtime):
    """The 16-bit format activations are kept in on this runtime, or None for float32."""
    return runtime.activation_dtype


def _stream(device) -> Optional[int]:
    return resolve(device.lib, device.index, None)


def _product(device, a: OclTensor, b: OclTensor, c: OclTensor, m: int, n: int, k: int,
             trans_a: int = 0, trans_b: int = 0, epilogue=None, offset_b: int = 0,
             ldb: Optional[int] = None) -> None:
    """C (m x n) = op(A) op(B), each operand in its own format (A and B share one); B from
    element offset_b with rows of ldb elements (default: dense)."""
    desc = gemm_desc(a.data.ptr, b.data.ptr, c.data.ptr, m, n, k, trans_a=trans_a,
                     trans_b=trans_b, dtype_a=dtypes.code_of(a.dtype),
                     dtype_c=dtypes.code_of(c.dtype), compute=COMPUTE_DEFAULT,
                     offset_b=offset_b, ldb=ldb)
    if epilogue is None:
        device.lib.check("aethercl_gemm", device.index, ctypes.byref(desc), _stream(device))
    else:
        device.lib.check("aethercl_gemm_fused", device.index, ctypes.byref(desc),
                         ctypes.byref(epilogue), _stream(device))


def _bias_gradient(device, dpre: OclTensor, b: OclTensor, rows: int) -> OclTensor:
    """db = the column sums of dpre (rows x N) in float32."""
    db = b.new_empty(b.shape)
    desc = train_ops.broadcast_desc((rows, b.shape[-1]), (1, b.shape[-1]))
    train_ops.binary_backward(device, "add", desc, dpre.data.ptr, None, db.data.ptr)
    return db


def _epilogue(b: Optional[OclTensor], gelu: bool, pre: Optional[OclTensor],
              residual: Optional[OclTensor] = None):
    """The forward's epilogue: bias and/or GELU (storing pre), plus a residual, or None for a
    plain product."""
    if b is None and not gelu:
        return None
    kind = ("bias_gelu" if gelu else "bias") if b is not None else "gelu"
    return gemm_epilogue(kind, bias=b.data.ptr if b is not None else None,
                         dtype_bias=dtypes.code_of(b.dtype) if b is not None else F32,
                         pre=pre.data.ptr if pre is not None else None,
                         residual=residual.data.ptr if residual is not None else None)


def _residual_output(x: OclTensor, shape, ctx, residual: Optional[OclTensor]) -> OclTensor:
    """The output of a product over x: in x's format, or the residual's with one."""
    if residual is None:
        return x._result(shape, ctx)
    if tuple(residual.shape) != tuple(shape):
        raise ValueError(f"a residual of {residual.shape} for an output of {shape}")
    return x._result(shape, ctx, residual.dtype)


def _branch_gradient(g: OclTensor, dtype) -> OclTensor:
    """g in the products' format (a residual output's gradient is in the residual's)."""
    if g.dtype == dtype:
        return g
    converted = g.new_empty(g.shape, dtype)
    convert_into(g, converted)
    return converted


class LinearContext(FunctionContext):
    """y = act(x W + b) (+ r) with x 16-bit and W, b float32 masters: dpre = g or GELU's slope at
    pre times g (16-bit), dx = dpre W16^T (16-bit, from W16 read transposed), dW = x^T dpre and
    db = column sums of dpre (float32); r's gradient is g."""

    def backward(self, g):
        x, W = self.parents[0], self.parents[1]
        W16, pre, rows, has_bias, has_residual = self.saved_data
        b = self.parents[2] if has_bias else None
        device = g.device
        K, N = W.shape
        dres = g if has_residual else None
        g = _branch_gradient(g, x.dtype)
        if pre is not None:
            dpre = g.new_empty(g.shape)
            train_ops.unary_backward(device, "gelu", pre.data.ptr, g.data.ptr, dpre.data.ptr,
                                     g.numel)
        else:
            dpre = g
        dx = dW = db = None
        if self.needs(0):
            dx = x.new_empty(x.shape)
            _product(device, dpre, W16, dx, rows, K, N, trans_b=1)
        if self.needs(1):
            dW = W.new_empty(W.shape)
            _product(device, x, dpre, dW, K, N, rows, trans_a=1)
        if b is not None and self.needs(2):
            db = _bias_gradient(device, dpre, b, rows)
        return (dx, dW) + ((db,) if b is not None else ()) + ((dres,) if dres is not None else ())


def linear(x: OclTensor, W: OclTensor, b: Optional[OclTensor], gelu: bool, dtype,
           residual: Optional[OclTensor] = None) -> OclTensor:
    """act(x W + b) in dtype for x (..., in) (converted to dtype first if it is not), W (in, out)
    and b (1, out) float32 (or None); GELU (erf form) when asked. With a residual (the output's
    shape, any format; with a bias and no GELU): residual + x W + b in the residual's format,
    added in the product's store."""
    if residual is not None and (gelu or b is None):
        raise ValueError("linear() adds a residual to a product with a bias and no GELU")
    x = x.to(dtype)
    K, N = W.shape
    rows = x.numel // K
    W16, W16T = weight_copies(W, dtype)
    parents = (x, W) + ((b,) if b is not None else ()) + ((residual,) if residual is not None
                                                          else ())
    ctx = LinearContext(*parents)
    out = _residual_output(x, x.shape[:-1] + (N,), ctx, residual)
    pre = out.new_empty(out.shape) if gelu else None
    _product(x.device, x, W16T, out, rows, N, K, trans_b=1,
             epilogue=_epilogue(b, gelu, pre, residual))
    ctx.save_for_backward(W16, pre, rows, b is not None, residual is not None)
    return out


class FeedForwardContext(FunctionContext):
    """y = h W2 + b2 with h = GELU(x W1 + b1), x and y 16-bit: the backward of two 16-bit Linears
    (dW, db float32) where the slope of GELU is applied in the store of dh = g W2^T (DGELU, pre
    read from the forward), so dpre comes out of that product directly."""

    def backward(self, g):
        x, W1, b1, W2, b2 = self.parents[:5]
        W1_16, W2_16, pre, h, rows = self.saved_data
        device = g.device
        K, F = W1.shape
        N = W2.shape[1]
        grads = [None] * len(self.parents)
        if len(self.parents) > 5:   # the residual's gradient is g itself
            grads[5] = g
        g = _branch_gradient(g, x.dtype)
        if self.needs(3):
            grads[3] = W2.new_empty(W2.shape)
            _product(device, h, g, grads[3], F, N, rows, trans_a=1)
        if self.needs(4):
            grads[4] = _bias_gradient(device, g, b2, rows)
        if self.needs(0) or self.needs(1) or self.needs(2):
            dpre = h.new_empty(h.shape)
            _product(device, g, W2_16, dpre, rows, F, N, trans_b=1,
                     epilogue=gemm_epilogue("dgelu", pre=pre.data.ptr))
            if self.needs(0):
                grads[0] = x.new_empty(x.shape)
                _product(device, dpre, W1_16, grads[0], rows, K, F, trans_b=1)
            if self.needs(1):
                grads[1] = W1.new_empty(W1.shape)
                _product(device, x, dpre, grads[1], K, F, rows, trans_a=1)
            if self.needs(2):
                grads[2] = _bias_gradient(device, dpre, b1, rows)
        return tuple(grads)


def feed_forward(x: OclTensor, W1: OclTensor, b1: OclTensor, W2: OclTensor, b2: OclTensor,
                 dtype, residual: Optional[OclTensor] = None) -> OclTensor:
    """GELU(x W1 + b1) W2 + b2 in dtype for x (..., in), W1 (in, hidden), W2 (hidden, out) and
    biases (1, hidden), (1, out) float32: the two 16-bit Linears of linear() as one autograd node
    (the hidden activation is internal, so its gradient can take GELU's slope in the product).
    With a residual: residual + that, in the residual's format (as linear())."""
    x = x.to(dtype)
    K, F = W1.shape
    N = W2.shape[1]
    rows = x.numel // K
    W1_16, W1_16T = weight_copies(W1, dtype)
    W2_16, W2_16T = weight_copies(W2, dtype)
    ctx = FeedForwardContext(*((x, W1, b1, W2, b2) + ((residual,) if residual is not None
                                                       else ())))
    h = x.new_empty(x.shape[:-1] + (F,))
    pre = h.new_empty(h.shape)
    device = x.device
    _product(device, x, W1_16T, h, rows, F, K, trans_b=1, epilogue=_epilogue(b1, True, pre))
    out = _residual_output(x, x.shape[:-1] + (N,), ctx, residual)
    _product(device, h, W2_16T, out, rows, N, F, trans_b=1,
             epilogue=_epilogue(b2, False, None, residual))
    ctx.save_for_backward(W1_16, W2_16, pre, h, rows)
    return out


class QKVContext(FunctionContext):
    """qkv = x [Wq Wk Wv] (bias-free, 16-bit, packed): dx = dqkv W16^T with W16 = [Wq Wk Wv] in
    16 bits (one product over k = 3 out), dW_z = x^T dqkv[:, z out : (z + 1) out] (float32)."""

    def backward(self, g):
        x, weights = self.parents[0], self.parents[1:]
        W16, rows = self.saved_data
        device = g.device
        K, N = weights[0].shape
        grads = [None] * len(self.parents)
        if self.needs(0):
            grads[0] = x.new_empty(x.shape)
            _product(device, g, W16, grads[0], rows, K, 3 * N, trans_b=1)
        for z, W in enumerate(weights):
            if self.needs(1 + z):
                grads[1 + z] = W.new_empty(W.shape)
                _product(device, x, g, grads[1 + z], K, N, rows, trans_a=1, offset_b=z * N,
                         ldb=3 * N)
        return tuple(grads)


def qkv_linear(x: OclTensor, Wq: OclTensor, Wk: OclTensor, Wv: OclTensor, dtype) -> OclTensor:
    """x (..., in) times Wq, Wk, Wv (in, out) float32, side by side: (..., 3 * out) in dtype,
    [q | k | v] in each row (the fused attention's layout 2). One product against packed 16-bit
    copies of the three weights (one launch, ocl_llm.weight_copies)."""
    x = x.to(dtype)
    K, N = Wq.shape
    rows = x.numel // K
    W16, W16T = packed_weight_copies([Wq, Wk, Wv], dtype)
    ctx = QKVContext(x, Wq, Wk, Wv)
    out = x._result(x.shape[:-1] + (3 * N,), ctx)
    _product(x.device, x, W16T, out, rows, 3 * N, K, trans_b=1)
    ctx.save_for_backward(W16, rows)
    return out


class NormContext(FunctionContext):
    """LayerNorm without affine parameters: dx (x's format) from dy (y's), statistics recomputed
    from x. The gradient x already holds from its other consumers (the residual connection's)
    is added in the same kernel (desc.dres) instead of by a separate add. A float32 dx is also
    written in the normalised output's 16-bit format (desc.dx_copy, dx.rounded_copy): the 16-bit
    branches that x's gradient reaches through residual adds take that copy instead of a
    conversion of their own."""

    def backward(self, g):
        (x,) = self.parents
        rows, cols, eps = self.saved_data
        dx = x.new_empty(x.shape)
        if is_16bit(g.dtype) and not is_16bit(x.dtype):
            dx.rounded_copy = x.new_empty(x.shape, g.dtype)
        self.folded = x.requires_grad and x.grad is not None
        desc = train_ops.T.NormDesc(kind=0, rows=rows, cols=cols, eps=eps, x=x.data.ptr,
                                    dy=g.data.ptr, dx=dx.data.ptr,
                                    dres=x.grad.data.ptr if self.folded else None,
                                    dx_copy=dx.rounded_copy.data.ptr if dx.rounded_copy else None)
        train_ops.norm_backward(g.device, desc)
        return (dx,)

    def apply_gradients(self, grads) -> None:
        if not self.folded:
            super().apply_gradients(grads)
            return
        (x,) = self.parents
        x.grad = grads[0]   # x's earlier gradient is in it already


def _normalized(s: OclTensor, eps: float, dtype, **fields) -> OclTensor:
    """The LayerNorm node of s (its output in dtype, NormContext) and its forward call; fields
    are the descriptor's others (x, res, sum: where s is written by the same kernel)."""
    cols = s.shape[-1]
    rows = s.numel // cols
    ctx = NormContext(s)
    ctx.save_for_backward(rows, cols, float(eps))
    out = s._result(s.shape, ctx, dtype)
    fields.setdefault("x", s.data.ptr)
    desc = train_ops.T.NormDesc(kind=0, rows=rows, cols=cols, eps=float(eps), y=out.data.ptr,
                                **fields)
    train_ops.norm_forward(s.device, desc)
    return out


def layer_norm(x: OclTensor, eps: float, dtype) -> OclTensor:
    """(x - mean) / sqrt(var + eps) over the last axis, written in dtype; x in any format."""
    return _normalized(x, eps, dtype)


def add_layer_norm(x: OclTensor, r: OclTensor, eps: float, dtype) -> Tuple[OclTensor, OclTensor]:
    """(s, y): the residual add s = x + r (float32 unless both share a 16-bit format, as add()
    promotes) and layer_norm(s, eps, dtype), in one kernel (desc.res, desc.sum) where s keeps x's
    format; autograd sees the add and the normalisation as two nodes, as when called apart."""
    if r.shape != x.shape or (r.dtype != x.dtype and is_16bit(x.dtype)):
        s = x.add(r)
        return s, layer_norm(s, eps, dtype)
    s = x._result(x.shape, AddBackwardContext(x, r))
    return s, _normalized(s, eps, dtype, x=x.data.ptr, res=r.data.ptr, sum=s.data.ptr)


def cross_entropy_rows(logits: OclTensor, targets, loss_rows, weights: Optional[OclTensor]):
    """Each row's cross entropy into loss_rows (float32) and, with weights ((1, rows, 1) float32,
    the per-row scale), the gradient weights * (softmax - onehot) in the logits' format: one fused
    kernel for the loss and unscaled gradient, one broadcast multiply."""
    B, S, V = logits.shape
    rows = B * S
    device = logits.device
    grad = logits.new_empty(logits.shape) if weights is not None else None
    desc = train_ops.T.CrossEntropyDesc(rows=rows, classes=V, ignore_index=-1,
                                        label_smoothing=0.0, reduction=train_ops.T.NO_REDUCTION,
                                        logits=logits.data.ptr, targets=targets.ptr,
                                        loss=loss_rows.ptr,
                                        grad=grad.data.ptr if grad is not None else None)
    train_ops.cross_entropy(device, desc)
    if grad is None:
        return None
    scaled = logits.new_empty(logits.shape)
    mul = train_ops.broadcast_desc((rows, V), (rows, 1), grad.data.ptr, weights.data.ptr,
                                   scaled.data.ptr)
    train_ops.binary(device, "mul", mul)
    return scaled

