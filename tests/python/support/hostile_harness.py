"""The shared machinery of the hostile-input cases: constants, bad-token kinds, the Harness every
case runs in, and the helpers that build valid calls (hostile_cases.py generates the cases)."""
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
sys.path.insert(0, str(HERE.parents[1] / "python_harness"))
sys.path.insert(0, str(HERE))

from aethercl import abi  # noqa: E402
from aethercl.status import Status  # noqa: E402
from support.op_specs import ELEMENT_BYTES, SPECIAL, SPECS, dims_of, element_count  # noqa: E402

INT_MAX, INT_MIN = 2**31 - 1, -2**31
SIZE_MAX = 2**64 - 1
NEVER_ISSUED = ((1 << 40) << 8) | 0xAE        # well-formed token, id far beyond any issued
MALFORMED = 0x12345678                         # wrong tag byte
C_INVALID_ARGUMENT, C_INVALID_HANDLE = Status.INVALID_ARGUMENT, Status.INVALID_HANDLE
C_OUT_OF_RANGE, C_OUT_OF_MEMORY = Status.OUT_OF_RANGE, Status.OUT_OF_MEMORY
C_NOT_INITIALIZED, C_NO_DEVICE = Status.NOT_INITIALIZED, Status.NO_DEVICE
C_DEVICE_ERROR, C_INTERNAL, C_NOT_IMPLEMENTED = Status.DEVICE_ERROR, Status.INTERNAL, \
    Status.NOT_IMPLEMENTED
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
        for event in self.events:
            self.lib.aethercl_event_destroy(event)
        self.events.clear()
        for stream in self.streams:
            self.lib.aethercl_stream_destroy(self.index, stream)
        self.streams.clear()
        for pointer in self.pinned:
            self.lib.aethercl_host_free(pointer)
        self.pinned.clear()

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
