"""What every execute_* entry point touches, from docs/ABI.md §4: for each buffer parameter the
dimensions whose product is its element count (4-byte elements: float32, int32 for ids/targets),
which buffer parameters may be NULL, and valid values for the non-dimension scalars.

The hostile-input, fuzz-seed and thread suites derive their cases from this table plus the
manifest; test_hostile checks that every execute_* symbol of the manifest has an entry here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple


@dataclass(frozen=True)
class OpSpec:
    buffers: Dict[str, Tuple[str, ...]]          # buffer parameter -> dimensions of its count
    optional: Tuple[str, ...] = ()               # buffer parameters that may be NULL
    scalars: Dict[str, float] = field(default_factory=dict)  # valid non-dimension scalars
    index_buffers: Tuple[str, ...] = ()          # int32 buffers holding ids / targets


def _same(names, dims):
    return {name: tuple(dims) for name in names}


SPECS: Dict[str, OpSpec] = {
    "execute_matmul_on_gpu": OpSpec(
        {"buffer_a": ("B", "M", "K"), "buffer_b": ("K", "N"), "buffer_c": ("B", "M", "N")}),
    "execute_matmul_backward_on_gpu": OpSpec(
        {"buffer_a": ("B", "M", "K"), "buffer_b": ("K", "N"), "buffer_dc": ("B", "M", "N"),
         "buffer_da": ("B", "M", "K"), "buffer_db": ("K", "N")},
        optional=("buffer_da", "buffer_db")),
    "execute_matmul_batched_on_gpu": OpSpec(
        {"buffer_a": ("B", "M", "K"), "buffer_b": ("B", "K", "N"), "buffer_c": ("B", "M", "N")}),
    "execute_matmul_batched_backward_on_gpu": OpSpec(
        {"buffer_a": ("B", "M", "K"), "buffer_b": ("B", "K", "N"), "buffer_dc": ("B", "M", "N"),
         "buffer_da": ("B", "M", "K"), "buffer_db": ("B", "K", "N")},
        optional=("buffer_da", "buffer_db")),
    "execute_add_on_gpu": OpSpec(_same(("buffer_a", "buffer_b", "buffer_c"), ("num_elements",))),
    "execute_mul_on_gpu": OpSpec(_same(("buffer_a", "buffer_b", "buffer_c"), ("num_elements",))),
    "execute_mul_backward_on_gpu": OpSpec(
        _same(("buffer_dC", "buffer_A", "buffer_B", "buffer_dA", "buffer_dB"), ("num_elements",)),
        optional=("buffer_dA", "buffer_dB")),
    "execute_gelu_on_gpu": OpSpec(_same(("buffer_input", "buffer_output"), ("num_elements",))),
    "execute_gelu_backward_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_grad_output", "buffer_grad_input"), ("num_elements",))),
    "execute_layernorm_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("num_rows", "row_size")), scalars={"eps": 1e-5}),
    "execute_layernorm_backward_on_gpu": OpSpec(
        _same(("buffer_dy", "buffer_x", "buffer_dx"), ("num_rows", "row_size")),
        scalars={"eps": 1e-5}),
    "execute_softmax_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("num_rows", "row_size"))),
    "execute_softmax_backward_on_gpu": OpSpec(
        _same(("buffer_dy", "buffer_y", "buffer_dx"), ("num_rows", "row_size"))),
    "execute_transpose_on_gpu": OpSpec(
        _same(("buffer_input", "buffer_output"), ("rows", "cols"))),
    "execute_transpose_backward_on_gpu": OpSpec(
        _same(("buffer_dC", "buffer_dA"), ("rows_A", "cols_A"))),
    "execute_adam_update_on_gpu": OpSpec(
        _same(("param_buffer", "grad_buffer", "m_buffer", "v_buffer"), ("num_elements",)),
        scalars={"t": 1, "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                 "weight_decay": 0.01}),
    "execute_transpose_batched_gpu": OpSpec(_same(("in", "out"), ("B_flat", "d1", "d2"))),
    "execute_transpose_12_batched_gpu": OpSpec(
        _same(("buffer_in", "buffer_out"), ("B", "D1", "D2", "D3"))),
    "execute_reduce_sum_gpu": OpSpec({"in": ("B", "M", "N"), "out": ("N",)}),
    "execute_add_broadcast_pe_gpu": OpSpec(
        {"input": ("B", "S", "E"), "pe_slice": ("S", "E"), "output": ("B", "S", "E")}),
    "execute_embedding_lookup_gpu": OpSpec(
        {"idx": ("b", "s"), "w": ("v", "d"), "o": ("b", "s", "d")}, index_buffers=("idx",)),
    "execute_embedding_backward_gpu": OpSpec(
        {"d_o": ("b", "s", "d"), "idx": ("b", "s"), "d_w": ("v", "d")}, index_buffers=("idx",)),
    "execute_log_softmax_stable_gpu": OpSpec(
        _same(("input_logits", "output_log_probs"), ("B", "S", "V"))),
    "execute_cross_entropy_loss_grad_gpu": OpSpec(
        {"log_probs": ("B", "S", "V"), "target_indices": ("B", "S"),
         "grad_input": ("B", "S", "V"), "loss_per_sample": ("B", "S")},
        index_buffers=("target_indices",)),
    "execute_broadcast_add_gpu": OpSpec(
        {"a": ("B", "M", "N"), "b": ("N",), "c": ("B", "M", "N")}),
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
