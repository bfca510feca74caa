"""Hostile-input cases of aethercl_gemm_fused: the epilogue descriptor's fields (struct_size, kind,
bias, pre and residual tokens, dtypes, offsets that overflow or leave the buffers, overlaps with
A, C and the bias, DGELU without pre), a bad desc behind a good epilogue, zero work and stream
tokens; run by hostile_cases.py like every other case. Every refusal leaves C and pre untouched."""
from __future__ import annotations

import ctypes
from typing import List

from support.hostile_harness import (BAD_TOKENS, C_INVALID_ARGUMENT, C_INVALID_HANDLE,
                                     C_OUT_OF_RANGE, INT_MAX, INT_MIN, NEVER_ISSUED, SIZE_MAX,
                                     TOKEN_WORDS, Case, fail)


def gemm_fused_cases() -> List[Case]:
    from aethercl import gemm as g
    cases: List[Case] = []
    name = "aethercl_gemm_fused"
    M, N, K = 3, 4, 5
    C_BYTES = M * N * 4

    def add(case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def setup(h, kind="bias_gelu"):
        a, b = h.alloc(M * K * 4, 0x3F), h.alloc(K * N * 4, 0x3F)
        c, pre = h.alloc(C_BYTES, 0x7F), h.alloc(C_BYTES, 0x7F)
        bias = h.alloc(N * 4, 0x3F)
        desc = g.gemm_desc(a, b, c, M, N, K, compute=g.COMPUTE_FP32)
        epilogue = g.gemm_epilogue(kind, bias=bias if kind.startswith("bias") else None,
                                   pre=pre)
        return desc, epilogue, c, pre

    def call(h, desc, epilogue, stream=None):
        return h.lib.aethercl_gemm_fused(
            h.index, ctypes.byref(desc) if desc is not None else None,
            ctypes.byref(epilogue) if epilogue is not None else None, stream)

    def untouched(h, c, pre):
        if (h.contents(c, C_BYTES) != bytes([0x7F]) * C_BYTES or
                h.contents(pre, C_BYTES) != bytes([0x7F]) * C_BYTES):
            fail("a refused call changed C or pre")

    def field_case(case_id, assignments, codes, words=(), kind="bias_gelu", desc_fields=None):
        def run(h):
            desc, epilogue, c, pre = setup(h, kind)
            for field, value in assignments.items():
                value = value(h) if callable(value) else value
                setattr(epilogue, field, value)
            for field, value in (desc_fields or {}).items():
                setattr(desc, field, value)
            h.refused(call(h, desc, epilogue), 0, codes, words)
            untouched(h, c, pre)
        add(case_id, run)

    def baseline(h):
        desc, epilogue, c, pre = setup(h)
        h.succeeded(call(h, desc, epilogue))
        if h.contents(c, C_BYTES) == bytes([0x7F]) * C_BYTES:
            fail("C unchanged after the call")
        if h.contents(pre, C_BYTES) == bytes([0x7F]) * C_BYTES:
            fail("pre unchanged after the call")
    add("baseline", baseline)

    def null_epilogue(h):
        desc, _, c, pre = setup(h)
        h.succeeded(call(h, desc, None))
        if h.contents(c, C_BYTES) == bytes([0x7F]) * C_BYTES:
            fail("C unchanged after the call")
    add("epilogue=NULL_is_aethercl_gemm", null_epilogue)
    add("desc=NULL", lambda h: h.refused(call(h, None, setup(h)[1]), 0, {C_INVALID_ARGUMENT},
                                         ["NULL"]))

    def stream_token(h):
        desc, epilogue, c, pre = setup(h)
        h.refused(call(h, desc, epilogue, NEVER_ISSUED), 0, {C_INVALID_HANDLE, C_INVALID_ARGUMENT},
                  ["stream"])
        untouched(h, c, pre)
    add("stream=never_issued", stream_token)

    first = g.GemmEpilogue.residual.offset   # the first version-4 size, still accepted
    for value in (0, 8, first - 1):
        field_case(f"struct_size={value}", {"struct_size": value}, {C_INVALID_ARGUMENT},
                   ["struct_size"])
    for value in (0, -1, 8, INT_MAX, INT_MIN):
        field_case(f"kind={value}", {"kind": value}, {C_INVALID_ARGUMENT}, ["epilogue->kind"])
    field_case("kind=dgelu_pre=NULL", {"pre": None}, {C_INVALID_ARGUMENT},
               ["epilogue->pre", "DGELU"], kind="dgelu")
    field_case("bias_set_kind=dgelu", {"bias": lambda h: h.alloc(N * 4, 0x3F)},
               {C_INVALID_ARGUMENT}, ["epilogue->bias"], kind="dgelu")
    field_case("residual_too_small", {"residual": lambda h: h.alloc(C_BYTES - 1, 0x3F)},
               {C_OUT_OF_RANGE}, ["epilogue->residual"])
    for value in (1, 2**40, SIZE_MAX):
        field_case(f"offset_residual={value}",
                   {"residual": lambda h: h.alloc(C_BYTES, 0x3F), "offset_residual": value},
                   {C_OUT_OF_RANGE, C_INVALID_ARGUMENT}, ["epilogue->residual"])
    for kind in BAD_TOKENS:
        field_case(f"residual={kind}", {"residual": lambda h, kind=kind: h.token(kind)},
                   {C_INVALID_HANDLE}, [TOKEN_WORDS[kind]])
    field_case("bias=NULL_kind=bias", {"bias": None}, {C_INVALID_ARGUMENT},
               ["epilogue->bias", "NULL"])
    for kind in ("relu", "gelu"):
        field_case(f"bias_set_kind={kind}", {"bias": lambda h: h.alloc(N * 4, 0x3F)},
                   {C_INVALID_ARGUMENT}, ["epilogue->bias"], kind=kind)
    for value in (-1, 3, 4, 7, 99):
        field_case(f"dtype_bias={value}", {"dtype_bias": value}, {C_INVALID_ARGUMENT},
                   ["dtype_bias"])
    for value in (1, 2**40, SIZE_MAX, 2**62):
        field_case(f"offset_bias={value}", {"offset_bias": value},
                   {C_OUT_OF_RANGE, C_INVALID_ARGUMENT}, ["epilogue->bias"])
        field_case(f"offset_pre={value}", {"offset_pre": value},
                   {C_OUT_OF_RANGE, C_INVALID_ARGUMENT}, ["epilogue->pre"])
    field_case("bias_too_small", {"bias": lambda h: h.alloc(N * 4 - 1, 0x3F)}, {C_OUT_OF_RANGE},
               ["epilogue->bias"])
    field_case("f32_bias_in_an_f16_sized_buffer", {"bias": lambda h: h.alloc(N * 2, 0x3F)},
               {C_OUT_OF_RANGE}, ["epilogue->bias"])
    field_case("pre_too_small", {"pre": lambda h: h.alloc(C_BYTES - 1, 0x7F)}, {C_OUT_OF_RANGE},
               ["epilogue->pre"])
    for slot in ("bias", "pre"):
        for kind in BAD_TOKENS:
            field_case(f"{slot}={kind}", {slot: lambda h, kind=kind: h.token(kind)},
                       {C_INVALID_HANDLE}, [TOKEN_WORDS[kind]])

    def pre_is(slot):
        def run(h):
            desc, epilogue, c, pre = setup(h)
            epilogue.pre = getattr(desc, slot)
            h.refused(call(h, desc, epilogue), 0, {C_INVALID_ARGUMENT}, ["overlap"])
            untouched(h, c, pre)
        return run
    for slot in ("a", "b", "c"):
        add(f"pre=desc->{slot}", pre_is(slot))

    def residual_is(slot):
        def run(h):
            desc, epilogue, c, pre = setup(h)
            epilogue.residual = c if slot == "c" else pre
            h.refused(call(h, desc, epilogue), 0, {C_INVALID_ARGUMENT}, ["overlap"])
            untouched(h, c, pre)
        return run
    for slot in ("c", "pre"):
        add(f"residual=desc->{slot}", residual_is(slot))

    def c_over_bias(h):
        desc, epilogue, c, pre = setup(h)
        epilogue.bias = c
        h.refused(call(h, desc, epilogue), 0, {C_INVALID_ARGUMENT}, ["overlap"])
        untouched(h, c, pre)
    add("bias=desc->c", c_over_bias)

    def pre_after_c(h):
        desc, epilogue, c, pre = setup(h)
        shared = h.alloc(2 * C_BYTES, 0x7F)
        desc.c, epilogue.pre, epilogue.offset_pre = shared, shared, M * N
        h.succeeded(call(h, desc, epilogue))
    add("pre_after_c_in_one_buffer", pre_after_c)

    field_case("desc_trans_a=2", {}, {C_INVALID_ARGUMENT}, ["trans_a"],
               desc_fields={"trans_a": 2})
    field_case("desc_huge_dims", {}, {C_OUT_OF_RANGE, C_INVALID_ARGUMENT},
               desc_fields={"m": INT_MAX, "n": INT_MAX, "k": INT_MAX})

    for field in ("m", "n", "batch"):
        def zero_work(h, field=field):
            desc, epilogue, c, pre = setup(h)
            setattr(desc, field, 0)
            h.succeeded(call(h, desc, epilogue))
            untouched(h, c, pre)
        add(f"{field}=0_touches_nothing", zero_work)

    def zero_work_bad_token(h):
        desc, epilogue, c, pre = setup(h)
        desc.m, epilogue.bias = 0, h.token("freed")
        h.refused(call(h, desc, epilogue), 0, {C_INVALID_HANDLE}, ["freed"])
    add("m=0_still_checks_bias_token", zero_work_bad_token)
    return cases
