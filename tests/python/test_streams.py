"""Streams and events against their contract (driver.h, "Streams and events"): tokens and the
per-thread current stream, order on a stream, waits across streams, query / synchronize, elapsed
time on timing streams, destroy with work pending, and the caching allocator across streams (a
buffer freed while another stream still reads it never gets new data early).

Tolerances: data movement and float32 additions are compared exactly (the driver adds in float32
as NumPy does); matrix products against float64 NumPy with rtol 1e-5 and atol 1e-5 (k = 192) or
1e-4 (k = 512): float32 accumulation of k terms of magnitude <= 1 errs by about k * 2^-24 * sqrt(k)."""
import ctypes
import threading

import numpy as np
import pytest

from aethercl import Event, Stream

C_INVALID_ARGUMENT, C_INVALID_HANDLE = 1, 2


def _upload(device, array):
    return device.upload(np.ascontiguousarray(array, np.float32), guard=0)


def _settle(lib, device):
    """Uploads and poisoning run on the default stream; work on other streams is not ordered
    after them (streams are ordered only by events and waits), so the tests wait for them."""
    lib.check("aethercl_synchronize", device.index)


def _error(lib):
    return lib.last_error_code(), lib.last_error()


def test_default_stream_is_null_and_current_is_per_thread(lib, device):
    assert lib.aethercl_stream_current(device.index) is None
    assert lib.last_error_code() == 0
    stream = Stream(device)
    seen = {}

    def other_thread():
        seen["other"] = lib.aethercl_stream_current(device.index)

    with stream:
        assert lib.aethercl_stream_current(device.index) == stream.handle
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert seen["other"] is None
    assert lib.aethercl_stream_current(device.index) is None
    stream.destroy()


def test_tokens_are_typed_and_never_reused(lib, device):
    first, second = Stream(device), Stream(device)
    assert first.handle != second.handle
    handle = first.handle
    first.destroy()
    assert lib.aethercl_stream_synchronize(device.index, handle) == 0
    code, message = _error(lib)
    assert code == C_INVALID_HANDLE and "destroyed" in message and "stream" in message
    buffer = device.alloc(16)
    assert lib.aethercl_stream_synchronize(device.index, buffer) == 0
    code, message = _error(lib)
    assert code == C_INVALID_HANDLE and "buffer handle, not a stream" in message
    event = second.record_event()
    assert lib.aethercl_stream_set_current(device.index, event.handle) == 0
    assert "an event, not a stream" in lib.last_error()
    assert lib.execute_add_on_gpu(device.index, second.handle, buffer, buffer, 4) == 0
    assert "not a buffer handle" in lib.last_error()
    third = Stream(device)
    assert third.handle not in (handle, second.handle)
    for item in (event, second, third):
        item.destroy()
    lib.free_gpu_memory(device.index, buffer)


def test_unknown_flags_and_destroying_the_default_stream_are_refused(lib, device):
    assert lib.aethercl_stream_create(device.index, 2) is None
    assert lib.last_error_code() == C_INVALID_ARGUMENT and "flags" in lib.last_error()
    assert lib.aethercl_stream_destroy(device.index, None) == 0
    assert "default stream" in lib.last_error()


def test_calls_run_in_order_on_the_current_stream(lib, device, rng):
    n = 4099
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ta, tb, tc = _upload(device, a), _upload(device, b), device.empty((n,), guard=0)
    _settle(lib, device)
    with Stream(device) as stream:
        for _ in range(20):  # c = a + b, then a = c: each step needs the one before
            lib.check("execute_add_on_gpu", device.index, ta.handle, tb.handle, tc.handle, n)
            lib.check("execute_clone_on_gpu", device.index, tc.handle, ta.handle, n * 4)
        stream.synchronize()
    expect = a.copy()
    for _ in range(20):
        expect = (expect + b).astype(np.float32)
    np.testing.assert_array_equal(ta.numpy(), expect)
    for t in (ta, tb, tc):
        t.free()


def test_a_stream_waits_for_an_event_of_another_stream(lib, device, rng):
    m = k = n = 192
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    ta, tw, tc, tcopy = (_upload(device, a), _upload(device, w), device.empty((m, n), guard=0),
                         device.empty((m, n), guard=0))
    _settle(lib, device)
    producer, consumer = Stream(device), Stream(device)
    with producer:
        for _ in range(3):
            lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, tc.handle, 1,
                      m, n, k)
    done = producer.record_event()
    consumer.wait_event(done)
    host = np.empty((m, n), np.float32)
    with consumer:
        lib.check("execute_clone_on_gpu", device.index, tc.handle, tcopy.handle, m * n * 4)
    consumer.synchronize()
    assert done.query()
    lib.check("aethercl_read_async", device.index, tcopy.handle, 0, host.nbytes,
              host.ctypes.data, consumer.handle)
    np.testing.assert_allclose(host, a.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    for item in (done, producer, consumer):
        item.destroy()
    for t in (ta, tw, tc, tcopy):
        t.free()


def test_event_query_and_synchronize(lib, device):
    stream = Stream(device)
    buffer = device.alloc(1 << 20)
    for value in range(8):
        lib.check("aethercl_memset", device.index, buffer, 0, 1 << 20, value, stream.handle)
    event = stream.record_event()
    event.synchronize()
    assert event.query() is True
    done = ctypes.c_int(7)
    assert lib.aethercl_event_query(event.handle, None) == 0
    assert lib.last_error_code() == C_INVALID_ARGUMENT
    lib.check("aethercl_event_query", event.handle, ctypes.byref(done))
    assert done.value == 1
    handle = event.handle
    event.destroy()
    assert lib.aethercl_event_synchronize(handle) == 0
    assert "destroyed" in lib.last_error()
    stream.destroy()
    lib.free_gpu_memory(device.index, buffer)


def test_elapsed_time_needs_timing_streams(lib, device):
    timed = Stream(device, timing=True)
    plain = Stream(device)
    buffer = device.alloc(4 << 20)
    start = timed.record_event()
    for value in range(4):
        lib.check("aethercl_memset", device.index, buffer, 0, 4 << 20, value, timed.handle)
    end = timed.record_event()
    ms = start.elapsed_ms(end)
    assert 0.0 <= ms < 60_000.0
    assert end.elapsed_ms(start) == pytest.approx(-ms, abs=1e-3)
    untimed = plain.record_event()
    out = ctypes.c_float(0)
    assert lib.aethercl_event_elapsed_ms(start.handle, untimed.handle, ctypes.byref(out)) == 0
    assert lib.last_error_code() == C_INVALID_ARGUMENT and "timing stream" in lib.last_error()
    assert lib.aethercl_event_elapsed_ms(start.handle, end.handle, None) == 0
    for item in (start, end, untimed, timed, plain):
        item.destroy()
    lib.free_gpu_memory(device.index, buffer)


def test_destroy_with_work_pending_still_completes_it(lib, device, rng):
    n = 1 << 16
    a = rng.standard_normal(n).astype(np.float32)
    ta, tb = _upload(device, a), device.empty((n,), guard=0)
    _settle(lib, device)
    stream = Stream(device)
    with stream:
        lib.check("execute_gelu_on_gpu", device.index, ta.handle, tb.handle, n)
        for _ in range(10):
            lib.check("execute_add_on_gpu", device.index, tb.handle, ta.handle, tb.handle, n)
    stream.destroy()  # returns at once; the work still runs
    from math import erf
    gelu = np.array([0.5 * x * (1 + erf(x / np.sqrt(2))) for x in a[:64].astype(np.float64)])
    expect = gelu.astype(np.float32)
    for _ in range(10):
        expect = (expect + a[:64]).astype(np.float32)
    np.testing.assert_allclose(tb.numpy()[:64], expect, rtol=1e-5, atol=1e-6)
    ta.free()
    tb.free()


def test_events_order_streams_of_another_thread(lib, device):
    """Each of 4 threads fills its own buffer on its own stream; the main thread waits for the
    events on one stream and copies every buffer: the copies see the fills."""
    size, count = 1 << 16, 4
    buffers = [device.alloc(size) for _ in range(count)]
    copies = [device.alloc(size) for _ in range(count)]
    events = [None] * count

    def fill(i):
        with Stream(device) as stream:
            for value in range(1, 6):
                lib.check("aethercl_memset", device.index, buffers[i], 0, size, 10 * i + value,
                          stream.handle)
            events[i] = stream.record_event()

    threads = [threading.Thread(target=fill, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    collector = Stream(device)
    for i in range(count):
        collector.wait_event(events[i])
        lib.check("aethercl_copy", device.index, copies[i], 0, buffers[i], 0, size,
                  collector.handle)
    collector.synchronize()
    for i in range(count):
        out = np.empty(size, np.uint8)
        lib.check("read_gpu_to_host_blocking", device.index, copies[i], 0, size, out.ctypes.data)
        assert (out == 10 * i + 5).all()
        events[i].destroy()
        lib.free_gpu_memory(device.index, buffers[i])
        lib.free_gpu_memory(device.index, copies[i])
    collector.destroy()


def _stats(lib, device):
    import json
    return json.loads(lib.json_call("aethercl_memory_stats", device.index))


def test_a_buffer_freed_while_another_stream_reads_it_is_not_reused_early(lib, device, rng):
    """Stream B multiplies (slow) and then adds x; x is freed on the default stream right after,
    and buffers of the same size are allocated and overwritten at once. B must still add the old
    x: had the allocator handed x's memory out before B's add ran, the junk would show. (The pool
    rule itself, with events that are held incomplete, is tested in memory_pool_test.cpp.)"""
    m = k = n = 512
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    x = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    ta, tw, tt, ty = (_upload(device, a), _upload(device, w), device.empty((m, n), guard=0),
                      device.empty((m, n), guard=0))
    x_handle = lib.check_handle("allocate_gpu_memory", device.index, x.nbytes)
    lib.check("write_host_to_gpu_blocking", device.index, x_handle, 0, x.nbytes, x.ctypes.data)
    _settle(lib, device)
    reader = Stream(device)
    with reader:
        for _ in range(4):
            lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, tt.handle, 1,
                      m, n, k)
        lib.check("execute_add_on_gpu", device.index, tt.handle, x_handle, ty.handle, m * n)
    lib.free_gpu_memory(device.index, x_handle)   # default stream; the reader may not be done
    junk = np.full(x.shape, 1e6, np.float32)
    fresh = []
    for _ in range(3):
        handle = lib.check_handle("allocate_gpu_memory", device.index, x.nbytes)
        lib.check("write_host_to_gpu_blocking", device.index, handle, 0, junk.nbytes,
                  junk.ctypes.data)
        fresh.append(handle)
    expect = (a.astype(np.float64) @ w + x).astype(np.float32)
    np.testing.assert_allclose(ty.numpy(), expect, rtol=1e-5, atol=1e-4)
    for handle in fresh:
        lib.free_gpu_memory(device.index, handle)
    reader.destroy()
    for t in (ta, tw, tt, ty):
        t.free()


def test_blocks_of_one_stream_are_reused_on_it_at_once(lib, device):
    stream = Stream(device)
    with stream:
        first = lib.check_handle("allocate_gpu_memory", device.index, 12345)
        lib.check("aethercl_memset", device.index, first, 0, 12345, 1, stream.handle)
        lib.free_gpu_memory(device.index, first)
        hits = _stats(lib, device)["pool_hits"]
        second = lib.check_handle("allocate_gpu_memory", device.index, 12345)
        assert _stats(lib, device)["pool_hits"] == hits + 1
        lib.free_gpu_memory(device.index, second)
    stream.destroy()


def test_synchronize_and_seed_reads_wait_for_every_stream(lib, device):
    size = 1 << 20
    buffer = device.alloc(size)
    streams = [Stream(device) for _ in range(3)]
    for i, stream in enumerate(streams):
        lib.check("aethercl_memset", device.index, buffer, i * 1000, 1000, 7 + i, stream.handle)
    out = np.empty(3000, np.uint8)
    lib.check("read_gpu_to_host_blocking", device.index, buffer, 0, 3000, out.ctypes.data)
    assert (out == np.repeat(np.array([7, 8, 9], np.uint8), 1000)).all()
    lib.check("aethercl_synchronize", device.index)
    for stream in streams:
        stream.destroy()
    lib.free_gpu_memory(device.index, buffer)


TWO_DEVICES = r"""
import json, os
count = lib.aethercl_device_count()
if count < 2:
    print(json.dumps({"skip": f"{count} device(s)"}))
    raise SystemExit(0)
assert lib.initialize_gpu(0) == 1 and lib.initialize_gpu(1) == 1
size = 1 << 20
a = lib.allocate_gpu_memory(0, size)
b = lib.allocate_gpu_memory(1, size)
s0 = lib.aethercl_stream_create(0, 0)
s1 = lib.aethercl_stream_create(1, 0)
result = {}
# A stream of device 0 is refused on device 1, by name.
result["foreign_stream"] = lib.aethercl_memset(1, b, 0, size, 1, s0)
result["foreign_message"] = lib.last_error()
# Device 1 waits for device 0's event, then copies its buffer from the host-visible result.
for value in range(1, 30):
    assert lib.aethercl_memset(0, a, 0, size, value, s0) == 1
done = lib.aethercl_event_record(0, s0)
assert done
assert lib.aethercl_stream_wait_event(1, s1, done) == 1, lib.last_error()
marker = lib.aethercl_event_record(1, s1)
# marker (device 1) completes only after device 0's memsets: when it has, they have too.
assert lib.aethercl_event_synchronize(marker) == 1
flag = ctypes.c_int(0)
assert lib.aethercl_event_query(done, ctypes.byref(flag)) == 1
result["done_when_waiter_done"] = flag.value
out = (ctypes.c_ubyte * 16)()
assert lib.read_gpu_to_host_blocking(0, a, 0, 16, out) == 1
result["value"] = out[0]
ms = ctypes.c_float(0)
timed0 = lib.aethercl_stream_create(0, 1)
timed1 = lib.aethercl_stream_create(1, 1)
e0 = lib.aethercl_event_record(0, timed0)
e1 = lib.aethercl_event_record(1, timed1)
result["elapsed_across_devices"] = lib.aethercl_event_elapsed_ms(e0, e1, ctypes.byref(ms))
result["elapsed_message"] = lib.last_error()
for e in (done, marker, e0, e1):
    assert lib.aethercl_event_destroy(e) == 1
lib.shutdown_driver()
print(json.dumps(result))
"""


def test_two_devices_streams_and_cross_device_waits():
    """PoCL shows its CPU twice with POCL_DEVICES="pthread pthread": two contexts, so an event
    of one device waited on by a stream of the other goes through the host."""
    import json
    import os
    from support.helpers import run_child
    backup = dict(os.environ)
    os.environ["POCL_DEVICES"] = "pthread pthread"
    try:
        child = run_child(TWO_DEVICES, timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(backup)
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(f"needs two devices (PoCL's POCL_DEVICES): {result['skip']}")
    assert result["foreign_stream"] == 0
    assert "belongs to device 0" in result["foreign_message"]
    assert result["done_when_waiter_done"] == 1
    assert result["value"] == 29
    assert result["elapsed_across_devices"] == 0
    assert "one device" in result["elapsed_message"]


def test_event_python_record_on_default_stream(lib, device):
    event = Event.record(device=device)
    event.wait()
    assert event.query()
    event.destroy()
