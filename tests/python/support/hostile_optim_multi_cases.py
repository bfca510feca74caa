"""Hostile-input cases for aethercl_optimizer_step_multi: a baseline of three descriptors (AdamW,
SGD with momentum, plain SGD), foreign gpu indices, a bad stream, count 0 / negative / too large,
NULL descs, struct_size rules at index 0 and at a later index, every buffer of the middle
descriptor NULL / a bad token / one element short / of a huge count, refused hyper-parameters,
NaN floats, finite_gate (gate_cases), a written buffer shared between descriptors (refused) and a
shared gradient (accepted). Every refusal must name the descriptor and leave every buffer as it was. Imported by
hostile_cases.all_cases."""
from __future__ import annotations

import ctypes
import math
from typing import List

from aethercl import train_types as T

NAME = "aethercl_optimizer_step_multi"
INT_MAX, INT_MIN, SIZE_MAX = 2**31 - 1, -2**31, 2**64 - 1
C_INVALID_ARGUMENT, C_INVALID_HANDLE, C_OUT_OF_RANGE = 1, 2, 3
BAD_TOKENS = ("never_issued", "malformed", "freed", "host_pointer")
TOKEN_WORDS = {"never_issued": "never issued", "malformed": "not a buffer handle",
               "freed": "freed", "host_pointer": "not a buffer handle"}
COUNTS = (10, 7, 3)
FIELDS = ("param", "grad", "state1", "state2")


def base_descs():
    return [dict(kind=T.OPTIMIZER_ADAMW, count=COUNTS[0], lr=1e-3, weight_decay=0.01, beta1=0.9,
                 beta2=0.999, eps=1e-8, step=1),
            dict(kind=T.OPTIMIZER_ADAMW, count=COUNTS[1], lr=1e-2, weight_decay=0.0, beta1=0.8,
                 beta2=0.99, eps=1e-6, step=3),
            dict(kind=T.OPTIMIZER_SGD, count=COUNTS[2], lr=0.1, momentum=0.9, step=2)]


class Buffers(list):
    """Per descriptor, its buffers by field; `originals` keeps what was allocated, for the check
    that a refusal changed nothing, after a case has swapped a field for a bad one."""
    originals: list


def buffers_for(h):
    """Per descriptor, its buffers (the SGD one: param, grad and its momentum buffer), each
    filled with a byte of its own."""
    out = Buffers()
    for i, count in enumerate(COUNTS):
        names = FIELDS if i < 2 else FIELDS[:3]
        out.append({name: h.alloc(count * 4, 0x11 + i) for name in names})
    out.originals = [dict(b) for b in out]
    return out


def call(h, fields=None, buffers=None, gpu=None, stream=None, count=None, descs="array",
         stride=None, sizes=None):
    """Runs the function on the descriptors `fields` (list of dicts) with `buffers`; stride
    (bytes) lays them out as a newer header would; sizes overrides struct_size per index."""
    fields = base_descs() if fields is None else fields
    buffers = buffers_for(h) if buffers is None else buffers
    made = []
    for f, b in zip(fields, buffers):
        desc = T.OptimizerDesc(**f)
        for name, handle in b.items():
            desc.set(name, handle)
        made.append(desc)
    stride = stride or ctypes.sizeof(T.OptimizerDesc)
    size = min(ctypes.sizeof(T.OptimizerDesc), stride)   # a version-3 stride: its first bytes
    raw = ctypes.create_string_buffer(stride * max(len(made), 1))
    for i, desc in enumerate(made):
        desc.struct_size = (sizes or {}).get(i, stride)
        ctypes.memmove(ctypes.addressof(raw) + i * stride, ctypes.addressof(desc), size)
    h.keep.append(raw)
    pointer = ctypes.addressof(raw) if descs == "array" else descs
    return h.lib.aethercl_optimizer_step_multi(h.index if gpu is None else gpu, pointer,
                                               len(made) if count is None else count, stream)


def unchanged(h, buffers):
    """Refusals change nothing: every buffer still holds its fill byte."""
    from support.hostile_cases import fail
    for i, b in enumerate(buffers.originals):
        for name, handle in b.items():
            if h.contents(handle, COUNTS[i] * 4) != bytes([0x11 + i]) * (COUNTS[i] * 4):
                fail(f"a refused call changed descs[{i}].{name}")


def refused_unchanged(h, codes, words, **kw):
    buffers = kw.pop("buffers", None) or buffers_for(h)
    h.refused(call(h, buffers=buffers, **kw), 0, codes, words)
    unchanged(h, buffers)


def gate_cases(add, size) -> None:
    """finite_gate of the middle descriptor: bad tokens and a short buffer refused, a buffer an
    update writes refused (its own or another descriptor's), a shut gate (NaN) accepted and
    leaving that descriptor's buffers as they were, a gradient or one gate for all accepted, and
    a version-3 stride reading no gate."""
    def with_gate(h, gate_of):
        buffers = buffers_for(h)
        for i, b in enumerate(buffers):
            gate = gate_of(h, i, buffers)
            if gate is not None:
                b["finite_gate"] = gate
        return buffers

    for kind in BAD_TOKENS:
        add(f"descs[1].finite_gate={kind}", lambda h, kind=kind: refused_unchanged(
            h, {C_INVALID_HANDLE}, ["descs[1].finite_gate", TOKEN_WORDS[kind]],
            buffers=with_gate(h, lambda h, i, b: h.token(kind) if i == 1 else None)))
    add("descs[1].finite_gate_too_small", lambda h: refused_unchanged(
        h, {C_OUT_OF_RANGE}, ["descs[1].finite_gate"],
        buffers=with_gate(h, lambda h, i, b: h.alloc(2, 0x40) if i == 1 else None)))
    for owner, field in ((1, "param"), (1, "state2"), (0, "state1"), (2, "param")):
        add(f"descs[1].finite_gate=descs[{owner}].{field}",
            lambda h, owner=owner, field=field: refused_unchanged(
                h, {C_INVALID_ARGUMENT}, ["finite_gate", f"descs[{owner}].{field}"],
                buffers=with_gate(h, lambda h, i, b: b[owner][field] if i == 1 else None)))

    def shut(h):
        from support.hostile_cases import fail
        nan = bytes.fromhex("0000c07f")   # a float32 NaN
        gate = h.alloc(4, 0x00)
        h.lib.write_host_to_gpu_blocking(h.index, gate, 0, 4, nan)
        buffers = with_gate(h, lambda h, i, b: gate if i == 1 else None)
        h.succeeded(call(h, buffers=buffers))
        for name, handle in buffers.originals[1].items():
            if h.contents(handle, COUNTS[1] * 4) != bytes([0x12]) * (COUNTS[1] * 4):
                fail(f"a shut gate let descs[1].{name} change")
    add("descs[1].finite_gate=NaN_leaves_it_unchanged", shut)
    add("finite_gate=descs[0].grad_for_all_accepted", lambda h: h.succeeded(call(
        h, buffers=with_gate(h, lambda h, i, b: b[0]["grad"]))))
    add("struct_size=version3_stride_accepted", lambda h: h.succeeded(call(
        h, stride=T.OptimizerDesc.finite_gate.offset)))


def optim_multi_cases() -> List[tuple]:
    cases = []

    def add(case_id, function):
        cases.append((f"{NAME}/{case_id}", function))

    add("baseline", lambda h: h.succeeded(call(h)))
    for gpu in (7, -1, INT_MIN, INT_MAX):
        add(f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(call(h, gpu=gpu)))
    add("stream=bad_token", lambda h: refused_unchanged(h, {C_INVALID_HANDLE}, ["stream"],
                                                        stream=0x1234AE))
    add("count=0_descs=NULL", lambda h: h.succeeded(call(h, [], [], descs=None)))
    for count in (-1, INT_MIN, 65537, INT_MAX):
        add(f"count={count}", lambda h, count=count: refused_unchanged(
            h, {C_INVALID_ARGUMENT}, ["count"], count=count))
    add("descs=NULL", lambda h: h.refused(call(h, descs=None), 0, {C_INVALID_ARGUMENT},
                                          ["descs is NULL"]))
    size = ctypes.sizeof(T.OptimizerDesc)
    for index, value, label in ((0, 0, "0"), (0, size - 1, "sizeof-1"), (0, SIZE_MAX, "SIZE_MAX"),
                                (0, 1 << 20, "1MiB"), (2, 0, "0"), (2, size - 8, "sizeof-8"),
                                (1, size + 8, "not_the_stride")):
        add(f"descs[{index}].struct_size={label}",
            lambda h, index=index, value=value: refused_unchanged(
                h, {C_INVALID_ARGUMENT}, [f"descs[{index}].struct_size"], sizes={index: value}))
    add("struct_size=newer_and_larger_stride", lambda h: h.succeeded(call(h, stride=size + 64)))

    for field in FIELDS:
        def null(h, field=field):
            buffers = buffers_for(h)
            buffers[1][field] = None
            refused_unchanged(h, {C_INVALID_ARGUMENT}, [f"descs[1].{field}", "NULL"],
                              buffers=buffers)
        add(f"descs[1].{field}=NULL", null)
        for kind in BAD_TOKENS:
            def bad(h, field=field, kind=kind):
                buffers = buffers_for(h)
                buffers[1][field] = h.token(kind)
                refused_unchanged(h, {C_INVALID_HANDLE}, [f"descs[1].{field}",
                                                          TOKEN_WORDS[kind]], buffers=buffers)
            add(f"descs[1].{field}={kind}", bad)

        def short(h, field=field):
            buffers = buffers_for(h)
            buffers[1][field] = h.alloc(COUNTS[1] * 4 - 4, 0x12)
            refused_unchanged(h, {C_OUT_OF_RANGE}, [f"descs[1].{field}"], buffers=buffers)
        add(f"descs[1].{field}_one_element_too_small", short)

    for value in (SIZE_MAX, 2**62, 2**63):
        def huge(h, value=value):
            fields = base_descs()
            fields[1]["count"] = value
            refused_unchanged(h, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE}, ["descs[1]"],
                              fields=fields)
        add(f"descs[1].count={value}", huge)

    bad_values = {"kind": (2, -1, INT_MAX), "step": (0, -1, INT_MIN),
                  "lr": (-1.0, math.nan, math.inf), "weight_decay": (math.nan, -0.5),
                  "beta1": (1.0, -0.1), "beta2": (1.0, math.nan), "eps": (-1.0, math.inf)}
    for field, values in bad_values.items():
        for value in values:
            def bad_value(h, field=field, value=value):
                fields = base_descs()
                fields[1][field] = value
                refused_unchanged(h, {C_INVALID_ARGUMENT}, [f"descs[1].{field}"], fields=fields)
            add(f"descs[1].{field}={value}", bad_value)
    for field, value in (("nesterov", 2), ("momentum", -1.0), ("dampening", math.nan)):
        def bad_sgd(h, field=field, value=value):
            fields = base_descs()
            fields[2][field] = value
            refused_unchanged(h, {C_INVALID_ARGUMENT}, [f"descs[2].{field}"], fields=fields)
        add(f"descs[2].{field}={value}", bad_sgd)

    for first, second in ((("param", 0), ("grad", 2)), (("state2", 0), ("state1", 1)),
                          (("grad", 1), ("param", 2))):
        def shared(h, first=first, second=second):
            buffers = buffers_for(h)
            (field_a, a), (field_b, b) = first, second
            buffers[b][field_b] = buffers[a][field_a]
            later, earlier = max((a, field_a), (b, field_b)), min((a, field_a), (b, field_b))
            h.refused(call(h, buffers=buffers), 0, {C_INVALID_ARGUMENT},
                      [f"descs[{later[0]}].{later[1]}", f"descs[{earlier[0]}]"])
            unchanged(h, buffers)
        add(f"descs[{second[1]}].{second[0]}=descs[{first[1]}].{first[0]}", shared)

    gate_cases(add, size)

    def shared_grad(h):  # gradients are only read: descriptors may share one
        buffers = buffers_for(h)
        buffers[1]["grad"] = buffers[0]["grad"]
        h.succeeded(call(h, buffers=buffers))
    add("descs[1].grad=descs[0].grad_accepted", shared_grad)
    return cases
