"""The Python shim: every manifest symbol declared with the manifest's types and wrapped by exactly
one aethercl.ops function of matching arity; Device and Buffer (NumPy in/out, labels, free, context
manager); failures raise AetherCLError carrying the driver's message, and the library keeps
working afterwards."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import aethercl
from aethercl import AetherCLError, Buffer, Device, abi, ops


@pytest.fixture(scope="module")
def dev(lib, gpu_index, device):
    return Device(gpu_index, library=lib)


@pytest.fixture(scope="module")
def manifest(lib):
    return abi.load_manifest(str(lib.path))


def test_every_manifest_symbol_is_declared_with_the_manifest_types(lib, manifest):
    assert len(manifest) >= 38
    for symbol in manifest:
        function = getattr(lib.cdll, symbol.name)
        assert function.restype == symbol.restype, symbol.name
        assert list(function.argtypes) == symbol.argtypes, symbol.name


def test_ops_wraps_every_symbol_exactly_once(manifest):
    names = {s.name for s in manifest}
    wrapped = list(ops.ENTRY_POINTS.values())
    assert len(wrapped) == len(set(wrapped)), "a symbol is wrapped twice"
    assert set(wrapped) == names
    for py_name, c_name in ops.ENTRY_POINTS.items():
        assert getattr(ops, py_name).c_name == c_name


def test_ops_arity_follows_the_c_signature(manifest):
    """Device-taking wrappers have one parameter per C parameter (the device for gpu_index)."""
    by_name = {s.name: s for s in manifest}
    for py_name, c_name in ops.ENTRY_POINTS.items():
        symbol = by_name[c_name]
        params = symbol.parameters
        if symbol.version != "DRIVER_1" or not params or params[0].name != "gpu_index":
            continue
        signature = inspect.signature(getattr(ops, py_name))
        assert len(signature.parameters) == len(params), (py_name, symbol.prototype())
        assert list(signature.parameters)[0] == "dev", py_name


def test_device_info_synchronize_and_memory_stats(dev):
    info = dev.info()
    assert info["index"] == dev.index and info["initialized"] is True
    assert isinstance(info["name"], str) and info["compute_units"] >= 1
    dev.synchronize()
    stats = dev.memory_stats()
    for key in ("live_buffers", "bytes_in_use", "labelled_buffers"):
        assert key in stats
    assert ops.device_count(dev) >= 1
    assert ops.abi_version(dev) >= 2 and ops.version(dev)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.uint8])
def test_buffer_numpy_round_trip(dev, rng, dtype):
    array = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    with Buffer.from_numpy(dev, array) as buffer:
        assert buffer.nbytes == array.nbytes and buffer.shape == (3, 5, 7)
        np.testing.assert_array_equal(buffer.to_numpy(), array)
        np.testing.assert_array_equal(buffer.to_numpy(shape=(105,)), array.reshape(-1))


def test_buffer_partial_reads_and_writes_with_offsets(dev):
    with dev.empty((10,), np.float32) as buffer:
        buffer.write(np.zeros(10, np.float32))
        buffer.write(np.array([7, 8], np.float32), offset=12)
        np.testing.assert_array_equal(buffer.to_numpy(shape=(3,), offset=8), [0, 7, 8])
        np.testing.assert_array_equal(buffer.to_numpy()[:6], [0, 0, 0, 7, 8, 0])


def test_buffer_clone_and_prefix_copy(dev):
    a = dev.from_numpy(np.arange(8, dtype=np.float32))
    b = a.clone()
    np.testing.assert_array_equal(b.to_numpy(), np.arange(8))
    c = dev.zeros((8,))
    a.copy_to(c, nbytes=12)
    np.testing.assert_array_equal(c.to_numpy(), [0, 1, 2, 0, 0, 0, 0, 0])
    for buffer in (a, b, c):
        buffer.free()


def test_labels_free_and_context_manager(dev):
    before = dev.memory_stats()["live_buffers"]
    with dev.alloc(64, label="shim-test-label") as buffer:
        assert buffer.label == "shim-test-label"
        labels = [entry["label"] for entry in dev.memory_stats()["labelled_buffers"]]
        assert "shim-test-label" in labels
        assert dev.memory_stats()["live_buffers"] == before + 1
    assert not buffer.alive
    assert dev.memory_stats()["live_buffers"] == before
    buffer.free()  # idempotent
    with pytest.raises(ValueError):
        buffer.to_numpy()


def test_a_forgotten_buffer_is_freed_when_collected(dev):
    before = dev.memory_stats()["live_buffers"]
    buffer = dev.alloc(128)
    assert dev.memory_stats()["live_buffers"] == before + 1
    del buffer
    assert dev.memory_stats()["live_buffers"] == before


def test_ops_compute_through_buffers_and_raw_handles(dev, rng):
    a = rng.standard_normal(37).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    ta, tb, tc = dev.from_numpy(a), dev.from_numpy(b), dev.empty((37,))
    ops.add(dev, ta, tb.handle, tc, 37)
    np.testing.assert_array_equal(tc.to_numpy(), a + b)
    ops.mul(dev.index, ta, tb, tc, 37)  # an int device uses the default library
    np.testing.assert_array_equal(tc.to_numpy(), a * b)
    for t in (ta, tb, tc):
        t.free()


def test_errors_raise_with_the_driver_message_and_the_library_keeps_working(dev):
    a = dev.from_numpy(np.ones(4, np.float32))
    small = dev.alloc(8)
    with pytest.raises(AetherCLError) as info:
        ops.add(dev, a, a, None, 4)
    assert info.value.function == "execute_add_on_gpu"
    assert "execute_add_on_gpu" in str(info.value) and "buffer_c" in str(info.value)
    assert info.value.code != 0
    with pytest.raises(AetherCLError) as info:
        ops.add(dev, a, a, small, 4)
    assert "16" in str(info.value) and "8" in str(info.value), str(info.value)
    with pytest.raises(AetherCLError):
        ops.read(dev, a, 8, 16, np.empty(4, np.float32))
    freed = a.handle
    a.free()
    with pytest.raises(AetherCLError):
        ops.add(dev, freed, freed, small, 1)
    with pytest.raises(AetherCLError):
        ops.allocate(dev, 0)
    ops.free(dev, freed)  # a stale handle is a no-op, never an error
    ops.free(dev, None)
    ok = dev.from_numpy(np.full(2, 3.0, np.float32))
    ops.add(dev, ok, ok, small, 2)
    np.testing.assert_array_equal(small.to_numpy(shape=(2,), dtype=np.float32), [6, 6])
    assert ops.last_error(dev) == "" and ops.last_error_code(dev) == 0
    ok.free()
    small.free()


def test_status_names(dev):
    assert ops.status_name(dev, 0).startswith("AETHERCL_")
    assert ops.status_name(dev, 12345) == "AETHERCL_UNKNOWN_STATUS"


def test_host_memory_api_round_trip(dev, rng):
    """app.py's sequence through the wrappers: allocate, write, multiply, read, free."""
    a = rng.standard_normal((5, 4))
    b = rng.standard_normal((4, 6))
    addr_a, addr_b = ops.sim_allocate(dev, a.nbytes), ops.sim_allocate(dev, b.nbytes)
    ops.sim_write(dev, addr_a, a.nbytes, a)
    ops.sim_write(dev, addr_b, b.nbytes, b)
    addr_c = ops.sim_matrix_multiply(dev, addr_a, addr_b, a.nbytes, b.nbytes, a.shape, b.shape)
    c = np.empty((5, 6))
    ops.sim_read(dev, addr_c, c.nbytes, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    with pytest.raises(AetherCLError):
        ops.sim_matrix_multiply(dev, addr_a, addr_b, a.nbytes, b.nbytes, (5, 4), (5, 6))
    with pytest.raises(AetherCLError, match="simulated_kernel_read"):  # a void entry point
        ops.sim_read(dev, addr_a, a.nbytes * 2, np.empty(40))
    for address, size in ((addr_c, c.nbytes), (addr_b, b.nbytes), (addr_a, a.nbytes)):
        ops.sim_free(dev, address, size)
    with pytest.raises(AetherCLError, match="simulated_kernel_write"):
        ops.sim_write(dev, addr_a, a.nbytes, a)            # freed block
    ops.sim_free(dev, addr_a, a.nbytes)                     # a second free is a no-op
    assert ops.sim_compute_unit_count(dev) >= 1


def test_package_exports():
    for name in ("AetherCLError", "Buffer", "Device", "Library", "ops", "default_library"):
        assert hasattr(aethercl, name)


def test_a_function_missing_from_the_manifest_is_refused_not_called(lib):
    """With a driver.abi older than the library, ctypes would pass a newer function's pointers as
    32-bit ints (a segmentation fault on the GPU machine): the shim refuses to call it instead."""
    from aethercl.library import Library
    partial = Library.__new__(Library)
    partial.path, partial.cdll = lib.path, lib.cdll
    partial.symbols = [s for s in lib.symbols if s.name != "aethercl_gather"]
    partial._declared = {s.name for s in partial.symbols}
    with pytest.raises(AttributeError, match="not in the ABI manifest"):
        partial.check("aethercl_gather", 0, None, None)
    with pytest.raises(AttributeError, match="not in the ABI manifest"):
        partial.aethercl_gather
    assert partial.check("aethercl_synchronize", 0) == 1
