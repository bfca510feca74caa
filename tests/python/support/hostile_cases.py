"""Hostile-input cases for every exported function, generated from the manifest and op_specs.

Run as a script in a child process (test_hostile.py does that), it initialises the test device,
runs the cases and prints one JSON line per case: {"start": id} before and {"id", "outcome",
"detail"} after, so a parent can tell which case crashed the process. Outcomes:
  pass         the documented failure value (or success) with the right message and code
  unsupported  a case that names a device feature (succeeded(..., unless_unsupported=...)) met
               AETHERCL_NOT_IMPLEMENTED with a message naming that feature: the device lacks it
  fail         anything else (wrong value, missing message, wrong code, leak, broken library);
               AETHERCL_NOT_IMPLEMENTED anywhere a case does not name a feature is a failure
After every case the library must still do a correct allocate/write/add/read round trip and the
number of live buffers must be back where it was."""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Tuple

HERE = Path(__file__).resolve().parents[1]  # tests/python: support.* imports from there
sys.path.insert(0, str(HERE))
from support.hostile_harness import *  # noqa: E402,F401,F403 (constants, Harness, op_specs names)
from support.hostile_harness import _buffers, _call, _values  # noqa: E402,F401
from support.hostile_runtime_cases import runtime_cases  # noqa: E402
from support.hostile_sim_cases import sim_cases  # noqa: E402
from support.hostile_gemm_cases import gemm_cases  # noqa: E402
from support.hostile_multi_cases import many_device_cases  # noqa: E402

def compute_cases(symbol) -> List[Case]:
    name, spec = symbol.name, SPECS[symbol.name]
    dims = dims_of(symbol)
    base = _values(symbol)
    base.update(spec.scalars)
    cases: List[Case] = []

    def add(case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def run_ok(h, values=None, buffers=None, gpu=None):
        values = values or base
        buffers = buffers if buffers is not None else _buffers(h, spec, values)
        h.succeeded(_call(h, symbol, buffers, values, gpu))

    add("baseline_exact_sizes", lambda h: run_ok(h))
    for gpu in FOREIGN_GPU_INDICES:
        add(f"gpu_index={gpu}", lambda h, gpu=gpu: run_ok(h, gpu=gpu))

    for buffer in spec.buffers:
        def null_case(h, buffer=buffer):
            buffers = _buffers(h, spec, base)
            buffers[buffer] = None
            result = _call(h, symbol, buffers, base)
            if buffer in spec.optional:
                h.succeeded(result)
            else:
                h.refused(result, 0, {C_INVALID_ARGUMENT}, ["NULL", buffer])
        add(f"{buffer}=NULL", null_case)
        for kind in BAD_TOKENS:
            def bad_token(h, buffer=buffer, kind=kind):
                buffers = _buffers(h, spec, base)
                buffers[buffer] = h.token(kind)
                h.refused(_call(h, symbol, buffers, base), 0, {C_INVALID_HANDLE},
                          [buffer, TOKEN_WORDS[kind]])
            add(f"{buffer}={kind}", bad_token)

        def too_small(h, buffer=buffer):
            need = element_count(spec.buffers[buffer], base) * ELEMENT_BYTES
            buffers = _buffers(h, spec, base, override={buffer: need - ELEMENT_BYTES})
            h.refused(_call(h, symbol, buffers, base), 0, {C_OUT_OF_RANGE},
                      [buffer, str(need - ELEMENT_BYTES), str(need)])
        add(f"{buffer}_one_element_too_small", too_small)

    if spec.optional:
        def all_optional_null(h):
            buffers = _buffers(h, spec, base)
            for buffer in spec.optional:
                buffers[buffer] = None
            h.succeeded(_call(h, symbol, buffers, base))
        add("all_optional_outputs_NULL", all_optional_null)

    for dim in dims:
        def zero(h, dim=dim):
            values = dict(base, **{dim: 0})
            buffers = _buffers(h, spec, base,
                               fills={b: 0x5A for b in spec.buffers if b not in spec.index_buffers})
            before = {b: h.contents(handle, element_count(spec.buffers[b], base) * 4)
                      for b, handle in buffers.items()}
            h.succeeded(_call(h, symbol, buffers, values))
            for b, handle in buffers.items():
                if element_count(spec.buffers[b], values) == 0 and \
                        h.contents(handle, len(before[b])) != before[b]:
                    fail(f"{dim}=0: {b} (0 elements) was written")
        add(f"{dim}=0", zero)
        for value in (-1, INT_MIN):
            add(f"{dim}={value}", lambda h, dim=dim, value=value: h.refused(
                _call(h, symbol, _buffers(h, spec, base), dict(base, **{dim: value})), 0,
                {C_INVALID_ARGUMENT}, ["negative", dim]))
        add(f"{dim}=INT_MAX", lambda h, dim=dim: h.refused(
            _call(h, symbol, _buffers(h, spec, base), dict(base, **{dim: INT_MAX})), 0,
            {C_INVALID_ARGUMENT, C_OUT_OF_RANGE}))

    def huge(assignments: Dict[str, int], case_id: str):
        def run(h):
            values = dict(base)
            values.update({d: 1 for d in dims})
            values.update(assignments)
            sizes = {}
            for b, bdims in spec.buffers.items():
                true = element_count(bdims, values)
                wrapped = true % 2**32 if true >= 2**31 else true
                sizes[b] = min(max(wrapped, 1) * ELEMENT_BYTES, 1 << 20)
            buffers = _buffers(h, spec, values | {d: 1 for d in dims}, override=sizes)
            h.refused(_call(h, symbol, buffers, values), 0,
                      {C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
        add(case_id, run)

    huge({d: INT_MAX for d in dims}, "all_dims_INT_MAX")
    widest = max(spec.buffers.values(), key=len)
    if len(widest) >= 2:  # 2^32 + 2^16 elements: 2^16 if counted in 32 bits
        huge({widest[0]: 65536, widest[1]: 65537}, "count_wraps_32_bits")
    if len(widest) >= 3:  # 2^64 elements (0 if unchecked), and 2^62 elements = 2^64 bytes
        huge({widest[0]: 2**21, widest[1]: 2**21, widest[2]: 2**22}, "count_wraps_64_bits")
        huge({widest[0]: 2**20, widest[1]: 2**20, widest[2]: 2**22}, "bytes_wrap_64_bits")

    if name == "execute_adam_update_on_gpu":
        bad = {"t=0": {"t": 0}, "t=-1": {"t": -1}, "lr<0": {"lr": -1e-3},
               "beta1=1": {"beta1": 1.0}, "beta1<0": {"beta1": -0.1}, "beta2=1": {"beta2": 1.0},
               "beta2<0": {"beta2": -0.5}, "eps<0": {"eps": -1e-8},
               "weight_decay<0": {"weight_decay": -0.1}}
        for case_id, change in bad.items():
            add(case_id, lambda h, change=change: h.refused(
                _call(h, symbol, _buffers(h, spec, base), dict(base, **change)), 0,
                {C_INVALID_ARGUMENT}))
        add("num_elements=0_before_hyperparameters", lambda h: run_ok(
            h, dict(base, num_elements=0, t=0, lr=-1.0)))
    if "eps" in spec.scalars and name != "execute_adam_update_on_gpu":
        for eps in (0.0, -1.0):  # docs/ABI.md §3.6: eps <= 0 is replaced by 1e-5
            add(f"eps={eps}", lambda h, eps=eps: run_ok(h, dict(base, eps=eps)))
    for scalar in spec.scalars:
        if symbol.parameters and any(p.name == scalar and p.c_type == "float"
                                     for p in symbol.parameters):
            def nan_case(h, scalar=scalar):
                result = _call(h, symbol, _buffers(h, spec, base), dict(base, **{scalar: math.nan}))
                if result not in (0, 1):
                    fail(f"returned {result!r}")
                if result == 0:
                    h.refused(result, 0, {C_INVALID_ARGUMENT})
            add(f"{scalar}=NaN_does_not_crash", nan_case)
    return cases


# ---- memory and transfer entry points -------------------------------------------------------
def memory_cases() -> List[Case]:
    cases: List[Case] = []
    lib_name = "allocate_gpu_memory"

    def add(name, case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def alloc_refused(size, code, words=()):
        def run(h):
            h.refused(h.lib.allocate_gpu_memory(h.index, size), None, {code}, words)
        return run

    add(lib_name, "size=0", alloc_refused(0, C_INVALID_ARGUMENT, ["size is 0"]))
    for size in (SIZE_MAX, 2**63, 2**62):
        add(lib_name, f"size={size}", alloc_refused(size, C_OUT_OF_MEMORY))

    def max_alloc_plus_one(h):
        info = json.loads(h.lib.json_call("aethercl_device_info", h.index))
        h.refused(h.lib.allocate_gpu_memory(h.index, info["max_alloc_bytes"] + 1), None,
                  {C_OUT_OF_MEMORY})
    add(lib_name, "size=max_alloc+1", max_alloc_plus_one)
    for gpu in FOREIGN_GPU_INDICES:
        def alloc_foreign(h, gpu=gpu):
            handle = h.lib.allocate_gpu_memory(gpu, 8)
            h.succeeded(handle, True)
            h.owned.append(handle)
        add(lib_name, f"gpu_index={gpu}", alloc_foreign)

    name = "free_gpu_memory"

    def free_null(h):
        live = h.live_buffers()
        h.lib.free_gpu_memory(h.index, None)
        h.succeeded_void()
        if h.live_buffers() != live:
            fail("free(NULL) changed the live buffer count")
    add(name, "NULL", free_null)
    for kind in BAD_TOKENS + ("double_free",):
        def free_bad(h, kind=kind):
            keep = h.alloc(16, 7)
            token = h.token("freed" if kind == "double_free" else kind)
            live = h.live_buffers()
            h.lib.free_gpu_memory(h.index, token)
            h.refused_void({C_INVALID_HANDLE},
                           [TOKEN_WORDS["freed" if kind == "double_free" else kind]])
            if h.live_buffers() != live or h.contents(keep, 16) != bytes([7]) * 16:
                fail("a refused free had an effect on live buffers")
        add(name, kind, free_bad)

    for name, is_write in (("write_host_to_gpu_blocking", True),
                           ("read_gpu_to_host_blocking", False)):
        function = name

        def transfer(h, handle, offset, size, host, function=function):
            return getattr(h.lib, function)(h.index, handle, offset, size, host)

        for kind in ("NULL",) + BAD_TOKENS:
            def bad_handle(h, kind=kind, transfer=transfer, name=name):
                host = ctypes.create_string_buffer(64)
                token = None if kind == "NULL" else h.token(kind)
                h.refused(transfer(h, token, 0, 16, host), 0,
                          {C_INVALID_ARGUMENT, C_INVALID_HANDLE},
                          ["gpu_buffer_handle", "NULL" if kind == "NULL" else TOKEN_WORDS[kind]])
            add(name, f"handle={kind}", bad_handle)

        def null_host(h, transfer=transfer, name=name):
            handle = h.alloc(16, 3)
            h.refused(transfer(h, handle, 0, 16, None), 0, {C_INVALID_ARGUMENT}, ["NULL"])
            if h.contents(handle, 16) != bytes([3]) * 16:
                fail("a refused call changed the buffer")
        add(name, "host_pointer=NULL", null_host)

        def zero_null(h, transfer=transfer, name=name):
            handle = h.alloc(16)
            h.succeeded(transfer(h, handle, 16, 0, None))
        add(name, "size=0_host_NULL", zero_null)
        spans = [(0, 17), (16, 1), (17, 0), (1, SIZE_MAX), (SIZE_MAX, 2), (2**63, 2**63),
                 (SIZE_MAX, 0), (4, 13)]
        for offset, size in spans:
            def span(h, offset=offset, size=size, transfer=transfer, name=name):
                handle = h.alloc(16, 3)
                host = ctypes.create_string_buffer(b"\x09" * 64, 64)
                h.refused(transfer(h, handle, offset, size, host), 0, {C_OUT_OF_RANGE})
                if h.contents(handle, 16) != bytes([3]) * 16 or host.raw != b"\x09" * 64:
                    fail("a refused transfer had an effect")
            add(name, f"offset={offset},size={size}", span)
        for gpu in FOREIGN_GPU_INDICES:
            def foreign(h, gpu=gpu, function=function, name=name):
                handle = h.alloc(16)
                host = ctypes.create_string_buffer(16)
                h.succeeded(getattr(h.lib, function)(gpu, handle, 0, 16, host))
            add(name, f"gpu_index={gpu}", foreign)

    name = "execute_clone_on_gpu"
    for slot in ("src_buffer", "dst_buffer"):
        for kind in ("NULL",) + BAD_TOKENS:
            def clone_bad(h, slot=slot, kind=kind):
                good = h.alloc(64)
                token = None if kind == "NULL" else h.token(kind)
                args = (token, good) if slot == "src_buffer" else (good, token)
                h.refused(h.lib.execute_clone_on_gpu(h.index, *args, 16), 0,
                          {C_INVALID_ARGUMENT, C_INVALID_HANDLE},
                          [slot, "NULL" if kind == "NULL" else TOKEN_WORDS[kind]])
            add(name, f"{slot}={kind}", clone_bad)

        def clone_small(h, slot=slot):
            small, big = h.alloc(60, 1), h.alloc(64, 2)
            args = (small, big) if slot == "src_buffer" else (big, small)
            h.refused(h.lib.execute_clone_on_gpu(h.index, *args, 64), 0, {C_OUT_OF_RANGE},
                      [slot, "60 bytes", "64 bytes"])
            if h.contents(small, 60) != bytes([1]) * 60 or h.contents(big, 64) != bytes([2]) * 64:
                fail("a refused clone had an effect")
        add(name, f"{slot}_one_element_too_small", clone_small)
    for size in (SIZE_MAX, 2**63):
        def clone_huge(h, size=size):
            a, b = h.alloc(64), h.alloc(64)
            h.refused(h.lib.execute_clone_on_gpu(h.index, a, b, size), 0, {C_OUT_OF_RANGE})
        add(name, f"size={size}", clone_huge)
    add(name, "size=0", lambda h: h.succeeded(
        h.lib.execute_clone_on_gpu(h.index, h.alloc(4), h.alloc(4), 0)))

    def clone_self(h):
        a = h.alloc(64, 4)
        h.succeeded(h.lib.execute_clone_on_gpu(h.index, a, a, 64))
        if h.contents(a, 64) != bytes([4]) * 64:
            fail("src == dst changed the buffer")
    add(name, "src==dst", clone_self)
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(
            h.lib.execute_clone_on_gpu(gpu, h.alloc(8), h.alloc(8), 8)))
    return cases


# ---- aethercl_* extensions and lifecycle ------------------------------------------------------
def extension_cases(count_hint: int = 1) -> List[Case]:
    cases: List[Case] = []

    def add(name, case_id, function):
        cases.append((f"{name}/{case_id}", function))

    name = "initialize_gpu"

    def init_out_of_range(value_of):
        def run(h):
            value = value_of(h)
            h.refused(h.lib.initialize_gpu(value), 0, {C_NO_DEVICE},
                      [f"gpu_index {value} is out of range"])
        return run
    add(name, "gpu_index=device_count", init_out_of_range(lambda h: h.lib.aethercl_device_count()))
    for value in (-1, INT_MIN, INT_MAX):
        add(name, f"gpu_index={value}", init_out_of_range(lambda h, value=value: value))
    add(name, "twice_is_idempotent", lambda h: h.succeeded(h.lib.initialize_gpu(h.index)))

    name = "aethercl_status_name"
    for value in (-1, len(Status), 999, INT_MIN, INT_MAX):
        def status_name(h, value=value):
            if h.lib.aethercl_status_name(value) != b"AETHERCL_UNKNOWN_STATUS":
                fail(f"aethercl_status_name({value}) = {h.lib.aethercl_status_name(value)!r}")
        add(name, f"status={value}", status_name)

    for name in ("aethercl_version", "aethercl_last_error"):
        add(name, "never_NULL", lambda h, name=name: (
            getattr(h.lib, name)() is not None or fail("returned NULL")))
    add("aethercl_abi_version", "positive", lambda h: (
        h.lib.aethercl_abi_version() >= 2 or fail("abi version < 2")))
    add("aethercl_last_error_code", "zero_after_success", lambda h: (
        h.lib.aethercl_device_count(), h.lib.aethercl_last_error_code() == 0
        or fail("code not cleared by a successful call")))
    add("aethercl_device_count", "at_least_one", lambda h: (
        h.lib.aethercl_device_count() >= 1 or fail("no device")))

    for name in ("aethercl_device_info", "aethercl_memory_stats"):
        function = name

        def null_with_capacity(h, function=function, name=name):
            size = getattr(h.lib, function)(h.index, None, 100)
            h.succeeded(size, True)
        add(name, "buffer=NULL_capacity=100", null_with_capacity)

        def capacity_one(h, function=function, name=name):
            buffer = ctypes.create_string_buffer(b"\x77" * 8, 8)
            size = getattr(h.lib, function)(h.index, buffer, 1)
            h.succeeded(size, True)
            if buffer.raw != b"\x00" + b"\x77" * 7:
                fail(f"capacity 1 wrote {buffer.raw!r}")
        add(name, "capacity=1", capacity_one)

    for value in (-1, INT_MIN, INT_MAX):
        add("aethercl_device_info", f"gpu_index={value}", lambda h, value=value: h.refused(
            h.lib.aethercl_device_info(value, None, 0), 0, {C_NO_DEVICE},
            ["out of range"]))
    for gpu in FOREIGN_GPU_INDICES:
        add("aethercl_memory_stats", f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(
            h.lib.aethercl_memory_stats(gpu, None, 0), True))
        add("aethercl_synchronize", f"gpu_index={gpu}", lambda h, gpu=gpu: h.succeeded(
            h.lib.aethercl_synchronize(gpu)))
    pool_cases(add)

    trace_cases(add)

    name = "aethercl_set_buffer_label"
    for kind in ("NULL",) + BAD_TOKENS:
        def label_bad(h, kind=kind):
            token = None if kind == "NULL" else h.token(kind)
            h.refused(h.lib.aethercl_set_buffer_label(h.index, token, b"x"), 0,
                      {C_INVALID_ARGUMENT, C_INVALID_HANDLE})
        add(name, f"handle={kind}", label_bad)
    labels = {"NULL": None, "empty": b"", "1000_bytes": b"L" * 1000,
              "quotes_and_controls": b'"\\\n\t\x01}', "invalid_utf8": b"\xff\xfe\x80abc",
              "utf8_cut_at_63": "é".encode() * 40}

    for case_id, label in labels.items():
        def label_case(h, label=label):
            handle = h.alloc(8)
            h.succeeded(h.lib.aethercl_set_buffer_label(h.index, handle, label))
            try:
                stats = json.loads(h.lib.json_call("aethercl_memory_stats", h.index))
            except (ValueError, UnicodeDecodeError) as error:
                fail(f"memory statistics are no longer valid UTF-8 JSON: {error}")
            mine = [b for b in stats["labelled_buffers"] if int(b["handle"], 16) == handle]
            if label:
                if len(mine) != 1 or len(mine[0]["label"].encode()) > 63:
                    fail(f"label entry {mine!r}")
            elif mine:
                fail("an empty label is still listed")
        add(name, f"label={case_id}", label_case)
    return cases


def pool_cases(add) -> None:
    """aethercl_empty_cache / aethercl_reset_peak_memory_stats: any gpu_index follows the
    one-initialised-device rule; both keep live buffers intact and do what they say."""
    for name in ("aethercl_empty_cache", "aethercl_reset_peak_memory_stats"):
        for gpu in FOREIGN_GPU_INDICES:
            add(name, f"gpu_index={gpu}", lambda h, gpu=gpu, name=name: h.succeeded(
                getattr(h.lib, name)(gpu)))

    def free_one(h, nbytes):
        handle = h.lib.allocate_gpu_memory(h.index, nbytes)
        if not handle:
            fail(f"setup: allocate_gpu_memory({nbytes}) failed: {h.lib.last_error()}")
        h.lib.free_gpu_memory(h.index, handle)

    def empty_cache_keeps_live_buffers(h):
        keep = h.alloc(4096, fill=0x5A)
        free_one(h, 1 << 20)
        h.succeeded(h.lib.aethercl_empty_cache(h.index))
        stats = json.loads(h.lib.json_call("aethercl_memory_stats", h.index))
        if stats["bytes_cached"] != 0:
            fail(f"bytes_cached {stats['bytes_cached']} after empty_cache")
        if h.contents(keep, 4096) != b"\x5a" * 4096:
            fail("a live buffer changed")
    add("aethercl_empty_cache", "keeps_live_buffers", empty_cache_keeps_live_buffers)

    def reset_peak(h):
        free_one(h, 8 << 20)
        h.succeeded(h.lib.aethercl_reset_peak_memory_stats(h.index))
        stats = json.loads(h.lib.json_call("aethercl_memory_stats", h.index))
        if stats["peak_bytes_reserved"] != stats["bytes_reserved"]:
            fail(f"peak {stats['peak_bytes_reserved']} != reserved {stats['bytes_reserved']}")
    add("aethercl_reset_peak_memory_stats", "peak_is_current", reset_peak)


def trace_cases(add) -> None:
    import tempfile

    def path(h, name="trace.json"):
        directory = tempfile.mkdtemp(prefix="aethercl-hostile-")
        h.keep.append(directory)
        return os.path.join(directory, name)

    add("aethercl_trace_start", "path=NULL", lambda h: h.refused(
        h.lib.aethercl_trace_start(None), 0, {C_INVALID_ARGUMENT}, ["NULL"]))
    add("aethercl_trace_stop", "without_start", lambda h: h.refused(
        h.lib.aethercl_trace_stop(), 0, {C_INVALID_ARGUMENT}))

    def start_twice(h):
        target = path(h)
        h.succeeded(h.lib.aethercl_trace_start(target.encode()))
        second = h.lib.aethercl_trace_start(path(h, "other.json").encode())
        h.refused(second, 0, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
        h.roundtrip()
        if h.lib.aethercl_trace_stop() != 1:
            fail(f"stop after a refused second start: {h.lib.last_error()}")
        with open(target) as f:
            json.load(f)
    add("aethercl_trace_start", "twice", start_twice)

    def unwritable(h):
        result = h.lib.aethercl_trace_start(b"/nonexistent-dir/deeper/trace.json")
        if result == 1:  # refused only when the file is written
            h.refused(h.lib.aethercl_trace_stop(), 0, {C_INVALID_ARGUMENT, C_DEVICE_ERROR,
                                                       C_INTERNAL}, name="aethercl_trace_stop")
        else:
            h.refused(result, 0, {C_INVALID_ARGUMENT})
        target = path(h)   # tracing is over either way: a new trace starts and stops
        if h.lib.aethercl_trace_start(target.encode()) != 1 or h.lib.aethercl_trace_stop() != 1:
            fail(f"tracing unusable after an unwritable path: {h.lib.last_error()}")
    add("aethercl_trace_start", "unwritable_path", unwritable)

    def summary(h, capacity, with_buffer):
        buffer = ctypes.create_string_buffer(b"\x77" * 8, 8) if with_buffer else None
        h.succeeded(h.lib.aethercl_trace_summary(buffer, capacity), True)
        if with_buffer and buffer.raw != b"\x00" + b"\x77" * 7:
            fail(f"capacity {capacity} wrote {buffer.raw!r}")
    add("aethercl_trace_summary", "buffer=NULL_capacity=100", lambda h: summary(h, 100, False))
    add("aethercl_trace_summary", "capacity=1", lambda h: summary(h, 1, True))


def all_cases(symbols) -> List[Case]:
    names = {s.name for s in symbols}
    cases = memory_cases() + extension_cases() + runtime_cases(symbols)
    if "aethercl_comm_create" in names:
        cases += many_device_cases()
    if "aethercl_gemm" in names:
        cases += gemm_cases()
    if "aethercl_gemm_fused" in names:
        from support.hostile_gemm_fused_cases import gemm_fused_cases
        cases += gemm_fused_cases()
    if "aethercl_launch" in names:
        from support.hostile_kernel_cases import kernel_runtime_cases  # your own kernels, typed memory
        cases += kernel_runtime_cases()
    if "simulated_kernel_allocate" in names:
        cases += sim_cases()
    for symbol in symbols:
        if symbol.name.startswith("execute_") and symbol.name not in SPECIAL:
            cases += compute_cases(symbol)
    from support.hostile_train_cases import all_train_cases  # version-3 training ops
    cases += all_train_cases(symbols)
    from support.hostile_typed_cases import typed_cases  # their 16-bit operands
    cases += typed_cases(symbols)
    # --- graphs (AETHERCL_4) ---
    if "aethercl_graph_capture_begin" in names:
        from support.hostile_graph_cases import graph_cases
        cases += graph_cases()
    if "aethercl_optimizer_step_multi" in names:
        from support.hostile_optim_multi_cases import optim_multi_cases
        cases += optim_multi_cases()
    return cases


def covered_functions(cases) -> set:
    return {case_id.split("/")[0] for case_id, _ in cases}


def manifest_symbols():
    return abi.parse_manifest((HERE.parents[1] / "abi" / "driver.abi").read_text())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", type=int, default=0, help="index of the first case to run")
    parser.add_argument("--only", default=None, help="run just this case id")
    args = parser.parse_args()
    from aethercl import Library
    lib = Library()
    index = int(os.environ.get("AETHERCL_TEST_DEVICE", "0"))
    if lib.initialize_gpu(index) != 1:
        print(json.dumps({"setup_error": lib.last_error()}), flush=True)
        return 2
    harness = Harness(lib, index)
    cases = all_cases(lib.symbols)
    selected = [(i, c) for i, c in enumerate(cases) if i >= args.start and
                (args.only is None or c[0] == args.only)]
    for i, (case_id, function) in selected:
        print(json.dumps({"start": case_id, "index": i}), flush=True)
        harness.function = case_id.split("/")[0]
        outcome, detail = "pass", ""
        try:
            live = harness.live_buffers()
            try:
                function(harness)
            finally:
                harness.cleanup()
            if harness.live_buffers() != live:
                fail(f"live buffers {live} -> {harness.live_buffers()} after the case")
            harness.roundtrip()
        except CaseResult as result:
            outcome, detail = result.outcome, result.detail
            harness.cleanup()
            if outcome != "fail":
                try:
                    harness.roundtrip()
                except CaseResult as broken:
                    outcome, detail = broken.outcome, broken.detail
        except Exception:  # a harness bug or a ctypes error: a failure, with the traceback
            outcome, detail = "fail", traceback.format_exc(limit=3)
            harness.cleanup()
        print(json.dumps({"id": case_id, "outcome": outcome, "detail": detail[:600]}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
