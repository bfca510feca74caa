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


# The unary ops' test tables, shared by the float32 and the 16-bit suites: ops held to the tight
# tolerance, ops defined for positive inputs only, the scalar each takes, the points of kinks.
UNARY_EXACT = {"relu", "leaky_relu", "abs", "neg", "add_scalar", "sub_scalar", "rsub_scalar",
               "mul_scalar", "div_scalar", "max_scalar", "min_scalar", "rdiv_scalar", "sqrt"}
POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt", "pow_scalar", "rdiv_scalar"}
ALPHA = {"leaky_relu": 0.1, "add_scalar": 1.5, "sub_scalar": -0.75, "rsub_scalar": 2.0,
         "mul_scalar": -3.0, "div_scalar": 7.0, "rdiv_scalar": 0.5, "max_scalar": 0.25,
         "min_scalar": -0.5, "pow_scalar": 1.7}
KINKS = {"relu": 0.0, "leaky_relu": 0.0, "abs": 0.0, "max_scalar": 0.25, "min_scalar": -0.5}
