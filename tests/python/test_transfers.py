"""Pinned host memory and the transfers of ABI version 3 (driver.h, "Host memory and transfers"):
aethercl_host_alloc/free, write_async and read_async with pinned and with ordinary (pageable)
memory, copy within and between buffers, memset, and the Python HostBuffer / Buffer(stream=)
layer. Every check is bit-exact: these calls move bytes; guard bytes around each span must stay
untouched."""
import ctypes

import numpy as np
import pytest

from aethercl import Buffer, Device as ShimDevice, HostBuffer, Stream

SIZES = [1, 3, 64, 4097, 1 << 20, (9 << 20) + 5]  # the last one is beyond the staging ring


def _pattern(rng, nbytes):
    return rng.integers(0, 256, nbytes, dtype=np.uint8)


def _read(lib, device, handle, nbytes, offset=0):
    out = np.empty(nbytes, np.uint8)
    if nbytes:
        lib.check("read_gpu_to_host_blocking", device.index, handle, offset, nbytes,
                  out.ctypes.data)
    return out


@pytest.mark.parametrize("nbytes", SIZES)
def test_pinned_round_trip_on_a_stream(lib, device, rng, nbytes):
    stream = Stream(device)
    host_in, host_out = HostBuffer(device, nbytes), HostBuffer(device, nbytes)
    data = _pattern(rng, nbytes)
    host_in.numpy()[:] = data
    host_out.numpy()[:] = 0xEE
    buffer = device.alloc(nbytes + 64)
    lib.check("aethercl_memset", device.index, buffer, 0, nbytes + 64, 0xA5, stream.handle)
    lib.check("aethercl_write_async", device.index, buffer, 0, nbytes, host_in.address,
              stream.handle)
    lib.check("aethercl_read_async", device.index, buffer, 0, nbytes, host_out.address,
              stream.handle)
    stream.synchronize()
    assert (host_out.numpy() == data).all()
    assert (_read(lib, device, buffer, 64, nbytes) == 0xA5).all()
    host_in.free()
    host_out.free()
    stream.destroy()
    lib.free_gpu_memory(device.index, buffer)


@pytest.mark.parametrize("nbytes", SIZES)
def test_pageable_write_async_copies_the_source_before_returning(lib, device, rng, nbytes):
    data = _pattern(rng, nbytes)
    source = data.copy()
    buffer = device.alloc(nbytes)
    stream = Stream(device)
    lib.check("aethercl_write_async", device.index, buffer, 0, nbytes, source.ctypes.data,
              stream.handle)
    source[:] = 0  # allowed: ordinary memory is copied before the call returns
    out = np.full(nbytes, 0xEE, np.uint8)
    lib.check("aethercl_read_async", device.index, buffer, 0, nbytes, out.ctypes.data,
              stream.handle)
    assert (out == data).all()  # pageable read: the data has arrived when the call returns
    stream.destroy()
    lib.free_gpu_memory(device.index, buffer)


def test_offsets_and_partial_spans(lib, device, rng):
    buffer = device.alloc(1000)
    lib.check("aethercl_memset", device.index, buffer, 0, 1000, 0x11, None)
    piece = _pattern(rng, 300)
    lib.check("aethercl_write_async", device.index, buffer, 123, 300, piece.ctypes.data, None)
    out = np.empty(200, np.uint8)
    lib.check("aethercl_read_async", device.index, buffer, 200, 200, out.ctypes.data, None)
    expect = np.full(1000, 0x11, np.uint8)
    expect[123:423] = piece
    assert (out == expect[200:400]).all()
    assert (_read(lib, device, buffer, 1000) == expect).all()
    lib.free_gpu_memory(device.index, buffer)


def test_copy_between_and_within_buffers(lib, device, rng):
    a, b = device.alloc(4096), device.alloc(4096)
    data = _pattern(rng, 4096)
    lib.check("write_host_to_gpu_blocking", device.index, a, 0, 4096, data.ctypes.data)
    lib.check("aethercl_memset", device.index, b, 0, 4096, 0, None)
    lib.check("aethercl_copy", device.index, b, 1000, a, 17, 2000, None)
    expect = np.zeros(4096, np.uint8)
    expect[1000:3000] = data[17:2017]
    assert (_read(lib, device, b, 4096) == expect).all()
    # Within one buffer: disjoint ranges are fine, overlapping ones are refused.
    lib.check("aethercl_copy", device.index, a, 2048, a, 0, 2048, None)
    expect = data.copy()
    expect[2048:] = data[:2048]
    assert (_read(lib, device, a, 4096) == expect).all()
    assert lib.aethercl_copy(device.index, a, 10, a, 0, 11, None) == 0
    assert "overlap" in lib.last_error()
    assert lib.aethercl_copy(device.index, a, 0, a, 0, 0, None) == 1  # zero bytes: nothing
    lib.free_gpu_memory(device.index, a)
    lib.free_gpu_memory(device.index, b)


def test_memset_values_follow_c(lib, device):
    buffer = device.alloc(64)
    for value, byte in ((0, 0), (255, 255), (256, 0), (-1, 255), (0x1234, 0x34)):
        lib.check("aethercl_memset", device.index, buffer, 3, 50, value, None)
        out = _read(lib, device, buffer, 64)
        assert (out[3:53] == byte).all()
    lib.free_gpu_memory(device.index, buffer)


def test_seed_write_from_pinned_memory_is_still_a_snapshot(lib, device, rng):
    """write_host_to_gpu_blocking keeps its promise with pinned memory too: the bytes are taken
    when the call returns."""
    host = HostBuffer(device, 4096)
    view = host.numpy()
    data = _pattern(rng, 4096)
    view[:] = data
    buffer = device.alloc(4096)
    lib.check("write_host_to_gpu_blocking", device.index, buffer, 0, 4096, host.address)
    view[:] = 0
    assert (_read(lib, device, buffer, 4096) == data).all()
    host.free()
    lib.free_gpu_memory(device.index, buffer)


def test_host_free_waits_for_transfers_and_refuses_other_pointers(lib, device):
    host = HostBuffer(device, 1 << 20)
    buffer = device.alloc(1 << 20)
    stream = Stream(device)
    lib.check("aethercl_read_async", device.index, buffer, 0, 1 << 20, host.address,
              stream.handle)
    address = host.address
    assert lib.aethercl_host_free(address + 8) == 0
    assert lib.last_error_code() == 2 and "host_ptr" in lib.last_error()
    host.free()
    assert lib.aethercl_host_free(address) == 0
    assert "freed" in lib.last_error()
    assert lib.aethercl_host_free(None) == 1
    stream.destroy()
    lib.free_gpu_memory(device.index, buffer)


def test_memory_statistics_show_streams_and_pinned_memory(lib, device):
    import json
    host = HostBuffer(device, 1 << 16)
    stream = Stream(device)
    stats = json.loads(lib.json_call("aethercl_memory_stats", device.index))
    assert stats["pinned_host_bytes"] >= 1 << 16
    assert stats["streams"] >= 1
    assert stats["submission_thread"] in (True, False)
    host.free()
    stream.destroy()


def test_python_buffer_write_and_read_with_a_stream(lib, device, rng):
    shim = ShimDevice(device.index, library=lib, initialize=False)
    array = rng.standard_normal((37, 11)).astype(np.float32)
    with Stream(shim) as stream, HostBuffer(shim, array.nbytes) as pinned:
        staged = pinned.numpy(np.float32, array.shape)
        staged[:] = array
        buffer = Buffer(shim, array.nbytes, shape=array.shape, dtype=np.float32)
        buffer.write(staged, stream=stream)
        back = pinned.numpy(np.float32, array.shape)
        stream.synchronize()
        back[:] = 0
        buffer.read_into(back, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(back, array)
        np.testing.assert_array_equal(buffer.read(stream=stream), array)  # pageable: waits
        np.testing.assert_array_equal(buffer.read(), array)
        buffer.free()
