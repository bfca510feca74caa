"""Hostile-input cases for the version-3 training ops (aethercl_rng_fill ... aethercl_pool2d_*),
generated from op_specs.TRAIN_SPECS and the manifest: for every function a baseline, foreign
gpu indices, a bad stream token, NULL / bad-token / one-element-short buffers (required and
optional), zero, negative and INT_MAX dimensions, overflowing shapes, refused parameter values,
NaN floats, and for descriptor functions a NULL descriptor and short / long struct_size.
Imported by hostile_cases.all_cases; uses its Harness and verdicts."""
from __future__ import annotations

import ctypes
import math
import re
from typing import Dict, List

from aethercl import train_types as T
from support.op_specs import TRAIN_SPECS

INT_MAX, INT_MIN, SIZE_MAX = 2**31 - 1, -2**31, 2**64 - 1
C_INVALID_ARGUMENT, C_INVALID_HANDLE, C_OUT_OF_RANGE, C_OUT_OF_MEMORY = 1, 2, 3, 4
C_NOT_IMPLEMENTED = 9
BAD_TOKENS = ("never_issued", "malformed", "freed", "host_pointer")
TOKEN_WORDS = {"never_issued": "never issued", "malformed": "not a buffer handle",
               "freed": "freed", "host_pointer": "not a buffer handle"}
FOREIGN_GPU_INDICES = (7, -1, INT_MIN, INT_MAX)
DIM_NAME = re.compile(r"^(n|c_in|c_out|h|w|channels|spatial|rows|cols|classes|count|shape_?[ab]?\d|"
                      r"kernel_[hw]|stride_[hw]|pad_[hw]|dilation_[hw]|groups|num_tensors|"
                      r"batch|heads|seq_[qk]|head_dim)$")
SIZE_T_NAMES = {"count"}
# Descriptors that grew in version 4: the version-3 size is still accepted, so the short-struct
# case takes one byte less than that.
FIRST_SIZES = {"NormDesc": T.NormDesc.dres.offset,
               "OptimizerDesc": T.OptimizerDesc.finite_gate.offset}
CLIP_COUNTS = (5, 9)


class Call:
    """Builds and runs one call of a training function from argument values and buffers."""

    def __init__(self, h, symbol, spec):
        self.h, self.symbol, self.spec = h, symbol, spec
        self.params = [p.name for p in symbol.parameters]

    def name_of(self, argument: str) -> str:
        """How the driver names an argument in messages."""
        if self.spec.desc and argument not in self.params:
            match = re.match(r"^(shape_[ab])(\d)$", argument)
            return f"desc.{match.group(1)}[{match.group(2)}]" if match else f"desc.{argument}"
        match = re.match(r"^shape(\d)$", argument)
        return f"shape[{match.group(1)}]" if match else argument

    def run(self, values, buffers, gpu=None, stream=None, desc_override=None, shape_null=False):
        spec, h = self.spec, self.h
        keep = []
        args = []
        desc = None
        if spec.desc:
            desc = getattr(T, spec.desc)()
            fields = {f[0] for f in desc._fields_}
            for key, value in values.items():
                match = re.match(r"^(shape_[ab])(\d)$", key)
                if match:
                    getattr(desc, match.group(1))[int(match.group(2))] = int(value)
                elif key in fields:
                    setattr(desc, key, value)
            for key, handle in buffers.items():
                if key in fields:
                    setattr(desc, key, handle)
        for p in self.symbol.parameters:
            if p.name == "gpu_index":
                args.append(h.index if gpu is None else gpu)
            elif p.name == "stream":
                args.append(stream)
            elif p.name == "desc":
                if desc_override is not None:
                    args.append(desc_override(desc, keep))
                else:
                    keep.append(desc)
                    args.append(ctypes.addressof(desc))
            elif p.name == "shape":
                ndim = int(values["ndim"])
                dims = [int(values.get(f"shape{i}", 1)) for i in range(max(ndim, 0))]
                array = (ctypes.c_int * max(len(dims), 1))(*dims)
                keep.append(array)
                args.append(None if shape_null else array)
            elif p.name == "grads":
                handles = [buffers.get(f"grads[{i}]") for i in range(len(CLIP_COUNTS))]
                array = (ctypes.c_void_p * len(handles))(*handles)
                keep.append(array)
                args.append(None if buffers.get("grads") == "NULL" else array)
            elif p.name == "counts":
                array = (ctypes.c_size_t * len(CLIP_COUNTS))(*values.get("counts", CLIP_COUNTS))
                keep.append(array)
                args.append(None if buffers.get("counts") == "NULL" else array)
            elif p.c_type == "void*":
                args.append(buffers.get(p.name))
            else:
                args.append(values[p.name])
        return getattr(h.lib, self.symbol.name)(*args)


def buffer_sizes(spec, values) -> Dict[str, int]:
    return {name: count(values) * size for name, (count, size) in spec.buffers.items()}


def alloc_buffers(h, spec, values, override=None, fill=0) -> Dict[str, int]:
    sizes = buffer_sizes(spec, values)
    sizes.update(override or {})
    return {name: h.alloc(size, fill) for name, size in sizes.items()}


def clip_buffers(h, values, fill=0) -> Dict[str, int]:
    return {f"grads[{i}]": h.alloc(c * 4, fill) for i, c in enumerate(CLIP_COUNTS)} | {
        "total_norm": h.alloc(4, fill)}


def train_cases(symbol) -> List[tuple]:
    from support.hostile_cases import fail  # noqa: F401  (the harness's failure exception)
    name, spec = symbol.name, TRAIN_SPECS[symbol.name]
    base = dict(spec.values)
    is_clip = name == "aethercl_clip_grad_norm"
    params = {p.name: p for p in symbol.parameters}
    ndim = int(base.get("ndim", 4))
    dims = [k for k, v in base.items() if DIM_NAME.match(k) and isinstance(v, int)
            and not (re.match(r"^shape_?[ab]?(\d)$", k)
                     and int(re.match(r"^shape_?[ab]?(\d)$", k).group(1)) >= ndim)]
    cases = []

    def add(case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def buffers_for(h, values, override=None, fill=0):
        if is_clip:
            return clip_buffers(h, values, fill)
        return alloc_buffers(h, spec, values, override, fill)

    def run(h, values=None, buffers=None, **kw):
        """Calls with `values`; buffers default to exact sizes for the baseline values."""
        values = base if values is None else values
        call = Call(h, symbol, spec)
        buffers = buffers_for(h, base) if buffers is None else buffers
        return call, call.run(values, buffers, **kw)

    add("baseline_exact_sizes", lambda h: h.succeeded(run(h)[1]))
    for gpu in FOREIGN_GPU_INDICES:
        add(f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(run(h, gpu=gpu)[1]))
    add("stream=bad_token", lambda h: h.refused(run(h, stream=0x1234AE)[1], 0,
                                                {C_INVALID_HANDLE}, ["stream"]))

    if spec.desc:
        add("desc=NULL", lambda h: h.refused(run(h, desc_override=lambda d, k: None)[1], 0,
                                             {C_INVALID_ARGUMENT}, ["desc is NULL"]))
        for size_case in ("0", "sizeof-1"):
            def short_struct(h, size_case=size_case):
                def shrink(desc, keep):
                    first = FIRST_SIZES.get(type(desc).__name__, ctypes.sizeof(desc))
                    desc.struct_size = 0 if size_case == "0" else first - 1
                    keep.append(desc)
                    return ctypes.addressof(desc)
                h.refused(run(h, desc_override=shrink)[1], 0, {C_INVALID_ARGUMENT},
                          ["struct_size"])
            add(f"struct_size={size_case}", short_struct)

        def longer_struct(h):
            def grow(desc, keep):
                raw = ctypes.create_string_buffer(ctypes.sizeof(desc) + 64)
                ctypes.memmove(raw, ctypes.addressof(desc), ctypes.sizeof(desc))
                ctypes.c_size_t.from_buffer(raw).value = ctypes.sizeof(desc) + 64
                keep.append(raw)
                return ctypes.addressof(raw)
            h.succeeded(run(h, desc_override=grow)[1])
        add("struct_size=newer_and_larger", longer_struct)

    if is_clip:
        for slot in ("grads[0]", "grads[1]", "total_norm"):
            for kind in ("NULL",) + BAD_TOKENS:
                def clip_bad(h, slot=slot, kind=kind):
                    buffers = clip_buffers(h, base)
                    buffers[slot] = None if kind == "NULL" else h.token(kind)
                    call, result = run(h, buffers=buffers)
                    if kind == "NULL" and slot == "total_norm":
                        h.succeeded(result)
                    elif kind == "NULL":
                        h.refused(result, 0, {C_INVALID_ARGUMENT}, [slot, "NULL"])
                    else:
                        h.refused(result, 0, {C_INVALID_HANDLE}, [slot, TOKEN_WORDS[kind]])
                add(f"{slot}={kind}", clip_bad)
        for array in ("grads", "counts"):
            def clip_null_array(h, array=array):
                buffers = clip_buffers(h, base)
                buffers[array] = "NULL"
                h.refused(run(h, buffers=buffers)[1], 0, {C_INVALID_ARGUMENT}, [array, "NULL"])
            add(f"{array}=NULL", clip_null_array)
        for counts, case_id in (((6, 9), "grads[0]_one_element_too_small"),
                                ((5, SIZE_MAX), "counts[1]=SIZE_MAX")):
            def clip_small(h, counts=counts):
                h.refused(run(h, dict(base, counts=counts))[1], 0,
                          {C_OUT_OF_RANGE, C_INVALID_ARGUMENT})
            add(case_id, clip_small)

        def clip_duplicate(h):
            buffers = clip_buffers(h, base)
            buffers["grads[1]"] = buffers["grads[0]"]
            h.refused(run(h, dict(base, counts=(5, 5)), buffers)[1], 0, {C_INVALID_ARGUMENT},
                      ["twice"])
        add("grads_repeat_a_buffer", clip_duplicate)
        add("num_tensors=0_arrays_NULL", lambda h: h.succeeded(run(
            h, dict(base, num_tensors=0), {"grads": "NULL", "counts": "NULL"})[1]))

    for buffer in spec.buffers:
        label = Call(None, symbol, spec).name_of(buffer)

        def null_case(h, buffer=buffer, label=label):
            buffers = buffers_for(h, base)
            buffers[buffer] = None
            call, result = run(h, buffers=buffers)
            if buffer in spec.optional:
                h.succeeded(result)
            else:
                h.refused(result, 0, {C_INVALID_ARGUMENT}, [label, "NULL"])
        add(f"{buffer}=NULL", null_case)
        for kind in BAD_TOKENS:
            def bad_token(h, buffer=buffer, kind=kind, label=label):
                buffers = buffers_for(h, base)
                buffers[buffer] = h.token(kind)
                h.refused(run(h, buffers=buffers)[1], 0, {C_INVALID_HANDLE},
                          [label, TOKEN_WORDS[kind]])
            add(f"{buffer}={kind}", bad_token)

        def too_small(h, buffer=buffer, label=label):
            count, size = spec.buffers[buffer]
            need = count(base) * size
            buffers = alloc_buffers(h, spec, base, override={buffer: need - size})
            h.refused(run(h, buffers=buffers)[1], 0, {C_OUT_OF_RANGE},
                      [label, str(need - size), str(need)])
        add(f"{buffer}_one_element_too_small", too_small)

    for dim in dims:
        label = Call(None, symbol, spec).name_of(dim)
        if dim in spec.zero_dims:
            def zero(h, dim=dim):
                values = dict(base, **{dim: 0})
                buffers = buffers_for(h, base, fill=0x5A)
                sizes = buffer_sizes(spec, values)
                before = {b: h.contents(handle, max(1, sizes.get(b, 4)))
                          for b, handle in buffers.items() if b in sizes}
                h.succeeded(run(h, values, buffers)[1])
                for b, handle in buffers.items():
                    if b in sizes and sizes[b] == 0 and h.contents(handle, 1) != before[b][:1]:
                        from support.hostile_cases import fail as failed
                        failed(f"{dim}=0: {b} (0 elements) was written")
            add(f"{dim}=0", zero)
        elif dim in spec.positive:
            add(f"{dim}=0", lambda h, dim=dim, label=label: h.refused(
                run(h, dict(base, **{dim: 0}))[1], 0, {C_INVALID_ARGUMENT},
                [label, "at least 1"]))
        negatives = (SIZE_MAX, 2**63) if dim in SIZE_T_NAMES else (-1, INT_MIN)
        for value in negatives:
            words = [] if dim in SIZE_T_NAMES else [label, ("negative", "at least", "must lie")]
            add(f"{dim}={value}", lambda h, dim=dim, value=value, words=words: h.refused(
                run(h, dict(base, **{dim: value}))[1], 0,
                {C_INVALID_ARGUMENT, C_OUT_OF_RANGE}, words))
        if dim.startswith("stride_"):  # a huge stride is valid: one output position
            add(f"{dim}=INT_MAX", lambda h, dim=dim: h.succeeded(
                run(h, dict(base, **{dim: INT_MAX}))[1]))
        else:
            add(f"{dim}=INT_MAX", lambda h, dim=dim: h.refused(
                run(h, dict(base, **{dim: INT_MAX}))[1], 0,
                {C_INVALID_ARGUMENT, C_OUT_OF_RANGE, C_OUT_OF_MEMORY}))

    if dims and not is_clip:
        def all_huge(h):
            values = dict(base, **{d: INT_MAX for d in dims if d not in SIZE_T_NAMES})
            values.update({d: 2**62 for d in dims if d in SIZE_T_NAMES})
            h.refused(run(h, values)[1], 0, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE, C_OUT_OF_MEMORY})
        add("all_dims_huge", all_huge)
        products = [d for d in dims if d in spec.zero_dims or d in ("rows", "cols", "channels")]
        if len(products) >= 2:  # a product of 2^32 + 2^16 elements wraps to 2^16 in 32 bits
            def wraps(h, pair=products[:2]):
                values = dict(base, **{pair[0]: 65536, pair[1]: 65537})
                h.refused(run(h, values)[1], 0, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
            add("count_wraps_32_bits", wraps)

    for argument, refused_values in spec.bad.items():
        label = Call(None, symbol, spec).name_of(argument)
        for value in refused_values:
            def bad_value(h, argument=argument, value=value, label=label):
                values = dict(base, **{argument: value})
                h.refused(run(h, values, buffers_for(h, base))[1], 0,
                          {C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
            add(f"{argument}={value}", bad_value)

    for argument, (refused_values, word) in spec.unsupported.items():
        for value in refused_values:
            add(f"{argument}={value}_not_in_this_build", lambda h, argument=argument, value=value,
                word=word: h.refused(run(h, dict(base, **{argument: value}))[1], 0,
                                     {C_NOT_IMPLEMENTED}, [word]))

    for argument, value in base.items():
        is_float = (argument in params and params[argument].c_type == "float") or (
            spec.desc and isinstance(value, float))
        if is_float and argument not in spec.bad:
            def nan_case(h, argument=argument):
                result = run(h, dict(base, **{argument: math.nan}))[1]
                if result not in (0, 1):
                    from support.hostile_cases import fail as failed
                    failed(f"returned {result!r}")
                if result == 0:
                    h.refused(result, 0, {C_INVALID_ARGUMENT})
            add(f"{argument}=NaN_does_not_crash", nan_case)

    if name == "aethercl_reduce":
        add("shape=NULL", lambda h: h.refused(run(h, shape_null=True)[1], 0,
                                              {C_INVALID_ARGUMENT}, ["shape is NULL"]))
    return cases


def norm_dres_cases() -> List[tuple]:
    """aethercl_norm_backward's dres (version 4): bad tokens, one element short, without dx, and
    the same buffer as x, dy or dgamma are refused with nothing written; dres = dx is accepted."""
    rows, cols = 5, 7
    nbytes = rows * cols * 4
    cases = []

    def add(case_id, function):
        cases.append((f"aethercl_norm_backward/{case_id}", function))

    def setup(h):
        x, dy = h.alloc(nbytes, 0x3F), h.alloc(nbytes, 0x3F)
        dx, dres = h.alloc(nbytes, 0x7F), h.alloc(nbytes, 0x3F)
        desc = T.NormDesc(kind=0, rows=rows, cols=cols, eps=1e-5, x=x, dy=dy, dx=dx, dres=dres)
        return desc, dx

    def call(h, desc):
        return h.lib.aethercl_norm_backward(h.index, ctypes.addressof(desc), None)

    def refused(case_id, change, words):
        def run(h):
            desc, dx = setup(h)
            change(h, desc)
            h.refused(call(h, desc), 0, {C_INVALID_ARGUMENT, C_INVALID_HANDLE, C_OUT_OF_RANGE},
                      words)
            if desc.dx and h.contents(dx, nbytes) != bytes([0x7F]) * nbytes:
                from support.hostile_harness import fail
                fail("a refused call wrote dx")
        add(case_id, run)

    for kind in BAD_TOKENS:
        refused(f"dres={kind}", lambda h, d, kind=kind: setattr(d, "dres", h.token(kind)),
                ["desc.dres", TOKEN_WORDS[kind]])
    refused("dres_one_element_too_small",
            lambda h, d: setattr(d, "dres", h.alloc(nbytes - 4, 0x3F)), ["desc.dres"])
    refused("dres_without_dx", lambda h, d: setattr(d, "dx", None), ["desc.dres", "desc.dx"])
    for other in ("x", "dy"):
        refused(f"dres=desc.{other}", lambda h, d, other=other: setattr(d, "dres",
                                                                         getattr(d, other)),
                ["same buffer"])

    def in_place(h):
        desc, dx = setup(h)
        desc.dres = desc.dx
        h.succeeded(call(h, desc))
    add("dres=desc.dx_accumulates_in_place", in_place)
    return cases


def norm_res_and_copy_cases() -> List[tuple]:
    """aethercl_norm_forward's res and sum and aethercl_norm_backward's dx_copy (version 4): bad
    tokens, one element short, one without the other (or without dx), and buffers shared with
    an operand they may not share are refused with nothing written; res = x is accepted."""
    rows, cols = 5, 7
    nbytes = rows * cols * 4
    cases = []

    def forward_setup(h):
        x, res = h.alloc(nbytes, 0x3F), h.alloc(nbytes, 0x3F)
        y, total = h.alloc(nbytes, 0x7F), h.alloc(nbytes, 0x7F)
        desc = T.NormDesc(kind=0, rows=rows, cols=cols, eps=1e-5, x=x, y=y, res=res, sum=total)
        return desc, [y, total]

    def backward_setup(h):
        x, dy = h.alloc(nbytes, 0x3F), h.alloc(nbytes, 0x3F)
        dx, copy = h.alloc(nbytes, 0x7F), h.alloc(nbytes, 0x7F)
        desc = T.NormDesc(kind=0, rows=rows, cols=cols, eps=1e-5, x=x, dy=dy, dx=dx, dx_copy=copy)
        return desc, [dx, copy]

    def refused(function, setup, case_id, change, words):
        def run(h):
            desc, outputs = setup(h)
            change(h, desc)
            result = getattr(h.lib, function)(h.index, ctypes.addressof(desc), None)
            h.refused(result, 0, {C_INVALID_ARGUMENT, C_INVALID_HANDLE, C_OUT_OF_RANGE}, words)
            for out in outputs:
                if h.contents(out, nbytes) != bytes([0x7F]) * nbytes:
                    from support.hostile_harness import fail
                    fail("a refused call wrote an output")
        cases.append((f"{function}/{case_id}", run))

    forward = ("aethercl_norm_forward", forward_setup)
    backward = ("aethercl_norm_backward", backward_setup)
    for field, (function, setup) in (("res", forward), ("sum", forward), ("dx_copy", backward)):
        for kind in BAD_TOKENS:
            refused(function, setup, f"{field}={kind}",
                    lambda h, d, kind=kind, field=field: setattr(d, field, h.token(kind)),
                    [f"desc.{field}", TOKEN_WORDS[kind]])
        refused(function, setup, f"{field}_one_element_too_small",
                lambda h, d, field=field: setattr(d, field, h.alloc(nbytes - 4, 0x3F)),
                [f"desc.{field}"])
    refused(*forward, "res_without_sum", lambda h, d: setattr(d, "sum", None),
            ["desc.res", "desc.sum"])
    refused(*forward, "sum_without_res", lambda h, d: setattr(d, "res", None),
            ["desc.sum", "desc.res"])
    for other in ("x", "res", "y"):
        refused(*forward, f"sum=desc.{other}",
                lambda h, d, other=other: setattr(d, "sum", getattr(d, other)), ["same buffer"])
    refused(*forward, "res=desc.y", lambda h, d: setattr(d, "res", d.y), ["same buffer"])
    refused(*backward, "dx_copy_without_dx", lambda h, d: setattr(d, "dx", None),
            ["desc.dx_copy", "desc.dx"])
    for other in ("x", "dy", "dx"):
        refused(*backward, f"dx_copy=desc.{other}",
                lambda h, d, other=other: setattr(d, "dx_copy", getattr(d, other)),
                ["same buffer"])

    def res_is_x(h):
        desc, _ = forward_setup(h)
        desc.res = desc.x
        h.succeeded(h.lib.aethercl_norm_forward(h.index, ctypes.addressof(desc), None))
    cases.append(("aethercl_norm_forward/res=desc.x_is_read_twice", res_is_x))
    return cases


def all_train_cases(symbols) -> List[tuple]:
    cases = []
    for symbol in symbols:
        if symbol.name in TRAIN_SPECS:
            cases += train_cases(symbol)
    if any(symbol.name == "aethercl_norm_backward" for symbol in symbols):
        cases += norm_dres_cases() + norm_res_and_copy_cases()
    return cases
