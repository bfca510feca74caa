"""Bad input to the many-device functions on several devices: every refusal returns the failure
value with a message naming the function and the argument, and leaves every buffer as it was.
(The single-device cases, including bad tokens, are generated in tests/python/support/hostile_cases.py.)"""
import ctypes
import json
import subprocess
import sys
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import token_array

F32, F16, F64, SUM, MAX = 0, 1, 3, 0, 2
INVALID_ARGUMENT, INVALID_HANDLE, OUT_OF_RANGE, NOT_INITIALIZED, NO_DEVICE, NOT_IMPLEMENTED = (
    1, 2, 3, 5, 6, 9)
SIZE_MAX = 2**64 - 1


def refused(lib, result, function, code, *words):
    assert result in (0, None), f"{function} accepted bad input"
    message = lib.aethercl_last_error().decode()
    assert lib.aethercl_last_error_code() == code, message
    assert message.startswith(function + ": "), message
    for word in words:
        assert word in message, message


def create(lib, *indices):
    array = (ctypes.c_int * len(indices))(*indices)
    return lib.aethercl_comm_create(len(indices), array)


def test_comm_create_refusals(lib, devices):
    f = "aethercl_comm_create"
    refused(lib, create(lib, devices[1], devices[1]), f, INVALID_ARGUMENT,
            "gpu_indices[1]", "repeats gpu_indices[0]")
    refused(lib, create(lib, devices[0], 99), f, NO_DEVICE,
            "gpu_indices[1] = 99")
    refused(lib, create(lib, -1), f, NO_DEVICE, "gpu_indices[0] = -1")
    refused(lib, lib.aethercl_comm_create(0, (ctypes.c_int * 1)(0)), f, INVALID_ARGUMENT, "count 0")
    refused(lib, lib.aethercl_comm_create(-5, None), f, INVALID_ARGUMENT, "count -5")
    refused(lib, lib.aethercl_comm_create(2**31 - 1, None), f, INVALID_ARGUMENT, "exceeds")
    refused(lib, lib.aethercl_comm_create(2, None), f, INVALID_ARGUMENT, "gpu_indices is NULL")


@pytest.fixture
def pair(lib, devices, buffers, comm):
    token = comm(devices[:2])
    bufs = [buffers(g, 4096) for g in devices[:2]]
    for b in bufs:
        b.write(np.arange(1024, dtype=np.float32))
    return token, bufs


def unchanged(bufs):
    for b in bufs:
        assert b.read(np.float32).tobytes() == np.arange(1024, dtype=np.float32).tobytes()


def test_collective_refusals(lib, devices, buffers, pair):
    token, bufs = pair
    arr = token_array([b.handle for b in bufs])
    swapped = token_array([b.handle for b in reversed(bufs)])
    f = "aethercl_all_reduce"
    refused(lib, lib.aethercl_all_reduce(token, swapped, 1024, F32, SUM), f, INVALID_HANDLE,
            "buffers[0]", f"must be on device {devices[0]}")
    refused(lib, lib.aethercl_all_reduce(token, arr, 1041, F32, SUM), f, OUT_OF_RANGE,
            "buffers[0]", "holds 4160 bytes")   # 4096 + the fixture's 64 guard bytes
    refused(lib, lib.aethercl_all_reduce(token, arr, SIZE_MAX // 2, F32, SUM), f,
            INVALID_ARGUMENT, "overflows")
    refused(lib, lib.aethercl_all_reduce(token, arr, 16, 99, SUM), f, INVALID_ARGUMENT, "dtype 99")
    refused(lib, lib.aethercl_all_reduce(token, arr, 16, F64, SUM), f, NOT_IMPLEMENTED, "f64")
    refused(lib, lib.aethercl_all_reduce(token, arr, 16, F32, 4), f, INVALID_ARGUMENT, "op 4")
    refused(lib, lib.aethercl_all_reduce(token, None, 16, F32, SUM), f, INVALID_ARGUMENT,
            "buffers is NULL")
    refused(lib, lib.aethercl_all_reduce(token, token_array([bufs[0].handle, None]), 16, F32,
                                         SUM), f, INVALID_ARGUMENT, "buffers[1] is NULL")
    refused(lib, lib.aethercl_all_reduce(bufs[0].handle, arr, 16, F32, SUM), f, INVALID_HANDLE,
            "comm", "buffer handle")
    f = "aethercl_broadcast"
    for root in (-1, 2, 2**31 - 1):
        refused(lib, lib.aethercl_broadcast(token, arr, 16, F32, root), f, INVALID_ARGUMENT,
                f"root {root}")
    f = "aethercl_all_gather"
    refused(lib, lib.aethercl_all_gather(token, arr, arr, 16, F32), f, INVALID_ARGUMENT,
            "same buffer")
    refused(lib, lib.aethercl_all_gather(token, arr, arr, 600, F32), f, OUT_OF_RANGE, "recv[0]")
    refused(lib, lib.aethercl_all_gather(token, arr, arr, SIZE_MAX // 4, F32), f,
            INVALID_ARGUMENT, "overflows")
    f = "aethercl_reduce_scatter"
    refused(lib, lib.aethercl_reduce_scatter(token, arr, None, 16, F32, SUM), f, INVALID_ARGUMENT,
            "recv is NULL")
    refused(lib, lib.aethercl_reduce_scatter(token, arr, arr, 530, F32, MAX), f, OUT_OF_RANGE,
            "send[0]")
    refused(lib, lib.aethercl_reduce_scatter(token, arr, arr, 16, F32, -1), f, INVALID_ARGUMENT,
            "op -1")
    unchanged(bufs)


def test_destroyed_communicator(lib, devices, buffers):
    token = create(lib, *devices[:2])
    assert token
    assert lib.aethercl_comm_destroy(token) == 1
    bufs = [buffers(g, 64) for g in devices[:2]]
    refused(lib, lib.aethercl_all_reduce(token, token_array([b.handle for b in bufs]), 16, F32,
                                         SUM), "aethercl_all_reduce", INVALID_HANDLE,
            "already destroyed")
    refused(lib, lib.aethercl_comm_destroy(token), "aethercl_comm_destroy", INVALID_HANDLE,
            "already destroyed")


def test_copy_peer_refusals(lib, devices, buffers):
    a, b = buffers(devices[0], 100), buffers(devices[1], 100)
    a.write_bytes(bytes(range(100)))
    f = "aethercl_copy_peer"
    refused(lib, lib.aethercl_copy_peer(devices[1], a.handle, 0, devices[0], a.handle, 0, 10), f,
            INVALID_HANDLE, "dst", f"must be on device {devices[1]}")
    refused(lib, lib.aethercl_copy_peer(devices[1], b.handle, 160, devices[0], a.handle, 0, 10), f,
            OUT_OF_RANGE, "dst_offset 160")   # 100 bytes + 64 guard bytes
    refused(lib, lib.aethercl_copy_peer(devices[1], b.handle, 0, devices[0], a.handle, SIZE_MAX,
                                        2), f, OUT_OF_RANGE, "overflows")
    refused(lib, lib.aethercl_copy_peer(devices[0], a.handle, 5, devices[0], a.handle, 0, 10), f,
            INVALID_ARGUMENT, "overlap")
    refused(lib, lib.aethercl_copy_peer(devices[1], b.handle, 0, devices[0], None, 0, 0), f,
            INVALID_ARGUMENT, "src is NULL")
    assert a.read_bytes(100) == bytes(range(100))


CHILD = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from aethercl import Library
lib = Library()
lib.check("initialize_gpu", 0)
array = (ctypes.c_int * 2)(0, 1)
assert not lib.aethercl_comm_create(2, array)
print("uninitialised:", lib.aethercl_last_error_code(), lib.aethercl_last_error().decode())
lib.check("initialize_gpu", 1)
token = lib.check_handle("aethercl_comm_create", 2, array)
import numpy as np
bufs = []
for g in (0, 1):
    h = lib.check_handle("allocate_gpu_memory", g, 4000)
    data = np.full(1000, g + 1, dtype=np.float32).tobytes()
    lib.check("write_host_to_gpu_blocking", g, h, 0, 4000, data)
    bufs.append(h)
lib.check("aethercl_all_reduce", token, (ctypes.c_void_p * 2)(*bufs), 1000, 0, 0)
out = ctypes.create_string_buffer(4000)
lib.check("read_gpu_to_host_blocking", 1, bufs[1], 0, 4000, out)
assert set(np.frombuffer(out.raw, np.float32)) == {3.0}
lib.shutdown_driver()
assert lib.aethercl_all_reduce(token, (ctypes.c_void_p * 2)(*bufs), 1000, 0, 0) == 0
print("after shutdown:", lib.aethercl_last_error().decode())
"""


@pytest.mark.parametrize("shared", ("1", "0"))
def test_uninitialised_separate_contexts_and_shutdown(devices, shared):
    """In a fresh process: a communicator naming an uninitialised device is refused; with
    AETHERCL_SHARED_CONTEXT=0 every device has its own context and the host path carries the
    all-reduce; shutdown_driver releases the communicator (its token is refused after)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, AETHERCL_SHARED_CONTEXT=shared, AETHERCL_LOG_LEVEL="info")
    run = subprocess.run([sys.executable, "-c", CHILD, str(root / "python_harness")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "uninitialised: 5 aethercl_comm_create: gpu_indices[1] = 1 is not initialised" in run.stdout
    assert "after shutdown: aethercl_all_reduce: comm" in run.stdout
    # Separate contexts always relay through the host; a shared context takes the device path on
    # CPU devices and the host path on GPUs (auto rule of aethercl_comm_create).
    kind = json.loads(subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from aethercl import "
         "Library; print(Library().json_call('aethercl_device_info', 0))",
         str(root / "python_harness")], capture_output=True, text=True, env=env).stdout)["type"]
    expected = "device path" if shared == "1" and kind == "cpu" else "host path"
    assert expected in run.stderr, run.stderr
