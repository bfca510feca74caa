"""Host-memory ("simulated") API (docs/ABI.md §4.10, §8): host blocks, the float64 matrix product,
app.py.

Tolerances: transfers are byte-exact. The product sums every element with k ascending and without
fused multiply-adds on the device and in the host fallback, so it must equal a k-ascending float64
NumPy reference bit for bit; against NumPy's own A @ B (BLAS order) it must agree within
1e-12 * (|A| @ |B|), i.e. 1e-12 relative to the magnitude of the terms.
"""
import ctypes
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from support.helpers import run_child

SIZE_MAX = 2**64 - 1
APP = Path(__file__).resolve().parents[2] / "python_harness" / "app.py"
MATMUL_RTOL = 1e-12


def shape(rows, cols):
    return (ctypes.c_int * 2)(rows, cols)


def allocate(lib, nbytes, gpu=0):
    address = lib.simulated_kernel_allocate(gpu, nbytes)
    assert address, lib.last_error()
    return address


def upload(lib, array, gpu=0):
    array = np.ascontiguousarray(array)
    address = allocate(lib, array.nbytes, gpu)
    lib.simulated_kernel_write(gpu, address, array.nbytes, array.ctypes.data)
    assert lib.last_error() == ""
    return address


def download(lib, address, shape_, dtype=np.float64, gpu=0):
    out = np.full(shape_, np.nan if np.dtype(dtype).kind == "f" else 0x5A, dtype)
    lib.simulated_kernel_read(gpu, address, out.nbytes, out.ctypes.data)
    assert lib.last_error() == ""
    return out


def k_ascending(a, b):
    """C = A @ B in float64, each element summed with k ascending, one rounding per step."""
    c = np.zeros((a.shape[0], b.shape[1]))
    for p in range(a.shape[1]):
        c = c + np.outer(a[:, p], b[p, :])
    return c


def multiply(lib, address_a, address_b, a_shape, b_shape, gpu=0):
    size_a = a_shape[0] * a_shape[1] * 8
    size_b = b_shape[0] * b_shape[1] * 8
    return lib.simulated_matrix_multiply(gpu, address_a, address_b, size_a, size_b,
                                         shape(*a_shape), shape(*b_shape))


def assert_still_works(lib):
    data = np.arange(33, dtype=np.uint8)
    address = upload(lib, data)
    np.testing.assert_array_equal(download(lib, address, 33, np.uint8), data)
    lib.simulated_kernel_free(0, address, 33)
    assert lib.last_error() == ""


# ---- host blocks -------------------------------------------------------------------------------

@pytest.mark.parametrize("nbytes", [1, 7, 64, 160, 4097, 1 << 20])
def test_roundtrip_and_repeated_reads(lib, nbytes, rng):
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    address = upload(lib, data)
    for _ in range(3):  # the original freed the block on the first read
        np.testing.assert_array_equal(download(lib, address, nbytes, np.uint8), data)
    lib.simulated_kernel_free(0, address, nbytes)
    assert lib.last_error() == ""


def test_addresses_are_aligned_real_host_pointers(lib, rng):
    data = rng.integers(0, 256, 300, dtype=np.uint8)
    address = allocate(lib, 300)
    assert address % 64 == 0
    ctypes.memmove(address, data.ctypes.data, 300)      # the client writes through the pointer
    np.testing.assert_array_equal(download(lib, address, 300, np.uint8), data)
    lib.simulated_kernel_write(0, address, 300, data[::-1].copy().ctypes.data)
    assert ctypes.string_at(address, 300) == data[::-1].tobytes()
    others = [allocate(lib, 1) for _ in range(8)]
    assert len(set(others + [address])) == 9 and all(a % 64 == 0 for a in others)
    for a in others + [address]:
        lib.simulated_kernel_free(0, a, 0)


def test_prefix_writes_and_reads(lib, rng):
    block = rng.integers(0, 256, 100, dtype=np.uint8)
    address = upload(lib, block)
    head = rng.integers(0, 256, 10, dtype=np.uint8)
    lib.simulated_kernel_write(0, address, 10, head.ctypes.data)
    expected = np.concatenate([head, block[10:]])
    np.testing.assert_array_equal(download(lib, address, 50, np.uint8), expected[:50])
    np.testing.assert_array_equal(download(lib, address, 100, np.uint8), expected)
    lib.simulated_kernel_free(0, address, 100)


def test_gpu_index_is_ignored_by_host_block_functions(lib):
    data = np.arange(16, dtype=np.float64)
    address = upload(lib, data, gpu=-3)
    np.testing.assert_array_equal(download(lib, address, 16, gpu=12345), data)
    lib.simulated_kernel_free(2**31 - 1, address, 999)
    assert lib.last_error() == ""


def test_size_zero_transfers_copy_nothing(lib):
    address = upload(lib, np.arange(8, dtype=np.uint8))
    lib.simulated_kernel_write(0, address, 0, None)
    lib.simulated_kernel_read(0, address, 0, None)
    assert lib.last_error() == ""
    np.testing.assert_array_equal(download(lib, address, 8, np.uint8), np.arange(8))
    lib.simulated_kernel_free(0, address, 8)


@pytest.mark.parametrize("nbytes,why", [(0, "size is 0"), (SIZE_MAX, "bytes"),
                                        (2**63, "bytes")])
def test_allocate_refusals(lib, nbytes, why):
    assert lib.simulated_kernel_allocate(0, nbytes) == 0
    assert lib.last_error().startswith("simulated_kernel_allocate: ")
    assert why in lib.last_error()
    assert_still_works(lib)


def _names(message, why):
    return any(w in message for w in ((why,) if isinstance(why, str) else why))


def _bad_addresses(lib):
    """(address, expected message part) for every kind of address that is not a live block."""
    live = allocate(lib, 64)
    freed = allocate(lib, 64)
    lib.simulated_kernel_free(0, freed, 64)
    scratch = ctypes.create_string_buffer(64)
    return live, [(0, "is 0"), (freed, "already freed"), (live + 8, "start address"),
                  # Python's own memory may reuse a freed block's address, hence two answers
                  (ctypes.addressof(scratch), ("never returned", "already freed")),
                  (0x1000, "never returned"),
                  (SIZE_MAX, "never returned")], scratch


@pytest.mark.parametrize("function", ["simulated_kernel_write", "simulated_kernel_read"])
def test_transfer_refusals_leave_both_sides_untouched(lib, function):
    live, bad, _keep = _bad_addresses(lib)
    original = np.arange(64, dtype=np.uint8)
    lib.simulated_kernel_write(0, live, 64, original.ctypes.data)
    host = np.full(200, 0xEE, np.uint8)
    cases = [(address, 16, host.ctypes.data, why) for address, why in bad]
    cases += [(live, 65, host.ctypes.data, "exceeds"),
              (live, SIZE_MAX, host.ctypes.data, "exceeds"), (live, 16, None, "NULL")]
    for address, size, pointer, why in cases:
        getattr(lib, function)(0, address, size, pointer)
        message = lib.last_error()
        assert message.startswith(f"{function}: ") and _names(message, why), (address, message)
        assert (host == 0xEE).all()
        np.testing.assert_array_equal(download(lib, live, 64, np.uint8), original)
    lib.simulated_kernel_free(0, live, 64)
    assert_still_works(lib)


def test_free_refusals_and_double_free(lib):
    live, bad, _keep = _bad_addresses(lib)
    for address, why in bad:
        lib.simulated_kernel_free(0, address, 64)
        message = lib.last_error()
        assert message.startswith("simulated_kernel_free: ") and _names(message, why), message
    lib.simulated_kernel_read(0, live, 64, ctypes.create_string_buffer(64))  # survived the above
    assert lib.last_error() == ""
    lib.simulated_kernel_free(0, live, 64)
    assert lib.last_error() == ""
    lib.simulated_kernel_free(0, live, 64)
    assert "already freed" in lib.last_error()
    assert_still_works(lib)


# ---- matrix product ----------------------------------------------------------------------------

MATMUL_SHAPES = [(1, 1, 1), (1, 7, 1), (5, 4, 6), (17, 1, 13), (2, 300, 3), (31, 33, 29),
                 (64, 64, 64), (97, 101, 89), (1, 200, 257), (300, 200, 257)]


@pytest.mark.parametrize("m,k,n", MATMUL_SHAPES)
def test_matrix_multiply_against_numpy(lib, device, rng, m, k, n):
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    address_a, address_b = upload(lib, a), upload(lib, b)
    address_c = multiply(lib, address_a, address_b, (m, k), (k, n), device.index)
    assert address_c, lib.last_error()
    assert lib.last_error() == ""
    assert address_c % 64 == 0 and address_c not in (address_a, address_b)
    c = download(lib, address_c, (m, n))
    np.testing.assert_array_equal(c, k_ascending(a, b))
    bound = MATMUL_RTOL * (np.abs(a) @ np.abs(b))
    assert (np.abs(c - a @ b) <= bound).all()
    # the result block holds exactly m*n*8 bytes and is a real pointer
    assert ctypes.string_at(address_c, c.nbytes) == c.tobytes()
    lib.simulated_kernel_read(0, address_c, c.nbytes + 1, ctypes.create_string_buffer(c.nbytes + 1))
    assert f"({c.nbytes} bytes)" in lib.last_error()
    # inputs are neither modified nor freed
    np.testing.assert_array_equal(download(lib, address_a, (m, k)), a)
    np.testing.assert_array_equal(download(lib, address_b, (k, n)), b)
    for address in (address_c, address_b, address_a):
        lib.simulated_kernel_free(0, address, 0)
        assert lib.last_error() == ""


def test_matrix_multiply_accepts_larger_operand_blocks_and_any_gpu_index(lib, device, rng):
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    address_a = allocate(lib, a.nbytes + 64)
    lib.simulated_kernel_write(0, address_a, a.nbytes, a.ctypes.data)
    address_b = upload(lib, b)
    address_c = multiply(lib, address_a, address_b, a.shape, b.shape, gpu=device.index + 7)
    assert address_c, lib.last_error()
    np.testing.assert_array_equal(download(lib, address_c, (3, 2)), k_ascending(a, b))
    for address in (address_c, address_b, address_a):
        lib.simulated_kernel_free(0, address, 0)


def test_matrix_multiply_refusals(lib, device, rng):
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 6))
    address_a, address_b = upload(lib, a), upload(lib, b)
    small = allocate(lib, 8)
    freed = allocate(lib, 192)
    lib.simulated_kernel_free(0, freed, 192)
    A, B = shape(5, 4), shape(4, 6)
    cases = [
        ((address_a, address_b, 160, 192, None, B), "shape_a is NULL"),
        ((address_a, address_b, 160, 192, A, None), "shape_b is NULL"),
        ((address_a, address_b, 160, 192, shape(0, 4), B), "non-positive"),
        ((address_a, address_b, 160, 192, A, shape(4, 0)), "non-positive"),
        ((address_a, address_b, 8, 8, shape(-1, -1), shape(-1, -1)), "non-positive"),
        ((address_a, address_b, 160, 192, A, shape(5, 6)), "cols_a = 4 differs from rows_b = 5"),
        ((address_a, address_b, 168, 192, A, B), "size_a = 168"),
        ((address_a, address_b, 160, 184, A, B), "size_b = 184"),
        ((0, address_b, 160, 192, A, B), "address_a is 0"),
        ((address_a, 0x1000, 160, 192, A, B), "address_b 0x1000 was never returned"),
        ((address_a, freed, 160, 192, A, B), "already freed"),
        ((address_a + 64, address_b, 160, 192, A, B), "start address"),
        ((small, address_b, 160, 192, A, B), "holds 8 bytes"),
        ((address_a, address_b, 160, 192, shape(2**31 - 1, 4), B), "size_a"),
        ((address_a, address_b, 2**63, 192, shape(2**31 - 1, 2**31 - 1),
          shape(2**31 - 1, 2**31 - 1)), "overflow"),
    ]
    for args, why in cases:
        assert lib.simulated_matrix_multiply(device.index, *args) == 0
        message = lib.last_error()
        assert message.startswith("simulated_matrix_multiply: ") and why in message, (why, message)
    # the operands are untouched and the library keeps working
    np.testing.assert_array_equal(download(lib, address_a, (5, 4)), a)
    address_c = multiply(lib, address_a, address_b, (5, 4), (4, 6), device.index)
    assert address_c, lib.last_error()
    np.testing.assert_array_equal(download(lib, address_c, (5, 6)), k_ascending(a, b))
    for address in (address_c, address_b, address_a, small):
        lib.simulated_kernel_free(0, address, 0)
    assert_still_works(lib)


def test_concurrent_multiplies_from_several_threads(lib, device):
    """ctypes releases the GIL: the registry and the callback read-back must hold up."""
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(4):
                a, b = rng.standard_normal((23, 19)), rng.standard_normal((19, 11))
                address_a, address_b = upload(lib, a), upload(lib, b)
                address_c = multiply(lib, address_a, address_b, a.shape, b.shape, device.index)
                assert address_c
                out = np.empty((23, 11))
                lib.simulated_kernel_read(0, address_c, out.nbytes, out.ctypes.data)
                np.testing.assert_array_equal(out, k_ascending(a, b))
                for address in (address_c, address_b, address_a):
                    lib.simulated_kernel_free(0, address, 0)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_blocks_survive_shutdown_and_multiply_needs_a_device():
    result = run_child("""
        def shape(r, c):
            return (ctypes.c_int * 2)(r, c)
        a = np.arange(6, dtype=np.float64).reshape(2, 3)
        b = np.arange(12, dtype=np.float64).reshape(3, 4)
        addr_a = lib.simulated_kernel_allocate(0, 48)   # before initialize_gpu: host memory
        addr_b = lib.simulated_kernel_allocate(0, 96)
        assert addr_a and addr_b
        lib.simulated_kernel_write(0, addr_a, 48, a.ctypes.data)
        lib.simulated_kernel_write(0, addr_b, 96, b.ctypes.data)
        assert lib.simulated_matrix_multiply(0, addr_a, addr_b, 48, 96, shape(2, 3),
                                             shape(3, 4)) == 0
        assert "simulated_matrix_multiply" in lib.last_error()
        assert "initialize_gpu" in lib.last_error()
        assert lib.initialize_gpu(0) == 1
        addr_c = lib.simulated_matrix_multiply(0, addr_a, addr_b, 48, 96, shape(2, 3), shape(3, 4))
        assert addr_c, lib.last_error()
        lib.shutdown_driver()
        out = np.empty((2, 4))
        lib.simulated_kernel_read(0, addr_c, 64, out.ctypes.data)
        assert lib.last_error() == "", lib.last_error()
        assert (out == a @ b).all()
        assert lib.simulated_matrix_multiply(0, addr_a, addr_b, 48, 96, shape(2, 3),
                                             shape(3, 4)) == 0
        assert "initialize_gpu" in lib.last_error()
        assert lib.initialize_gpu(0) == 1             # blocks from before still multiply
        addr_d = lib.simulated_matrix_multiply(0, addr_a, addr_b, 48, 96, shape(2, 3), shape(3, 4))
        assert addr_d and addr_d != addr_c
        lib.shutdown_driver()
        for addr in (addr_d, addr_c, addr_b, addr_a):
            lib.simulated_kernel_free(0, addr, 0)
            assert lib.last_error() == ""
        lib.simulated_kernel_free(0, addr_a, 0)
        assert "already freed" in lib.last_error()
        print("OK")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"


def test_host_fallback_is_reported_and_exact(monkeypatch):
    monkeypatch.setenv("AETHERCL_SIM_HOST_MATMUL", "1")
    monkeypatch.setenv("AETHERCL_LOG_LEVEL", "warn")
    result = run_child("""
        rng = np.random.default_rng(7)
        assert lib.initialize_gpu(0) == 1
        for m, k, n in ((5, 4, 6), (37, 41, 3)):
            a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            addr_a = lib.simulated_kernel_allocate(0, a.nbytes)
            addr_b = lib.simulated_kernel_allocate(0, b.nbytes)
            lib.simulated_kernel_write(0, addr_a, a.nbytes, a.ctypes.data)
            lib.simulated_kernel_write(0, addr_b, b.nbytes, b.ctypes.data)
            addr_c = lib.simulated_matrix_multiply(0, addr_a, addr_b, a.nbytes, b.nbytes,
                                                   (ctypes.c_int * 2)(m, k),
                                                   (ctypes.c_int * 2)(k, n))
            assert addr_c, lib.last_error()
            out = np.empty((m, n))
            lib.simulated_kernel_read(0, addr_c, out.nbytes, out.ctypes.data)
            ref = np.zeros((m, n))
            for p in range(k):
                ref = ref + np.outer(a[:, p], b[p, :])
            assert (out == ref).all()
            for addr in (addr_c, addr_b, addr_a):
                lib.simulated_kernel_free(0, addr, 0)
        lib.shutdown_driver()
        print("OK")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK"
    assert result.stderr.count("simulated_matrix_multiply computes on the host") == 1


# ---- app.py --------------------------------------------------------------------------------------

def _run_app(cwd):
    env = dict(os.environ, MALLOC_CHECK_="3", MALLOC_PERTURB_="165")
    return subprocess.run([sys.executable, str(APP)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_app_runs_cleanly_against_simulated_driver_so(lib, tmp_path):
    shutil.copy(os.path.realpath(lib.path), tmp_path / "simulated_driver.so")
    result = _run_app(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified" in result.stdout
    assert "(5, 4)" in result.stdout and "(4, 6)" in result.stdout and "(5, 6)" in result.stdout
    for bad in ("double free", "corrupted", "invalid pointer", "Traceback"):
        assert bad not in result.stderr


def test_app_reports_a_missing_driver(tmp_path):
    result = _run_app(tmp_path)
    assert result.returncode == 1
    assert "cannot load" in result.stdout and "simulated_driver" in result.stdout
