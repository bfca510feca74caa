"""Shared pieces of the training-op suites: a scope that uploads inputs, poisons outputs and
checks every buffer's guard bytes at the end, and tolerance-aware comparisons."""
from __future__ import annotations

import numpy as np

from support.helpers import POISON_F32, Tensor


class Scope:
    """Tensors of one test. in_() uploads data; out() allocates a poisoned output; close() checks
    that no call wrote past any payload (guard bytes) and frees everything."""

    def __init__(self, device):
        self.device = device
        self.tensors = []

    def in_(self, array, dtype=None) -> Tensor:
        array = np.ascontiguousarray(array, dtype=dtype or np.asarray(array).dtype)
        tensor = self.device.upload(array)
        self.tensors.append(tensor)
        return tensor

    def out(self, shape, dtype=np.float32) -> Tensor:
        dtype = np.dtype(dtype)
        tensor = Tensor(self.device, shape, dtype)
        self.tensors.append(tensor)
        if dtype == np.float32:
            return tensor.poison()
        # Integer outputs: every byte 0x5A, a value no op here produces by accident.
        count = int(np.prod(tensor.shape, dtype=np.int64))
        return tensor.write(np.frombuffer(b"\x5a" * (count * dtype.itemsize), dtype))

    def close(self) -> None:
        broken = [t.shape for t in self.tensors if t.handle and not t.guard_intact()]
        for tensor in self.tensors:
            tensor.free()
        assert not broken, f"guard bytes overwritten after tensors of shapes {broken}"


def close(actual, expected, rtol, atol, what=""):
    """Elementwise |a - e| <= atol + rtol |e| (NaN must match NaN); no poison may remain."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=what)


def no_poison(array):
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    poison = np.float32(POISON_F32).view(np.uint32)
    assert not (bits == poison).any(), "an output element was never written"
