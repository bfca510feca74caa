"""Test helpers: device tensors with poisoned contents and guard bytes, child-process runs."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

GUARD_BYTES = 64          # after every payload; must never change
GUARD_PATTERN = 0xA5
POISON_F32 = np.frombuffer(np.uint32(0x7FC0DEAD).tobytes(), np.float32)[0]  # a quiet NaN


class Tensor:
    """A device buffer of payload + GUARD_BYTES bytes; the driver is told only the payload size
    is needed, so any write past the payload shows up in the guard."""

    def __init__(self, device: "Device", shape, dtype, guard: int = GUARD_BYTES):
        self.device = device
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.guard = guard
        self.handle = device.lib.check_handle("allocate_gpu_memory", device.index,
                                              max(1, self.nbytes + guard))

    def write(self, array) -> "Tensor":
        data = np.ascontiguousarray(array, dtype=self.dtype).reshape(-1)
        assert data.nbytes == self.nbytes
        blob = data.tobytes() + bytes([GUARD_PATTERN]) * self.guard
        self.device.lib.check("write_host_to_gpu_blocking", self.device.index, self.handle, 0,
                              len(blob), blob)
        return self

    def poison(self) -> "Tensor":
        if self.dtype == np.float32:
            return self.write(np.full(self.shape, POISON_F32, np.float32))
        return self.write(np.full(self.shape, -0x5A5A5A5A, self.dtype))

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.device.lib.check("read_gpu_to_host_blocking", self.device.index, self.handle, 0,
                                  self.nbytes, out.ctypes.data)
        return out

    def guard_intact(self) -> bool:
        if self.guard == 0:
            return True
        raw = (ctypes.c_ubyte * self.guard)()
        self.device.lib.check("read_gpu_to_host_blocking", self.device.index, self.handle,
                              self.nbytes, self.guard, raw)
        return all(b == GUARD_PATTERN for b in raw)

    def free(self) -> None:
        if self.handle:
            self.device.lib.free_gpu_memory(self.device.index, self.handle)
            self.handle = None


class Device:
    def __init__(self, lib, index: int):
        self.lib = lib
        self.index = index

    def upload(self, array, dtype=None, guard: int = GUARD_BYTES) -> Tensor:
        array = np.asarray(array, dtype=dtype or np.asarray(array).dtype)
        return Tensor(self, array.shape, array.dtype, guard).write(array)

    def empty(self, shape, dtype=np.float32, guard: int = GUARD_BYTES) -> Tensor:
        """A poisoned output tensor: any element the op fails to write stays NaN/garbage."""
        return Tensor(self, shape, dtype, guard).poison()

    def alloc(self, nbytes: int) -> int:
        return self.lib.check_handle("allocate_gpu_memory", self.index, nbytes)


def kernels_launched(lib, gpu: int, trace_path, call):
    """Runs call() under a trace and returns (the names of the kernels it launched, from the
    trace's per-kernel summary, and call()'s result)."""
    lib.check("aethercl_trace_start", str(trace_path).encode())
    try:
        result = call()
        lib.check("aethercl_synchronize", gpu)
        summary = json.loads(lib.json_call("aethercl_trace_summary"))
    finally:
        lib.check("aethercl_trace_stop")
    return {kernel["name"] for kernel in summary["kernels"]}, result


def run_child(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs Python code in a fresh process with the shim importable and the library loaded as
    `lib` (an aethercl.Library); returns the completed process (check returncode/stdout)."""
    root = Path(__file__).resolve().parents[3]
    prelude = textwrap.dedent(f"""
        import sys, ctypes
        sys.path.insert(0, {str(root / 'python_harness')!r})
        sys.path.insert(0, {str(root / 'tests' / 'python')!r})
        import numpy as np
        from aethercl import Library
        lib = Library()
    """)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
