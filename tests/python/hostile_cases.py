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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python_harness"))
sys.path.insert(0, str(HERE))

from aethercl import abi  # noqa: E402
from aethercl.status import Status  # noqa: E402
from op_specs import ELEMENT_BYTES, SPECIAL, SPECS, dims_of, element_count  # noqa: E402

INT_MAX, INT_MIN = 2**31 - 1, -2**31
SIZE_MAX = 2**64 - 1
NEVER_ISSUED = ((1 << 40) << 8) | 0xAE        # well-formed token, id far beyond any issued
MALFORMED = 0x12345678                         # wrong tag byte
C_INVALID_ARGUMENT, C_INVALID_HANDLE = Status.INVALID_ARGUMENT, Status.INVALID_HANDLE
C_OUT_OF_RANGE, C_OUT_OF_MEMORY = Status.OUT_OF_RANGE, Status.OUT_OF_MEMORY
C_NOT_INITIALIZED, C_NO_DEVICE = Status.NOT_INITIALIZED, Status.NO_DEVICE
C_DEVICE_ERROR, C_INTERNAL, C_NOT_IMPLEMENTED = Status.DEVICE_ERROR, Status.INTERNAL, \
    Status.NOT_IMPLEMENTED
C_BUILD_FAILED = Status.BUILD_FAILED
BAD_TOKENS = ("never_issued", "malformed", "freed", "host_pointer")
TOKEN_WORDS = {"never_issued": "never issued", "malformed": "not a buffer handle",
               "freed": "freed", "host_pointer": "not a buffer handle"}
FOREIGN_GPU_INDICES = (7, -1, INT_MIN, INT_MAX)   # never initialised: docs/ABI.md §3.2 fallback


class CaseResult(Exception):
    def __init__(self, outcome: str, detail: str = ""):
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


def fail(detail: str):
    raise CaseResult("fail", detail)


class Harness:
    """The library, the test device and the bookkeeping every case shares."""

    def __init__(self, lib, index: int):
        self.lib, self.index = lib, index
        self.function = ""  # the function under test (the runner sets it from the case id)
        self.owned: List[int] = []
        self.blocks: List[int] = []
        self.keep = []  # host memory that must outlive a call
        self.streams: List[int] = []   # stream tokens to destroy after the case
        self.events: List[int] = []    # event tokens to destroy after the case
        self.pinned: List[int] = []    # aethercl_host_alloc pointers to free after the case

    # ---- memory helpers -------------------------------------------------------------------
    def alloc(self, nbytes: int, fill: int = 0) -> int:
        handle = self.lib.allocate_gpu_memory(self.index, max(1, nbytes))
        if not handle:
            fail(f"setup: allocate_gpu_memory({nbytes}) failed: {self.lib.last_error()}")
        self.owned.append(handle)
        data = bytes([fill]) * max(1, nbytes)
        if self.lib.write_host_to_gpu_blocking(self.index, handle, 0, len(data), data) != 1:
            fail(f"setup: write failed: {self.lib.last_error()}")
        return handle

    def contents(self, handle: int, nbytes: int) -> bytes:
        out = ctypes.create_string_buffer(max(1, nbytes))
        if self.lib.read_gpu_to_host_blocking(self.index, handle, 0, nbytes, out) != 1:
            fail(f"read back failed: {self.lib.last_error()}")
        return out.raw[:nbytes]

    def token(self, kind: str, nbytes: int = 64) -> int:
        if kind == "never_issued":
            return NEVER_ISSUED
        if kind == "malformed":
            return MALFORMED
        if kind == "freed":
            handle = self.alloc(nbytes)
            self.lib.free_gpu_memory(self.index, handle)
            return handle
        if kind == "host_pointer":
            buffer = ctypes.create_string_buffer(nbytes)
            self.keep.append(buffer)
            return ctypes.addressof(buffer)
        raise ValueError(kind)

    def live_buffers(self) -> int:
        return json.loads(self.lib.json_call("aethercl_memory_stats", self.index))["live_buffers"]

    def cleanup(self) -> None:
        for event in self.events:
            self.lib.aethercl_event_destroy(event)
        self.events.clear()
        for stream in self.streams:
            self.lib.aethercl_stream_destroy(self.index, stream)
        self.streams.clear()
        for pointer in self.pinned:
            self.lib.aethercl_host_free(pointer)
        self.pinned.clear()
        for handle in self.owned:
            self.lib.free_gpu_memory(self.index, handle)
        self.owned.clear()
        if hasattr(self.lib.cdll, "simulated_kernel_free"):
            for address in self.blocks:
                self.lib.simulated_kernel_free(self.index, address, 0)
        self.blocks.clear()
        for item in self.keep:
            if isinstance(item, str):
                import shutil
                shutil.rmtree(item, ignore_errors=True)
        self.keep.clear()

    def roundtrip(self) -> None:
        """allocate, write, execute_add, read, compare: the library still works."""
        import numpy as np
        n = 37
        a = np.arange(n, dtype=np.float32)
        b = np.full(n, 0.5, np.float32)
        handles = [self.lib.allocate_gpu_memory(self.index, n * 4) for _ in range(3)]
        try:
            if not all(handles):
                fail(f"round trip: allocation failed: {self.lib.last_error()}")
            for handle, data in zip(handles, (a, b)):
                if self.lib.write_host_to_gpu_blocking(self.index, handle, 0, n * 4,
                                                       data.ctypes.data) != 1:
                    fail(f"round trip: write failed: {self.lib.last_error()}")
            if self.lib.execute_add_on_gpu(self.index, *handles, n) != 1:
                fail(f"round trip: execute_add failed: {self.lib.last_error()}")
            out = np.zeros(n, np.float32)
            if self.lib.read_gpu_to_host_blocking(self.index, handles[2], 0, n * 4,
                                                  out.ctypes.data) != 1:
                fail(f"round trip: read failed: {self.lib.last_error()}")
            if not (out == a + b).all():
                fail("round trip: wrong result after the case")
        finally:
            for handle in handles:
                if handle:
                    self.lib.free_gpu_memory(self.index, handle)

    # ---- verdicts -----------------------------------------------------------------------
    def refused(self, result, failure, codes, words=(), name=None) -> None:
        """The call must have returned `failure`, with a message naming the function under test
        (or `name`) and the problem."""
        name = name or self.function
        message, code = self.lib.last_error(), self.lib.last_error_code()
        if result != failure:
            fail(f"returned {result!r}, expected the failure value {failure!r} "
                 f"(last error: {message!r})")
        self._check_message(name, message, code, codes, words)

    def refused_void(self, codes, words=(), name=None) -> None:
        name = name or self.function
        self._check_message(name, self.lib.last_error(), self.lib.last_error_code(), codes, words)

    def _check_message(self, name, message, code, codes, words):
        if not message.startswith(name + ": "):
            fail(f"the message does not start with the function name: {message!r} (code {code})")
        if code not in codes:
            fail(f"status {code}, expected one of {sorted(codes)}: {message!r}")
        for word in words:
            alternatives = word if isinstance(word, tuple) else (word,)
            if not any(w.lower() in message.lower() for w in alternatives):
                fail(f"the message does not mention {' or '.join(alternatives)!r}: {message!r}")

    def succeeded(self, result, success=1, name=None, unless_unsupported=None) -> None:
        """The call must have succeeded. unless_unsupported names the one device feature (a word
        the message must contain, e.g. "IL" for SPIR-V) whose absence makes a refusal with
        AETHERCL_NOT_IMPLEMENTED the right answer for this case; without it that code fails."""
        name = name or self.function
        message, code = self.lib.last_error(), self.lib.last_error_code()
        ok = bool(result) if success is True else result == success
        if ok and message == "" and code == 0:
            return
        if (not ok and unless_unsupported and code == C_NOT_IMPLEMENTED
                and message.startswith(name + ": ")
                and unless_unsupported.lower() in message.lower()):
            raise CaseResult("unsupported", message)
        fail(f"returned {result!r}, expected success; last error {message!r} (code {code})")

    def succeeded_void(self, name=None) -> None:
        message, code = self.lib.last_error(), self.lib.last_error_code()
        if message or code:
            fail(f"unexpected error {message!r} (code {code})")


Case = Tuple[str, Callable[[Harness], None]]


# ---- execute_* entry points (generic, from op_specs) --------------------------------------
def _values(symbol) -> Dict[str, int]:
    primes = [2, 3, 5, 7, 11, 13]
    return dict(zip(dims_of(symbol), primes))


def _call(h: Harness, symbol, buffers: Dict[str, int], values: Dict[str, float], gpu=None):
    args = [h.index if gpu is None else gpu]
    for p in symbol.parameters[1:]:
        if p.c_type == "void*":
            args.append(buffers.get(p.name))
        else:
            args.append(values[p.name])
    return getattr(h.lib, symbol.name)(*args)


def _buffers(h: Harness, spec, values, fills=None, override=None) -> Dict[str, int]:
    """Exactly sized buffers (at least 1 byte) for the dims in values; fills per buffer."""
    out = {}
    for name, dims in spec.buffers.items():
        count = element_count(dims, values)
        size = (override or {}).get(name, count * ELEMENT_BYTES)
        out[name] = h.alloc(size, (fills or {}).get(name, 0))
    return out


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


# ---- simulated_* host-memory API -----------------------------------------------------------
def sim_cases() -> List[Case]:
    cases: List[Case] = []

    def add(name, case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def block(h, nbytes, fill=0):
        address = h.lib.simulated_kernel_allocate(h.index, nbytes)
        h.succeeded(address, True, name="simulated_kernel_allocate")
        h.blocks.append(address)
        data = bytes([fill]) * nbytes
        h.lib.simulated_kernel_write(h.index, address, nbytes, data)
        h.succeeded_void("simulated_kernel_write")
        return address

    def read_block(h, address, nbytes):
        out = ctypes.create_string_buffer(nbytes)
        h.lib.simulated_kernel_read(h.index, address, nbytes, out)
        h.succeeded_void("simulated_kernel_read")
        return out.raw

    def bad_address(h, kind):
        if kind == "zero":
            return 0
        if kind == "unknown":
            return 0x7F0000001000
        if kind == "freed":
            address = block(h, 64)
            h.lib.simulated_kernel_free(h.index, address, 64)
            h.blocks.remove(address)
            return address
        if kind == "device_token":
            return h.alloc(64)
        if kind == "host_pointer":
            buffer = ctypes.create_string_buffer(64)
            h.keep.append(buffer)
            return ctypes.addressof(buffer)
        if kind == "inside_a_block":
            return block(h, 64) + 8
        raise ValueError(kind)

    ADDRESS_KINDS = ("zero", "unknown", "freed", "device_token", "host_pointer", "inside_a_block")

    name = "simulated_kernel_allocate"
    add(name, "size=0", lambda h: h.refused(
        h.lib.simulated_kernel_allocate(h.index, 0), 0, {C_INVALID_ARGUMENT}))
    for size in (SIZE_MAX, 2**63, SIZE_MAX - 62):
        add(name, f"size={size}", lambda h, size=size: h.refused(
            h.lib.simulated_kernel_allocate(h.index, size), 0,
            {C_OUT_OF_MEMORY, C_INVALID_ARGUMENT}))

    def sim_alloc_any_index(h):
        address = h.lib.simulated_kernel_allocate(INT_MIN, 8)
        h.succeeded(address, True)
        h.blocks.append(address)
    add(name, "gpu_index_ignored", sim_alloc_any_index)

    name = "simulated_kernel_free"
    for kind in ADDRESS_KINDS + ("double_free",):
        def sim_free_bad(h, kind=kind):
            keep = block(h, 32, 5)
            address = bad_address(h, "freed" if kind == "double_free" else kind)
            h.lib.simulated_kernel_free(h.index, address, 64)
            if kind == "zero":  # a no-op; a message is optional but must name the function
                message = h.lib.last_error()
                if message and not message.startswith(h.function + ": "):
                    fail(f"message {message!r}")
            else:
                h.refused_void({C_INVALID_HANDLE, C_INVALID_ARGUMENT})
            if read_block(h, keep, 32) != bytes([5]) * 32:
                fail("a refused free changed another block")
        add(name, f"address={kind}", sim_free_bad)

    for name in ("simulated_kernel_write", "simulated_kernel_read"):
        function = name
        for kind in ADDRESS_KINDS:
            def sim_bad(h, kind=kind, function=function, name=name):
                host = ctypes.create_string_buffer(b"\x09" * 64, 64)
                address = bad_address(h, kind)
                getattr(h.lib, function)(h.index, address, 64, host)
                h.refused_void({C_INVALID_HANDLE, C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
                if host.raw != b"\x09" * 64:
                    fail("a refused call wrote host memory")
            add(name, f"address={kind}", sim_bad)

        def sim_null(h, function=function, name=name):
            address = block(h, 64, 6)
            getattr(h.lib, function)(h.index, address, 64, None)
            h.refused_void({C_INVALID_ARGUMENT}, ["NULL"])
            if read_block(h, address, 64) != bytes([6]) * 64:
                fail("the block changed")
        add(name, "host=NULL", sim_null)
        for size in (65, SIZE_MAX, 2**63):
            def sim_too_big(h, size=size, function=function, name=name):
                address = block(h, 64, 6)
                host = ctypes.create_string_buffer(b"\x09" * 128, 128)
                getattr(h.lib, function)(h.index, address, size, host)
                h.refused_void({C_OUT_OF_RANGE, C_INVALID_ARGUMENT})
                if read_block(h, address, 64) != bytes([6]) * 64 or host.raw != b"\x09" * 128:
                    fail("a refused call had an effect")
            add(name, f"size={size}_beyond_the_block", sim_too_big)

    name = "simulated_matrix_multiply"

    def mm(h, a, b, size_a, size_b, shape_a, shape_b):
        sa = (ctypes.c_int * 2)(*shape_a) if shape_a is not None else None
        sb = (ctypes.c_int * 2)(*shape_b) if shape_b is not None else None
        return h.lib.simulated_matrix_multiply(h.index, a, b, size_a, size_b, sa, sb)

    def mm_ok(h):
        a, b = block(h, 160), block(h, 192)
        result = mm(h, a, b, 160, 192, (5, 4), (4, 6))
        h.succeeded(result, True)
        h.blocks.append(result)
    add(name, "baseline_5x4_at_4x6", mm_ok)
    shape_cases = {
        "shape_a=NULL": (160, 192, None, (4, 6)), "shape_b=NULL": (160, 192, (5, 4), None),
        "cols_a!=rows_b": (160, 192, (5, 4), (3, 8)), "size_a!=shape": (152, 192, (5, 4), (4, 6)),
        "size_b!=shape": (160, 200, (5, 4), (4, 6)), "rows_a=-1": (160, 192, (-1, 4), (4, 6)),
        "negative_square": (8, 8, (-1, -1), (-1, -1)), "rows_a=0": (0, 192, (0, 4), (4, 6)),
        "cols_b=0": (160, 0, (5, 4), (4, 0)),
        "shape_claims_more_than_the_block": (320, 192 * 2, (5, 8), (8, 6)),
        "INT_MAX_shapes": ((2**31 - 1) ** 2 * 8 % 2**64, INT_MAX * 8, (INT_MAX, INT_MAX),
                           (INT_MAX, 1)),
        "huge_shapes": (0, 0, (2**30, 2**30), (2**30, 2**30)),
    }
    for case_id, (size_a, size_b, shape_a, shape_b) in shape_cases.items():
        def mm_bad(h, size_a=size_a, size_b=size_b, shape_a=shape_a, shape_b=shape_b):
            a, b = block(h, 160, 1), block(h, 192, 2)
            result = mm(h, a, b, size_a, size_b, shape_a, shape_b)
            if result:
                h.blocks.append(result)
            h.refused(result, 0, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE, C_INVALID_HANDLE})
            if read_block(h, a, 160) != bytes([1]) * 160:
                fail("the input block changed")
        add(name, case_id, mm_bad)
    for slot in ("address_a", "address_b"):
        for kind in ADDRESS_KINDS:
            def mm_address(h, slot=slot, kind=kind):
                a, b = block(h, 160), block(h, 192)
                bad = bad_address(h, kind)
                args = (bad, b) if slot == "address_a" else (a, bad)
                result = mm(h, *args, 160, 192, (5, 4), (4, 6))
                if result:
                    h.blocks.append(result)
                h.refused(result, 0, {C_INVALID_HANDLE, C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
            add(name, f"{slot}={kind}", mm_address)

    name = "simulated_get_compute_unit_count"
    for gpu in FOREIGN_GPU_INDICES:
        def cu(h, gpu=gpu):
            info = json.loads(h.lib.json_call("aethercl_device_info", h.index))
            if h.lib.simulated_get_compute_unit_count(gpu) != info["compute_units"]:
                fail("an uninitialised index does not fall back to the only device")
        add(name, f"gpu_index={gpu}", cu)
    return cases


# ---- AETHERCL_3 runtime functions (streams, events, host memory, transfers) -----------------
# Generated from the manifest by parameter name: every stream, event, buffer, host-pointer,
# out-pointer and span parameter of every such function gets its hostile values.
STREAM_TAG, EVENT_TAG = 0xA5, 0xA7
STREAM_PARAMS = ("stream",)
EVENT_PARAMS = ("event", "start", "end")
BUFFER_PARAMS = ("buffer", "dst", "src")
OUT_PARAMS = ("done", "ms")
SPAN_SIZE = 64  # bytes of every buffer the cases allocate


def _new_stream(h: Harness, timing: bool = False) -> int:
    stream = h.lib.aethercl_stream_create(h.index, 1 if timing else 0)
    if not stream:
        fail(f"setup: aethercl_stream_create failed: {h.lib.last_error()}")
    h.streams.append(stream)
    return stream


def _new_event(h: Harness) -> int:
    event = h.lib.aethercl_event_record(h.index, _new_stream(h, timing=True))
    if not event:
        fail(f"setup: aethercl_event_record failed: {h.lib.last_error()}")
    h.events.append(event)
    return event


def _new_pinned(h: Harness, nbytes: int = SPAN_SIZE) -> int:
    pointer = h.lib.aethercl_host_alloc(h.index, nbytes)
    if not pointer:
        fail(f"setup: aethercl_host_alloc failed: {h.lib.last_error()}")
    h.pinned.append(pointer)
    return pointer


def _host(h: Harness, nbytes: int = SPAN_SIZE) -> int:
    buffer = ctypes.create_string_buffer(b"\x09" * nbytes, nbytes)
    h.keep.append(buffer)
    return ctypes.addressof(buffer)


def _valid_args(h: Harness, symbol) -> Dict[str, object]:
    """A valid value for every parameter, by name."""
    args: Dict[str, object] = {}
    for p in symbol.parameters:
        n = p.name
        if n == "gpu_index":
            args[n] = h.index
        elif n == "flags":
            args[n] = 0
        elif n in STREAM_PARAMS:
            args[n] = _new_stream(h)
        elif n in EVENT_PARAMS:
            args[n] = _new_event(h)
        elif n in BUFFER_PARAMS:
            args[n] = h.alloc(SPAN_SIZE, 3)
        elif n in ("offset", "dst_offset", "src_offset", "value"):
            args[n] = 0
        elif n == "size":
            args[n] = SPAN_SIZE if symbol.name == "aethercl_host_alloc" else 16
        elif n in ("source", "destination"):
            args[n] = _host(h)
        elif n == "host_ptr":
            args[n] = _new_pinned(h)
        elif n == "done":
            args[n] = ctypes.byref(ctypes.c_int(0))
        elif n == "ms":
            args[n] = ctypes.byref(ctypes.c_float(0))
        else:
            raise ValueError(f"{symbol.name}: no valid value for parameter {n}")
    if symbol.name == "aethercl_copy":  # two distinct buffers: no overlap
        args["src"] = h.alloc(SPAN_SIZE, 4)
    if symbol.name == "aethercl_host_free":
        h.pinned.remove(args["host_ptr"])  # the call itself frees it
    return args


def _invoke(h: Harness, symbol, args: Dict[str, object]):
    return getattr(h.lib, symbol.name)(*(args[p.name] for p in symbol.parameters))


def _failure(symbol):
    return None if symbol.return_type == "void*" else 0


def _bad_token(h: Harness, kind: str, tag: int) -> int:
    if kind == "never_issued":
        return ((1 << 40) << 8) | tag
    if kind == "malformed":
        return MALFORMED
    if kind == "buffer_handle":
        return h.alloc(16)
    if kind == "host_pointer":
        return _host(h)
    if kind == "destroyed_stream":
        stream = h.lib.aethercl_stream_create(h.index, 0)
        h.lib.aethercl_stream_destroy(h.index, stream)
        return stream
    if kind == "destroyed_event":
        event = h.lib.aethercl_event_record(h.index, None)
        h.lib.aethercl_event_destroy(event)
        return event
    if kind == "event_token":
        return _new_event(h)
    if kind == "stream_token":
        return _new_stream(h)
    raise ValueError(kind)


def runtime_cases(symbols) -> List[Case]:
    cases: List[Case] = []
    runtime = [s for s in symbols if s.version == "AETHERCL_3" and
               (s.name.startswith("aethercl_stream_") or s.name.startswith("aethercl_event_") or
                s.name in ("aethercl_host_alloc", "aethercl_host_free", "aethercl_write_async",
                           "aethercl_read_async", "aethercl_copy", "aethercl_memset"))]

    def add(symbol, case_id, function):
        cases.append((f"{symbol.name}/{case_id}", function))

    for symbol in runtime:
        names = [p.name for p in symbol.parameters]

        def baseline(h, symbol=symbol):
            args = _valid_args(h, symbol)
            result = _invoke(h, symbol, args)
            if symbol.name == "aethercl_stream_create" and result:
                h.streams.append(result)
            if symbol.name == "aethercl_event_record" and result:
                h.events.append(result)
            if symbol.name == "aethercl_host_alloc" and result:
                h.pinned.append(result)
            if symbol.name == "aethercl_stream_destroy":
                h.streams.remove(args["stream"])
            if symbol.name == "aethercl_event_destroy":
                h.events.remove(args["event"])
            if symbol.name == "aethercl_stream_current":
                h.succeeded(True, True)  # NULL is the default stream: only the error must be clear
            else:
                h.succeeded(result, True if symbol.return_type == "void*" else 1)
        add(symbol, "baseline", baseline)

        if "gpu_index" in names:
            for gpu in FOREIGN_GPU_INDICES:
                def foreign(h, symbol=symbol, gpu=gpu):
                    args = dict(_valid_args(h, symbol), gpu_index=gpu)
                    result = _invoke(h, symbol, args)
                    for kind, bucket in (("aethercl_stream_create", h.streams),
                                         ("aethercl_event_record", h.events),
                                         ("aethercl_host_alloc", h.pinned)):
                        if symbol.name == kind and result:
                            bucket.append(result)
                    if symbol.name == "aethercl_stream_destroy":
                        h.streams.remove(args["stream"])
                    if symbol.name == "aethercl_stream_current":
                        h.succeeded(True, True)
                    else:
                        h.succeeded(result, True if symbol.return_type == "void*" else 1)
                add(symbol, f"gpu_index={gpu}", foreign)

        for name in names:
            if name in STREAM_PARAMS:
                kinds = ("never_issued", "malformed", "buffer_handle", "host_pointer",
                         "destroyed_stream", "event_token")
                tag = STREAM_TAG
            elif name in EVENT_PARAMS:
                kinds = ("never_issued", "malformed", "buffer_handle", "host_pointer",
                         "destroyed_event", "stream_token")
                tag = EVENT_TAG
            else:
                kinds = ()
            for kind in kinds:
                def bad(h, symbol=symbol, name=name, kind=kind, tag=tag):
                    args = _valid_args(h, symbol)
                    args[name] = _bad_token(h, kind, tag)
                    h.refused(_invoke(h, symbol, args), _failure(symbol), {C_INVALID_HANDLE},
                              [name])
                add(symbol, f"{name}={kind}", bad)
            if name in EVENT_PARAMS:
                def null_event(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), _failure(symbol), {C_INVALID_ARGUMENT},
                              [name, "NULL"])
                add(symbol, f"{name}=NULL", null_event)
            if name in BUFFER_PARAMS:
                for kind in ("NULL",) + BAD_TOKENS:
                    def bad_buffer(h, symbol=symbol, name=name, kind=kind):
                        args = _valid_args(h, symbol)
                        args[name] = None if kind == "NULL" else h.token(kind)
                        h.refused(_invoke(h, symbol, args), 0,
                                  {C_INVALID_ARGUMENT, C_INVALID_HANDLE},
                                  [name, "NULL" if kind == "NULL" else TOKEN_WORDS[kind]])
                    add(symbol, f"{name}={kind}", bad_buffer)
            if name in OUT_PARAMS:
                def null_out(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), 0, {C_INVALID_ARGUMENT}, [name, "NULL"])
                add(symbol, f"{name}=NULL", null_out)
            if name in ("source", "destination"):
                def null_host(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), 0, {C_INVALID_ARGUMENT}, [name, "NULL"])
                add(symbol, f"{name}=NULL", null_host)

                def zero_null(h, symbol=symbol, name=name):
                    args = dict(_valid_args(h, symbol), size=0)
                    args[name] = None
                    h.succeeded(_invoke(h, symbol, args))
                add(symbol, f"size=0_{name}=NULL", zero_null)

                def pinned(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = _new_pinned(h)
                    h.succeeded(_invoke(h, symbol, args))
                    h.succeeded(h.lib.aethercl_synchronize(h.index), name="aethercl_synchronize")
                add(symbol, f"{name}=pinned", pinned)

        # Spans of every (buffer, offset) pair against SPAN_SIZE-byte buffers.
        pairs = [(b, o) for b, o in (("buffer", "offset"), ("dst", "dst_offset"),
                                     ("src", "src_offset")) if b in names and o in names]
        spans = [(0, SPAN_SIZE + 1), (SPAN_SIZE, 1), (SPAN_SIZE + 1, 0), (1, SIZE_MAX),
                 (SIZE_MAX, 2), (2**63, 2**63), (SIZE_MAX, 0)]
        for buffer, offset_name in pairs:
            for offset, size in spans:
                def span(h, symbol=symbol, buffer=buffer, offset_name=offset_name, offset=offset,
                         size=size):
                    args = dict(_valid_args(h, symbol), size=size)
                    args[offset_name] = offset
                    words = [offset_name]
                    if symbol.name == "aethercl_copy":
                        # The other range gets a buffer that holds the size where it can, so the
                        # refusal is about this one; a size beyond it fails both ranges.
                        other = "src" if buffer == "dst" else "dst"
                        args[other] = h.alloc(1 << 20, 4)
                        if size > 1 << 20:
                            words = [("dst_offset", "src_offset")]
                    host = args.get("source") or args.get("destination")
                    h.refused(_invoke(h, symbol, args), 0, {C_OUT_OF_RANGE}, words)
                    if h.contents(args[buffer], SPAN_SIZE)[:4] not in (b"\x03" * 4, b"\x04" * 4):
                        fail("a refused call changed the buffer")
                    if host is not None and ctypes.string_at(host, 4) != b"\x09" * 4:
                        fail("a refused call changed host memory")
                add(symbol, f"{offset_name}={offset},size={size}", span)

    # Function-specific rules.
    by_name = {s.name: s for s in runtime}
    if "aethercl_stream_create" in by_name:
        symbol = by_name["aethercl_stream_create"]
        for flags in (2, 3, 0x80000000, 0xFFFFFFFF):
            add(symbol, f"flags=0x{flags:x}", lambda h, flags=flags: h.refused(
                h.lib.aethercl_stream_create(h.index, flags), None, {C_INVALID_ARGUMENT},
                ["flags"]))

        def timing(h):
            stream = h.lib.aethercl_stream_create(h.index, 1)
            h.succeeded(stream, True)
            h.streams.append(stream)
        add(symbol, "flags=TIMING", timing)
    if "aethercl_stream_destroy" in by_name:
        symbol = by_name["aethercl_stream_destroy"]
        add(symbol, "stream=NULL", lambda h: h.refused(
            h.lib.aethercl_stream_destroy(h.index, None), 0, {C_INVALID_ARGUMENT},
            ["default stream"]))

        def twice(h):
            stream = h.lib.aethercl_stream_create(h.index, 0)
            h.succeeded(h.lib.aethercl_stream_destroy(h.index, stream))
            h.refused(h.lib.aethercl_stream_destroy(h.index, stream), 0, {C_INVALID_HANDLE},
                      ["destroyed"])
        add(symbol, "twice", twice)
    for name in ("aethercl_stream_set_current", "aethercl_stream_synchronize",
                 "aethercl_event_record", "aethercl_write_async", "aethercl_read_async",
                 "aethercl_copy", "aethercl_memset"):
        if name not in by_name:
            continue
        symbol = by_name[name]

        def null_stream(h, symbol=symbol):
            args = dict(_valid_args(h, symbol), stream=None)
            result = _invoke(h, symbol, args)
            if symbol.name == "aethercl_event_record" and result:
                h.events.append(result)
            h.succeeded(result, True if symbol.return_type == "void*" else 1)
        add(symbol, "stream=NULL_is_the_default_stream", null_stream)
    if "aethercl_event_elapsed_ms" in by_name:
        symbol = by_name["aethercl_event_elapsed_ms"]

        def untimed(h):
            start = h.lib.aethercl_event_record(h.index, None)
            h.events.append(start)
            h.refused(h.lib.aethercl_event_elapsed_ms(start, _new_event(h),
                                                      ctypes.byref(ctypes.c_float())),
                      0, {C_INVALID_ARGUMENT}, ["timing"])
        add(symbol, "start_on_a_stream_without_timing", untimed)
    if "aethercl_host_alloc" in by_name:
        symbol = by_name["aethercl_host_alloc"]
        add(symbol, "size=0", lambda h: h.refused(
            h.lib.aethercl_host_alloc(h.index, 0), None, {C_INVALID_ARGUMENT}, ["size is 0"]))
        for size in (SIZE_MAX, 2**63):
            add(symbol, f"size={size}", lambda h, size=size: h.refused(
                h.lib.aethercl_host_alloc(h.index, size), None,
                {C_OUT_OF_MEMORY, C_DEVICE_ERROR}))
    if "aethercl_host_free" in by_name:
        symbol = by_name["aethercl_host_free"]
        add(symbol, "host_ptr=NULL", lambda h: h.succeeded(h.lib.aethercl_host_free(None)))
        bad_pointers = {
            "stack_pointer": lambda h: _host(h),
            "inside_an_allocation": lambda h: _new_pinned(h) + 8,
            "device_buffer_handle": lambda h: h.alloc(16),
        }
        for case_id, make in bad_pointers.items():
            add(symbol, case_id, lambda h, make=make: h.refused(
                h.lib.aethercl_host_free(make(h)), 0, {C_INVALID_HANDLE}, ["host_ptr"]))

        def double_free(h):
            pointer = h.lib.aethercl_host_alloc(h.index, 64)
            h.succeeded(h.lib.aethercl_host_free(pointer))
            h.refused(h.lib.aethercl_host_free(pointer), 0, {C_INVALID_HANDLE}, ["freed"])
        add(symbol, "double_free", double_free)
    if "aethercl_copy" in by_name:
        symbol = by_name["aethercl_copy"]
        for dst_offset, src_offset, size in ((0, 0, 16), (8, 0, 16), (0, 15, 16), (16, 0, 17)):
            def overlap(h, dst_offset=dst_offset, src_offset=src_offset, size=size):
                buffer = h.alloc(SPAN_SIZE, 3)
                h.refused(h.lib.aethercl_copy(h.index, buffer, dst_offset, buffer, src_offset,
                                              size, None), 0, {C_INVALID_ARGUMENT}, ["overlap"])
                if h.contents(buffer, SPAN_SIZE) != b"\x03" * SPAN_SIZE:
                    fail("a refused copy changed the buffer")
            add(symbol, f"overlap_dst{dst_offset}_src{src_offset}_size{size}", overlap)

        def adjacent(h):
            buffer = h.alloc(SPAN_SIZE, 3)
            h.succeeded(h.lib.aethercl_copy(h.index, buffer, 16, buffer, 0, 16, None))
        add(symbol, "same_buffer_adjacent_ranges", adjacent)
    if "aethercl_memset" in by_name:
        symbol = by_name["aethercl_memset"]
        for value in (-1, 256, 0x1234, INT_MIN, INT_MAX):
            def memset_value(h, value=value):
                buffer = h.alloc(SPAN_SIZE, 3)
                h.succeeded(h.lib.aethercl_memset(h.index, buffer, 4, 8, value, None))
                want = b"\x03" * 4 + bytes([value & 0xFF]) * 8 + b"\x03" * (SPAN_SIZE - 12)
                if h.contents(buffer, SPAN_SIZE) != want:
                    fail(f"memset({value}) wrote {h.contents(buffer, SPAN_SIZE)!r}")
            add(symbol, f"value={value}", memset_value)
    return cases


def all_cases(symbols) -> List[Case]:
    names = {s.name for s in symbols}
    cases = memory_cases() + extension_cases() + runtime_cases(symbols)
    if "aethercl_gemm" in names:
        cases += gemm_cases()
    if "aethercl_launch" in names:
        from hostile_kernel_cases import kernel_runtime_cases  # your own kernels, typed memory
        cases += kernel_runtime_cases()
    if "simulated_kernel_allocate" in names:
        cases += sim_cases()
    for symbol in symbols:
        if symbol.name.startswith("execute_") and symbol.name not in SPECIAL:
            cases += compute_cases(symbol)
    from hostile_train_cases import all_train_cases  # version-3 training ops
    cases += all_train_cases(symbols)
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
