"""Shared checks for the op-family suites: bitwise comparison and the hostile-input battery
(NULL, freed and undersized buffers; negative, zero and overflowing dimensions)."""
from __future__ import annotations

import numpy as np

from support.helpers import Tensor

INT_MAX = 2**31 - 1


def assert_bitwise(actual, expected):
    """Exact equality of float32 bit patterns (NaN payloads, signed zeros included)."""
    actual = np.ascontiguousarray(actual, np.float32)
    expected = np.ascontiguousarray(expected, np.float32)
    assert actual.shape == expected.shape
    mismatch = actual.view(np.uint32) != expected.view(np.uint32)
    assert not mismatch.any(), f"{int(mismatch.sum())} of {mismatch.size} elements differ"


def special_values(rng, shape):
    """Random float32 data salted with values a copy must preserve bit for bit."""
    data = rng.standard_normal(shape).astype(np.float32).reshape(-1)
    salt = np.array([0x7FC0BEEF, 0xFFC00001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001,
                     0x807FFFFF], np.uint32).view(np.float32)
    positions = rng.choice(data.size, size=min(data.size, salt.size), replace=False)
    data[positions] = salt[:positions.size]
    return data.reshape(shape)


def expect_refusal(lib, result, *fragments):
    assert result == 0, "the call was expected to fail"
    message = lib.last_error()
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def raw_bytes(tensor):
    return tensor.numpy().tobytes()


def check_buffer_refusals(lib, device, invoke, tensors, names, function):
    """invoke(handles) -> int result. Each buffer in turn is NULL, freed, and one element short;
    each must be refused naming the function and the argument, and the intact call still works."""
    handles = [t.handle for t in tensors]
    freed_handle = Tensor(device, (1,), np.float32)
    stale = freed_handle.handle
    freed_handle.free()
    for position, (tensor, name) in enumerate(zip(tensors, names)):
        bad = list(handles)
        bad[position] = None
        expect_refusal(lib, invoke(bad), function, name, "NULL")
        bad[position] = stale
        expect_refusal(lib, invoke(bad), function, name)
        elements = tensor.nbytes // tensor.dtype.itemsize
        short = Tensor(device, (elements - 1,), tensor.dtype, guard=0)
        bad[position] = short.handle
        expect_refusal(lib, invoke(bad), function, name,
                       f"{tensor.nbytes - tensor.dtype.itemsize} bytes", f"{tensor.nbytes} bytes")
        short.free()
    assert invoke(handles) == 1, lib.last_error()


def check_dim_refusals(lib, invoke, dims, names, function, outputs, zero_noop_positions=None):
    """invoke(dims) -> int result. A negative dimension is refused naming it; all-INT_MAX dims
    are refused as overflowing; a zero dimension at the listed positions (default: all) succeeds
    and leaves every output untouched."""
    before = [raw_bytes(t) for t in outputs]
    for position, name in enumerate(names):
        bad = list(dims)
        bad[position] = -1
        expect_refusal(lib, invoke(bad), function, name, "negative")
        bad[position] = -INT_MAX - 1
        expect_refusal(lib, invoke(bad), function, "negative")
    # All-INT_MAX dims: with three or more the byte count passes 2**64 ("overflow"); with fewer
    # it fits and the buffers are too small.
    huge_bytes = INT_MAX ** len(dims) * 4
    expect_refusal(lib, invoke([INT_MAX] * len(dims)), function,
                   *(["overflow"] if huge_bytes >= 2**64 else ["bytes"]))
    positions = range(len(dims)) if zero_noop_positions is None else zero_noop_positions
    for position in positions:
        zero = list(dims)
        zero[position] = 0
        assert invoke(zero) == 1, lib.last_error()
    assert [raw_bytes(t) for t in outputs] == before, "a refused or empty call touched an output"
    for t in outputs:
        assert t.guard_intact()
