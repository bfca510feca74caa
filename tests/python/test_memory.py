"""Device memory: allocation, transfers, clone, handle validation, lifecycle, introspection."""
import ctypes
import json

import numpy as np
import pytest

from support.helpers import run_child

SIZE_MAX = 2**64 - 1


def _roundtrip(lib, device, nbytes, offset, rng):
    handle = device.alloc(offset + nbytes)
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    lib.check("write_host_to_gpu_blocking", device.index, handle, offset, nbytes, data.ctypes.data)
    out = np.zeros(nbytes, np.uint8)
    lib.check("read_gpu_to_host_blocking", device.index, handle, offset, nbytes, out.ctypes.data)
    lib.free_gpu_memory(device.index, handle)
    np.testing.assert_array_equal(out, data)


ROUNDTRIP_CASES = [(n, off) for n in (1, 3, 255, 4096, 65537, 1 << 20)
                   for off in (0, 1, 13, 4096)] + [(64 << 20, 0), (64 << 20, 13)]


@pytest.mark.parametrize("nbytes,offset", ROUNDTRIP_CASES)
def test_roundtrip(lib, device, nbytes, offset, rng):
    _roundtrip(lib, device, nbytes, offset, rng)


def test_write_returns_before_the_source_is_reused(lib, device):
    """The host buffer may be overwritten (or freed) right after the write returns."""
    handle = device.alloc(4096)
    source = np.arange(1024, dtype=np.float32)
    lib.check("write_host_to_gpu_blocking", device.index, handle, 0, 4096, source.ctypes.data)
    source[:] = -1.0
    out = np.empty(1024, np.float32)
    lib.check("read_gpu_to_host_blocking", device.index, handle, 0, 4096, out.ctypes.data)
    np.testing.assert_array_equal(out, np.arange(1024, dtype=np.float32))
    lib.free_gpu_memory(device.index, handle)


def test_many_writes_then_one_read_keep_stream_order(lib, device):
    handle = device.alloc(400)
    for value in range(200):
        chunk = np.full(100, value, np.float32)
        lib.check("write_host_to_gpu_blocking", device.index, handle, 0, 400, chunk.ctypes.data)
    out = np.empty(100, np.float32)
    lib.check("read_gpu_to_host_blocking", device.index, handle, 0, 400, out.ctypes.data)
    assert (out == 199).all()
    lib.free_gpu_memory(device.index, handle)


def test_clone_full_and_prefix(lib, device, rng):
    data = rng.standard_normal(1000).astype(np.float32)
    src = device.upload(data)
    dst = device.empty((1000,))
    lib.check("execute_clone_on_gpu", device.index, src.handle, dst.handle, 4000)
    np.testing.assert_array_equal(dst.numpy(), data)
    prefix = device.empty((10,))
    lib.check("execute_clone_on_gpu", device.index, src.handle, prefix.handle, 40)
    np.testing.assert_array_equal(prefix.numpy(), data[:10])
    assert prefix.guard_intact()
    exact = device.empty((10,), guard=0)
    assert lib.execute_clone_on_gpu(device.index, src.handle, exact.handle, 44) == 0
    assert "dst_buffer" in lib.last_error() and "40 bytes" in lib.last_error()
    exact.free()
    assert lib.execute_clone_on_gpu(device.index, src.handle, dst.handle, 0) == 1
    assert lib.execute_clone_on_gpu(device.index, src.handle, src.handle, 4000) == 1
    for t in (src, dst, prefix):
        t.free()


def test_size_zero_transfers_succeed_without_a_pointer(lib, device):
    handle = device.alloc(16)
    assert lib.write_host_to_gpu_blocking(device.index, handle, 0, 0, None) == 1
    assert lib.read_gpu_to_host_blocking(device.index, handle, 16, 0, None) == 1
    assert lib.write_host_to_gpu_blocking(device.index, handle, 0, 4, None) == 0
    assert "NULL" in lib.last_error()
    lib.free_gpu_memory(device.index, handle)


@pytest.mark.parametrize("offset,size", [(0, 17), (16, 1), (17, 0), (1, SIZE_MAX),
                                         (SIZE_MAX, 2), (2**63, 2**63)])
def test_offset_plus_size_beyond_the_buffer_is_refused(lib, device, offset, size):
    handle = device.alloc(16)
    scratch = ctypes.create_string_buffer(32)
    assert lib.write_host_to_gpu_blocking(device.index, handle, offset, size, scratch) == 0
    assert lib.last_error_code() == 3  # AETHERCL_OUT_OF_RANGE
    assert lib.read_gpu_to_host_blocking(device.index, handle, offset, size, scratch) == 0
    assert "write_host_to_gpu_blocking" not in lib.last_error()
    assert "read_gpu_to_host_blocking" in lib.last_error()
    lib.free_gpu_memory(device.index, handle)
    _roundtrip(lib, device, 64, 0, np.random.default_rng(0))


def test_allocation_of_zero_bytes_is_null(lib, device):
    assert lib.allocate_gpu_memory(device.index, 0) is None
    assert "size is 0" in lib.last_error()


def test_allocation_beyond_the_device_is_null_and_the_driver_stays_usable(lib, device):
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    for size in (info["max_alloc_bytes"] + 1, info["global_mem_bytes"] * 4, SIZE_MAX):
        assert lib.allocate_gpu_memory(device.index, size) is None
        assert lib.last_error_code() == 4  # AETHERCL_OUT_OF_MEMORY
        assert "allocate_gpu_memory" in lib.last_error()
    _roundtrip(lib, device, 1 << 16, 5, np.random.default_rng(1))


def test_double_free_and_free_of_null_are_harmless(lib, device):
    handle = device.alloc(64)
    lib.free_gpu_memory(device.index, handle)
    lib.free_gpu_memory(device.index, handle)
    assert "already freed" in lib.last_error()
    lib.free_gpu_memory(device.index, None)
    assert lib.last_error() == ""
    _roundtrip(lib, device, 64, 0, np.random.default_rng(2))


def test_unknown_and_freed_tokens_are_refused_everywhere(lib, device):
    handle = device.alloc(64)
    lib.free_gpu_memory(device.index, handle)
    scratch = ctypes.create_string_buffer(64)
    live = device.alloc(64)
    for bad, why in ((handle, "already freed"), (0x12345678, "not a buffer handle"),
                     (0xDEAD00AE, "never issued"), (id(scratch), "not a buffer handle")):
        assert lib.write_host_to_gpu_blocking(device.index, bad, 0, 4, scratch) == 0
        assert why in lib.last_error()
        assert lib.last_error_code() == 2  # AETHERCL_INVALID_HANDLE
        assert lib.read_gpu_to_host_blocking(device.index, bad, 0, 4, scratch) == 0
        assert lib.execute_clone_on_gpu(device.index, bad, live, 4) == 0
        assert lib.execute_clone_on_gpu(device.index, live, bad, 4) == 0
        assert lib.execute_add_on_gpu(device.index, bad, live, live, 1) == 0
        lib.free_gpu_memory(device.index, bad)  # harmless
    for null_case in ((None, live), (live, None)):
        assert lib.execute_clone_on_gpu(device.index, *null_case, 4) == 0
        assert "NULL" in lib.last_error()
    lib.free_gpu_memory(device.index, live)


def test_handles_are_not_reused(lib, device):
    seen = set()
    for _ in range(50):
        handle = device.alloc(128)
        assert handle not in seen
        seen.add(handle)
        lib.free_gpu_memory(device.index, handle)


def test_pool_reuses_freed_memory(lib, device):
    def stats():
        return json.loads(lib.json_call("aethercl_memory_stats", device.index))
    before = stats()
    for _ in range(20):
        lib.free_gpu_memory(device.index, device.alloc(12345))
    after = stats()
    assert after["pool_hits"] - before["pool_hits"] >= 19
    assert after["device_allocations"] - before["device_allocations"] <= 1
    assert after["live_buffers"] == before["live_buffers"]


def test_initialize_twice_is_idempotent(lib, device):
    handle = device.alloc(16)
    assert lib.initialize_gpu(device.index) == 1
    assert lib.read_gpu_to_host_blocking(device.index, handle, 0, 16,
                                         ctypes.create_string_buffer(16)) == 1
    lib.free_gpu_memory(device.index, handle)


def test_out_of_range_gpu_index_is_refused_with_the_device_list(lib, device):
    count = lib.aethercl_device_count()
    assert count >= 1
    for index in (count, count + 7, -1, 2**31 - 1):
        assert lib.initialize_gpu(index) == 0
        message = lib.last_error()
        assert f"gpu_index {index} is out of range" in message and "0: " in message
        assert lib.last_error_code() == 6  # AETHERCL_NO_DEVICE


def test_calls_with_an_uninitialised_index_use_the_only_device(lib, device):
    """docs/ABI.md §3.2: clients pass their fixed index everywhere; it must not make calls fail."""
    handle = lib.allocate_gpu_memory(device.index + 5, 64)
    assert handle
    lib.free_gpu_memory(device.index + 5, handle)


def test_last_error_is_cleared_by_the_next_successful_call(lib, device):
    assert lib.allocate_gpu_memory(device.index, 0) is None
    assert lib.last_error() != ""
    handle = device.alloc(8)
    assert lib.last_error() == "" and lib.last_error_code() == 0
    lib.free_gpu_memory(device.index, handle)


def test_device_info_json(lib, device):
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    for key in ("name", "vendor", "platform", "type", "compute_units", "global_mem_bytes",
                "local_mem_bytes", "max_work_group_size", "fp64", "fp16", "subgroups",
                "int32_global_atomics"):
        assert key in info
    assert info["initialized"] is True
    assert lib.simulated_get_compute_unit_count(device.index) == info["compute_units"]
    small = ctypes.create_string_buffer(8)
    full = lib.aethercl_device_info(device.index, small, 8)
    assert full > 8 and len(small.value) == 7
    assert lib.aethercl_device_info(lib.aethercl_device_count(), None, 0) == 0


def test_labels_appear_in_memory_statistics(lib, device):
    handle = device.alloc(100)
    assert lib.aethercl_set_buffer_label(device.index, handle, b"attention.scores") == 1
    stats = json.loads(lib.json_call("aethercl_memory_stats", device.index))
    assert any(b["label"] == "attention.scores" and b["bytes"] == 100
               for b in stats["labelled_buffers"])
    assert lib.aethercl_synchronize(device.index) == 1
    small = device.alloc(4)
    assert lib.aethercl_set_buffer_label(device.index, small, b"tiny") == 1
    assert lib.execute_clone_on_gpu(device.index, handle, small, 8) == 0
    assert "'tiny'" in lib.last_error()
    lib.free_gpu_memory(device.index, handle)
    lib.free_gpu_memory(device.index, small)
    assert lib.aethercl_set_buffer_label(device.index, handle, b"x") == 0


def test_no_entry_point_is_a_stub(lib, device):
    """Every execute_* entry point is implemented: called with NULL buffers it refuses with a
    message about the arguments, never with 'not implemented' and never with a fake success."""
    for symbol in lib.symbols:
        if not symbol.name.startswith("execute_"):
            continue
        defaults = {ctypes.c_void_p: None, ctypes.c_int: 1, ctypes.c_float: 1.0,
                    ctypes.c_size_t: 4}
        args = [device.index] + [defaults[t] for t in symbol.argtypes[1:]]
        assert getattr(lib.cdll, symbol.name)(*args) == 0, symbol.name
        assert "not implemented" not in lib.last_error(), symbol.name
        assert lib.last_error_code() == 1 and "NULL" in lib.last_error(), lib.last_error()


SHUTDOWN_SCRIPT = """
    import json
    assert lib.initialize_gpu(0) == 1
    h = lib.allocate_gpu_memory(0, 1024)
    data = np.arange(256, dtype=np.float32)
    assert lib.write_host_to_gpu_blocking(0, h, 0, 1024, data.ctypes.data) == 1
    lib.shutdown_driver()
    lib.shutdown_driver()                      # twice: harmless
    # after shutdown: documented failure values, handles dead, frees harmless
    assert lib.allocate_gpu_memory(0, 16) is None
    assert "initialize_gpu" in lib.last_error()
    assert lib.last_error_code() == 5
    out = np.zeros(256, np.float32)
    assert lib.read_gpu_to_host_blocking(0, h, 0, 1024, out.ctypes.data) == 0
    assert lib.execute_add_on_gpu(0, h, h, h, 1) == 0
    lib.free_gpu_memory(0, h)
    assert lib.aethercl_memory_stats(0, None, 0) == 0
    assert lib.simulated_get_compute_unit_count(0) == 16
    # re-initialisation works; the old handle stays invalid forever
    assert lib.initialize_gpu(0) == 1
    assert lib.read_gpu_to_host_blocking(0, h, 0, 1024, out.ctypes.data) == 0
    assert "freed" in lib.last_error()
    h2 = lib.allocate_gpu_memory(0, 1024)
    assert h2 and h2 != h
    assert lib.write_host_to_gpu_blocking(0, h2, 0, 1024, data.ctypes.data) == 1
    assert lib.read_gpu_to_host_blocking(0, h2, 0, 1024, out.ctypes.data) == 1
    assert (out == data).all()
    stats = json.loads(lib.json_call("aethercl_memory_stats", 0))
    assert stats["live_buffers"] == 1
    lib.shutdown_driver()
    print("OK")
"""


def test_shutdown_twice_and_calls_after_shutdown():
    result = run_child(SHUTDOWN_SCRIPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


def test_calls_before_initialisation_fail_cleanly():
    result = run_child("""
        assert lib.allocate_gpu_memory(0, 16) is None
        assert lib.last_error_code() == 5
        assert lib.execute_add_on_gpu(0, None, None, None, 0) == 0
        lib.free_gpu_memory(0, 0xAE)
        lib.shutdown_driver()
        assert lib.simulated_get_compute_unit_count(0) == 16
        assert lib.aethercl_device_count() >= 1
        print("OK")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"
