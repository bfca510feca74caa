"""Concurrency through ctypes (which releases the GIL): 8 threads issue mixed calls at once.

Every execute_* of op_specs is first run single-threaded on fixed inputs to get reference outputs
(each must succeed); then 8 threads repeat allocate/write/compute/read/free of those ops plus
checked add/mul round trips, and every result must equal its reference (rtol 1e-6: only an
atomic accumulation may reorder sums). A join timeout catches deadlocks."""
import threading

import numpy as np
import pytest

from support.hostile_cases import _values
from support.op_specs import SPECS, element_count

THREADS, ITERATIONS, JOIN_TIMEOUT = 8, 24, 300


def _inputs(symbol, rng):
    spec = SPECS[symbol.name]
    values = dict(_values(symbol), **spec.scalars)
    bound = values.get("v", values.get("V", 1))
    data = {}
    for name, dims in spec.buffers.items():
        count = element_count(dims, values)
        if name in spec.index_buffers:
            data[name] = rng.integers(0, bound, count).astype(np.int32)
        else:
            data[name] = rng.uniform(0.1, 1.0, count).astype(np.float32)
    return values, data


def _run_op(lib, index, symbol, values, data):
    """Uploads data, runs the op once, reads every buffer back:
    (result, (code, message) of the call, {name: array})."""
    handles = {}
    try:
        for name, array in data.items():
            handles[name] = lib.allocate_gpu_memory(index, array.nbytes)
            assert handles[name], lib.last_error()
            lib.check("write_host_to_gpu_blocking", index, handles[name], 0, array.nbytes,
                      array.ctypes.data)
        args = [index] + [handles[p.name] if p.c_type == "void*" else values[p.name]
                          for p in symbol.parameters[1:]]
        result = getattr(lib, symbol.name)(*args)
        error = (lib.last_error_code(), lib.last_error())
        outputs = {}
        for name, array in data.items():
            out = np.empty_like(array)
            lib.check("read_gpu_to_host_blocking", index, handles[name], 0, array.nbytes,
                      out.ctypes.data)
            outputs[name] = out
        return result, error, outputs
    finally:
        for handle in handles.values():
            lib.free_gpu_memory(index, handle)


@pytest.fixture(scope="module")
def references(lib, device):
    rng = np.random.default_rng(7)
    refs = {}
    for symbol in lib.symbols:
        if symbol.name not in SPECS:
            continue
        values, data = _inputs(symbol, rng)
        result, (code, message), outputs = _run_op(lib, device.index, symbol, values, data)
        assert result == 1, f"{symbol.name}: code {code}: {message}"
        refs[symbol.name] = (symbol, values, data, outputs)
    assert set(refs) == set(SPECS)
    return refs


def test_eight_threads_of_mixed_calls(lib, device, references):
    ops = list(references.values())
    errors = []

    def worker(thread):
        rng = np.random.default_rng(100 + thread)
        try:
            for iteration in range(ITERATIONS):
                symbol, values, data, expected = ops[(thread + iteration) % len(ops)]
                result, (_, message), outputs = _run_op(lib, device.index, symbol, values, data)
                if result != 1:
                    errors.append(f"{symbol.name}: {message}")
                for name, out in outputs.items():
                    if not np.allclose(out, expected[name], rtol=1e-6, atol=1e-7, equal_nan=True):
                        errors.append(f"thread {thread}: {symbol.name}.{name} differs")
                n = int(rng.integers(1, 20000))
                a = rng.standard_normal(n).astype(np.float32)
                b = rng.standard_normal(n).astype(np.float32)
                op = "add" if iteration % 2 else "mul"
                result, (_, message), outputs = _run_op(
                    lib, device.index, next(s for s in lib.symbols
                                            if s.name == f"execute_{op}_on_gpu"),
                    {"num_elements": n}, {"buffer_a": a, "buffer_b": b,
                                          "buffer_c": np.full(n, np.nan, np.float32)})
                want = a + b if op == "add" else a * b
                if result != 1 or not np.array_equal(outputs["buffer_c"], want):
                    errors.append(f"thread {thread}: {op} of {n} wrong ({message})")
                if lib.execute_add_on_gpu(device.index, None, None, None, 5) != 0 or \
                        "buffer_a is NULL" not in lib.last_error():
                    errors.append(f"thread {thread}: last error mixed up: {lib.last_error()!r}")
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(f"thread {thread}: {error!r}")

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "deadlock: threads still running"
    assert not errors, "\n".join(errors[:20])


def test_threads_share_nothing_through_the_last_error(lib, device):
    """Each thread sees only its own failures (the last error is per thread)."""
    barrier = threading.Barrier(THREADS)
    seen = {}

    def worker(thread):
        barrier.wait()
        lib.execute_add_on_gpu(device.index, None, None, None, -(thread + 1))
        barrier.wait()
        seen[thread] = lib.last_error()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(seen) == THREADS
    for thread, message in seen.items():
        assert message.startswith("execute_add_on_gpu: "), message
        assert f"= {-(thread + 1)} is negative" in message, (thread, message)
