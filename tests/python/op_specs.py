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
