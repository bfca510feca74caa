"""The documented transformer: its layers (Linear, Embedding, GeLUActivation, LayerNorm without
affine parameters, PositionalEncoding, MultiHeadAttention, the pre-LN TransformerBlock) and
SimpleModel (embedding, positional encoding, blocks, final LayerNorm, projection to the vocabulary)
with the documented parameter order and state dicts. Module-style layers: ocl_llm.layers."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from aethercl import ops

from . import fused, mixed
from .autograd import EmbeddingBackwardContext
from .buffer import GPUBuffer, causal_mask
from .config import FP_TYPE, IDX_TYPE
from .state import load_into, state_of
from .tensor import OclTensor, Parameter, is_16bit
from .weight_copies import prepared


class Linear:
    """y = x @ W + b with W (in, out) and b (1, out)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "linear"):
        rng = rng if rng is not None else np.random.default_rng()
        std = 1.0 / math.sqrt(in_features)
        self.W = Parameter((rng.standard_normal((in_features, out_features)) * std)
                           .astype(FP_TYPE), name=name + ".W")
        self.b = Parameter(np.zeros((1, out_features), FP_TYPE), name=name + ".b") if bias else None

    def __call__(self, x: OclTensor, gelu: bool = False,
                 residual: Optional[OclTensor] = None) -> OclTensor:
        """x W + b, then GELU when asked, and residual + that when given; one fused GEMM where
        the library has it. With 16-bit activations (or a 16-bit x), in 16 bits against a
        16-bit copy of W (ocl_llm.mixed), the residual added in the product's store."""
        dtype = mixed.activation_dtype(x.runtime) or (x.dtype if is_16bit(x.dtype) else None)
        if dtype is not None and residual is not None and self.b is not None and not gelu:
            return mixed.linear(x, self.W, self.b, gelu, dtype, residual)
        y = self._forward(x, gelu, dtype)
        return y if residual is None else residual.add(y)

    def _forward(self, x: OclTensor, gelu: bool, dtype) -> OclTensor:
        if dtype is not None:
            return mixed.linear(x, self.W, self.b, gelu, dtype)
        if self.b is not None and fused.linear_enabled(x.device):
            return fused.linear(x, self.W, self.b, gelu=gelu)
        y = x.matmul(self.W)
        y = y.add(self.b) if self.b is not None else y
        return y.gelu() if gelu else y

    def parameters(self) -> List[Parameter]:
        return [self.W] + ([self.b] if self.b is not None else [])


class TokenIds:
    """A (batch, seq) int32 buffer of token ids on the device, filled by write(): a model input that
    stays in place, as a captured step (ocl_llm.graph_step) needs."""

    def __init__(self, shape, runtime=None):
        self.shape = (int(shape[0]), int(shape[1]))
        self.buffer = GPUBuffer(self.shape[0] * self.shape[1] * 4, tag="token_ids",
                                dtype=IDX_TYPE, runtime=runtime)

    def write(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=IDX_TYPE)
        if ids.shape != self.shape:
            raise ValueError(f"token ids of shape {ids.shape} for a buffer of {self.shape}")
        self.buffer.write(ids)

    def free(self) -> None:
        self.buffer.free()


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

    def __call__(self, input_ids) -> OclTensor:
        """Rows of the table for input_ids: host ids (uploaded here) or TokenIds on the device."""
        weight = self.weight_param
        if isinstance(input_ids, TokenIds):
            ids_buffer, (b, s) = input_ids.buffer, input_ids.shape
        else:
            ids = np.ascontiguousarray(input_ids, dtype=IDX_TYPE)
            if ids.ndim == 1:
                ids = ids[None, :]
            b, s = ids.shape
            ids_buffer = GPUBuffer(ids.nbytes, tag="token_ids", dtype=IDX_TYPE,
                                   runtime=weight.runtime)
            ids_buffer.write(ids)
        ctx = EmbeddingBackwardContext(weight)
        ctx.save_for_backward(ids_buffer, b, s, self.embed_dim, self.vocab_size)
        out = weight._result((b, s, self.embed_dim), ctx)
        ops.embedding_lookup(weight.device, ids_buffer.ptr, weight.data.ptr, out.data.ptr,
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
    """Normalisation without affine parameters (as the documented model); with 16-bit
    activations it writes 16 bits from the float32 residual stream."""

    def __init__(self, eps: float = 1e-5):
        self.eps = eps

    def __call__(self, x: OclTensor) -> OclTensor:
        dtype = mixed.activation_dtype(x.runtime)
        if dtype is not None:
            return mixed.layer_norm(x, self.eps, dtype)
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

    def __call__(self, x: OclTensor, residual: Optional[OclTensor] = None) -> OclTensor:
        """The attention of x; residual + that when given (added in the output projection's
        store where it is a 16-bit product)."""
        B, S, E = x.shape
        H, dk = self.num_heads, self.d_k
        if fused.attention_enabled(x.device):
            # One flash-style kernel each way, on the projections' own [B, S, H, dk] layout; with
            # 16-bit activations one product makes q, k and v packed side by side.
            dtype = mixed.activation_dtype(x.runtime)
            if dtype is not None:
                qkv = mixed.qkv_linear(x, self.q.W, self.k.W, self.v.W, dtype)
                return self.o(fused.packed_attention(qkv, H, self.causal), residual=residual)
            return self.o(fused.attention(self.q(x), self.k(x), self.v(x), H, self.causal),
                          residual=residual)
        q = self._split(self.q(x), B, S)
        k = self._split(self.k(x), B, S)
        v = self._split(self.v(x), B, S)
        if fused.scores_enabled(x.device):
            scores = fused.scaled_scores(q, k, 1.0 / math.sqrt(dk))
        else:
            scores = q.matmul(k.transpose(-2, -1)).mul_scalar(1.0 / math.sqrt(dk))
        if self.causal:
            scores = scores._add_broadcast_pe(causal_mask(S, x.runtime))
        probs = scores.softmax(-1)
        context = probs.matmul(v).reshape(B, H, S, dk).transpose(1, 2).reshape(B, S, E)
        return self.o(context, residual=residual)

    def parameters(self) -> List[Parameter]:
        return self.q.parameters() + self.k.parameters() + self.v.parameters() + \
            self.o.parameters()

    def weight_groups(self, device) -> List[List[Parameter]]:
        """The weights whose 16-bit copies a 16-bit forward asks for, grouped as it asks."""
        if fused.attention_enabled(device):
            return [[self.q.W, self.k.W, self.v.W], [self.o.W]]
        return [[self.q.W], [self.k.W], [self.v.W], [self.o.W]]


class TransformerBlock:
    """Pre-LN block: x + MHA(LN(x)), then x + W2 GELU(W1 LN(x) + b1) + b2."""

    def __init__(self, embed_dim: int, num_heads: int, d_ff: int, causal: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "block",
                 dropout: float = 0.0):
        self.ln1, self.ln2 = LayerNorm(), LayerNorm()
        self.dropout, self.training = float(dropout), True
        self.attn = MultiHeadAttention(embed_dim, num_heads, causal, rng, name + ".attn")
        self.ff1 = Linear(embed_dim, d_ff, rng=rng, name=name + ".ff1")
        self.ff2 = Linear(d_ff, embed_dim, rng=rng, name=name + ".ff2")

    def __call__(self, x: OclTensor) -> OclTensor:
        dtype = mixed.activation_dtype(x.runtime)
        if dtype is None:
            x = x.add(self._drop(self.attn(self.ln1(x))))
            return x.add(self._drop(self.ff2(self.ff1(self.ln2(x), gelu=True))))
        x, branch = self.forward_pending(x, None)
        return x if branch is None else x.add(branch)

    def forward_pending(self, x: OclTensor, pending: Optional[OclTensor]):
        """The 16-bit forward of x + pending (pending: the previous block's last branch, not yet
        added, or None), returned the same way: (stream, branch) whose sum is the block's output
        (branch None when added already). Each residual add goes into the LayerNorm after it
        (mixed.add_layer_norm), or into its branch's last product where that path is on
        (fused.residual_enabled) and nothing drops out; the feed-forward pair is one node."""
        dtype = mixed.activation_dtype(x.runtime)
        in_store = not self._dropping() and fused.residual_enabled(x.device)
        if pending is None:
            h = self.ln1(x)
        else:
            x, h = mixed.add_layer_norm(x, pending, self.ln1.eps, dtype)
        if in_store:
            x = self.attn(h, residual=x)
            h = self.ln2(x)
        else:
            x, h = mixed.add_layer_norm(x, self._drop(self.attn(h)), self.ln2.eps, dtype)
        residual = x if in_store else None
        if self.ff1.b is not None and self.ff2.b is not None:
            y = mixed.feed_forward(h, self.ff1.W, self.ff1.b, self.ff2.W, self.ff2.b, dtype,
                                   residual=residual)
        else:
            y = self.ff2(self.ff1(h, gelu=True), residual=residual)
        return (y, None) if in_store else (x, self._drop(y))

    def _dropping(self) -> bool:
        return self.training and self.dropout > 0.0

    def _drop(self, h: OclTensor) -> OclTensor:
        """Residual dropout (aethercl_dropout) while training; identity otherwise."""
        if not self._dropping():
            return h
        from .functional import dropout
        return dropout(h, self.dropout, True)

    def parameters(self) -> List[Parameter]:
        # documented order: Wq, Wk, Wv, Wo, bo, W1, b1, W2, b2
        return self.attn.parameters() + self.ff1.parameters() + self.ff2.parameters()

    def weight_groups(self, device) -> List[List[Parameter]]:
        return self.attn.weight_groups(device) + [[self.ff1.W], [self.ff2.W]]


class SimpleModel:
    """Embedding -> positional encoding -> transformer blocks -> LayerNorm -> Linear to vocab."""

    def __init__(self, config: Dict[str, Any]):
        self.config = dict(config)
        rng = np.random.default_rng(config.get("init_seed", 42))
        E, V = config["embed_dim"], config["vocab_size"]
        self.embedding = Embedding(V, E, rng=rng)
        self.pos_encoding = PositionalEncoding(config["max_len"], E)
        self.blocks = [TransformerBlock(E, config["num_heads"], config["d_ff"],
                                        config.get("causal", True), rng, f"block{i}",
                                        config.get("dropout", 0.0))
                       for i in range(config["num_layers"])]
        self.final_norm = LayerNorm()
        self.output_layer = Linear(E, V, rng=rng, name="output")
        # Small output weights: the initial prediction is nearly uniform (loss close to ln V).
        self.output_layer.W.data.write((rng.standard_normal((E, V)) * 0.02).astype(FP_TYPE))
        self.training = True

    def __call__(self, input_ids: np.ndarray, mask=None) -> OclTensor:
        x = self.pos_encoding(self.embedding(input_ids))
        # With 16-bit activations every weight's 16-bit copies are made first, in a few launches
        # (ocl_llm.weight_copies.prepared) instead of one per layer.
        dtype = mixed.activation_dtype(x.runtime)
        if dtype is None:
            for block in self.blocks:
                x = block(x)
            return self.output_layer(self.final_norm(x))
        # 16-bit: each block's last residual add goes into the next LayerNorm (forward_pending).
        pending = None
        with prepared(self.weight_groups(x.device), dtype):
            for block in self.blocks:
                x, pending = block.forward_pending(x, pending)
            if pending is None:
                h = self.final_norm(x)
            else:
                _, h = mixed.add_layer_norm(x, pending, self.final_norm.eps, dtype)
            return self.output_layer(h)

    def weight_groups(self, device) -> List[List[Parameter]]:
        """The weights whose 16-bit copies a 16-bit forward asks for, grouped as it asks."""
        groups = [g for block in self.blocks for g in block.weight_groups(device)]
        return groups + [[self.output_layer.W]]

    def parameters(self) -> List[Parameter]:
        params = self.embedding.parameters()
        for block in self.blocks:
            params += block.parameters()
        return params + self.output_layer.parameters()

    def num_parameters(self) -> int:
        return sum(p.numel for p in self.parameters())

    def train(self) -> None:
        self.training = True
        for block in self.blocks:
            block.training = True

    def eval(self) -> None:
        self.training = False
        for block in self.blocks:
            block.training = False

    def named_tensors(self):
        """The parameters as param_<i>, in the documented order."""
        return ((f"param_{i}", p) for i, p in enumerate(self.parameters()))

    def state_dict(self) -> Dict[str, np.ndarray]:
        return state_of(self.named_tensors())

    def load_state_dict(self, state_dict: Dict[str, np.ndarray], strict: bool = True) -> None:
        """Refuses (ValueError naming every difference, nothing written) unknown names, other
        shapes and, when strict, missing names."""
        load_into(self.named_tensors(), state_dict, "SimpleModel", strict)

    def free_memory(self) -> None:
        for p in self.parameters():
            p.free_memory()
        self.pos_encoding.free_memory()
