"""Hostile-input cases of aethercl_gemm (every descriptor field: struct_size, flags, negative and
overflowing sizes, leading dimensions, strides, offsets, dtypes, compute modes, buffer tokens,
C overlapping A, zero work, stream tokens) and of aethercl_set_matmul_precision; run by
hostile_cases.py like every other case."""
from __future__ import annotations

import ctypes
from typing import List

from support.hostile_harness import (BAD_TOKENS, C_INVALID_ARGUMENT, C_INVALID_HANDLE,  # noqa: F401
                             C_OUT_OF_RANGE, FOREIGN_GPU_INDICES, INT_MAX, INT_MIN,
                             NEVER_ISSUED, SIZE_MAX, TOKEN_WORDS, Case, fail)


# ---- aethercl_gemm and the matmul precision ------------------------------------------------
def gemm_cases() -> List[Case]:
    from aethercl import gemm as g
    cases: List[Case] = []

    def add(name, case_id, function):
        cases.append((f"{name}/{case_id}", function))

    name = "aethercl_gemm"
    M, N, K = 3, 4, 5

    def setup(h, c_bytes=M * N * 4):
        a, b = h.alloc(M * K * 4, 0x3F), h.alloc(K * N * 4, 0x3F)  # 0x3F3F3F3F ~ 0.75
        c = h.alloc(c_bytes, 0x7F)
        return g.gemm_desc(a, b, c, M, N, K, compute=g.COMPUTE_FP32), c, c_bytes

    def call(h, desc, stream=None, gpu=None):
        return h.lib.aethercl_gemm(h.index if gpu is None else gpu, ctypes.byref(desc), stream)

    def refused(h, desc, c, c_bytes, codes, words=(), stream=None):
        h.refused(call(h, desc, stream), 0, codes, words)
        if h.contents(c, c_bytes) != bytes([0x7F]) * c_bytes:
            fail("a refused call changed C")

    def ok(h, desc, c, c_bytes, changes=True, gpu=None):
        h.succeeded(call(h, desc, gpu=gpu))
        if changes == (h.contents(c, c_bytes) == bytes([0x7F]) * c_bytes):
            fail("C " + ("unchanged after" if changes else "changed by") + " the call")

    def field_case(case_id, assignments, codes, words=(), c_bytes=M * N * 4):
        def run(h):
            desc, c, size = setup(h, c_bytes)
            for field, value in assignments.items():
                setattr(desc, field, value)
            refused(h, desc, c, size, codes, words)
        add(name, case_id, run)

    add(name, "baseline", lambda h: ok(h, *setup(h)))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, gpu=gpu: ok(h, *setup(h), gpu=gpu))
    add(name, "desc=NULL", lambda h: h.refused(
        h.lib.aethercl_gemm(h.index, None, None), 0, {C_INVALID_ARGUMENT}, ["NULL"]))

    def stream_token(h):
        desc, c, size = setup(h)
        refused(h, desc, c, size, {C_INVALID_HANDLE, C_INVALID_ARGUMENT}, ["stream"],
                stream=NEVER_ISSUED)
    add(name, "stream=never_issued", stream_token)

    struct_size = ctypes.sizeof(g.GemmDesc)
    for value in (0, 8, struct_size - 1):
        field_case(f"struct_size={value}", {"struct_size": value}, {C_INVALID_ARGUMENT},
                   ["struct_size"])
    for field in ("trans_a", "trans_b"):
        for value in (2, -1, INT_MAX):
            field_case(f"{field}={value}", {field: value}, {C_INVALID_ARGUMENT}, [field])
    for field in ("m", "n", "k", "batch"):
        for value in (-1, INT_MIN):
            field_case(f"{field}={value}", {field: value}, {C_INVALID_ARGUMENT},
                       [field, "negative"])
    for field in ("stride_a", "stride_b", "stride_c"):
        field_case(f"{field}=-1", {field: -1}, {C_INVALID_ARGUMENT}, [field])
    field_case("stride_c=0_batch=2", {"stride_c": 0, "batch": 2}, {C_INVALID_ARGUMENT},
               ["stride_c"])
    for field, low in (("lda", K - 1), ("ldb", N - 1), ("ldc", N - 1)):
        for value in (low, 0, -1, INT_MIN):
            field_case(f"{field}={value}", {field: value}, {C_INVALID_ARGUMENT}, [field])
    field_case("lda=m_with_trans_a", {"trans_a": 1, "lda": M - 1}, {C_INVALID_ARGUMENT},
               ["lda"])
    for field in ("dtype_a", "dtype_b", "dtype_c"):
        for value in (-1, 8, 99, 3, 4, 7):
            field_case(f"{field}={value}", {field: value}, {C_INVALID_ARGUMENT}, [field])
    field_case("dtype_a!=dtype_b", {"dtype_b": g.F16}, {C_INVALID_ARGUMENT},
               ["dtype_a", "dtype_b"])
    for value in (-1, 6, 1000):
        field_case(f"compute={value}", {"compute": value}, {C_INVALID_ARGUMENT}, ["compute"])
    for field, value in (("offset_a", 1), ("offset_b", 4), ("offset_c", 1), ("offset_c", 2**40),
                         ("offset_a", SIZE_MAX), ("offset_b", 2**62)):
        field_case(f"{field}={value}", {field: value}, {C_OUT_OF_RANGE, C_INVALID_ARGUMENT},
                   [("desc->" + field[-1], "operand " + field[-1])])
    field_case("c_too_small", {}, {C_OUT_OF_RANGE}, ["desc->c"], c_bytes=M * N * 4 - 1)
    field_case("dtype_c=f32_in_an_f16_sized_buffer", {}, {C_OUT_OF_RANGE}, ["desc->c"],
               c_bytes=M * N * 2)
    for case_id, values in (("int_max_dims", {"m": INT_MAX, "n": INT_MAX, "k": INT_MAX}),
                            ("huge_batch", {"batch": INT_MAX, "stride_a": 2**62,
                                            "stride_c": 2**62}),
                            ("huge_ld", {"lda": INT_MAX, "m": 2**20}),
                            ("huge_stride_overflow", {"batch": 3, "stride_b": 2**63 - 1,
                                                      "stride_c": 12})):
        field_case(case_id, values, {C_OUT_OF_RANGE, C_INVALID_ARGUMENT})
    for slot in ("a", "b", "c"):
        def null_buffer(h, slot=slot):
            desc, c, size = setup(h)
            setattr(desc, slot, None)
            h.refused(call(h, desc), 0, {C_INVALID_ARGUMENT}, ["NULL"])
        add(name, f"{slot}=NULL", null_buffer)
        for kind in BAD_TOKENS:
            def bad_buffer(h, slot=slot, kind=kind):
                desc, c, size = setup(h)
                setattr(desc, slot, h.token(kind))
                result = call(h, desc)
                h.refused(result, 0, {C_INVALID_HANDLE}, [TOKEN_WORDS[kind]])
            add(name, f"{slot}={kind}", bad_buffer)

    def overlap(h):
        desc, c, size = setup(h)
        shared = h.alloc(4 * (M * K + M * N), 0x7F)
        desc.a, desc.c, desc.offset_c = shared, shared, M * K - 1  # one element shared
        refused(h, desc, shared, 4 * (M * K + M * N), {C_INVALID_ARGUMENT}, ["overlap"])
    add(name, "c_overlaps_a", overlap)

    def disjoint(h):
        desc, c, size = setup(h)
        shared = h.alloc(4 * (K * N + M * N), 0x3F)
        desc.b, desc.c, desc.offset_c = shared, shared, K * N  # B first, C after it
        h.succeeded(call(h, desc))
    add(name, "c_after_b_in_one_buffer", disjoint)

    for field in ("m", "n", "batch"):
        def zero_work(h, field=field):
            desc, c, size = setup(h)
            setattr(desc, field, 0)
            ok(h, desc, c, size, changes=False)
        add(name, f"{field}=0_touches_nothing", zero_work)

    def zero_work_bad_token(h):
        desc, c, size = setup(h)
        desc.m, desc.a = 0, h.token("freed")
        h.refused(call(h, desc), 0, {C_INVALID_HANDLE}, ["freed"])
    add(name, "m=0_still_checks_tokens", zero_work_bad_token)

    name = "aethercl_set_matmul_precision"
    for value in (-1, 6, INT_MIN, INT_MAX):
        add(name, f"compute={value}", lambda h, value=value: h.refused(
            h.lib.aethercl_set_matmul_precision(h.index, value), 0, {C_INVALID_ARGUMENT},
            ["compute"]))
    for value in range(6):
        def set_valid(h, value=value):
            h.succeeded(h.lib.aethercl_set_matmul_precision(h.index, value))
            h.succeeded(h.lib.aethercl_set_matmul_precision(h.index, g.COMPUTE_FP32))
        add(name, f"compute={value}", set_valid)
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(
            h.lib.aethercl_set_matmul_precision(gpu, g.COMPUTE_FP32)))
    return cases
