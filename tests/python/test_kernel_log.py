"""The kernel log (aethercl_kernel_log): every op family's launches, conversions and user launches
appear under their kernel and entry point, oldest first; at least 1,024 (here: 4,096) are kept;
device times appear when the queue times (tracing); AETHERCL_KERNEL_LOG=0 turns it off."""
import ctypes
import json
import os

import pytest

from aethercl import abi
from support.helpers import run_child
from support.hostile_cases import Harness, _buffers, _call, _values
from support.op_specs import SPECIAL, SPECS

KEYS = ["kernel", "entry_point", "stream", "global", "local", "queued_ns", "start_ns", "end_ns"]
CAPACITY = 4096


def log(lib, index):
    return json.loads(lib.json_call("aethercl_kernel_log", index))


def add_once(lib, index, handle):
    lib.check("execute_add_on_gpu", index, handle, handle, handle, 1)


@pytest.fixture
def scratch(lib, device):
    handle = lib.check_handle("allocate_gpu_memory", device.index, 64)
    yield handle
    lib.free_gpu_memory(device.index, handle)


def test_every_op_family_appears_under_its_entry_point(lib, device):
    symbols = abi.load_manifest(str(lib.path))
    harness = Harness(lib, device.index)
    missing = []
    for symbol in symbols:
        if not symbol.name.startswith("execute_") or symbol.name in SPECIAL:
            continue
        spec = SPECS[symbol.name]
        values = dict(_values(symbol), **spec.scalars)
        buffers = _buffers(harness, spec, values)
        assert _call(harness, symbol, buffers, values) == 1, lib.last_error()
        mine = [e for e in log(lib, device.index)[-8:] if e["entry_point"] == symbol.name]
        if not mine or not all(e["kernel"] for e in mine):
            missing.append(symbol.name)
        harness.cleanup()
    assert not missing, f"no kernel-log entry for {missing}"


def test_entries_have_the_documented_shape_and_order(lib, device, scratch):
    from aethercl.abi import AetherclArg
    program = lib.aethercl_program_create(
        device.index, b"__kernel void tagged(__global float* x) { x[get_global_id(0)] = 1.0f; }",
        None)
    kernel = lib.aethercl_kernel_create(program, b"tagged")
    args = (AetherclArg * 1)(AetherclArg(0, 0, scratch))
    lib.check("aethercl_launch", device.index, kernel, None, 2, (ctypes.c_size_t * 2)(4, 2),
              (ctypes.c_size_t * 2)(2, 1), 1, args)
    add_once(lib, device.index, scratch)
    entries = log(lib, device.index)
    user, add = entries[-2], entries[-1]
    assert list(user) == KEYS and list(add) == KEYS
    assert user["kernel"] == "tagged" and user["entry_point"] == "aethercl_launch"
    assert user["global"] == [4, 2] and user["local"] == [2, 1] and user["stream"] is None
    assert add["entry_point"] == "execute_add_on_gpu" and add["global"][0] >= 1
    assert user["queued_ns"] <= add["queued_ns"]
    queued = [e["queued_ns"] for e in entries]
    assert queued == sorted(queued), "oldest first"
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(program)


def test_at_least_1024_and_at_most_the_capacity_are_kept(lib, device, scratch):
    for _ in range(CAPACITY + 100):
        add_once(lib, device.index, scratch)
    entries = log(lib, device.index)
    assert len(entries) == CAPACITY >= 1024
    assert all(e["entry_point"] == "execute_add_on_gpu" for e in entries)


def test_conversions_are_logged(lib, device, scratch):
    other = lib.check_handle("allocate_gpu_memory", device.index, 64)
    lib.check("aethercl_convert", device.index, scratch, 0, other, 1, 16, None)
    last = log(lib, device.index)[-1]
    assert (last["kernel"], last["entry_point"]) == ("convert_elements", "aethercl_convert")
    lib.free_gpu_memory(device.index, other)


def test_refusals(lib, device):
    assert lib.aethercl_kernel_log(7, None, 0) > 0  # the only initialised device (fallback)
    buffer = ctypes.create_string_buffer(b"\x77" * 8, 8)
    assert lib.aethercl_kernel_log(device.index, buffer, 1) > 0
    assert buffer.raw == b"\x00" + b"\x77" * 7


TIMED_CHILD = r"""
import json, os, tempfile
assert lib.initialize_gpu(0) == 1
h = lib.allocate_gpu_memory(0, 64)
lib.execute_add_on_gpu(0, h, h, h, 1)
with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "trace.json")
    assert lib.aethercl_trace_start(path.encode()) == 1
    for _ in range(3):
        lib.execute_add_on_gpu(0, h, h, h, 16)
    assert lib.aethercl_synchronize(0) == 1
    entries = json.loads(lib.json_call("aethercl_kernel_log", 0))
    lib.aethercl_trace_stop()
print(json.dumps(entries[-4:]))
"""


def test_device_times_appear_when_the_queue_times():
    result = run_child(TIMED_CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
    before, *timed = json.loads(result.stdout.strip().splitlines()[-1])
    assert before["start_ns"] is None and before["end_ns"] is None
    for entry in timed:
        assert entry["start_ns"] is not None and entry["end_ns"] >= entry["start_ns"] > 0


def test_the_log_can_be_turned_off():
    env_backup = dict(os.environ)
    os.environ["AETHERCL_KERNEL_LOG"] = "0"
    try:
        result = run_child("""
assert lib.initialize_gpu(0) == 1
h = lib.allocate_gpu_memory(0, 16)
lib.execute_add_on_gpu(0, h, h, h, 4)
print(lib.json_call("aethercl_kernel_log", 0))
""")
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
