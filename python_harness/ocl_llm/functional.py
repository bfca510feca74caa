"""Differentiable operations of the version-3 training ops on OclTensor: activations, broadcast
arithmetic, reductions, gather, dropout, LayerNorm/RMSNorm with affine parameters, batch normalisation,
convolution, pooling and the losses. Each forward calls one aethercl_* entry point on the input's
device and records a FunctionContext (ocl_llm.autograd) whose backward calls the matching
backward entry point; nothing leaves the device."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from aethercl import train as ops  # stream=None there: the thread's current stream
from aethercl import train_types as T
from aethercl.train import broadcast_desc

from .autograd import FunctionContext
from .buffer import GPUBuffer
from .config import FP_TYPE, IDX_TYPE, numel
from .tensor import OclTensor


def _ptr(t: Optional[OclTensor]) -> Optional[int]:
    return t.data.ptr if t is not None else None


def _grad(t: Optional[OclTensor], wanted: bool) -> Optional[OclTensor]:
    return t.new_empty(t.shape) if (t is not None and wanted) else None


# ---- activations and scalar forms ---------------------------------------------------------------
class UnaryContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        code, alpha = self.saved_data
        dx = x.new_empty(x.shape)
        ops.unary_backward(g.device, code, x.data.ptr, g.data.ptr, dx.data.ptr, x.numel, alpha)
        return (dx,)


def unary(x: OclTensor, op: str, alpha: float = 0.0) -> OclTensor:
    """y = f(x) for an aethercl_unary_op named as in train_types.UNARY_OPS."""
    code = T.UNARY[op]
    ctx = UnaryContext(x)
    ctx.save_for_backward(code, float(alpha))
    out = x._result(x.shape, ctx)
    ops.unary(x.device, code, x.data.ptr, out.data.ptr, x.numel, float(alpha))
    return out


def relu(x): return unary(x, "relu")
def leaky_relu(x, slope=0.01): return unary(x, "leaky_relu", slope)
def sigmoid(x): return unary(x, "sigmoid")
def tanh(x): return unary(x, "tanh")
def silu(x): return unary(x, "silu")
def gelu(x, approximate: str = "none"): return unary(x, "gelu_tanh" if approximate == "tanh" else "gelu")


# ---- broadcasting binary ops --------------------------------------------------------------------
def _padded(shape) -> Tuple[int, ...]:
    return tuple(shape) if len(shape) else (1,)


class BinaryContext(FunctionContext):
    def backward(self, g):
        a, b = self.parents
        code, = self.saved_data
        da, db = _grad(a, self.needs(0)), _grad(b, self.needs(1))
        if da is not None or db is not None:
            desc = broadcast_desc(_padded(a.shape), _padded(b.shape), a.data.ptr, b.data.ptr)
            ops.binary_backward(g.device, code, desc, g.data.ptr, _ptr(da), _ptr(db))
        return da, db


_SCALAR_FORMS = {"add": ("add_scalar", "add_scalar"), "sub": ("sub_scalar", "rsub_scalar"),
                 "mul": ("mul_scalar", "mul_scalar"), "div": ("div_scalar", "rdiv_scalar"),
                 "max": ("max_scalar", "max_scalar"), "min": ("min_scalar", "min_scalar"),
                 "pow": ("pow_scalar", None)}


def binary(a, b, op: str) -> OclTensor:
    """a op b with NumPy broadcasting (up to 4 dimensions); a Python number on either side uses
    the scalar form of aethercl_unary."""
    if not isinstance(b, OclTensor):
        return unary(a, _SCALAR_FORMS[op][0], float(b))
    if not isinstance(a, OclTensor):
        reverse = _SCALAR_FORMS[op][1]
        if reverse is None:
            raise TypeError(f"number {op} tensor is not supported")
        return unary(b, reverse, float(a))
    shape = np.broadcast_shapes(a.shape, b.shape)
    if len(shape) > 4:
        raise ValueError(f"broadcasting supports up to 4 dimensions, got {shape}")
    code = T.BINARY[op]
    ctx = BinaryContext(a, b)
    ctx.save_for_backward(code)
    out = a._result(shape, ctx)
    desc = broadcast_desc(_padded(a.shape), _padded(b.shape), a.data.ptr, b.data.ptr,
                          out.data.ptr)
    ops.binary(a.device, code, desc)
    return out


def add(a, b): return binary(a, b, "add")
def sub(a, b): return binary(a, b, "sub")
def mul(a, b): return binary(a, b, "mul")
def div(a, b): return binary(a, b, "div")


# ---- reductions ---------------------------------------------------------------------------------
def _axis_view(shape, axis) -> Tuple[Tuple[int, int, int], int]:
    """(outer, len, inner) of the axis and the axis normalised."""
    nd = len(shape)
    axis = axis % nd
    return (numel(shape[:axis]), shape[axis], numel(shape[axis + 1:])), axis


class ReduceContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        code, view = self.saved_data
        dx = x.new_empty(x.shape)
        needs_x = code in (T.MAX, T.MIN)
        ops.reduce_backward(g.device, code, x.data.ptr if needs_x else None, g.data.ptr,
                            dx.data.ptr, view, 1)
        return (dx,)


def reduce(x: OclTensor, op: int, axis: Optional[int] = None, keepdims: bool = False):
    """SUM / MEAN / MAX / MIN (differentiable) or ARGMAX / ARGMIN (int32, no gradient) over one
    axis, or over everything when axis is None."""
    shape = x.shape if x.ndim else (1,)
    if axis is None:
        view, out_shape = (1, x.numel, 1), ((1,) * len(shape) if keepdims else ())
    else:
        view, a = _axis_view(shape, axis)
        out_shape = tuple(1 if i == a else s for i, s in enumerate(shape)) if keepdims else \
            tuple(s for i, s in enumerate(shape) if i != a)
    if op in (T.ARGMAX, T.ARGMIN):
        out = OclTensor.empty(out_shape, dtype=IDX_TYPE, runtime=x.runtime)
        ops.reduce(x.device, op, x.data.ptr, out.data.ptr, view, 1)
        return out
    ctx = ReduceContext(x)
    ctx.save_for_backward(op, view)
    out = x._result(out_shape, ctx)
    ops.reduce(x.device, op, x.data.ptr, out.data.ptr, view, 1)
    return out


def sum(x, axis=None, keepdims=False): return reduce(x, T.SUM, axis, keepdims)  # noqa: A001
def mean(x, axis=None, keepdims=False): return reduce(x, T.MEAN, axis, keepdims)
def amax(x, axis=None, keepdims=False): return reduce(x, T.MAX, axis, keepdims)
def argmax(x, axis=None): return reduce(x, T.ARGMAX, axis)


# ---- gather along an axis (torch.gather) ----------------------------------------------------------
class GatherContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        index, axis = self.saved_data
        dx = x.new_zeros(x.shape)   # scatter_add adds into it: the gradient of gather
        ops.scatter_add(g.device, _index_desc(x.shape, index, axis, dx, g))
        return (dx,)


def _index_desc(shape, index: OclTensor, axis: int, x: OclTensor, y: OclTensor) -> T.IndexDesc:
    pad = lambda s: [int(v) for v in s] + [1] * (4 - len(s))  # noqa: E731
    return T.IndexDesc(ndim=len(shape), axis=axis, shape_a=pad(shape), shape_b=pad(index.shape),
                       x=x.data.ptr, index=index.data.ptr, y=y.data.ptr)


def gather(x: OclTensor, axis: int, index) -> OclTensor:
    """out[.., i, ..] = x[.., index[.., i, ..], ..] (torch.gather); index: an int32 OclTensor or
    NumPy array with x's shape except along axis. Out-of-range indices give 0."""
    if not isinstance(index, OclTensor):
        index = OclTensor(np.ascontiguousarray(index, IDX_TYPE), dtype=IDX_TYPE, runtime=x.runtime)
    axis = axis % max(x.ndim, 1)
    ctx = GatherContext(x)
    ctx.save_for_backward(index, axis)
    out = x._result(tuple(index.shape), ctx)
    ops.gather(x.device, _index_desc(x.shape, index, axis, x, out))
    return out


# ---- dropout ------------------------------------------------------------------------------------
class Generator:
    """A Philox stream: (seed, offset); every draw of n numbers advances the offset by n, so runs
    with the same seed repeat exactly on every device."""

    def __init__(self, seed: int = 0):
        self.seed, self.offset = int(seed) & (2**64 - 1), 0

    def draw(self, n: int) -> Tuple[int, int]:
        offset = self.offset
        self.offset += int(n)
        return self.seed, offset


default_generator = Generator(0x5EED)


class DropoutContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        mask, p = self.saved_data
        dx = x.new_empty(x.shape)
        ops.dropout_backward(g.device, g.data.ptr, mask.ptr, dx.data.ptr, x.numel, p)
        return (dx,)


def dropout(x: OclTensor, p: float = 0.5, training: bool = True,
            generator: Optional[Generator] = None) -> OclTensor:
    """Inverted dropout: kept elements are scaled by 1 / (1 - p); identity when not training."""
    if not training or p == 0.0:
        return x
    seed, offset = (generator or default_generator).draw(x.numel)
    mask = GPUBuffer(x.numel, tag="dropout_mask", dtype=np.uint8, runtime=x.runtime)
    ctx = DropoutContext(x)
    ctx.save_for_backward(mask, float(p))
    out = x._result(x.shape, ctx)
    ops.dropout(x.device, x.data.ptr, out.data.ptr, mask.ptr, x.numel, float(p), seed, offset)
    return out


# ---- normalisation ------------------------------------------------------------------------------
class NormContext(FunctionContext):
    """Parents: x, then gamma and beta where given (flags in saved_data)."""

    def backward(self, g):
        kind, eps, has_gamma, has_beta, rows, cols = self.saved_data
        x = self.parents[0]
        gamma = self.parents[1] if has_gamma else None
        beta = self.parents[1 + has_gamma] if has_beta else None
        dx = _grad(x, self.needs(0))
        dgamma = _grad(gamma, has_gamma and gamma.requires_grad)
        dbeta = _grad(beta, has_beta and beta.requires_grad)
        desc = T.NormDesc(kind=kind, rows=rows, cols=cols, eps=eps, x=x.data.ptr,
                          gamma=_ptr(gamma), dy=g.data.ptr, dx=_ptr(dx), dgamma=_ptr(dgamma),
                          dbeta=_ptr(dbeta))
        ops.norm_backward(g.device, desc)
        return tuple(t for t in (dx, dgamma if has_gamma else False, dbeta if has_beta else False)
                     if t is not False)


def layer_norm(x: OclTensor, gamma: Optional[OclTensor] = None,
               beta: Optional[OclTensor] = None, eps: float = 1e-5, rms: bool = False):
    """LayerNorm (or RMSNorm) over the last axis with optional affine parameters."""
    cols = x.shape[-1]
    rows = x.numel // cols
    kind = T.NORM_RMS if rms else T.NORM_LAYER
    parents = [x] + [t for t in (gamma, beta) if t is not None]
    ctx = NormContext(*parents)
    ctx.save_for_backward(kind, float(eps), gamma is not None, beta is not None, rows, cols)
    out = x._result(x.shape, ctx)
    ops.norm_forward(x.device, T.NormDesc(kind=kind, rows=rows, cols=cols, eps=eps,
                                          x=x.data.ptr, gamma=_ptr(gamma), beta=_ptr(beta),
                                          y=out.data.ptr))
    return out


class BatchNormContext(FunctionContext):
    def backward(self, g):
        x, gamma, beta = self.parents
        fields = self.saved_data[0]
        dx, dgamma, dbeta = (_grad(x, self.needs(0)), _grad(gamma, self.needs(1)),
                             _grad(beta, self.needs(2)))
        desc = T.BatchNormDesc(**fields, x=x.data.ptr, gamma=gamma.data.ptr, dy=g.data.ptr,
                               dx=_ptr(dx), dgamma=_ptr(dgamma), dbeta=_ptr(dbeta))
        ops.batchnorm_backward(g.device, desc)
        return dx, dgamma, dbeta


def batch_norm(x: OclTensor, gamma: OclTensor, beta: OclTensor, running_mean: GPUBuffer,
               running_var: GPUBuffer, training: bool, momentum: float = 0.1,
               eps: float = 1e-5) -> OclTensor:
    """BatchNorm over (N, C, ...) with per-channel gamma/beta; running statistics are updated in
    training and used in evaluation."""
    n, c = x.shape[0], x.shape[1]
    spatial = numel(x.shape[2:])
    fields = dict(n=n, channels=c, spatial=spatial, training=int(training),
                  momentum=float(momentum), eps=float(eps), running_mean=running_mean.ptr,
                  running_var=running_var.ptr)
    saves = None
    if training:
        saves = (GPUBuffer(c * 4, tag="bn_save_mean", runtime=x.runtime),
                 GPUBuffer(c * 4, tag="bn_save_rstd", runtime=x.runtime))
        fields.update(save_mean=saves[0].ptr, save_rstd=saves[1].ptr)
    ctx = BatchNormContext(x, gamma, beta)
    ctx.save_for_backward(fields, saves)
    out = x._result(x.shape, ctx)
    ops.batchnorm_forward(x.device, T.BatchNormDesc(**fields, x=x.data.ptr, gamma=gamma.data.ptr,
                                                    beta=beta.data.ptr, y=out.data.ptr))
    return out


# ---- convolution and pooling --------------------------------------------------------------------
def _pair(v) -> Tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def conv_output(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


class Conv2dContext(FunctionContext):
    def backward(self, g):
        x, weight = self.parents[0], self.parents[1]
        bias = self.parents[2] if len(self.parents) > 2 else None
        fields = self.saved_data[0]
        dx, dw = _grad(x, self.needs(0)), _grad(weight, self.needs(1))
        db = _grad(bias, bias is not None and bias.requires_grad)
        ops.conv2d_backward(g.device, T.Conv2dDesc(**fields, x=x.data.ptr, weight=weight.data.ptr,
                                                   dy=g.data.ptr, dx=_ptr(dx), dweight=_ptr(dw),
                                                   dbias=_ptr(db)))
        return (dx, dw) + ((db,) if bias is not None else ())


def conv2d(x: OclTensor, weight: OclTensor, bias: Optional[OclTensor] = None, stride=1,
           padding=0, dilation=1, groups: int = 1) -> OclTensor:
    """NCHW convolution (PyTorch's conv2d) through aethercl_conv2d_forward."""
    n, c_in, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    oh, ow = conv_output(h, kh, sh, ph, dh), conv_output(w, kw, sw, pw, dw)
    fields = dict(n=n, c_in=c_in, h=h, w=w, c_out=c_out, kernel_h=kh, kernel_w=kw, stride_h=sh,
                  stride_w=sw, pad_h=ph, pad_w=pw, dilation_h=dh, dilation_w=dw, groups=groups)
    ctx = Conv2dContext(*([x, weight] + ([bias] if bias is not None else [])))
    ctx.save_for_backward(fields)
    out = x._result((n, c_out, oh, ow), ctx)
    ops.conv2d_forward(x.device, T.Conv2dDesc(**fields, x=x.data.ptr, weight=weight.data.ptr,
                                              bias=_ptr(bias), y=out.data.ptr))
    return out


class Pool2dContext(FunctionContext):
    def backward(self, g):
        (x,) = self.parents
        fields, indices = self.saved_data
        dx = x.new_empty(x.shape)
        ops.pool2d_backward(g.device, T.Pool2dDesc(**fields, dy=g.data.ptr,
                                                   indices=indices.ptr if indices else None,
                                                   dx=dx.data.ptr))
        return (dx,)


def _pool(x: OclTensor, kind: int, kernel, stride, padding, count_include_pad=True):
    n, c, h, w = x.shape
    (kh, kw) = _pair(kernel)
    (sh, sw) = _pair(stride if stride is not None else kernel)
    (ph, pw) = _pair(padding)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    fields = dict(kind=kind, n=n, channels=c, h=h, w=w, kernel_h=kh, kernel_w=kw, stride_h=sh,
                  stride_w=sw, pad_h=ph, pad_w=pw, count_include_pad=int(count_include_pad))
    indices = GPUBuffer(n * c * oh * ow * 4, tag="pool_indices", dtype=IDX_TYPE,
                        runtime=x.runtime) if kind == T.POOL_MAX else None
    ctx = Pool2dContext(x)
    ctx.save_for_backward(fields, indices)
    out = x._result((n, c, oh, ow), ctx)
    ops.pool2d_forward(x.device, T.Pool2dDesc(**fields, x=x.data.ptr, y=out.data.ptr,
                                              indices=indices.ptr if indices else None))
    return out


def max_pool2d(x, kernel, stride=None, padding=0):
    return _pool(x, T.POOL_MAX, kernel, stride, padding)


def avg_pool2d(x, kernel, stride=None, padding=0, count_include_pad=True):
    return _pool(x, T.POOL_AVG, kernel, stride, padding, count_include_pad)


# ---- losses -------------------------------------------------------------------------------------
class LossContext(FunctionContext):
    """The gradient of the loss was computed with the loss; backward scales it by the upstream
    gradient (broadcast: one value, or one per row for reduction='none')."""

    def backward(self, g):
        (x,) = self.parents
        grad, upstream_shape = self.saved_data
        dx = x.new_empty(x.shape)
        desc = broadcast_desc(x.shape, upstream_shape, grad.data.ptr, g.data.ptr, dx.data.ptr)
        ops.binary(g.device, T.BINARY["mul"], desc)
        return (dx,)


_REDUCTIONS = {"sum": T.SUM, "mean": T.MEAN, "none": T.NO_REDUCTION}


def cross_entropy(logits: OclTensor, targets, ignore_index: int = -100,
                  label_smoothing: float = 0.0, reduction: str = "mean") -> OclTensor:
    """Cross-entropy of (N, C) logits against int class targets (a NumPy array or an int32
    OclTensor), with ignore_index and label smoothing, fused with log-softmax on the device."""
    rows, classes = logits.numel // logits.shape[-1], logits.shape[-1]
    if isinstance(targets, OclTensor):
        target_buffer, owned = targets.data, None
    else:
        host = np.ascontiguousarray(targets, dtype=IDX_TYPE).reshape(rows)
        owned = GPUBuffer(rows * 4, tag="ce_targets", dtype=IDX_TYPE, runtime=logits.runtime)
        owned.write(host)
        target_buffer = owned
    loss_shape = (rows,) if reduction == "none" else (1,)
    wants_grad = logits.requires_grad
    grad = logits.new_empty(logits.shape) if wants_grad else None
    ctx = LossContext(logits)
    ctx.save_for_backward(grad, loss_shape if reduction == "none" else (1,))
    out = logits._result(loss_shape, ctx if wants_grad else None)
    ops.cross_entropy(logits.device, T.CrossEntropyDesc(
        rows=rows, classes=classes, ignore_index=ignore_index, label_smoothing=label_smoothing,
        reduction=_REDUCTIONS[reduction], logits=logits.data.ptr, targets=target_buffer.ptr,
        loss=out.data.ptr, grad=_ptr(grad)))
    if reduction == "none":  # per-row upstream gradient broadcast along the classes
        ctx.save_for_backward(grad, (rows, 1))
    if owned is not None:
        owned.free()
    return out


def mse_loss(pred: OclTensor, target, reduction: str = "mean") -> OclTensor:
    """Mean (or summed) squared error; target is an OclTensor or a NumPy array of pred's shape."""
    if not isinstance(target, OclTensor):
        target = pred.new_tensor(np.asarray(target, FP_TYPE).reshape(pred.shape))
    wants_grad = pred.requires_grad
    grad = pred.new_empty(pred.shape) if wants_grad else None
    ctx = LossContext(pred)
    ctx.save_for_backward(grad, (1,))
    out = pred._result((1,), ctx if wants_grad else None)
    ops.mse_loss(pred.device, pred.data.ptr, target.data.ptr, out.data.ptr, _ptr(grad),
                 pred.numel, _REDUCTIONS[reduction])
    return out


def flatten(x: OclTensor, start_dim: int = 1) -> OclTensor:
    return x.reshape(x.shape[:start_dim] + (numel(x.shape[start_dim:]),))
