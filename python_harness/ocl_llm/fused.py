"""Fused forms of the transformer's hot paths, on libraries with the version-4 functions: attention
as one flash-style kernel each way (aethercl_attention_forward/backward, no seq x seq matrix in
device memory) and Linear with its bias and GELU applied in the GEMM's own store
(aethercl_gemm_fused, the pre-activation kept for the backward). ocl_llm.model uses them where the
library has them (attention by default only in 16-bit precisions on a GPU: OCL_LLM_FUSED below);
OCL_LLM_FUSED=0 keeps the op-by-op forms (the documented seed calls)."""
from __future__ import annotations

import ctypes
import os
from typing import Optional

import numpy as np

from aethercl import dtypes, ops
from aethercl.gemm import COMPUTE_DEFAULT, F32, gemm_desc, gemm_epilogue
from aethercl.streams import resolve

from .autograd import FunctionContext
from .tensor import OclTensor

# Which fused paths the model takes by default: the GEMM epilogue measured faster on an H200
# (2026-11-28, bench train small). Attention: the tensor-core flash kernels (BF16/FP16 compute on a
# GPU) measured as fast as the unfused attention stepped op by op and faster replayed in a graph,
# in 40% less memory (H200, 2026-11-28, docs/PERFORMANCE.md); the portable kernel of the float32
# modes measured slower than the batched products, so there it is taken only when asked for.
# "scores": the unfused attention's scaled q k^T as one aethercl_gemm (alpha, B transposed) each
# way instead of a transpose, a product and a scaling. "residual": with 16-bit activations, each
# residual connection added in its branch's last product (the GEMM epilogue's residual) instead
# of an add kernel; not by default: on an H200 the float32 output's pair stores took the products
# from 17 to 35 us (attention's output projection) and 38 to 56 us (the feed-forward's second),
# against 9.5 us for the add (2026-11-29, docs/PERFORMANCE.md). "linear" only on GPUs: on PoCL the
# portable kernel applies the epilogue element by element after its vector loop (a GPT tiny step
# took 89 ms fused against 45 ms op by op on the 2-core host, 2026-11-29).
PATHS = ("linear", "attention", "scores", "residual")
SIXTEEN_BIT = ("bf16", "fp16")


def _by_default(path: str) -> bool:
    """scores everywhere; linear on GPUs; attention on GPUs in the 16-bit matmul precisions."""
    if path == "scores":
        return True
    if path not in ("linear", "attention"):
        return False
    from . import runtime
    current = runtime._current
    if current is None or not current.open or not current.is_gpu:
        return False
    return path == "linear" or current.matmul_precision in SIXTEEN_BIT


def _wanted(path: str) -> bool:
    """OCL_LLM_FUSED: "1" every fused path, "0" none, or a comma list of PATHS; unset:
    _by_default's choice."""
    value = os.environ.get("OCL_LLM_FUSED", "").strip().lower()
    if not value:
        return _by_default(path)
    if value in ("0", "1"):
        return value == "1"
    chosen = {item.strip() for item in value.split(",") if item.strip()}
    unknown = chosen - set(PATHS)
    if unknown:
        raise ValueError(f"OCL_LLM_FUSED: unknown path(s) {', '.join(sorted(unknown))} "
                         f"(expected 0, 1 or a list of {', '.join(PATHS)})")
    return path in chosen


def _enabled(device, path: str, *functions: str) -> bool:
    return _wanted(path) and all(device.lib.has(name) for name in functions)


def attention_enabled(device) -> bool:
    """Whether attention should take the flash-style kernels on this device's library."""
    return _enabled(device, "attention", "aethercl_attention_forward",
                    "aethercl_attention_backward")


def scores_enabled(device) -> bool:
    """Whether attention's scaled scores should be one GEMM with alpha each way."""
    return _enabled(device, "scores", "aethercl_gemm")


def residual_enabled(device) -> bool:
    """Whether 16-bit branches should add the residual connection in their last product."""
    return _enabled(device, "residual", "aethercl_gemm_fused")


def linear_enabled(device) -> bool:
    """Whether Linear should apply its bias and activation in the GEMM's store."""
    return _enabled(device, "linear", "aethercl_gemm_fused")


def _stream(device) -> Optional[int]:
    return resolve(device.lib, device.index, None)


# ---- attention ----------------------------------------------------------------------------------
def _attention_desc(q, k, v, o, lse, heads: int, causal: bool, dout=None, dq=None, dk=None,
                    dv=None, layout: int = 1):
    from aethercl.structs import AttentionDesc
    B, S, E = o.shape
    desc = AttentionDesc()
    desc.struct_size = ctypes.sizeof(AttentionDesc)
    desc.batch, desc.heads, desc.seq_q, desc.seq_k, desc.head_dim = B, heads, S, S, E // heads
    # 1: [batch, seq, heads, head_dim], the projections' own layout, no transposes; 2: q, k, v
    # packed [batch, seq, 3, heads, head_dim] as one fused projection writes them.
    desc.layout = layout
    desc.causal = int(causal)
    desc.scale = 0.0
    desc.dtype = dtypes.code_of(q.dtype)
    desc.compute = COMPUTE_DEFAULT
    for name, tensor in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse), ("dout", dout),
                         ("dq", dq), ("dk", dk), ("dv", dv)):
        setattr(desc, name, tensor.data.ptr if tensor is not None else None)
    return desc


def _run_attention(device, function: str, desc) -> None:
    device.lib.check(function, device.index, ctypes.byref(desc), _stream(device))


class AttentionContext(FunctionContext):
    def backward(self, g):
        q, k, v = self.parents
        o, lse, heads, causal = self.saved_data
        dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
        desc = _attention_desc(q, k, v, o, lse, heads, causal, g, dq, dk, dv)
        _run_attention(g.device, "aethercl_attention_backward", desc)
        return dq, dk, dv


class PackedAttentionContext(FunctionContext):
    def backward(self, g):
        (qkv,) = self.parents
        o, lse, heads, causal = self.saved_data
        dqkv = qkv.new_empty(qkv.shape)
        desc = _attention_desc(qkv, qkv, qkv, o, lse, heads, causal, g, dqkv, dqkv, dqkv, layout=2)
        _run_attention(g.device, "aethercl_attention_backward", desc)
        return (dqkv,)


def packed_attention(qkv: OclTensor, heads: int, causal: bool) -> OclTensor:
    """attention() of the three parts of qkv (batch, seq, 3 * heads * head_dim), [q | k | v] in
    each row (ocl_llm.mixed.qkv_linear): the result is (batch, seq, heads * head_dim) in qkv's
    format and the gradient one packed tensor, with no copy either way."""
    B, S, E3 = qkv.shape
    ctx = PackedAttentionContext(qkv)
    out = qkv._result((B, S, E3 // 3), ctx)
    lse = qkv.new_empty((B, heads, S), np.float32)
    desc = _attention_desc(qkv, qkv, qkv, out, lse, heads, causal, layout=2)
    _run_attention(qkv.device, "aethercl_attention_forward", desc)
    ctx.save_for_backward(out.detach(), lse, heads, causal)
    return out


def attention(q: OclTensor, k: OclTensor, v: OclTensor, heads: int, causal: bool) -> OclTensor:
    """softmax(q k^T / sqrt(head_dim) + causal mask) v per head, for q, k, v of shape
    (batch, seq, heads * head_dim); the result has q's shape and format (k and v are converted to
    it), the row statistics stay float32."""
    k, v = k.to(q.dtype), v.to(q.dtype)
    B, S, _ = q.shape
    ctx = AttentionContext(q, k, v)
    out = q._result(q.shape, ctx)
    lse = q.new_empty((B, heads, S), np.float32)
    desc = _attention_desc(q, k, v, out, lse, heads, causal)
    _run_attention(q.device, "aethercl_attention_forward", desc)
    ctx.save_for_backward(out.detach(), lse, heads, causal)
    return out


# ---- Linear with its epilogue -------------------------------------------------------------------
class LinearContext(FunctionContext):
    """y = act(x W + b): dpre = g (no activation) or GELU's slope at pre times g; dx and dW by
    execute_matmul_backward_on_gpu (as the unfused Linear), db the column sum of dpre."""

    def backward(self, g):
        x, W, b = self.parents
        pre, rows = self.saved_data
        device = g.device
        if pre is not None:
            dpre = g.new_empty(g.shape)
            ops.gelu_backward(device, pre.data.ptr, g.data.ptr, dpre.data.ptr, g.numel)
        else:
            dpre = g
        K, N = W.shape
        dx = x.new_empty(x.shape) if self.needs(0) else None
        dW = W.new_empty(W.shape) if self.needs(1) else None
        if dx is not None or dW is not None:
            ops.matmul_backward(device, x.data.ptr, W.data.ptr, dpre.data.ptr,
                                dx.data.ptr if dx is not None else None,
                                dW.data.ptr if dW is not None else None, 1, rows, N, K)
        db = None
        if self.needs(2):
            db = b.new_empty(b.shape)
            ops.reduce_sum(device, dpre.data.ptr, db.data.ptr, 1, rows, N)
        return dx, dW, db


def linear(x: OclTensor, W: OclTensor, b: OclTensor, gelu: bool = False) -> OclTensor:
    """x (..., in) times W (in, out) plus b (1, out), then GELU (erf form) when asked: one GEMM
    whose store adds the bias and applies the activation."""
    K, N = W.shape
    rows = x.numel // K
    ctx = LinearContext(x, W, b)
    out = x._result(x.shape[:-1] + (N,), ctx)
    pre = out.new_empty(out.shape) if gelu else None
    epilogue = gemm_epilogue("bias_gelu" if gelu else "bias", bias=b.data.ptr, dtype_bias=F32,
                             pre=pre.data.ptr if pre is not None else None)
    desc = gemm_desc(x.data.ptr, W.data.ptr, out.data.ptr, rows, N, K)
    device = x.device
    device.lib.check("aethercl_gemm_fused", device.index, ctypes.byref(desc),
                     ctypes.byref(epilogue), _stream(device))
    ctx.save_for_backward(pre, rows)
    return out


# ---- attention's scaled scores ------------------------------------------------------------------
def _batched_product(device, a, b, c, batch: int, m: int, n: int, k: int, alpha: float,
                     trans_a: int = 0, trans_b: int = 0) -> None:
    desc = gemm_desc(a.data.ptr, b.data.ptr, c.data.ptr, m, n, k, trans_a=trans_a,
                     trans_b=trans_b, batch=batch, alpha=alpha)
    device.lib.check("aethercl_gemm", device.index, ctypes.byref(desc), _stream(device))


class ScoresContext(FunctionContext):
    """s = scale q k^T per batch item: dq = scale ds k, dk = scale ds^T q."""

    def backward(self, g):
        q, k = self.parents
        (scale,) = self.saved_data
        batch, S, d = q.shape
        T = k.shape[1]
        device = g.device
        dq = q.new_empty(q.shape) if self.needs(0) else None
        dk = k.new_empty(k.shape) if self.needs(1) else None
        if dq is not None:
            _batched_product(device, g, k, dq, batch, S, d, T, scale)
        if dk is not None:
            _batched_product(device, g, q, dk, batch, T, d, S, scale, trans_a=1)
        return dq, dk


def scaled_scores(q: OclTensor, k: OclTensor, scale: float) -> OclTensor:
    """scale * q @ k^T for q (batch, S, d) and k (batch, T, d): (batch, S, T), one GEMM (B
    transposed, alpha = scale) in the device's matmul precision."""
    batch, S, d = q.shape
    T = k.shape[1]
    ctx = ScoresContext(q, k)
    out = q._result((batch, S, T), ctx)
    _batched_product(q.device, q, k, out, batch, S, T, d, scale, trans_b=1)
    ctx.save_for_backward(float(scale))
    return out
