"""Tracing: Chrome-trace JSON with device timestamps, from the API and from AETHERCL_TRACE."""
import json
import os

import numpy as np

from support.helpers import run_child

# execute_add_on_gpu's kernel: the _vec4 form on GPUs, the _lanes form on CPU devices.
ADD_KERNELS = ("elementwise_add_vec4", "elementwise_add_lanes")


def _check_trace(path, expected_kernels):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    transfers = [e for e in events if e["cat"] == "transfer"]
    assert any(e["name"] in expected_kernels for e in kernels)
    assert any(e["name"] == "host-to-device copy" for e in transfers)
    assert any(e["name"] == "device-to-host copy" for e in transfers)
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
    assert any(e["args"]["api"] == "execute_add_on_gpu" for e in kernels)
    return events


def test_trace_through_the_api(lib, device, tmp_path):
    path = tmp_path / "trace.json"
    assert lib.aethercl_trace_start(str(path).encode()) == 1
    assert lib.aethercl_trace_start(str(path).encode()) == 0
    assert "already on" in lib.last_error()
    a = device.upload(np.ones(1000, np.float32))
    c = device.empty((1000,))
    for _ in range(5):
        lib.check("execute_add_on_gpu", device.index, a.handle, a.handle, c.handle, 1000)
    assert (c.numpy() == 2).all()
    summary = json.loads(lib.json_call("aethercl_trace_summary"))
    assert summary["active"] is True
    assert lib.aethercl_trace_stop() == 1
    assert lib.aethercl_trace_stop() == 0
    events = _check_trace(path, ADD_KERNELS)
    assert len([e for e in events if e["name"] in ADD_KERNELS]) == 5
    a.free(), c.free()


def test_trace_from_the_environment_is_written_at_shutdown(tmp_path):
    path = tmp_path / "env-trace.json"
    env_before = os.environ.get("AETHERCL_TRACE")
    os.environ["AETHERCL_TRACE"] = str(path)
    try:
        result = run_child("""
            assert lib.initialize_gpu(0) == 1
            x = np.arange(64, dtype=np.float32)
            h = lib.allocate_gpu_memory(0, 256); o = lib.allocate_gpu_memory(0, 256)
            assert lib.write_host_to_gpu_blocking(0, h, 0, 256, x.ctypes.data) == 1
            assert lib.execute_add_on_gpu(0, h, h, o, 64) == 1
            assert lib.read_gpu_to_host_blocking(0, o, 0, 256, x.ctypes.data) == 1
            lib.shutdown_driver()
            print("OK")
        """)
    finally:
        if env_before is None:
            del os.environ["AETHERCL_TRACE"]
        else:
            os.environ["AETHERCL_TRACE"] = env_before
    assert result.returncode == 0, result.stderr
    assert "elementwise_add" in result.stderr  # the per-kernel summary
    _check_trace(path, ADD_KERNELS)


def test_trace_stop_gives_streams_plain_queues_back(lib, device, tmp_path):
    # While tracing, launches carry device times (start_ns in the kernel log); after stop they do
    # not: streams are back on queues without profiling, whose launches the submission thread
    # issues where the device has one (profiling ones run on the caller's thread to keep their
    # events, several times slower on NVIDIA). A timing stream keeps its timing.
    import ctypes
    from aethercl import ops
    from aethercl.structs import STREAM_TIMING
    a, c = device.upload(np.ones(64, np.float32)), device.empty((64,))
    timing = ops.stream_create(device.index, STREAM_TIMING)

    def add_and_last_log_entry():
        lib.check("execute_add_on_gpu", device.index, a.handle, a.handle, c.handle, 64)
        lib.check("aethercl_synchronize", device.index, None)
        return json.loads(lib.json_call("aethercl_kernel_log", device.index))[-1]

    assert lib.aethercl_trace_start(str(tmp_path / "trace.json").encode()) == 1
    assert add_and_last_log_entry()["start_ns"] is not None
    assert lib.aethercl_trace_stop() == 1
    for _ in range(2):
        assert add_and_last_log_entry()["start_ns"] is None
    assert (c.numpy() == 2).all()
    start = ops.event_record(device.index, timing)
    end = ops.event_record(device.index, timing)
    ms = (ctypes.c_float * 1)(-1.0)
    ops.event_elapsed_ms(device.index, start, end, ms)
    assert ms[0] >= 0.0
    for event in (start, end):
        ops.event_destroy(device.index, event)
    ops.stream_destroy(device.index, timing)
    assert a.guard_intact() and c.guard_intact()
    a.free(), c.free()
