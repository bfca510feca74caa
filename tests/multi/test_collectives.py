"""Collectives and peer copies on 2 and 3 devices against NumPy, on both peer paths.

Tolerance: none. The driver defines element e of a reduction as the left fold in rank order,
((x_0 op x_1) op x_2) ..., in float32 (f16/bf16 inputs widened exactly), MEAN as that sum divided
by P (correctly rounded), then one round-to-nearest-even to the dtype. NumPy computes exactly that
fold in float32, so every comparison below is bitwise (NaN compared as NaN). Outputs are poisoned
with 0xFF bytes (NaN in every dtype) before each call and every buffer has guard bytes behind it.
Sizes are odd and not multiples of the device count; a 1 KiB pipeline chunk
(AETHERCL_COLLECTIVE_CHUNK) makes the larger cases run many chunks and reuse the scratch slots."""
import ctypes

import numpy as np
import pytest

from conftest import require_shared, token_array

F32, F16, BF16 = 0, 1, 2
SUM, MEAN, MAX, MIN = 0, 1, 2, 3
DTYPES = {F32: "f32", F16: "f16", BF16: "bf16"}
OPS = {SUM: "sum", MEAN: "mean", MAX: "max", MIN: "min"}
PATHS = ("device", "host")
COUNTS = (1, 2, 1003, 4099)


def f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    quiet_nan = ((bits >> 16) | 0x40) & 0xFFFF
    return np.where(np.isnan(values), quiet_nan, rounded).astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def storage(dtype: int, values: np.ndarray) -> np.ndarray:
    """float32 values -> the array the device holds (rounded to the dtype)."""
    if dtype == F32:
        return values.astype(np.float32)
    if dtype == F16:
        return values.astype(np.float16)
    return f32_to_bf16_bits(values)


def widen(dtype: int, stored: np.ndarray) -> np.ndarray:
    if dtype == BF16:
        return bf16_bits_to_f32(stored)
    return stored.astype(np.float32)


def numpy_dtype(dtype: int):
    return {F32: np.float32, F16: np.float16, BF16: np.uint16}[dtype]


def reference(dtype: int, op: int, contributions) -> np.ndarray:
    acc = widen(dtype, contributions[0]).copy()
    for stored in contributions[1:]:
        value = widen(dtype, stored)
        if op in (SUM, MEAN):
            acc = (acc + value).astype(np.float32)
        else:
            pick = value > acc if op == MAX else value < acc
            acc = np.where(np.isnan(acc) | np.isnan(value), np.float32(np.nan),
                           np.where(pick, value, acc)).astype(np.float32)
    if op == MEAN:
        acc = (acc / np.float32(len(contributions))).astype(np.float32)
    return storage(dtype, acc)


def same_bits(dtype: int, got: np.ndarray, want: np.ndarray) -> bool:
    a, b = widen(dtype, got), widen(dtype, want)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (got.view(np.uint16 if dtype != F32 else np.uint32)
                                   == want.view(np.uint16 if dtype != F32 else np.uint32))))


def random_values(rng, dtype, count, with_nan=False):
    values = rng.standard_normal(count).astype(np.float32) * 3
    if with_nan and count > 2:
        values[count // 2] = np.nan
    return storage(dtype, values)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setenv("AETHERCL_COLLECTIVE_CHUNK", "1K")


def ranks_for(devices, size):
    if len(devices) < size:
        pytest.skip(f"needs {size} devices, {len(devices)} visible")
    return devices[:size]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
@pytest.mark.parametrize("op", list(OPS), ids=list(OPS.values()))
def test_all_reduce(lib, devices, buffers, comm, rng, path, size, dtype, op):
    ranks = ranks_for(devices, size)
    token = comm(ranks, path)
    for count in COUNTS:
        inputs = [random_values(rng, dtype, count, with_nan=(op in (MAX, MIN) and r == 1))
                  for r in range(size)]
        bufs = [buffers(g, inputs[r].nbytes).write(inputs[r]) for r, g in enumerate(ranks)]
        lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]), count,
                  dtype, op)
        want = reference(dtype, op, inputs)
        for r, buffer in enumerate(bufs):
            got = buffer.read(numpy_dtype(dtype))
            assert same_bits(dtype, got, want), f"rank {r}, count {count}"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
def test_broadcast(lib, devices, buffers, comm, rng, path, size, dtype):
    ranks = ranks_for(devices, size)
    token = comm(ranks, path)
    count = 2051
    for root in range(size):
        data = random_values(rng, dtype, count)
        bufs = [buffers(g, data.nbytes) for g in ranks]
        bufs[root].write(data)
        lib.check("aethercl_broadcast", token, token_array([b.handle for b in bufs]), count,
                  dtype, root)
        for r, buffer in enumerate(bufs):
            assert buffer.read(numpy_dtype(dtype)).tobytes() == data.tobytes(), f"root {root} rank {r}"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
def test_all_gather(lib, devices, buffers, comm, rng, path, size, dtype):
    ranks = ranks_for(devices, size)
    token = comm(ranks, path)
    for count in (1, 777):
        sends = [random_values(rng, dtype, count) for _ in ranks]
        send = [buffers(g, sends[r].nbytes).write(sends[r]) for r, g in enumerate(ranks)]
        recv = [buffers(g, sends[0].nbytes * size) for g in ranks]
        lib.check("aethercl_all_gather", token, token_array([b.handle for b in send]),
                  token_array([b.handle for b in recv]), count, dtype)
        want = np.concatenate(sends)
        for r, buffer in enumerate(recv):
            assert buffer.read(numpy_dtype(dtype)).tobytes() == want.tobytes(), f"rank {r}"
        for r, buffer in enumerate(send):
            assert buffer.read(numpy_dtype(dtype)).tobytes() == sends[r].tobytes()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", (2, 3))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES.values()))
@pytest.mark.parametrize("op", list(OPS), ids=list(OPS.values()))
def test_reduce_scatter(lib, devices, buffers, comm, rng, path, size, dtype, op):
    ranks = ranks_for(devices, size)
    token = comm(ranks, path)
    for count in (1, 1031):
        sends = [random_values(rng, dtype, count * size, with_nan=(op == MAX and r == 0))
                 for r in range(size)]
        send = [buffers(g, sends[r].nbytes).write(sends[r]) for r, g in enumerate(ranks)]
        recv = [buffers(g, sends[0].nbytes // size) for g in ranks]
        lib.check("aethercl_reduce_scatter", token, token_array([b.handle for b in send]),
                  token_array([b.handle for b in recv]), count, dtype, op)
        for r, buffer in enumerate(recv):
            want = reference(dtype, op, [s[r * count:(r + 1) * count] for s in sends])
            assert same_bits(dtype, buffer.read(numpy_dtype(dtype)), want), f"rank {r}"


def test_paths_agree_and_repeat(lib, devices, buffers, comm, rng):
    """Same inputs, both paths, twice each: four identical results."""
    ranks = devices
    count = 5003
    inputs = [rng.standard_normal(count).astype(np.float32) for _ in ranks]
    results = []
    for path in PATHS + PATHS:
        token = comm(ranks, path)
        bufs = [buffers(g, count * 4).write(inputs[r]) for r, g in enumerate(ranks)]
        lib.check("aethercl_all_reduce", token, token_array([b.handle for b in bufs]), count,
                  F32, SUM)
        results += [b.read(np.float32).tobytes() for b in bufs]
    assert len(set(results)) == 1


def test_ordered_with_device_work(lib, devices, buffers, comm, rng):
    """Compute before and after the collective on each device, with no synchronisation between:
    c = a + b on every device, all-reduce(c), d = c + c; d must be 2 * sum(a + b)."""
    ranks = devices
    count = 3001
    token = comm(ranks, "device")
    a = [rng.standard_normal(count).astype(np.float32) for _ in ranks]
    bufs = []
    for r, g in enumerate(ranks):
        ba, bc, bd = (buffers(g, count * 4).write(a[r]), buffers(g, count * 4),
                      buffers(g, count * 4))
        lib.check("execute_add_on_gpu", g, ba.handle, ba.handle, bc.handle, count)
        bufs.append((bc, bd))
    lib.check("aethercl_all_reduce", token, token_array([c.handle for c, _ in bufs]), count, F32,
              SUM)
    for g, (bc, bd) in zip(ranks, bufs):
        lib.check("execute_add_on_gpu", g, bc.handle, bc.handle, bd.handle, count)
    want = reference(F32, SUM, [x + x for x in a])
    for bc, bd in bufs:
        assert bd.read(np.float32).tobytes() == (want + want).tobytes()


def test_single_device_communicator(lib, devices, buffers, comm, rng):
    token = comm([devices[1]])
    data = rng.standard_normal(301).astype(np.float32)
    buf = buffers(devices[1], data.nbytes).write(data)
    for op in OPS:
        lib.check("aethercl_all_reduce", token, token_array([buf.handle]), 301, F32, op)
    assert buf.read(np.float32).tobytes() == data.tobytes()
    lib.check("aethercl_broadcast", token, token_array([buf.handle]), 301, F32, 0)
    out = buffers(devices[1], data.nbytes)
    lib.check("aethercl_all_gather", token, token_array([buf.handle]), token_array([out.handle]),
              301, F32)
    assert out.read(np.float32).tobytes() == data.tobytes()
    out2 = buffers(devices[1], data.nbytes)
    lib.check("aethercl_reduce_scatter", token, token_array([buf.handle]),
              token_array([out2.handle]), 301, F32, SUM)
    assert out2.read(np.float32).tobytes() == data.tobytes()


def test_zero_count_validates_and_succeeds(lib, devices, buffers, comm):
    token = comm(devices[:2])
    bufs = [buffers(g, 4) for g in devices[:2]]
    arr = token_array([b.handle for b in bufs])
    lib.check("aethercl_all_reduce", token, arr, 0, F32, SUM)
    lib.check("aethercl_broadcast", token, arr, 0, F32, 1)
    other = token_array([buffers(g, 4).handle for g in devices[:2]])
    lib.check("aethercl_all_gather", token, arr, other, 0, F32)
    lib.check("aethercl_reduce_scatter", token, arr, other, 0, F32, MAX)
    assert lib.aethercl_all_reduce(token, arr, 0, 42, SUM) == 0   # a bad dtype is still refused


@pytest.mark.parametrize("path", PATHS)
def test_copy_peer_odd_offsets(lib, devices, buffers, rng, monkeypatch, path, shared_context):
    if path == "device":
        require_shared(shared_context)
    monkeypatch.setenv("AETHERCL_PEER_PATH", path)
    for size, src_offset, dst_offset in ((1, 0, 0), (13, 3, 7), (1000003, 5, 1), (4097, 0, 11)):
        src = buffers(devices[0], src_offset + size + 9)
        dst = buffers(devices[1], dst_offset + size + 5)
        data = rng.integers(0, 256, src_offset + size + 9, dtype=np.uint8).tobytes()
        src.write_bytes(data)
        before = dst.read_bytes()
        lib.check("aethercl_copy_peer", devices[1], dst.handle, dst_offset, devices[0],
                  src.handle, src_offset, size)
        after = dst.read_bytes()
        assert after[dst_offset:dst_offset + size] == data[src_offset:src_offset + size]
        assert after[:dst_offset] == before[:dst_offset]
        assert after[dst_offset + size:] == before[dst_offset + size:]
        assert src.read_bytes()[:len(data)] == data


def test_copy_peer_same_device_and_back(lib, devices, buffers, rng):
    data = rng.integers(0, 256, 999, dtype=np.uint8).tobytes()
    a = buffers(devices[0], 2000)
    a.write_bytes(data)
    lib.check("aethercl_copy_peer", devices[0], a.handle, 1000, devices[0], a.handle, 1, 998)
    assert a.read_bytes(1998)[1000:] == data[1:]
    b = buffers(devices[2 % len(devices)], 999)
    lib.check("aethercl_copy_peer", b.gpu, b.handle, 0, devices[0], a.handle, 0, 999)
    c = buffers(devices[0], 999)
    lib.check("aethercl_copy_peer", devices[0], c.handle, 0, b.gpu, b.handle, 0, 999)
    assert c.read_bytes(999) == data


def test_copy_peer_then_compute_is_ordered(lib, devices, buffers, rng):
    """Overwrite the source right after the copy: the copy must have taken the old bytes."""
    count = 200003
    old = rng.standard_normal(count).astype(np.float32)
    src = buffers(devices[0], count * 4).write(old)
    dst = buffers(devices[1], count * 4)
    lib.check("aethercl_copy_peer", devices[1], dst.handle, 0, devices[0], src.handle, 0, count * 4)
    lib.check("execute_add_on_gpu", devices[0], src.handle, src.handle, src.handle, count)
    assert dst.read(np.float32).tobytes() == old.tobytes()
    assert src.read(np.float32).tobytes() == (old + old).tobytes()
