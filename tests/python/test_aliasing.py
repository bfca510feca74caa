"""One buffer passed as two arguments ("in place"), for every pairing of the buffer parameters of
every execute_* entry point, generated from the manifest and the roles in op_specs (outputs,
updates, refuses_aliasing), so an op added there is covered without a line here.

For each pair the call either
  - is refused, when op_specs (the header's in-place rules) lists the pair: return 0,
    AETHERCL_INVALID_ARGUMENT, a message naming the function, both parameters and "same buffer",
    and no buffer changed; or
  - computes the in-place result: every output equals what the op writes with separate buffers
    holding the same contents (the float64 NumPy reference of reference_backend), i.e. each input
    is read as it was before the call. Where an output is smaller than the input it shares a
    buffer with, the bytes past the output keep the input's contents.
Guard bytes after every buffer must survive either way.

Tolerance: rtol 1e-4 plus atol 1e-4 x max(1, max |expected|). Every op here is one float32 pass
over at most a few dozen terms per output (matmul: K = 43 products, Adam and the elementwise ops
one expression, row-wise ops rows of 37 to 41 elements), whose float32 error is below 1e-5
relative; an aliasing race overwrites operands with unrelated values and misses by orders of
magnitude (the defect seen: factors of 60 to 280,000)."""
from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from support.hostile_cases import manifest_symbols
from support.op_specs import ELEMENT_BYTES, SPECIAL, SPECS, dims_of, element_count
from support.reference_backend import ReferenceLibrary

SYMBOLS = {s.name: s for s in manifest_symbols() if s.name in SPECS}
INVALID_ARGUMENT = 1
GUARD = 64
GUARD_BYTE = 0xA5
# Dimension values by position (a single dimension gets ONE_DIM): several GEMM tiles and
# multi-item row groups, small enough to keep every case in milliseconds.
DIM_VALUES = (5, 37, 41, 43)
ONE_DIM = 1031
# Valid ids of an index buffer run up to this dimension (plus -1 and the bound itself, invalid).
ID_BOUND = {"idx": "v", "target_indices": "V"}


def _cases():
    for name in sorted(SYMBOLS):
        for first, second in itertools.combinations(SPECS[name].buffers, 2):
            yield pytest.param(name, first, second, id=f"{name}:{first}={second}")


def _values(symbol):
    dims = dims_of(symbol)
    values = {dims[0]: ONE_DIM} if len(dims) == 1 else {
        dim: DIM_VALUES[i % len(DIM_VALUES)] for i, dim in enumerate(dims)}
    values.update(SPECS[symbol.name].scalars)
    return values


def _nbytes(spec, buffer, values):
    return element_count(spec.buffers[buffer], values) * ELEMENT_BYTES


def _contents(spec, buffer, nbytes, values, rng, lowest_id=-1):
    """Initial bytes for a buffer: int32 ids (some invalid) for index buffers, floats otherwise.
    Ids that float parameters also read start at 0 (the bits of -1 are a NaN)."""
    count = nbytes // ELEMENT_BYTES
    if buffer in spec.index_buffers:
        bound = values.get(ID_BOUND.get(buffer, ""), 3)
        return rng.integers(lowest_id, bound + 1, count).astype(np.int32).tobytes()
    # Positive, so that every op (Adam's second moment included) has a finite, NaN-free result.
    return rng.uniform(0.1, 1.5, count).astype(np.float32).tobytes()


def _reference(symbol, spec, values, initial):
    """Final contents of every buffer when each parameter has a buffer of its own."""
    ref = ReferenceLibrary()
    handles = {}
    for buffer, data in initial.items():
        handles[buffer] = ref._allocate_gpu_memory(len(data))
        ref.memory[handles[buffer]][:] = np.frombuffer(data, np.uint8)
    args = [handles.get(p.name) if p.c_type == "void*" else values[p.name]
            for p in symbol.parameters[1:]]
    getattr(ref, "_" + symbol.name)(*args)
    return {buffer: ref.memory[handles[buffer]].tobytes() for buffer in initial}


def _close(actual: bytes, expected: bytes) -> bool:
    got = np.frombuffer(actual, np.float32).astype(np.float64)
    want = np.frombuffer(expected, np.float32).astype(np.float64)
    assert np.isfinite(want).all(), "the reference itself is not finite: pick other inputs"
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4 * scale))


class DeviceBuffers:
    """Driver buffers with GUARD bytes after each payload; one handle per distinct buffer."""

    def __init__(self, lib, index):
        self.lib, self.index, self.handles = lib, index, []

    def make(self, data: bytes) -> int:
        blob = data + bytes([GUARD_BYTE]) * GUARD
        handle = self.lib.check_handle("allocate_gpu_memory", self.index, len(blob))
        self.handles.append(handle)
        self.lib.check("write_host_to_gpu_blocking", self.index, handle, 0, len(blob), blob)
        return handle

    def read(self, handle: int, nbytes: int) -> bytes:
        out = ctypes.create_string_buffer(nbytes + GUARD)
        self.lib.check("read_gpu_to_host_blocking", self.index, handle, 0, nbytes + GUARD, out)
        assert out.raw[nbytes:] == bytes([GUARD_BYTE]) * GUARD, "guard bytes overwritten"
        return out.raw[:nbytes]

    def free(self):
        for handle in self.handles:
            self.lib.free_gpu_memory(self.index, handle)


@pytest.mark.parametrize("name, first, second", list(_cases()))
def test_one_buffer_as_two_arguments(lib, device, rng, name, first, second):
    symbol, spec = SYMBOLS[name], SPECS[name]
    values = _values(symbol)
    sizes = {b: _nbytes(spec, b, values) for b in spec.buffers}
    shared_size = max(sizes[first], sizes[second])
    # The shared buffer is filled as the pair's index buffer if it has one (ids are valid floats:
    # tiny denormals), else with floats.
    kind = first if first in spec.index_buffers else second
    shared = _contents(spec, kind, shared_size, values, rng, lowest_id=0)
    initial = {b: _contents(spec, b, sizes[b], values, rng) for b in spec.buffers}
    initial[first] = initial[second] = shared

    buffers = DeviceBuffers(lib, device.index)
    try:
        handles = {b: buffers.make(initial[b]) for b in spec.buffers if b not in (first, second)}
        handles[first] = handles[second] = buffers.make(shared)
        extents = dict(sizes, **{first: shared_size, second: shared_size})
        args = [device.index] + [handles[p.name] if p.c_type == "void*" else values[p.name]
                                 for p in symbol.parameters[1:]]
        result = getattr(lib, name)(*args)
        message, code = lib.last_error(), lib.last_error_code()
        final = {b: buffers.read(handles[b], extents[b]) for b in spec.buffers}

        if (first, second) in spec.refuses_aliasing or (second, first) in spec.refuses_aliasing:
            assert result == 0, f"{name} accepted {first} == {second}, which it must refuse"
            assert code == INVALID_ARGUMENT, message
            for fragment in (name, first, second, "same buffer"):
                assert fragment in message, f"{fragment!r} not in {message!r}"
            for b in spec.buffers:
                assert final[b] == initial[b][:extents[b]], f"refused call changed {b}"
            return

        assert result == 1, f"{name} with {first} == {second}: {message}"
        expected = _reference(symbol, spec, values, initial)
        written = [b for b in (first, second) if b in spec.outputs]
        assert len(written) <= 1, "two outputs in one buffer must be listed in refuses_aliasing"
        for b in spec.buffers:
            if b in (first, second):
                want = bytearray(shared)
                if written:
                    want[:sizes[written[0]]] = expected[written[0]][:sizes[written[0]]]
                want = bytes(want)
            else:
                want = expected[b][:sizes[b]]
            got = final[b]
            if b in spec.outputs or (b in (first, second) and written):
                assert _close(got, want), f"{b} differs from the separate-buffer result"
            else:
                assert got == want, f"input {b} changed"
    finally:
        buffers.free()


def test_every_op_declares_its_roles():
    """New entries of op_specs must say what they write and what they refuse, and have a
    reference unless they refuse every aliasing of their outputs."""
    ref = ReferenceLibrary()
    for name, spec in SPECS.items():
        assert spec.outputs, f"{name}: declare outputs= in op_specs"
        assert set(spec.outputs) <= set(spec.buffers), name
        assert set(spec.updates) <= set(spec.outputs), name
        for pair in spec.refuses_aliasing:
            assert set(pair) <= set(spec.buffers) and pair[0] != pair[1], (name, pair)
            assert set(pair) & set(spec.outputs), f"{name}: refusing {pair}, two inputs?"
        for a, b in itertools.combinations(spec.outputs, 2):
            assert (a, b) in spec.refuses_aliasing or (b, a) in spec.refuses_aliasing, (
                f"{name}: outputs {a} and {b} cannot share a buffer; list the pair")
        allowed = [p for p in itertools.combinations(spec.buffers, 2)
                   if p not in spec.refuses_aliasing and p[::-1] not in spec.refuses_aliasing]
        if allowed:
            assert hasattr(ref, "_" + name), f"{name}: add a reference to reference_backend"
    names = {s.name for s in manifest_symbols() if s.name.startswith("execute_")}
    assert names - SPECIAL <= set(SYMBOLS), "an execute_* entry point has no op_specs entry"


def test_mul_backward_refuses_outputs_that_each_overwrite_the_others_input(lib, device, rng):
    """dA = dC * B and dB = dC * A: with dA == A and dB == B (or dA == dC and dB == B, ...) each
    product needs an input the other overwrites; a pair of swaps cannot be ordered."""
    n = 257
    data = {k: rng.standard_normal(n).astype(np.float32) for k in ("dc", "a", "b")}
    for da_is, db_is in (("a", "b"), ("dc", "b"), ("a", "dc")):
        buffers = DeviceBuffers(lib, device.index)
        try:
            h = {k: buffers.make(v.tobytes()) for k, v in data.items()}
            result = lib.execute_mul_backward_on_gpu(device.index, h["dc"], h["a"], h["b"],
                                                     h[da_is], h[db_is], n)
            assert result == 0, (da_is, db_is)
            assert lib.last_error_code() == INVALID_ARGUMENT
            assert "buffer_dA" in lib.last_error() and "buffer_dB" in lib.last_error()
            for k, v in data.items():
                assert buffers.read(h[k], n * 4) == v.tobytes(), f"refused call changed {k}"
        finally:
            buffers.free()
    # Both outputs in place on their own products' inputs is fine: dA == B, dB == A.
    buffers = DeviceBuffers(lib, device.index)
    try:
        h = {k: buffers.make(v.tobytes()) for k, v in data.items()}
        assert lib.execute_mul_backward_on_gpu(device.index, h["dc"], h["a"], h["b"], h["b"],
                                               h["a"], n) == 1, lib.last_error()
        da = np.frombuffer(buffers.read(h["b"], n * 4), np.float32)
        db = np.frombuffer(buffers.read(h["a"], n * 4), np.float32)
        assert np.array_equal(da, data["dc"] * data["b"])
        assert np.array_equal(db, data["dc"] * data["a"])
    finally:
        buffers.free()
