"""Reductions over any axis of 1-D to 4-D tensors (sum, mean, max, min, argmax, argmin) and their
backward, against float64 NumPy, with poisoned outputs and guard bytes; run with the device's
own group size and with 64-item groups (the tree reduction GPUs use). Axes with inner > 1 run in
tiles (kernels/reduce_axis.cl reduce_axis_tiles): TILE_CASES reach each of their paths with the
GPU forms (a tree over lanes along the axis), and with a CPU device's own forms those of
reduce_axis_lanes (SUM/MEAN/MAX/MIN: blocks of columns per work-item, chunks and their fold) and
of the tiles with one lane along the axis (ARGMAX/ARGMIN).

Tolerances: sums accumulate in double (FP64 devices) or float: rtol 1e-6 / 1e-5 relative to the
sum of magnitudes; max/min/arg results are exact. Backward values are exact copies (SUM, MAX,
MIN) or one division (MEAN, 1e-7)."""
import warnings

import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import close, no_poison

SHAPES = [(1,), (37,), (5, 7), (3, 1, 4), (2, 3, 5, 7), (4, 129), (1, 1, 1, 300), (2, 0, 3),
          # few outputs over a long axis
          (300, 3), (1000, 2, 5), (2, 257, 3)]
NUMPY = {T.SUM: np.sum, T.MEAN: np.mean, T.MAX: np.max, T.MIN: np.min, T.ARGMAX: np.argmax,
         T.ARGMIN: np.argmin}


def cases():
    for shape in SHAPES:
        for axis in range(-len(shape), len(shape)):
            yield shape, axis


@pytest.mark.parametrize("shape,axis", list(cases()))
@pytest.mark.parametrize("op", [T.SUM, T.MEAN, T.MAX, T.MIN, T.ARGMAX, T.ARGMIN])
def test_reduce_forward(scope, device, rng, row_group, shape, axis, op):
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        x.reshape(-1)[::5] = np.float32(1.5)  # ties: the first index must win
    out_shape = tuple(s for i, s in enumerate(shape) if i != axis % len(shape))
    empty_axis = shape[axis] == 0 and int(np.prod(out_shape)) > 0
    arg = op in (T.ARGMAX, T.ARGMIN)
    tx, ty = scope.in_(x), scope.out(out_shape, np.int32 if arg else np.float32)
    if empty_axis and op not in (T.SUM, T.MEAN):
        with pytest.raises(Exception, match="empty"):
            ops.reduce(device.index, op, tx.handle, ty.handle, shape, axis)
        return
    ops.reduce(device.index, op, tx.handle, ty.handle, shape, axis)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty axis is NaN
        expected = NUMPY[op](x.astype(np.float64), axis=axis) if x.size or op < 2 else None
    if expected is None:
        return
    got = ty.numpy()
    if arg:
        assert np.array_equal(got, expected)
    else:
        no_poison(got)
        scale = np.abs(x.astype(np.float64)).sum(axis=axis) if op < 2 else 0
        if op == T.MEAN and shape[axis]:
            scale = scale / shape[axis]
        assert np.all((np.abs(got - expected) <= 1e-5 * scale + 1e-7) |
                      (np.isnan(got) & np.isnan(expected)))


# (shape, axis) with inner > 1 over 2^16 elements or more: chunks of the axis and their fold with
# inner not a multiple of 4 (3, 17: vload4 and the scalar tail), a multiple of 4 but not of a
# 64-position tile (68), and 2; one pass with an axis shorter than the lanes along it (3) and an
# aligned inner of 1024; an axis of one.
TILE_CASES = [((70000, 3), 0), ((3000, 68), 0), ((2, 5000, 17), 1), ((2, 33000, 2), 1),
              ((4, 3, 1024), 1), ((300, 257), 0), ((5, 1, 6), 1), ((1100, 64), 0)]


@pytest.mark.parametrize("shape,axis", TILE_CASES)
@pytest.mark.parametrize("op", [T.SUM, T.MEAN, T.MAX, T.MIN, T.ARGMAX, T.ARGMIN])
def test_reduce_tiles(scope, device, rng, kernel_forms, shape, axis, op):
    test_reduce_forward(scope, device, rng, "device-default", shape, axis, op)


# The innermost axis with len % 4 == 0 is read as float4s (groups sized for len / 4 lanes);
# other lengths element by element.
ROW_CASES = [((3, 1024), 1), ((5, 4100), -1), ((2, 7, 36), 2), ((1, 16384), 1), ((9, 4), 1),
             ((4, 1027), 1)]


@pytest.mark.parametrize("shape,axis", ROW_CASES)
@pytest.mark.parametrize("op", [T.SUM, T.MEAN, T.MAX, T.MIN, T.ARGMAX, T.ARGMIN])
def test_reduce_rows(scope, device, rng, row_group, shape, axis, op):
    test_reduce_forward(scope, device, rng, row_group, shape, axis, op)


def test_reduce_rows_ties_and_nan_in_float4_lanes(scope, device, row_group):
    """The first index wins inside one float4 and across items; the first NaN wins."""
    x = np.zeros((3, 1024), np.float32)
    x[0, [6, 5, 700]] = 4.0          # lanes 2 and 1 of one float4, and a later item
    x[1, [1023, 2]] = np.nan
    x[2, :] = -1.0
    tx = scope.in_(x)
    for op, expected in ((T.ARGMAX, [5, 2, 0]), (T.ARGMIN, [0, 2, 0])):
        ty = scope.out((3,), np.int32)
        ops.reduce(device.index, op, tx.handle, ty.handle, (3, 1024), 1)
        close(ty.numpy(), expected, 0, 0, str(op))


@pytest.mark.parametrize("shape", [(70000, 3), (3000, 68)])
def test_reduce_tiles_ties_nan_and_repeatability(scope, device, rng, kernel_forms, shape):
    """Across chunks: the first index of a tied maximum and of the first NaN wins; sums repeat
    bit for bit."""
    rows, cols = shape
    x = rng.standard_normal(shape).astype(np.float32)
    tied = [rows // 3, rows // 2, rows - 1]          # far apart: different chunks
    x[tied, 0] = 9.0
    x[tied, cols - 1] = -9.0
    x[[rows - 2, rows // 4 + 1], 1] = np.nan
    tx = scope.in_(x)
    expected = {T.ARGMAX: np.argmax(np.where(np.isnan(x), np.inf, x), axis=0),
                T.ARGMIN: np.argmin(np.where(np.isnan(x), -np.inf, x), axis=0)}
    for op, want in expected.items():
        ty = scope.out((cols,), np.int32)
        ops.reduce(device.index, op, tx.handle, ty.handle, shape, 0)
        got = ty.numpy()
        assert np.array_equal(got, want), (op, np.flatnonzero(got != want))
        assert got[0 if op == T.ARGMAX else cols - 1] == tied[0] and got[1] == rows // 4 + 1
    first = None
    for _ in range(2):
        ty = scope.out((cols,))
        ops.reduce(device.index, T.SUM, tx.handle, ty.handle, shape, 0)
        got = ty.numpy()
        if first is not None:
            assert got.tobytes() == first.tobytes()
        first = got


def test_nan_propagates_and_wins_argmax(scope, device):
    x = np.array([[1, np.nan, 3, np.nan], [5, 2, 7, 7]], np.float32)
    for op, expected in ((T.MAX, [np.nan, 7]), (T.MIN, [np.nan, 2]), (T.ARGMAX, [1, 2]),
                         (T.ARGMIN, [1, 1])):
        tx = scope.in_(x)
        ty = scope.out((2,), np.int32 if op >= T.ARGMAX else np.float32)
        ops.reduce(device.index, op, tx.handle, ty.handle, (2, 4), 1)
        close(ty.numpy(), expected, 0, 0, str(op))


@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4, 5), 2),
                                        ((2, 1, 3), 1)])
@pytest.mark.parametrize("op", [T.SUM, T.MEAN, T.MAX, T.MIN])
def test_reduce_backward_matches_finite_differences(scope, device, rng, shape, axis, op):
    x = rng.standard_normal(shape).astype(np.float32)
    out_shape = tuple(s for i, s in enumerate(shape) if i != axis % len(shape))
    dy = rng.uniform(-2, 2, out_shape).astype(np.float32)
    tx, tdy, tdx = scope.in_(x), scope.in_(dy), scope.out(shape)
    ops.reduce_backward(device.index, op, tx.handle if op >= T.MAX else None, tdy.handle,
                        tdx.handle, shape, axis)
    f = {T.SUM: np.sum, T.MEAN: np.mean, T.MAX: np.max, T.MIN: np.min}[op]
    fd = R.numeric_gradient(lambda v: f(v, axis=axis), x, dy.astype(np.float64))
    close(tdx.numpy(), fd, 1e-6, 1e-6)


def test_max_backward_routes_ties_to_the_first_index(scope, device):
    x = np.array([[2, 5, 5], [7, 7, 1]], np.float32)
    tx, tdy, tdx = scope.in_(x), scope.in_(np.array([1, 2], np.float32)), scope.out((2, 3))
    ops.reduce_backward(device.index, T.MAX, tx.handle, tdy.handle, tdx.handle, (2, 3), 1)
    close(tdx.numpy(), [[0, 1, 0], [2, 0, 0]], 0, 0)


def test_reduce_refusals(scope, device, lib):
    tx, ty = scope.out((3, 4)), scope.out((3,))
    import ctypes
    shape = (ctypes.c_int * 2)(3, 4)
    for args, words in (((T.SUM, 2, shape, 2), "axis = 2"), ((T.SUM, 0, shape, 0), "ndim = 0"),
                        ((T.SUM, 5, shape, 0), "ndim = 5"), ((9, 2, shape, 0), "op = 9"),
                        ((T.SUM, 2, None, 0), "shape is NULL")):
        op, ndim, s, axis = args
        assert lib.aethercl_reduce(device.index, op, tx.handle, ty.handle, ndim, s, axis,
                                   None) == 0
        assert words in lib.last_error(), lib.last_error()
    assert lib.aethercl_reduce(device.index, T.SUM, tx.handle, tx.handle, 2, shape, 1, None) == 0
    assert lib.aethercl_reduce_backward(device.index, T.ARGMAX, tx.handle, ty.handle, tx.handle,
                                        2, shape, 1, None) == 0
    assert "no gradient" in lib.last_error()
    assert lib.aethercl_reduce_backward(device.index, T.MAX, None, ty.handle, tx.handle, 2,
                                        shape, 1, None) == 0
    assert "x is NULL" in lib.last_error()
