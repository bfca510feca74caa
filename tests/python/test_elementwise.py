"""Elementwise family against float64 NumPy: add, mul, mul_backward, gelu, gelu_backward.
Tolerance: add/mul exact in float32 (one rounding); gelu forms 2e-6 relative + 1e-6 absolute
(the absolute part covers the cancellation of Phi(x) and x*phi(x) for negative x, where a few-ulp
difference in a device's erf/exp shows up as a large relative error of a tiny result)."""
import math

import numpy as np
import pytest

SIZES = [1, 2, 7, 255, 256, 257, 1009, 65537, 262144, 1_000_003]
GELU_RTOL, GELU_ATOL = 2e-6, 1e-6

erf = np.vectorize(math.erf)


def gelu_ref(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_grad_ref(x, dy):
    x = x.astype(np.float64)
    cdf = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy.astype(np.float64) * (cdf + x * pdf)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary(lib, device, rng, n, op):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ta, tb, tc = device.upload(a), device.upload(b), device.empty((n,))
    lib.check(f"execute_{op}_on_gpu", device.index, ta.handle, tb.handle, tc.handle, n)
    ref = (a.astype(np.float64) + b) if op == "add" else (a.astype(np.float64) * b)
    np.testing.assert_array_equal(tc.numpy(), ref.astype(np.float32))
    assert tc.guard_intact() and ta.guard_intact() and tb.guard_intact()
    for t in (ta, tb, tc):
        t.free()


@pytest.mark.parametrize("n", [1, 257, 65537])
@pytest.mark.parametrize("outputs", ["both", "da", "db", "none"])
def test_mul_backward(lib, device, rng, n, outputs):
    dc, a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    tdc, ta, tb = device.upload(dc), device.upload(a), device.upload(b)
    tda = device.empty((n,)) if outputs in ("both", "da") else None
    tdb = device.empty((n,)) if outputs in ("both", "db") else None
    lib.check("execute_mul_backward_on_gpu", device.index, tdc.handle, ta.handle, tb.handle,
              tda.handle if tda else None, tdb.handle if tdb else None, n)
    if tda:
        np.testing.assert_array_equal(tda.numpy(), (dc * b).astype(np.float32))
        assert tda.guard_intact()
    if tdb:
        np.testing.assert_array_equal(tdb.numpy(), (dc * a).astype(np.float32))
        assert tdb.guard_intact()
    for t in (tdc, ta, tb, tda, tdb):
        if t:
            t.free()


@pytest.mark.parametrize("n", SIZES)
def test_gelu(lib, device, rng, n):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    tx, ty = device.upload(x), device.empty((n,))
    lib.check("execute_gelu_on_gpu", device.index, tx.handle, ty.handle, n)
    np.testing.assert_allclose(ty.numpy(), gelu_ref(x), rtol=GELU_RTOL, atol=GELU_ATOL)
    assert ty.guard_intact()
    tx.free(), ty.free()


@pytest.mark.parametrize("n", SIZES)
def test_gelu_backward(lib, device, rng, n):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    dy = rng.standard_normal(n).astype(np.float32)
    tx, tdy, tdx = device.upload(x), device.upload(dy), device.empty((n,))
    lib.check("execute_gelu_backward_on_gpu", device.index, tx.handle, tdy.handle, tdx.handle, n)
    np.testing.assert_allclose(tdx.numpy(), gelu_grad_ref(x, dy), rtol=GELU_RTOL, atol=GELU_ATOL)
    assert tdx.guard_intact()
    for t in (tx, tdy, tdx):
        t.free()


def test_gelu_backward_matches_finite_differences_of_gelu(lib, device, rng):
    n = 513
    x = rng.uniform(-4, 4, n)
    h = 1e-2
    tx = device.upload(x.astype(np.float32))
    tplus, tminus = device.upload((x + h).astype(np.float32)), device.upload((x - h).astype(np.float32))
    yp, ym, dx = device.empty((n,)), device.empty((n,)), device.empty((n,))
    ones = device.upload(np.ones(n, np.float32))
    lib.check("execute_gelu_on_gpu", device.index, tplus.handle, yp.handle, n)
    lib.check("execute_gelu_on_gpu", device.index, tminus.handle, ym.handle, n)
    lib.check("execute_gelu_backward_on_gpu", device.index, tx.handle, ones.handle, dx.handle, n)
    numeric = (yp.numpy().astype(np.float64) - ym.numpy()) / (2 * h)
    np.testing.assert_allclose(dx.numpy(), numeric, rtol=2e-3, atol=2e-3)
    for t in (tx, tplus, tminus, yp, ym, dx, ones):
        t.free()


@pytest.mark.parametrize("name,nargs", [("execute_add_on_gpu", 3), ("execute_mul_on_gpu", 3),
                                        ("execute_gelu_on_gpu", 2),
                                        ("execute_gelu_backward_on_gpu", 3)])
def test_validation(lib, device, name, nargs):
    n = 100
    good = [device.empty((n,)) for _ in range(nargs)]
    small = device.empty((n - 1,), guard=0)
    handles = [t.handle for t in good]
    call = getattr(lib, name)
    assert call(device.index, *handles, n) == 1
    assert call(device.index, *handles, 0) == 1          # zero elements: success, no work
    assert call(device.index, *handles, -1) == 0
    assert "negative" in lib.last_error() and name in lib.last_error()
    for position in range(nargs):
        bad = list(handles)
        bad[position] = small.handle
        assert call(device.index, *bad, n) == 0
        assert "396 bytes" in lib.last_error() and "400 bytes" in lib.last_error()
        bad[position] = None
        assert call(device.index, *bad, n) == 0
        assert "NULL" in lib.last_error()
    for t in good + [small]:
        t.free()


def test_mul_backward_validation(lib, device):
    n = 10
    t = [device.empty((n,)) for _ in range(5)]
    h = [x.handle for x in t]
    assert lib.execute_mul_backward_on_gpu(device.index, *h[:3], None, None, n) == 1
    for position in range(3):
        bad = list(h)
        bad[position] = None
        assert lib.execute_mul_backward_on_gpu(device.index, *bad, n) == 0
    small = device.empty((n - 1,), guard=0)
    assert lib.execute_mul_backward_on_gpu(device.index, *h[:3], small.handle, None, n) == 0
    assert "buffer_dA" in lib.last_error()
    for x in t + [small]:
        x.free()
