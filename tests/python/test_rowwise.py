"""Row-wise family against float64 NumPy: softmax, softmax_backward, layernorm, layernorm_backward.

Tolerances (float32 storage; the references are float64 on the same float32 inputs):
  softmax            rtol 1e-5, atol 1e-9 (float32 sums; exp of a rounded x - max)
  softmax, |x| ~ 80  rtol 3e-5, atol 1e-12 (x - max spans ~160, so its rounding is ~1e-5)
  softmax_backward   |err| <= 1e-5 * (max |ref| + 1e-6) elementwise (dot product in acc_t)
  layernorm          rtol 1e-5, atol 2e-6
  layernorm_backward |err| <= 1e-5 * max(max |ref|, max inv * |dy|) (inv = 1/sqrt(var + eps);
                     the second term is the size of the summands, which matters where they
                     cancel: with C = 2 the exact gradient is ~0)
  finite differences (central, float64 differences of float32 device outputs, h = 1e-2):
                     |err| <= 2e-3 * max |analytic| + 1e-4
Determinism is checked bit for bit (two runs on the same inputs).
"""
import ctypes

import numpy as np
import pytest

from support.helpers import POISON_F32


# Every case runs with the device's own row group size and with groups of up to 64 items.
pytestmark = pytest.mark.usefixtures("row_group")

ROW_SIZES = [1, 2, 3, 16, 53, 64, 127, 257, 1000, 4099]
SOFTMAX_RTOL, SOFTMAX_ATOL = 1e-5, 1e-9
BIG_RTOL, BIG_ATOL = 3e-5, 1e-12
LN_RTOL, LN_ATOL = 1e-5, 2e-6
GRAD_REL = 1e-5
FD_H, FD_REL, FD_ABS = 1e-2, 2e-3, 1e-4
LN_EPS = 1e-5


# ---- float64 references ----------------------------------------------------------------------

def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / (e.sum(axis=-1, keepdims=True) + 1e-9)


def softmax_backward_ref(dy, y):
    dy, y = dy.astype(np.float64), y.astype(np.float64)
    return (dy - (dy * y).sum(axis=-1, keepdims=True)) * y


def layernorm_ref(x, eps):
    x = x.astype(np.float64)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def layernorm_backward_ref(dy, x, eps):
    dy, x = dy.astype(np.float64), x.astype(np.float64)
    c = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * inv
    return (inv / c) * (c * dy - dy.sum(axis=-1, keepdims=True)
                        - xhat * (dy * xhat).sum(axis=-1, keepdims=True))


# ---- device calls ----------------------------------------------------------------------------

def run_forward(lib, device, name, x, *extra):
    rows, cols = x.shape
    tx, ty = device.upload(x.astype(np.float32)), device.empty((rows, cols))
    lib.check(name, device.index, tx.handle, ty.handle, rows, cols, *extra)
    out = ty.numpy()
    assert ty.guard_intact() and tx.guard_intact()
    tx.free(), ty.free()
    return out


def run_backward(lib, device, name, first, second, *extra):
    rows, cols = first.shape
    ta, tb = device.upload(first.astype(np.float32)), device.upload(second.astype(np.float32))
    tdx = device.empty((rows, cols))
    lib.check(name, device.index, ta.handle, tb.handle, tdx.handle, rows, cols, *extra)
    out = tdx.numpy()
    assert tdx.guard_intact() and ta.guard_intact() and tb.guard_intact()
    for t in (ta, tb, tdx):
        t.free()
    return out


def softmax(lib, device, x):
    return run_forward(lib, device, "execute_softmax_on_gpu", x)


def layernorm(lib, device, x, eps=LN_EPS):
    return run_forward(lib, device, "execute_layernorm_on_gpu", x, eps)


def softmax_backward(lib, device, dy, y):
    return run_backward(lib, device, "execute_softmax_backward_on_gpu", dy, y)


def layernorm_backward(lib, device, dy, x, eps=LN_EPS):
    return run_backward(lib, device, "execute_layernorm_backward_on_gpu", dy, x, eps)


def shapes():
    """(rows, row_size) pairs: every listed row size with 1 row and with a few rows, the llm.py
    shapes, and one very long row."""
    out = []
    for c in ROW_SIZES:
        out += [(1, c), ((7 * c) % 37 + 2, c)]
    return out + [(4096, 64), (1024, 16), (2, 100003)]


def layernorm_term_scale(dy, x, eps):
    x = x.astype(np.float64)
    var = ((x - x.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1, keepdims=True)
    return (np.abs(dy) / np.sqrt(var + eps)).max()


def assert_grad_close(actual, ref, scale=0.0):
    bound = GRAD_REL * (max(np.abs(ref).max(), scale) + 1e-6)
    err = np.abs(actual.astype(np.float64) - ref)
    assert np.all(np.isfinite(actual))
    assert err.max() <= bound, f"max error {err.max()} > {bound}"


# ---- numerics --------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols", shapes())
def test_softmax(lib, device, rng, rows, cols):
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    np.testing.assert_allclose(softmax(lib, device, x), softmax_ref(x), rtol=SOFTMAX_RTOL,
                               atol=SOFTMAX_ATOL)


@pytest.mark.parametrize("center", [80.0, -80.0, 0.0])
def test_softmax_large_magnitude_is_stable(lib, device, rng, center):
    # centre 0: rows mixing +80 and -80, so exp(x) alone would overflow/underflow in float32.
    x = rng.standard_normal((9, 257)) + center
    if center == 0.0:
        x += np.where(rng.random(x.shape) < 0.5, 80.0, -80.0)
    x = x.astype(np.float32)
    y = softmax(lib, device, x)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, softmax_ref(x), rtol=BIG_RTOL, atol=BIG_ATOL)
    np.testing.assert_allclose(y.astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_special_rows(lib, device):
    x = np.zeros((3, 53), np.float32)
    x[1] = 5.0                    # constant row: uniform
    x[2, 7] = 1e30                # one dominant entry: one-hot
    y = softmax(lib, device, x)
    np.testing.assert_allclose(y[:2], 1.0 / 53, rtol=1e-6)
    assert y[2, 7] == pytest.approx(1.0, rel=1e-6) and np.all(np.delete(y[2], 7) == 0.0)


@pytest.mark.parametrize("rows,cols", shapes())
def test_softmax_backward(lib, device, rng, rows, cols):
    y = softmax_ref(rng.standard_normal((rows, cols)) * 2).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    assert_grad_close(softmax_backward(lib, device, dy, y), softmax_backward_ref(dy, y))


@pytest.mark.parametrize("rows,cols", shapes())
def test_layernorm(lib, device, rng, rows, cols):
    x = (rng.standard_normal((rows, cols)) * 4 + rng.uniform(-10, 10, (rows, 1))).astype(np.float32)
    np.testing.assert_allclose(layernorm(lib, device, x), layernorm_ref(x, LN_EPS), rtol=LN_RTOL,
                               atol=LN_ATOL)


def test_layernorm_constant_row_and_offset(lib, device, rng):
    x = np.full((2, 64), 3.25, np.float32)
    x[1] = 1000.0 + rng.standard_normal(64).astype(np.float32)   # large mean, unit spread
    y = layernorm(lib, device, x)
    assert np.all(y[0] == 0.0)
    np.testing.assert_allclose(y[1], layernorm_ref(x[1:], LN_EPS)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,cols", shapes())
def test_layernorm_backward(lib, device, rng, rows, cols):
    x = (rng.standard_normal((rows, cols)) * 2 + 1).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    assert_grad_close(layernorm_backward(lib, device, dy, x), layernorm_backward_ref(dy, x, LN_EPS),
                      layernorm_term_scale(dy, x, LN_EPS))


@pytest.mark.parametrize("eps", [0.0, -1.0, -1e-5])
def test_layernorm_eps_not_positive_means_1e_5(lib, device, rng, eps):
    # Rows of variance ~1e-6, where eps = 1e-5 changes the result by a factor of ~3.
    x = (rng.standard_normal((5, 53)) * 1e-3 + 2).astype(np.float32)
    dy = rng.standard_normal((5, 53)).astype(np.float32)
    y = layernorm(lib, device, x, eps)
    np.testing.assert_array_equal(y, layernorm(lib, device, x, 1e-5))
    np.testing.assert_allclose(y, layernorm_ref(x, 1e-5), rtol=1e-4, atol=1e-4)
    assert not np.allclose(y, layernorm_ref(x, 1e-12), rtol=1e-2)
    dx = layernorm_backward(lib, device, dy, x, eps)
    np.testing.assert_array_equal(dx, layernorm_backward(lib, device, dy, x, 1e-5))
    assert_grad_close(dx, layernorm_backward_ref(dy, x, 1e-5), layernorm_term_scale(dy, x, 1e-5))


# ---- finite differences ----------------------------------------------------------------------

def finite_difference_grad(forward, x, w):
    """d/dx of sum(w * forward(x)) per row, by central differences: for each row and coordinate
    the perturbed rows are evaluated in one batched call."""
    rows, cols = x.shape
    x64 = x.astype(np.float64)
    eye = np.eye(cols) * FD_H
    plus = (x64[:, None, :] + eye[None]).reshape(-1, cols)
    minus = (x64[:, None, :] - eye[None]).reshape(-1, cols)
    yp = forward(plus.astype(np.float32)).astype(np.float64).reshape(rows, cols, cols)
    ym = forward(minus.astype(np.float32)).astype(np.float64).reshape(rows, cols, cols)
    # Use the actually representable perturbations for the step.
    step = (plus.astype(np.float32).astype(np.float64) -
            minus.astype(np.float32).astype(np.float64)).reshape(rows, cols, cols)
    step = np.einsum("rjj->rj", step)
    return np.einsum("rjc,rc->rj", yp - ym, w) / step


def spread_rows(rng, cols, rows=3):
    """Rows whose values spread over [-2, 2]: a row of nearly equal values has a tiny variance,
    where LayerNorm's curvature (and so the central-difference error) explodes."""
    base = np.stack([rng.permutation(np.linspace(-2, 2, cols)) for _ in range(rows)])
    return (base + 0.2 * rng.standard_normal((rows, cols))).astype(np.float32)


@pytest.mark.parametrize("cols", [1, 2, 5, 53, 64])
def test_softmax_backward_matches_finite_differences(lib, device, rng, cols):
    x = spread_rows(rng, cols)
    w = rng.standard_normal((3, cols))
    analytic = softmax_backward(lib, device, w.astype(np.float32), softmax(lib, device, x))
    numeric = finite_difference_grad(lambda v: softmax(lib, device, v), x, w)
    bound = FD_REL * np.abs(analytic).max() + FD_ABS
    assert np.abs(analytic - numeric).max() <= bound


@pytest.mark.parametrize("cols", [2, 3, 16, 53])
def test_layernorm_backward_matches_finite_differences(lib, device, rng, cols):
    x = spread_rows(rng, cols)
    w = rng.standard_normal((3, cols))
    analytic = layernorm_backward(lib, device, w.astype(np.float32), x)
    numeric = finite_difference_grad(lambda v: layernorm(lib, device, v), x, w)
    bound = FD_REL * np.abs(analytic).max() + FD_ABS
    assert np.abs(analytic - numeric).max() <= bound


# ---- determinism -----------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols", [(4096, 64), (3, 100003), (37, 4099)])
def test_bit_identical_run_to_run(lib, device, rng, rows, cols):
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    y = softmax(lib, device, x)
    for run in (
        lambda: softmax(lib, device, x),
        lambda: layernorm(lib, device, x),
        lambda: softmax_backward(lib, device, dy, y),
        lambda: layernorm_backward(lib, device, dy, x),
    ):
        first, second = run(), run()
        assert first.tobytes() == second.tobytes()


# ---- validation ------------------------------------------------------------------------------

CASES = [  # name, buffer argument count, extra trailing arguments
    ("execute_softmax_on_gpu", 2, ()),
    ("execute_softmax_backward_on_gpu", 3, ()),
    ("execute_layernorm_on_gpu", 2, (1e-5,)),
    ("execute_layernorm_backward_on_gpu", 3, (1e-5,)),
]


@pytest.mark.parametrize("name,nargs,extra", CASES)
def test_validation(lib, device, name, nargs, extra):
    rows, cols = 5, 20
    call = getattr(lib, name)
    good = [device.upload(np.ones((rows, cols), np.float32)) for _ in range(nargs)]
    handles = [t.handle for t in good]
    small = device.empty((rows * cols - 1,), guard=0)
    assert call(device.index, *handles, rows, cols, *extra) == 1

    # Zero rows or columns: success without touching memory.
    out = device.empty((rows, cols))
    zero_handles = handles[:-1] + [out.handle]
    for dims in [(0, cols), (rows, 0), (0, 0)]:
        assert call(device.index, *zero_handles, *dims, *extra) == 1
    assert np.all(out.numpy().view(np.uint32) == POISON_F32.view(np.uint32))

    for dims in [(-1, cols), (rows, -1), (-5, 0)]:
        assert call(device.index, *handles, *dims, *extra) == 0
        assert "negative" in lib.last_error() and name in lib.last_error()

    # Dimensions whose bytes exceed any buffer: refused, never launched.
    assert call(device.index, *handles, 2**31 - 1, 2**31 - 1, *extra) == 0
    assert name in lib.last_error()

    for position in range(nargs):
        bad = list(handles)
        bad[position] = small.handle
        assert call(device.index, *bad, rows, cols, *extra) == 0
        assert "396 bytes" in lib.last_error() and "400 bytes" in lib.last_error()
        bad[position] = None
        assert call(device.index, *bad, rows, cols, *extra) == 0
        assert "NULL" in lib.last_error()
        bad[position] = ctypes.c_void_p(0xDEAD0000)
        assert call(device.index, *bad, rows, cols, *extra) == 0

    assert call(device.index, *handles, rows, cols, *extra) == 1   # still working
    for t in good + [small, out]:
        t.free()
