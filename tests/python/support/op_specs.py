"""What every execute_* entry point touches, from docs/ABI.md §4: for each buffer parameter the
dimensions whose product is its element count (4-byte elements: float32, int32 for ids/targets),
which buffer parameters may be NULL, and valid values for the non-dimension scalars.

Roles: `outputs` are the buffers the op writes (every other buffer is an input, read only),
`updates` the outputs whose old contents it also reads (in-place updates and accumulations), and
`refuses_aliasing` the pairs of parameters that may not be one buffer (the header's in-place
rules): the op refuses such a call with a message. Every other pairing must compute the in-place
result (inputs read as they were before the call).

The hostile-input, fuzz-seed, thread and aliasing suites derive their cases from this table plus
the manifest; test_hostile checks that every execute_* symbol of the manifest has an entry here,
test_aliasing that every entry declares its roles."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple


@dataclass(frozen=True)
class OpSpec:
    buffers: Dict[str, Tuple[str, ...]]          # buffer parameter -> dimensions of its count
    optional: Tuple[str, ...] = ()               # buffer parameters that may be NULL
    scalars: Dict[str, float] = field(default_factory=dict)  # valid non-dimension scalars
    index_buffers: Tuple[str, ...] = ()          # int32 buffers holding ids / targets
    outputs: Tuple[str, ...] = ()                # buffer parameters the op writes
    updates: Tuple[str, ...] = ()                # outputs whose old contents are read too
    refuses_aliasing: Tuple[Tuple[str, str], ...] = ()  # pairs that may not be one buffer


def _same(names, dims):
    return {name: tuple(dims) for name in names}


def _output_pairs(buffers, outputs):
    """Every pair of distinct parameters of which at least one is an output: for ops that refuse
    any aliasing of an output."""
    names = list(buffers)
    return tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                 if a in outputs or b in outputs)


_MATMUL = {"buffer_a": ("B", "M", "K"), "buffer_b": ("K", "N"), "buffer_c": ("B", "M", "N")}
_MATMUL_BACKWARD = {"buffer_a": ("B", "M", "K"), "buffer_b": ("K", "N"),
                    "buffer_dc": ("B", "M", "N"), "buffer_da": ("B", "M", "K"),
                    "buffer_db": ("K", "N")}
_MATMUL_BATCHED = dict(_MATMUL, buffer_b=("B", "K", "N"))
_MATMUL_BATCHED_BACKWARD = dict(_MATMUL_BACKWARD, buffer_b=("B", "K", "N"),
                                buffer_db=("B", "K", "N"))
_CROSS_ENTROPY = {"log_probs": ("B", "S", "V"), "target_indices": ("B", "S"),
                  "grad_input": ("B", "S", "V"), "loss_per_sample": ("B", "S")}


SPECS: Dict[str, OpSpec] = {
    # Matrix products refuse any output that is an input or the other output.
    "execute_matmul_on_gpu": OpSpec(
        _MATMUL, outputs=("buffer_c",), refuses_aliasing=_output_pairs(_MATMUL, ("buffer_c",))),
    "execute_matmul_backward_on_gpu": OpSpec(
        _MATMUL_BACKWARD, optional=("buffer_da", "buffer_db"), outputs=("buffer_da", "buffer_db"),
        refuses_aliasing=_output_pairs(_MATMUL_BACKWARD, ("buffer_da", "buffer_db"))),
    "execute_matmul_batched_on_gpu": OpSpec(
        _MATMUL_BATCHED, outputs=("buffer_c",),
        refuses_aliasing=_output_pairs(_MATMUL_BATCHED, ("buffer_c",))),
    "execute_matmul_batched_backward_on_gpu": OpSpec(
        _MATMUL_BATCHED_BACKWARD, optional=("buffer_da", "buffer_db"),
        outputs=("buffer_da", "buffer_db"),
        refuses_aliasing=_output_pairs(_MATMUL_BATCHED_BACKWARD, ("buffer_da", "buffer_db"))),
    # Elementwise and row-wise ops run in place; only two outputs may not share a buffer.
    "execute_add_on_gpu": OpSpec(_same(("buffer_a", "buffer_b", "buffer_c"), ("num_elements",)),
                                 outputs=("buffer_c",)),
    "execute_mul_on_gpu": OpSpec(_same(("buffer_a", "buffer_b", "buffer_c"), ("num_elements",)),
                                 outputs=("buffer_c",)),
    "execute_mul_backward_on_gpu": OpSpec(
        _same(("buffer_dC", "buffer_A", "buffer_B", "buffer_dA", "buffer_dB"), ("num_elements",)),
        optional=("buffer_dA", "buffer_dB"), outputs=("buffer_dA", "buffer_dB"),
        refuses_aliasing=(("buffer_dA", "buffer_dB"),)),
    "execute_gelu_on_gpu": OpSpec(_same(("buffer_input", "buffer_output"), ("num_elements",)),
                                  outputs=("buffer_output",)),
    "execute_gelu_backward_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_grad_output", "buffer_grad_input"), ("num_elements",)),
        outputs=("buffer_grad_input",)),
    "execute_layernorm_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("num_rows", "row_size")), scalars={"eps": 1e-5},
        outputs=("buffer_output",)),
    "execute_layernorm_backward_on_gpu": OpSpec(
        _same(("buffer_dy", "buffer_x", "buffer_dx"), ("num_rows", "row_size")),
        scalars={"eps": 1e-5}, outputs=("buffer_dx",)),
    "execute_softmax_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("num_rows", "row_size")),
        outputs=("buffer_output",)),
    "execute_softmax_backward_on_gpu": OpSpec(
        _same(("buffer_dy", "buffer_y", "buffer_dx"), ("num_rows", "row_size")),
        outputs=("buffer_dx",)),
    # Layout ops refuse in place.
    "execute_transpose_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("rows", "cols")), outputs=("buffer_output",),
        refuses_aliasing=(("buffer_input", "buffer_output"),)),
    "execute_transpose_backward_on_gpu": OpSpec(
        _same(("buffer_dC", "buffer_dA"), ("rows_A", "cols_A")), outputs=("buffer_dA",),
        refuses_aliasing=(("buffer_dC", "buffer_dA"),)),
    # Adam updates param, m and v in place; grad may be any of them, the three must differ.
    "execute_adam_update_on_gpu": OpSpec(
        _same(("param_buffer", "grad_buffer", "m_buffer", "v_buffer"), ("num_elements",)),
        scalars={"t": 1, "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                 "weight_decay": 0.01},
        outputs=("param_buffer", "m_buffer", "v_buffer"),
        updates=("param_buffer", "m_buffer", "v_buffer"),
        refuses_aliasing=(("param_buffer", "m_buffer"), ("param_buffer", "v_buffer"),
                          ("m_buffer", "v_buffer"))),
    "execute_transpose_batched_gpu": OpSpec(
        _same(("in", "out"), ("B_flat", "d1", "d2")), outputs=("out",),
        refuses_aliasing=(("in", "out"),)),
    "execute_transpose_12_batched_gpu": OpSpec(
        _same(("buffer_in", "buffer_out"), ("B", "D1", "D2", "D3")), outputs=("buffer_out",),
        refuses_aliasing=(("buffer_in", "buffer_out"),)),
    # Reductions refuse in place; broadcast adds run in place on the full-size operand only.
    "execute_reduce_sum_gpu": OpSpec({"in": ("B", "M", "N"), "out": ("N",)}, outputs=("out",),
                                     refuses_aliasing=(("in", "out"),)),
    "execute_add_broadcast_pe_gpu": OpSpec(
        {"input": ("B", "S", "E"), "pe_slice": ("S", "E"), "output": ("B", "S", "E")},
        outputs=("output",), refuses_aliasing=(("pe_slice", "output"),)),
    # Embeddings refuse an output that is an input.
    "execute_embedding_lookup_gpu": OpSpec(
        {"idx": ("b", "s"), "w": ("v", "d"), "o": ("b", "s", "d")}, index_buffers=("idx",),
        outputs=("o",), refuses_aliasing=(("idx", "o"), ("w", "o"))),
    "execute_embedding_backward_gpu": OpSpec(
        {"d_o": ("b", "s", "d"), "idx": ("b", "s"), "d_w": ("v", "d")}, index_buffers=("idx",),
        outputs=("d_w",), updates=("d_w",), refuses_aliasing=(("d_o", "d_w"), ("idx", "d_w"))),
    "execute_log_softmax_stable_gpu": OpSpec(
        _same(("input_logits", "output_log_probs"), ("B", "S", "V")),
        outputs=("output_log_probs",)),
    # Cross-entropy refuses any output that is an input or the other output.
    "execute_cross_entropy_loss_grad_gpu": OpSpec(
        _CROSS_ENTROPY, index_buffers=("target_indices",),
        outputs=("grad_input", "loss_per_sample"),
        refuses_aliasing=_output_pairs(_CROSS_ENTROPY, ("grad_input", "loss_per_sample"))),
    "execute_broadcast_add_gpu": OpSpec(
        {"a": ("B", "M", "N"), "b": ("N",), "c": ("B", "M", "N")}, outputs=("c",),
        refuses_aliasing=(("b", "c"),)),
}

# Entry points whose semantics are not "buffers + int dimensions"; they get hand-written cases.
SPECIAL = {"execute_clone_on_gpu"}

ELEMENT_BYTES = 4


def dims_of(symbol):
    """The int dimension parameters of an execute_* symbol (all ints but gpu_index and t)."""
    return [p.name for p in symbol.parameters[1:]
            if p.c_type == "int" and p.name not in SPECS[symbol.name].scalars]


def element_count(dims: Tuple[str, ...], values: Dict[str, int]) -> int:
    count = 1
    for name in dims:
        count *= values[name]
    return count


# ---- version-3 training ops (aethercl_*; hostile_train_cases.py generates their cases) --------
def _prod(*values):
    out = 1
    for v in values:
        out *= v
    return out


def _conv_out(size, pad, dilation, kernel, stride):
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _pool_out(size, pad, kernel, stride):
    return (size + 2 * pad - kernel) // stride + 1


@dataclass(frozen=True)
class TrainSpec:
    """One training-op function. `values`: a valid value for every non-buffer argument or
    descriptor field; `buffers`: buffer argument/field -> (element count from values, element
    bytes); `desc`: the descriptor class (aethercl.train_types) when the function takes one (its
    fields are then named desc.<field> in messages); `zero_dims`: integer arguments for which 0 is
    zero work; `positive`: integer arguments that must be >= 1; `bad`: argument -> values that are
    refused (AETHERCL_INVALID_ARGUMENT); `nan_ok`: float arguments that accept NaN (unused)."""
    values: Dict[str, float]
    buffers: Dict[str, tuple]
    optional: Tuple[str, ...] = ()
    desc: str = ""
    zero_dims: Tuple[str, ...] = ()
    positive: Tuple[str, ...] = ()
    bad: Dict[str, tuple] = field(default_factory=dict)
    nan_ok: Tuple[str, ...] = ()
    # argument -> (values, a word of the message): refused with AETHERCL_NOT_IMPLEMENTED because
    # this build lacks the feature the value asks for
    unsupported: Dict[str, tuple] = field(default_factory=dict)


_F4, _I4, _U1 = 4, 4, 1
_CONV = dict(n=2, c_in=4, h=5, w=6, c_out=6, kernel_h=3, kernel_w=2, stride_h=2, stride_w=1,
             pad_h=1, pad_w=0, dilation_h=1, dilation_w=2, groups=2, compute=0)


def _conv_y(v):
    return _prod(v["n"], v["c_out"], _conv_out(v["h"], v["pad_h"], v["dilation_h"], v["kernel_h"],
                                               v["stride_h"]),
                 _conv_out(v["w"], v["pad_w"], v["dilation_w"], v["kernel_w"], v["stride_w"]))


_POOL = dict(kind=0, n=2, channels=3, h=7, w=5, kernel_h=3, kernel_w=2, stride_h=2, stride_w=1,
             pad_h=1, pad_w=1, count_include_pad=0)


def _pool_y(v):
    return _prod(v["n"], v["channels"], _pool_out(v["h"], v["pad_h"], v["kernel_h"], v["stride_h"]),
                 _pool_out(v["w"], v["pad_w"], v["kernel_w"], v["stride_w"]))


_ATTN = dict(batch=2, heads=3, seq_q=5, seq_k=7, head_dim=4, layout=0, causal=1, scale=0.0,
             dtype=0, compute=0)
_ATTN_BAD = {"layout": (3, -1), "causal": (2,), "dtype": (3, -1), "compute": (-1, 6),
             "scale": (float("nan"), float("inf")), "head_dim": (257,)}


def _attn_q(v):
    return _prod(v["batch"], v["heads"], v["seq_q"], v["head_dim"])


def _attn_k(v):
    return _prod(v["batch"], v["heads"], v["seq_k"], v["head_dim"])


def _attn_rows(v):
    return _prod(v["batch"], v["heads"], v["seq_q"])


TRAIN_SPECS: Dict[str, TrainSpec] = {
    "aethercl_rng_fill": TrainSpec(
        dict(count=11, distribution=1, a=-1.0, b=2.0, seed=7, offset=3),
        {"buffer": (lambda v: v["count"], _F4)}, zero_dims=("count",),
        bad={"distribution": (-1, 3), "a": (float("nan"), float("inf")), "b": (-3.0,),
             "offset": (2**64 - 4,)}),
    "aethercl_dropout": TrainSpec(
        dict(count=13, p=0.3, seed=1, offset=0),
        {"x": (lambda v: v["count"], _F4), "y": (lambda v: v["count"], _F4),
         "mask": (lambda v: v["count"], _U1)}, optional=("mask",), zero_dims=("count",),
        bad={"p": (-0.5, 1.5, float("nan"))}),
    "aethercl_dropout_backward": TrainSpec(
        dict(count=13, p=0.3),
        {"dy": (lambda v: v["count"], _F4), "mask": (lambda v: v["count"], _U1),
         "dx": (lambda v: v["count"], _F4)}, zero_dims=("count",),
        bad={"p": (-0.5, 1.5, float("nan"))}),
    "aethercl_unary": TrainSpec(
        dict(op=16, count=9, alpha=0.5),
        {"x": (lambda v: v["count"], _F4), "y": (lambda v: v["count"], _F4)},
        zero_dims=("count",), bad={"op": (-1, 22, 2**31 - 1), "alpha": (float("nan"),)}),
    "aethercl_unary_backward": TrainSpec(
        dict(op=1, count=9, alpha=0.5),
        {"x": (lambda v: v["count"], _F4), "dy": (lambda v: v["count"], _F4),
         "dx": (lambda v: v["count"], _F4)},
        zero_dims=("count",), bad={"op": (-1, 22), "alpha": (float("inf"),)}),
    "aethercl_binary": TrainSpec(
        dict(op=2, ndim=3, shape_a0=2, shape_a1=1, shape_a2=5, shape_a3=1,
             shape_b0=1, shape_b1=3, shape_b2=5, shape_b3=1),
        {"a": (lambda v: v["shape_a0"] * v["shape_a1"] * v["shape_a2"], _F4),
         "b": (lambda v: v["shape_b0"] * v["shape_b1"] * v["shape_b2"], _F4),
         "c": (lambda v: max(v["shape_a0"], v["shape_b0"]) * max(v["shape_a1"], v["shape_b1"])
               * max(v["shape_a2"], v["shape_b2"]) if 0 not in (v["shape_a0"], v["shape_b0"],
               v["shape_a1"], v["shape_b1"], v["shape_a2"], v["shape_b2"]) else 0, _F4)},
        desc="BroadcastDesc", zero_dims=("shape_a0", "shape_b1"),
        bad={"op": (-1, 7), "ndim": (0, 5, -1), "shape_a2": (4,)}),
    "aethercl_binary_backward": TrainSpec(
        dict(op=3, ndim=2, shape_a0=4, shape_a1=1, shape_a2=1, shape_a3=1,
             shape_b0=4, shape_b1=3, shape_b2=1, shape_b3=1),
        {"a": (lambda v: v["shape_a0"] * v["shape_a1"], _F4),
         "b": (lambda v: v["shape_b0"] * v["shape_b1"], _F4),
         "dc": (lambda v: v["shape_a0"] * v["shape_b1"] if v["shape_a0"] and v["shape_b0"]
                else 0, _F4),
         "da": (lambda v: v["shape_a0"] * v["shape_a1"], _F4),
         "db": (lambda v: v["shape_b0"] * v["shape_b1"], _F4)},
        optional=("da", "db"), desc="BroadcastDesc", zero_dims=("shape_b1",),
        bad={"op": (-1, 7), "ndim": (0, 5), "shape_b0": (3,)}),
    "aethercl_reduce": TrainSpec(
        dict(op=0, ndim=3, shape0=3, shape1=5, shape2=4, axis=1),
        {"x": (lambda v: v["shape0"] * v["shape1"] * v["shape2"], _F4),
         "y": (lambda v: v["shape0"] * v["shape2"], _F4)},
        zero_dims=("shape0", "shape1"), bad={"op": (-1, 6), "ndim": (0, 5), "axis": (3, -4)}),
    "aethercl_reduce_backward": TrainSpec(
        dict(op=2, ndim=3, shape0=3, shape1=5, shape2=4, axis=-1),
        {"x": (lambda v: v["shape0"] * v["shape1"] * v["shape2"], _F4),
         "dy": (lambda v: v["shape0"] * v["shape1"], _F4),
         "dx": (lambda v: v["shape0"] * v["shape1"] * v["shape2"], _F4)},
        zero_dims=("shape0", "shape2"), bad={"op": (4, 5, -1), "ndim": (0, 5), "axis": (3,)}),
    "aethercl_gather": TrainSpec(
        dict(ndim=3, axis=1, shape_a0=3, shape_a1=5, shape_a2=4, shape_a3=1,
             shape_b0=3, shape_b1=7, shape_b2=4, shape_b3=1),
        {"x": (lambda v: v["shape_a0"] * v["shape_a1"] * v["shape_a2"], _F4),
         "index": (lambda v: v["shape_b0"] * v["shape_b1"] * v["shape_b2"], _I4),
         "y": (lambda v: v["shape_b0"] * v["shape_b1"] * v["shape_b2"], _F4)},
        desc="IndexDesc", zero_dims=("shape_b1", "shape_a1"),
        bad={"ndim": (0, 5, -1), "axis": (3, -4), "shape_a0": (2,), "shape_b2": (5,)}),
    "aethercl_scatter_add": TrainSpec(
        dict(ndim=2, axis=0, shape_a0=6, shape_a1=3, shape_a2=1, shape_a3=1,
             shape_b0=9, shape_b1=3, shape_b2=1, shape_b3=1),
        {"x": (lambda v: v["shape_a0"] * v["shape_a1"], _F4),
         "index": (lambda v: v["shape_b0"] * v["shape_b1"], _I4),
         "y": (lambda v: v["shape_b0"] * v["shape_b1"], _F4)},
        desc="IndexDesc", zero_dims=("shape_b0", "shape_a0"),
        bad={"ndim": (0, 5), "axis": (2, -3), "shape_a1": (4,)}),
    "aethercl_norm_forward": TrainSpec(
        dict(kind=0, rows=5, cols=7, eps=1e-5),
        {"x": (lambda v: v["rows"] * v["cols"], _F4), "gamma": (lambda v: v["cols"], _F4),
         "beta": (lambda v: v["cols"], _F4), "y": (lambda v: v["rows"] * v["cols"], _F4)},
        optional=("gamma", "beta"), desc="NormDesc", zero_dims=("rows", "cols"),
        bad={"kind": (2, -1), "eps": (0.0, -1.0, float("nan"), float("inf"))}),
    "aethercl_norm_backward": TrainSpec(
        dict(kind=1, rows=5, cols=7, eps=1e-5),
        {"x": (lambda v: v["rows"] * v["cols"], _F4), "gamma": (lambda v: v["cols"], _F4),
         "dy": (lambda v: v["rows"] * v["cols"], _F4), "dx": (lambda v: v["rows"] * v["cols"], _F4),
         "dgamma": (lambda v: v["cols"], _F4), "dbeta": (lambda v: v["cols"], _F4)},
        optional=("gamma", "dx", "dgamma", "dbeta"), desc="NormDesc", zero_dims=("rows", "cols"),
        bad={"kind": (2,), "eps": (0.0, float("nan"))}),
    "aethercl_batchnorm_forward": TrainSpec(
        dict(n=3, channels=4, spatial=5, training=1, momentum=0.1, eps=1e-5),
        {"x": (lambda v: v["n"] * v["channels"] * v["spatial"], _F4),
         "gamma": (lambda v: v["channels"], _F4), "beta": (lambda v: v["channels"], _F4),
         "running_mean": (lambda v: v["channels"], _F4),
         "running_var": (lambda v: v["channels"], _F4),
         "save_mean": (lambda v: v["channels"], _F4), "save_rstd": (lambda v: v["channels"], _F4),
         "y": (lambda v: v["n"] * v["channels"] * v["spatial"], _F4)},
        optional=("gamma", "beta", "save_mean", "save_rstd"), desc="BatchNormDesc",
        zero_dims=("channels",),
        bad={"training": (2, -1), "momentum": (-0.1, 1.5, float("nan")), "eps": (0.0,)}),
    "aethercl_batchnorm_backward": TrainSpec(
        dict(n=3, channels=4, spatial=5, training=1, momentum=0.1, eps=1e-5),
        {"x": (lambda v: v["n"] * v["channels"] * v["spatial"], _F4),
         "gamma": (lambda v: v["channels"], _F4),
         "save_mean": (lambda v: v["channels"], _F4), "save_rstd": (lambda v: v["channels"], _F4),
         "dy": (lambda v: v["n"] * v["channels"] * v["spatial"], _F4),
         "dx": (lambda v: v["n"] * v["channels"] * v["spatial"], _F4),
         "dgamma": (lambda v: v["channels"], _F4), "dbeta": (lambda v: v["channels"], _F4)},
        optional=("gamma", "dx", "dgamma", "dbeta"), desc="BatchNormDesc",
        zero_dims=("n", "channels", "spatial"), bad={"training": (3,), "eps": (-1.0,)}),
    "aethercl_optimizer_step": TrainSpec(
        dict(kind=1, count=10, lr=1e-3, weight_decay=0.01, momentum=0.0, dampening=0.0,
             nesterov=0, beta1=0.9, beta2=0.999, eps=1e-8, step=1),
        {"param": (lambda v: v["count"], _F4), "grad": (lambda v: v["count"], _F4),
         "state1": (lambda v: v["count"], _F4), "state2": (lambda v: v["count"], _F4),
         "finite_gate": (lambda v: 1, _F4)},
        optional=("finite_gate",), desc="OptimizerDesc", zero_dims=("count",),
        bad={"kind": (2, -1), "step": (0, -1), "lr": (-1.0, float("nan"), float("inf")),
             "beta1": (1.0, -0.1), "beta2": (1.0,), "eps": (-1.0,),
             "weight_decay": (float("nan"),)}),
    "aethercl_clip_grad_norm": TrainSpec(
        dict(num_tensors=2, max_norm=1.0), {}, zero_dims=("num_tensors",),
        bad={"num_tensors": (-1, 65537), "max_norm": (-1.0, float("nan"))}),
    "aethercl_mse_loss": TrainSpec(
        dict(count=17, reduction=1),
        {"pred": (lambda v: v["count"], _F4), "target": (lambda v: v["count"], _F4),
         "loss": (lambda v: 1, _F4), "grad": (lambda v: v["count"], _F4)},
        optional=("loss", "grad"), zero_dims=("count",), bad={"reduction": (2, 6, -1)}),
    "aethercl_cross_entropy": TrainSpec(
        dict(rows=6, classes=5, ignore_index=-100, label_smoothing=0.1, reduction=1),
        {"logits": (lambda v: v["rows"] * v["classes"], _F4),
         "targets": (lambda v: v["rows"], _I4), "loss": (lambda v: 1, _F4),
         "grad": (lambda v: v["rows"] * v["classes"], _F4)},
        optional=("loss", "grad"), desc="CrossEntropyDesc", zero_dims=("rows",),
        bad={"reduction": (2, 7), "label_smoothing": (-0.1, 1.1, float("nan"))}),
    "aethercl_conv2d_forward": TrainSpec(
        dict(_CONV),
        {"x": (lambda v: _prod(v["n"], v["c_in"], v["h"], v["w"]), _F4),
         "weight": (lambda v: _prod(v["c_out"], v["c_in"] // v["groups"], v["kernel_h"],
                                    v["kernel_w"]), _F4),
         "bias": (lambda v: v["c_out"], _F4), "y": (_conv_y, _F4)},
        optional=("bias",), desc="Conv2dDesc", zero_dims=("n", "c_out"),
        positive=("kernel_h", "kernel_w", "stride_h", "stride_w", "dilation_h", "dilation_w",
                  "groups"),
        bad={"groups": (3,), "kernel_h": (9,), "compute": (-1, 6, 99)}),
    "aethercl_conv2d_backward": TrainSpec(
        dict(_CONV),
        {"x": (lambda v: _prod(v["n"], v["c_in"], v["h"], v["w"]), _F4),
         "weight": (lambda v: _prod(v["c_out"], v["c_in"] // v["groups"], v["kernel_h"],
                                    v["kernel_w"]), _F4),
         "dy": (_conv_y, _F4), "dx": (lambda v: _prod(v["n"], v["c_in"], v["h"], v["w"]), _F4),
         "dweight": (lambda v: _prod(v["c_out"], v["c_in"] // v["groups"], v["kernel_h"],
                                     v["kernel_w"]), _F4),
         "dbias": (lambda v: v["c_out"], _F4)},
        optional=("dx", "dweight", "dbias"), desc="Conv2dDesc", zero_dims=("n", "c_out"),
        positive=("kernel_h", "kernel_w", "stride_h", "stride_w", "dilation_h", "dilation_w",
                  "groups"),
        bad={"groups": (4,), "pad_w": (-1,), "compute": (-1, 6)}),
    "aethercl_pool2d_forward": TrainSpec(
        dict(_POOL),
        {"x": (lambda v: _prod(v["n"], v["channels"], v["h"], v["w"]), _F4),
         "y": (_pool_y, _F4), "indices": (_pool_y, _I4)},
        optional=("indices",), desc="Pool2dDesc", zero_dims=("n", "channels"),
        positive=("kernel_h", "kernel_w", "stride_h", "stride_w"),
        bad={"kind": (2, -1), "pad_h": (2,), "count_include_pad": (2,), "h": (0,)}),
    "aethercl_pool2d_backward": TrainSpec(
        dict(_POOL),
        {"dy": (_pool_y, _F4), "indices": (_pool_y, _I4),
         "dx": (lambda v: _prod(v["n"], v["channels"], v["h"], v["w"]), _F4)},
        desc="Pool2dDesc", zero_dims=("n", "channels"),
        positive=("kernel_h", "kernel_w", "stride_h", "stride_w"),
        bad={"kind": (3,), "pad_w": (2,), "w": (0,)}),
    "aethercl_attention_forward": TrainSpec(
        dict(_ATTN),
        {"q": (_attn_q, _F4), "k": (_attn_k, _F4), "v": (_attn_k, _F4), "o": (_attn_q, _F4),
         "lse": (_attn_rows, _F4)},
        optional=("lse",), desc="AttentionDesc",
        zero_dims=("batch", "heads", "seq_q", "seq_k", "head_dim"), bad=dict(_ATTN_BAD)),
    "aethercl_attention_backward": TrainSpec(
        dict(_ATTN),
        {"q": (_attn_q, _F4), "k": (_attn_k, _F4), "v": (_attn_k, _F4), "o": (_attn_q, _F4),
         "lse": (_attn_rows, _F4), "dout": (_attn_q, _F4), "dq": (_attn_q, _F4),
         "dk": (_attn_k, _F4), "dv": (_attn_k, _F4)},
        desc="AttentionDesc", zero_dims=("batch", "heads", "seq_q", "seq_k", "head_dim"),
        bad=dict(_ATTN_BAD)),
}
