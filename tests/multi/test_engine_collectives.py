"""Collectives and peer copies on the vendor engines (AETHERCL_PEER_PATH=engine: CUDA + NCCL,
docs/ARCHITECTURE.md decision 26) against float64 NumPy. Skipped, with the driver's reason,
where the engines do not serve the devices (every machine without NVIDIA's CUDA and NCCL); on CPU
CI the ctest multi_device_fake_engines runs this file through the fake engines of tests/vendor/.

Tolerance: NCCL reduces in an order of its own (ring or tree, by size and topology), rounding to
the dtype after each of the P-1 additions, and its average may scale every input by 1/P first.
Each rounding errs by at most half an ulp of a value no larger than sum |x_i|, so
|got - exact| <= P * eps(dtype) * sum |x_i| bounds the error; the check allows twice that for the
order NCCL does not document. Every rank must hold the same bits (NCCL computes each element once
and copies it), outputs are poisoned (NaN) before each call and guard bytes follow every buffer."""
import numpy as np
import pytest

from conftest import GUARD, Buffer, token_array
from test_collectives import DTYPES, F16, F32, MAX, MEAN, SUM, numpy_dtype, random_values, widen

EPS = {F32: 2.0 ** -24, F16: 2.0 ** -11, 2: 2.0 ** -8}
NOT_IMPLEMENTED = 9


@pytest.fixture
def engine_comm(lib, devices, comm):
    def make(ranks):
        try:
            return comm(ranks, "engine")
        except Exception:  # noqa: BLE001 - the driver's refusal says why
            if lib.last_error_code() == NOT_IMPLEMENTED:
                pytest.skip(f"vendor engines unavailable: {lib.last_error()}")
            raise
    return make


def ranks_for(devices, size):
    if len(devices) < size:
        pytest.skip(f"needs {size} devices, {len(devices)} visible")
    return devices[:size]


def close_to_float64(dtype, got, inputs, mean, count=None, block=None):
    x = [widen(dtype, s).astype(np.float64) for s in inputs]
    if block is not None:
        x = [v[block * count:(block + 1) * count] for v in x]
    exact = sum(x) / (len(x) if mean else 1)
    bound = 2 * len(x) * EPS[dtype] * sum(np.abs(v) for v in x)
    return bool(np.all(np.abs(widen(dtype, got).astype(np.float64) - exact) <= bound))


@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
@pytest.mark.parametrize("op", (SUM, MEAN), ids=("sum", "mean"))
def test_all_reduce_and_reduce_scatter(lib, devices, buffers, engine_comm, rng, size, dtype, op):
    ranks = ranks_for(devices, size)
    token = engine_comm(ranks)
    for count in (1, 1003, 4099):
        inputs = [random_values(rng, dtype, count) for _ in ranks]
        bufs = [buffers(g, inputs[r].nbytes).write(inputs[r]) for r, g in enumerate(ranks)]
        lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]), count,
                  dtype, op)
        got = [b.read(numpy_dtype(dtype)) for b in bufs]
        assert all(g.tobytes() == got[0].tobytes() for g in got), "ranks differ"
        assert close_to_float64(dtype, got[0], inputs, op == MEAN), f"count {count}"
        sends = [random_values(rng, dtype, count * size) for _ in ranks]
        send = [buffers(g, sends[r].nbytes).write(sends[r]) for r, g in enumerate(ranks)]
        recv = [buffers(g, sends[0].nbytes // size) for g in ranks]
        lib.check("aethercl_reduce_scatter", token, token_array([b.handle for b in send]),
                  token_array([b.handle for b in recv]), count, dtype, op)
        for r, buffer in enumerate(recv):
            assert close_to_float64(dtype, buffer.read(numpy_dtype(dtype)), sends, op == MEAN,
                                    count, r), f"count {count}, rank {r}"


@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
def test_broadcast_and_all_gather(lib, devices, buffers, engine_comm, rng, size, dtype):
    ranks = ranks_for(devices, size)
    token = engine_comm(ranks)
    count = 2051
    for root in range(size):
        data = random_values(rng, dtype, count)
        bufs = [buffers(g, data.nbytes) for g in ranks]
        bufs[root].write(data)
        lib.check("aethercl_broadcast", token, token_array([b.handle for b in bufs]), count,
                  dtype, root)
        for r, buffer in enumerate(bufs):
            assert buffer.read(numpy_dtype(dtype)).tobytes() == data.tobytes(), (root, r)
    for count in (1, 777):
        sends = [random_values(rng, dtype, count) for _ in ranks]
        send = [buffers(g, sends[r].nbytes).write(sends[r]) for r, g in enumerate(ranks)]
        recv = [buffers(g, sends[0].nbytes * size) for g in ranks]
        lib.check("aethercl_all_gather", token, token_array([b.handle for b in send]),
                  token_array([b.handle for b in recv]), count, dtype)
        want = np.concatenate(sends).tobytes()
        for r, buffer in enumerate(recv):
            assert buffer.read(numpy_dtype(dtype)).tobytes() == want, (count, r)


def test_results_are_visible_to_later_work_on_the_stream(lib, devices, buffers, engine_comm, rng):
    """The header's ordering: a device-to-device copy enqueued right after the all-reduce on the
    same (default) stream copies the reduced values."""
    ranks = ranks_for(devices, 2)
    token = engine_comm(ranks)
    count = 4099
    inputs = [random_values(rng, F32, count) for _ in ranks]
    bufs = [buffers(g, inputs[r].nbytes).write(inputs[r]) for r, g in enumerate(ranks)]
    copies = [buffers(g, inputs[0].nbytes) for g in ranks]
    lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]), count, F32,
              SUM)
    for r, g in enumerate(ranks):
        lib.check("aethercl_copy_peer", g, copies[r].handle, 0, g, bufs[r].handle, 0,
                  inputs[0].nbytes)
    for buffer in copies:
        assert close_to_float64(F32, buffer.read(np.float32), inputs, False)


def test_copy_peer_on_the_engine(lib, devices, buffers, monkeypatch, engine_comm, rng):
    ranks = ranks_for(devices, 2)
    engine_comm(ranks)  # skips where the engines do not serve these devices
    monkeypatch.setenv("AETHERCL_PEER_PATH", "engine")
    for size in (1, 4097, (3 << 20) + 5):
        data = rng.integers(0, 256, size + 3, dtype=np.uint8).tobytes()
        src = buffers(ranks[0], size + 3)
        src.write_bytes(data)
        dst = buffers(ranks[1], size + 8)
        lib.check("aethercl_copy_peer", ranks[1], dst.handle, 5, ranks[0], src.handle, 3, size)
        got = dst.read_bytes()
        assert got[:5] == b"\xff" * 5 and got[5:5 + size] == data[3:]
        assert got[5 + size:size + 8] == b"\xff" * 3 and got[size + 8:] == b"\x5a" * 64


class EngineBuffer(Buffer):
    """A Buffer from aethercl_comm_alloc (engine memory on the engine path), poisoned, guarded."""

    def __init__(self, lib, comm, rank, gpu, nbytes):
        self.lib, self.gpu, self.nbytes = lib, gpu, nbytes
        self.handle = lib.check_handle("aethercl_comm_alloc", comm, rank, nbytes + GUARD)
        self.write_bytes(b"\xff" * nbytes + b"\x5a" * GUARD)


@pytest.mark.parametrize("import_bytes", (None, 4096), ids=("engine-memory", "pool-above-import"))
def test_comm_alloc_buffers(lib, devices, engine_comm, rng, monkeypatch, import_bytes):
    """Buffers from aethercl_comm_alloc: engine memory NCCL reduces in place (or, above
    AETHERCL_ENGINE_IMPORT_BYTES, pool buffers it stages): every collective against float64 with
    guards and poisoned outputs, results visible to a copy enqueued right after on the stream,
    a peer copy between two of them, and MAX (the OpenCL path) on the same buffers."""
    if import_bytes:
        monkeypatch.setenv("AETHERCL_ENGINE_IMPORT_BYTES", str(import_bytes))
    ranks = ranks_for(devices, 2)
    token = engine_comm(ranks)
    made = []

    def alloc(r, nbytes):
        made.append(EngineBuffer(lib, token, r, ranks[r], nbytes))
        return made[-1]
    try:
        for dtype in DTYPES:
            for count in (1, 4099):
                inputs = [random_values(rng, dtype, count) for _ in ranks]
                bufs = [alloc(r, inputs[r].nbytes).write(inputs[r]) for r in range(2)]
                copies = [alloc(r, inputs[0].nbytes) for r in range(2)]
                lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]),
                          count, dtype, MEAN)
                for r, g in enumerate(ranks):
                    lib.check("aethercl_copy_peer", g, copies[r].handle, 0, g, bufs[r].handle, 0,
                              inputs[0].nbytes)
                got = [b.read(numpy_dtype(dtype)) for b in copies]
                assert got[0].tobytes() == got[1].tobytes(), "ranks differ"
                assert close_to_float64(dtype, got[0], inputs, True), (dtype, count)
                sends = [random_values(rng, dtype, 2 * count) for _ in ranks]
                send = [alloc(r, sends[r].nbytes).write(sends[r]) for r in range(2)]
                recv = [alloc(r, sends[0].nbytes // 2) for r in range(2)]
                lib.check("aethercl_reduce_scatter", token, token_array([b.handle for b in send]),
                          token_array([b.handle for b in recv]), count, dtype, SUM)
                for r, buffer in enumerate(recv):
                    assert close_to_float64(dtype, buffer.read(numpy_dtype(dtype)), sends, False,
                                            count, r), (dtype, count, r)
                gathered = [alloc(r, sends[0].nbytes) for r in range(2)]
                lib.check("aethercl_all_gather", token, token_array([b.handle for b in recv]),
                          token_array([b.handle for b in gathered]), count, dtype)
                want = b"".join(b.read(numpy_dtype(dtype)).tobytes() for b in recv)
                assert all(b.read(numpy_dtype(dtype)).tobytes() == want for b in gathered)
                lib.check("aethercl_broadcast", token, token_array([b.handle for b in send]),
                          2 * count, dtype, 1)
                assert send[0].read(numpy_dtype(dtype)).tobytes() == sends[1].tobytes()
        # A peer copy between two engine buffers (one cuMemcpyPeerAsync), at odd offsets.
        data = rng.integers(0, 256, 5003, dtype=np.uint8).tobytes()
        src, dst = alloc(0, 5003), alloc(1, 5011)
        src.write_bytes(data)
        lib.check("aethercl_copy_peer", ranks[1], dst.handle, 7, ranks[0], src.handle, 3, 4999)
        got = dst.read_bytes()
        assert got[:7] == b"\xff" * 7 and got[7:7 + 4999] == data[3:3 + 4999]
        assert got[7 + 4999:5011] == b"\xff" * 5 and got[5011:] == b"\x5a" * GUARD
        values = [random_values(rng, F32, 999) for _ in ranks]
        bufs = [alloc(r, values[r].nbytes).write(values[r]) for r in range(2)]
        lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]), 999, F32,
                  MAX)
        assert np.array_equal(bufs[0].read(np.float32), np.maximum(values[0], values[1]))
    finally:
        for buffer in made:
            buffer.free()
