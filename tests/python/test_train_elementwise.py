"""Unary ops (with scalar forms) and broadcasting binary ops against float64 NumPy, their
backward passes against finite differences of the float64 reference, on odd shapes with
poisoned outputs and guard bytes.

Tolerances: the forward is one float32 evaluation of the formula, so the error is a few ulp of
the result plus the input's own rounding propagated through the function. OpenCL's
transcendental functions may be off by up to 4 ulp (exp, log, tanh: 3-5) and 16 ulp (pow, erf):
rtol 2e-6 for exact arithmetic, 2e-5 for transcendental ops, atol 1e-6 near zero results.
Gradients compose two to four such evaluations: rtol 5e-5, atol 1e-5 (scaled by |dy| <= 3).
Finite differences use h = 1e-6 on the float64 reference (truncation error ~1e-12)."""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import ALPHA, KINKS, POSITIVE_DOMAIN, UNARY_EXACT, close, no_poison


def inputs(op, rng, n):
    if op in POSITIVE_DOMAIN:
        return rng.uniform(0.2, 4.0, n).astype(np.float32)
    x = (rng.standard_normal(n) * 2.5).astype(np.float32)
    if op in KINKS:  # keep finite differences away from the kink
        x[np.abs(x - KINKS[op]) < 1e-3] += np.float32(0.01)
    return x


@pytest.mark.parametrize("op", T.UNARY_OPS)
@pytest.mark.parametrize("n", [1, 37, 4099])
def test_unary_forward(scope, device, rng, op, n):
    x = inputs(op, rng, n)
    alpha = ALPHA.get(op, 0.0)
    tx, ty = scope.in_(x), scope.out((n,))
    ops.unary(device.index, op, tx.handle, ty.handle, n, alpha)
    got = ty.numpy()
    no_poison(got)
    rtol = 2e-6 if op in UNARY_EXACT else 2e-5
    close(got, R.unary_forward(op, x, alpha), rtol, 1e-6, op)


@pytest.mark.parametrize("op", T.UNARY_OPS)
def test_unary_backward_matches_finite_differences(scope, device, rng, op):
    n = 29
    x = inputs(op, rng, n)
    dy = rng.uniform(-3, 3, n).astype(np.float32)
    alpha = ALPHA.get(op, 0.0)
    tx, tdy, tdx = scope.in_(x), scope.in_(dy), scope.out((n,))
    ops.unary_backward(device.index, op, tx.handle, tdy.handle, tdx.handle, n, alpha)
    fd = R.numeric_gradient(lambda v: R.unary_forward(op, v, alpha), x, dy.astype(np.float64))
    close(tdx.numpy(), fd, 5e-5, 1e-5, op)


def test_unary_in_place_and_nan_propagation(scope, device):
    x = np.array([np.nan, -1.0, 0.0, 2.0], np.float32)
    for op, expected in (("relu", [np.nan, 0, 0, 2]), ("max_scalar", [np.nan, 0.25, 0.25, 2]),
                         ("min_scalar", [np.nan, -1, -0.5, -0.5])):
        t = scope.in_(x)
        ops.unary(device.index, op, t.handle, t.handle, 4, ALPHA.get(op, 0.0))
        close(t.numpy(), expected, 0, 0, op)


def test_unary_refusals(scope, device, lib):
    t = scope.out((4,))
    for op in (-1, len(T.UNARY_OPS), 1000):
        assert lib.aethercl_unary(device.index, op, t.handle, t.handle, 4, 0.0, None) == 0
        assert "aethercl_unary_op" in lib.last_error()
    assert lib.aethercl_unary(device.index, T.UNARY["mul_scalar"], t.handle, t.handle, 4,
                              float("inf"), None) == 0
    assert "alpha" in lib.last_error()
    # Ops that ignore alpha accept anything there.
    assert lib.aethercl_unary(device.index, T.UNARY["relu"], t.handle, t.handle, 4,
                              float("nan"), None) == 1
    assert lib.aethercl_unary(device.index, 0, t.handle, t.handle, 4, 0.0, 0x1234) == 0
    assert "stream" in lib.last_error()


# ---- binary with broadcasting -----------------------------------------------------------------
SHAPES = [((7,), (7,)), ((5, 3), (3,)), ((5, 3), (5, 1)), ((1, 3), (4, 1)), ((2, 3, 5), (1,)),
          ((3, 1, 5, 1), (1, 4, 1, 6)), ((2, 3, 4, 5), (2, 3, 4, 5)), ((1,), (2, 1, 3, 1)),
          ((4, 1, 3), (4, 2, 3)), ((0, 3), (1, 3)), ((2, 0), (2, 1)), ((3, 1), (3, 0))]


def binary_inputs(op, rng, shape_a, shape_b):
    if op == "pow":
        return (rng.uniform(0.5, 2.0, shape_a).astype(np.float32),
                rng.uniform(-1.5, 1.5, shape_b).astype(np.float32))
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    if op == "div":
        b = np.where(np.abs(b) < 0.3, np.float32(0.7), b).astype(np.float32)
    if op in ("max", "min") and a.size and b.size:  # some exact ties (gradient split in halves)
        flat = a.reshape(-1)
        flat[::3] = b.reshape(-1)[0]
    return a, b


@pytest.mark.parametrize("op", T.BINARY_OPS)
@pytest.mark.parametrize("shape_a,shape_b", SHAPES)
def test_binary_forward_and_backward(scope, device, rng, op, shape_a, shape_b):
    a, b = binary_inputs(op, rng, shape_a, shape_b)
    expected = R.BINARY_REF[op](a.astype(np.float64), b.astype(np.float64))
    ta, tb, tc = scope.in_(a), scope.in_(b), scope.out(expected.shape)
    desc = ops.broadcast_desc(shape_a, shape_b, ta.handle, tb.handle, tc.handle)
    ops.binary(device.index, op, desc)
    got = tc.numpy()
    no_poison(got)
    close(got, expected, 2e-5 if op == "pow" else 2e-6, 1e-6, op)

    dc = rng.uniform(-2, 2, expected.shape).astype(np.float32)
    tdc, tda, tdb = scope.in_(dc), scope.out(shape_a), scope.out(shape_b)
    ops.binary_backward(device.index, op, desc, tdc.handle, tda.handle, tdb.handle)
    ga, gb = R.binary_grads(op, a, b, dc.astype(np.float64))
    close(tda.numpy(), ga, 5e-5, 1e-5, f"{op} da")
    close(tdb.numpy(), gb, 5e-5, 1e-5, f"{op} db")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_binary_backward_matches_finite_differences(scope, device, rng, op):
    shape_a, shape_b = (3, 1, 4), (2, 1)
    a, b = binary_inputs(op, rng, shape_a, shape_b)
    f = R.BINARY_REF[op]
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    dc = rng.uniform(-2, 2, out_shape)
    ta, tb = scope.in_(a), scope.in_(b)
    tdc, tda, tdb = scope.in_(dc.astype(np.float32)), scope.out(shape_a), scope.out(shape_b)
    desc = ops.broadcast_desc(shape_a, shape_b, ta.handle, tb.handle, None)
    ops.binary_backward(device.index, op, desc, tdc.handle, tda.handle, tdb.handle)
    dc32 = dc.astype(np.float32).astype(np.float64)
    fd_a = R.numeric_gradient(lambda v: f(v, b.astype(np.float64)), a, dc32)
    fd_b = R.numeric_gradient(lambda v: f(a.astype(np.float64), v), b, dc32)
    close(tda.numpy(), fd_a, 5e-5, 1e-5, "da")
    close(tdb.numpy(), fd_b, 5e-5, 1e-5, "db")


def test_binary_in_place_and_optional_gradients(scope, device, rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    ta, tb = scope.in_(a), scope.in_(b)
    ops.binary(device.index, "mul", ops.broadcast_desc((4, 3), (3,), ta.handle, tb.handle,
                                                       ta.handle))
    close(ta.numpy(), a * b, 0, 0)
    # ADD/SUB gradients need no inputs; one gradient may be skipped.
    dc = rng.standard_normal((4, 3)).astype(np.float32)
    tdc, tdb = scope.in_(dc), scope.out((3,))
    ops.binary_backward(device.index, "sub", ops.broadcast_desc((4, 3), (3,)), tdc.handle, None,
                        tdb.handle)
    close(tdb.numpy(), -dc.astype(np.float64).sum(0), 1e-6, 1e-6)


def test_binary_refusals(scope, device, lib):
    ta, tb, tc = scope.out((4, 3)), scope.out((3,)), scope.out((4, 3))
    bad = [(ops.broadcast_desc((4, 3), (2,), ta.handle, tb.handle, tc.handle), "do not broadcast"),
           (ops.broadcast_desc((4, 3), (3,), ta.handle, tb.handle, tb.handle), "same buffer"),
           (ops.broadcast_desc((4, 3), (3,), ta.handle, tb.handle, None), "desc.c is NULL")]
    for desc, words in bad:
        assert lib.aethercl_binary(device.index, 0, desc.address, None) == 0
        assert words in lib.last_error(), lib.last_error()
    desc = ops.broadcast_desc((4, 3), (3,), ta.handle, tb.handle, tc.handle)
    desc.ndim = 5
    assert lib.aethercl_binary(device.index, 0, desc.address, None) == 0
    assert "desc.ndim" in lib.last_error()
    desc.ndim, desc.struct_size = 2, desc.struct_size - 1
    assert lib.aethercl_binary(device.index, 0, desc.address, None) == 0
    assert "struct_size" in lib.last_error()
    assert lib.aethercl_binary(device.index, 0, None, None) == 0
    assert lib.aethercl_binary(device.index, 9, ops.broadcast_desc(
        (4, 3), (3,), ta.handle, tb.handle, tc.handle).address, None) == 0
    assert "aethercl_binary_op" in lib.last_error()
    assert lib.aethercl_binary_backward(device.index, 2, ops.broadcast_desc(
        (4, 3), (3,), ta.handle, None).address, tc.handle, ta.handle, None, None) == 0
    assert "desc.b is NULL" in lib.last_error()
