"""GPUBuffer: the frontend's device allocation, an aethercl.Buffer registered with its runtime; and
the runtime's cached constant buffers (scalar fills, the causal attention mask)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from aethercl import AetherCLError, Buffer, dtypes, inspect

from .config import FP_TYPE
from .runtime import NOT_INITIALIZED, Runtime, current_runtime


class GPUBuffer(Buffer):
    """`size_in_bytes` bytes of device memory (at least one byte is allocated) with a tag and an
    element dtype. `ptr` is the driver handle, None once freed. Reads and writes are checked
    against `size` before the driver sees them. Allocation failures raise MemoryError."""

    runtime: Optional[Runtime] = None   # set first thing in __init__; read by free()

    def __init__(self, size_in_bytes: int, tag: str = "buffer", _init_zeros: bool = False,
                 dtype=FP_TYPE, runtime: Optional[Runtime] = None):
        runtime = runtime if runtime is not None else current_runtime()
        if not runtime.open:
            raise RuntimeError(NOT_INITIALIZED)
        self.runtime = runtime
        self.size = int(size_in_bytes)
        self.tag = tag
        try:
            # 16-bit floats are tagged: the typed ops take an operand's format from its tag.
            super().__init__(runtime.device, max(self.size, 1), dtype=dtype,
                             tag_dtype=dtypes.element_type(dtype).itemsize == 2)
        except AetherCLError as error:
            raise MemoryError(f"allocate_gpu_memory({self.size}) for '{tag}': {error}") from error
        runtime.buffers.add(self)
        if tag != "tensor":
            self.rename(tag)
        if _init_zeros and self.size:
            self.write(np.zeros(self.size // self.dtype.itemsize, self.dtype))

    def rename(self, tag: str) -> None:
        """Sets the tag; while an inspector runs, also the driver's label and dtype of the buffer
        (a call each), so the page lists it. The many short-lived "tensor" temporaries are never
        renamed (the page counts them), which keeps a step's cost flat."""
        self.tag = tag
        if inspect.active() is not None:
            self.label = tag
            self.set_dtype(self.dtype)

    @property
    def ptr(self) -> Optional[int]:
        return self.handle

    def write(self, host_data: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(host_data)
        if offset + data.nbytes > self.size:
            raise ValueError(f"write of {data.nbytes} B at {offset} exceeds buffer '{self.tag}' "
                             f"of {self.size} B")
        super().write(data, offset)

    def read(self, shape, dtype=FP_TYPE, offset: int = 0) -> np.ndarray:
        out = np.empty(shape, dtype)
        if offset + out.nbytes > self.size:
            raise ValueError(f"read of {out.nbytes} B at {offset} exceeds buffer '{self.tag}' "
                             f"of {self.size} B")
        return self.read_into(out, offset)

    def clone(self) -> "GPUBuffer":
        copy = GPUBuffer(self.size, tag=self.tag + "_clone", dtype=self.dtype,
                         runtime=self.runtime)
        if self.size:
            self.copy_to(copy, self.size)
        return copy

    def free(self) -> None:
        if self.runtime is not None and not self.runtime.open:
            self.handle = None   # the driver was shut down: the handle is gone already
            return
        super().free()


def constant_buffer(runtime: Runtime, numel: int, value: float) -> GPUBuffer:
    """A cached device buffer of `numel` copies of `value` (scalar multiplies, masks, ones)."""
    key = (int(numel), float(value))
    buffer = runtime.constants.get(key)
    if buffer is None or not buffer.alive:
        buffer = GPUBuffer(numel * 4, tag=f"const_{value:g}", runtime=runtime)
        buffer.write(np.full(numel, value, FP_TYPE))
        runtime.constants[key] = buffer
    return buffer


MASK_VALUE = -1e9


def causal_mask(seq_len: int, runtime: Optional[Runtime] = None) -> GPUBuffer:
    """(S,S) additive attention mask, cached per runtime: 0 where key <= query, MASK_VALUE above
    the diagonal."""
    runtime = runtime if runtime is not None else current_runtime()
    buffer = runtime.masks.get(seq_len)
    if buffer is None or not buffer.alive:
        mask = np.triu(np.full((seq_len, seq_len), MASK_VALUE, FP_TYPE), k=1)
        buffer = GPUBuffer(mask.nbytes, tag=f"causal_mask_{seq_len}", runtime=runtime)
        buffer.write(mask)
        runtime.masks[seq_len] = buffer
    return buffer
