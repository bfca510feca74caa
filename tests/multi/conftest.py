"""Fixtures for the many-device suites: the driver with every visible device initialised.

ctest runs this folder with POCL_DEVICES="pthread pthread pthread" (three PoCL CPU devices that
share one context); on a machine with several GPUs it runs on those. With fewer than two devices
every test here is skipped with the reason."""
import ctypes
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aethercl import Library  # noqa: E402

GUARD = 64  # bytes after every buffer that must keep their pattern


@pytest.fixture(scope="session")
def lib():
    return Library()


@pytest.fixture(scope="session")
def devices(lib):
    count = lib.aethercl_device_count()
    if count < 2:
        pytest.skip(f"{count} OpenCL device(s): run with POCL_DEVICES='pthread pthread pthread'")
    wanted = min(count, 3)
    for index in range(wanted):
        lib.check("initialize_gpu", index)
    return list(range(wanted))


class Buffer:
    """A device buffer of nbytes plus GUARD guard bytes (pattern 0x5A) behind it."""

    def __init__(self, lib, gpu: int, nbytes: int, poison: bool = True):
        self.lib, self.gpu, self.nbytes = lib, gpu, nbytes
        self.handle = lib.check_handle("allocate_gpu_memory", gpu, nbytes + GUARD)
        fill = b"\xff" if poison else b"\x00"   # 0xFFFF... is NaN in f32, f16 and bf16
        self.write_bytes(fill * nbytes + b"\x5a" * GUARD)

    def write_bytes(self, data: bytes, offset: int = 0):
        self.lib.check("write_host_to_gpu_blocking", self.gpu, self.handle, offset, len(data), data)

    def read_bytes(self, nbytes=None, offset: int = 0) -> bytes:
        nbytes = self.nbytes + GUARD if nbytes is None else nbytes
        out = ctypes.create_string_buffer(nbytes)
        self.lib.check("read_gpu_to_host_blocking", self.gpu, self.handle, offset, nbytes, out)
        return out.raw

    def write(self, array: np.ndarray):
        self.write_bytes(np.ascontiguousarray(array).tobytes())
        return self

    def read(self, dtype) -> np.ndarray:
        raw = self.read_bytes()
        assert raw[self.nbytes:] == b"\x5a" * GUARD, "guard bytes after the buffer were overwritten"
        return np.frombuffer(raw[:self.nbytes], dtype=dtype).copy()

    def free(self):
        self.lib.free_gpu_memory(self.gpu, self.handle)


@pytest.fixture
def buffers(lib):
    made = []

    def make(gpu, nbytes, poison=True):
        made.append(Buffer(lib, gpu, nbytes, poison))
        return made[-1]
    yield make
    for buffer in made:
        buffer.free()


@pytest.fixture
def rng(request):
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def token_array(handles):
    return (ctypes.c_void_p * len(handles))(*handles)


@pytest.fixture(scope="session")
def shared_context(lib, devices):
    """Whether the devices share one OpenCL context (the device path needs it): PoCL's CPU
    devices do; GPUs get a context each unless AETHERCL_SHARED_CONTEXT=1."""
    previous = os.environ.get("AETHERCL_PEER_PATH")
    os.environ["AETHERCL_PEER_PATH"] = "device"
    try:
        token = lib.aethercl_comm_create(2, (ctypes.c_int * 2)(*devices[:2]))
    finally:
        if previous is None:
            os.environ.pop("AETHERCL_PEER_PATH")
        else:
            os.environ["AETHERCL_PEER_PATH"] = previous
    if token:
        lib.check("aethercl_comm_destroy", token)
    return bool(token)


def require_shared(shared: bool):
    if not shared:
        pytest.skip("the devices do not share an OpenCL context (GPUs get one each; "
                    "AETHERCL_SHARED_CONTEXT=1 runs the device path)")


@pytest.fixture
def comm(lib, devices, monkeypatch, shared_context):
    """comm(ranks, path) -> a communicator over those device indices on path 'device' or
    'host' (AETHERCL_PEER_PATH); destroyed after the test. The device path is skipped where the
    devices do not share a context."""
    made = []

    def make(ranks, path="auto"):
        if path == "device":
            require_shared(shared_context)
        monkeypatch.setenv("AETHERCL_PEER_PATH", path)
        indices = (ctypes.c_int * len(ranks))(*ranks)
        made.append(lib.check_handle("aethercl_comm_create", len(ranks), indices))
        return made[-1]
    yield make
    for token in made:
        lib.check("aethercl_comm_destroy", token)
