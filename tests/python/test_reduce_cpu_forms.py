"""The CPU forms of the reductions (column sums, aethercl_reduce's SUM/MEAN/MAX/MIN, the gradient
norm's sums of squares) against the general forms (AETHERCL_CPU_KERNELS=0) on random odd shapes,
both against float64 NumPy, every output poisoned before each call. On a GPU both runs take the
general forms and the test still holds.

Tolerances, per form:
- column sums (execute_reduce_sum_gpu): the documented compensated-sum bound of test_reduce.py,
  2**-22 |ref| + 2**-32 sum |x|; each form repeats bit for bit (the orders differ between forms:
  the contract fixes the order per shape and device only).
- SUM / MEAN: acc_t sums. FP64 devices: 2**-23 |ref| (the final rounding to float, with slack)
  + len 2**-52 sum |x| (a running double sum); otherwise the suite's 1e-5 sum |x|.
- MAX / MIN: exact, and bit-identical between the forms (the first index's value wins, ties of
  +0 and -0 and NaN included).
- the gradient norm: an acc_t sum, a square root and one rounding: rtol 2**-22 (FP64) or 1e-6."""
import json

import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support.helpers import kernels_launched
from support.op_checks import assert_bitwise
from support.train_helpers import no_poison

ODD = [1, 3, 257, 1029]


def fp64(lib, device):
    return bool(json.loads(lib.json_call("aethercl_device_info", device.index))["fp64"])


def both_forms(lib, device, monkeypatch, tmp_path, kernel, call):
    """call() with the device's own forms (on a CPU device: launching `kernel`, the CPU form),
    then with the general forms."""
    names, own = kernels_launched(lib, device.index, tmp_path / "trace.json", call)
    if json.loads(lib.json_call("aethercl_device_info", device.index))["type"] == "cpu":
        assert kernel in names, names
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    general = call()
    monkeypatch.delenv("AETHERCL_CPU_KERNELS")
    return own, general


# (rows, cols): the odd sizes crossed, and tall ones that take chunks of rows and their fold.
COLUMN_SHAPES = [(r, c) for r in ODD for c in ODD] + [(70001, 3), (4100, 1029), (300, 2048)]


@pytest.mark.parametrize("rows,cols", COLUMN_SHAPES)
def test_column_sums_forms_agree(lib, device, rng, monkeypatch, tmp_path, rows, cols):
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.1, 10, cols)).astype(np.float32)
    ref = x.astype(np.float64).sum(axis=0)
    bound = 2.0**-22 * np.abs(ref) + 2.0**-32 * np.abs(x.astype(np.float64)).sum(axis=0)
    tin, tout = device.upload(x), device.empty((cols,))

    def run():
        results = []
        for _ in range(2):
            tout.poison()
            lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, 1, rows,
                      cols)
            results.append(tout.numpy())
        assert_bitwise(results[1], results[0])  # repeatable
        return results[0]

    own, general = both_forms(lib, device, monkeypatch, tmp_path, "reduce_sum_columns_lanes", run)
    for got in (own, general):
        no_poison(got)
        assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)
    assert tin.guard_intact() and tout.guard_intact()
    tin.free(), tout.free()


# (shape, axis): first, middle and last axes over the odd sizes; long axes (chunks of the axis)
# and rows longer than a 16-float vector with a tail.
AXIS_CASES = ([((r, c), 0) for r in ODD for c in ODD] + [((3, r, c), 1) for r in (3, 257)
                                                         for c in ODD]
              + [((r, c), 1) for r in ODD for c in ODD] + [((70001, 3), 0), ((2, 4100, 1029), 1),
                                                           ((5, 70001), 1)])


def special_values(x, rng):
    """Ties of +0 and -0 (the first index's bits must win) and a few NaNs."""
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.05] = 0.0
    flat[rng.random(flat.size) < 0.05] = -0.0
    flat[rng.integers(0, flat.size, max(1, flat.size // 5000))] = np.nan


@pytest.mark.parametrize("shape,axis", AXIS_CASES)
@pytest.mark.parametrize("op", [T.SUM, T.MEAN, T.MAX, T.MIN])
def test_reduce_forms_agree(lib, scope, device, rng, monkeypatch, tmp_path, shape, axis, op):
    x = rng.standard_normal(shape).astype(np.float32)
    if op in (T.MAX, T.MIN):
        special_values(x, rng)
    out_shape = tuple(s for i, s in enumerate(shape) if i != axis % len(shape))
    tx, ty = scope.in_(x), scope.out(out_shape)

    def run():
        ty.poison()
        ops.reduce(device.index, op, tx.handle, ty.handle, shape, axis)
        got = ty.numpy()
        no_poison(got)
        return got

    inner = int(np.prod(shape[axis % len(shape) + 1:]))
    if inner > 1:
        kernel = "reduce_axis_lanes"
    else:  # an axis of one is a copy
        kernel = "reduce_axis_rows_lanes" if shape[axis] > 1 else "reduce_axis_items"
    own, general = both_forms(lib, device, monkeypatch, tmp_path, kernel, run)
    x64 = x.astype(np.float64)
    if op in (T.MAX, T.MIN):
        assert_bitwise(own, general)
        expected = (np.max if op == T.MAX else np.min)(x64, axis=axis)  # NaN propagates
        assert np.array_equal(own, expected, equal_nan=True)
        return
    length = shape[axis]
    expected = x64.sum(axis=axis) / (length if op == T.MEAN else 1)
    magnitude = np.abs(x64).sum(axis=axis) / (length if op == T.MEAN else 1)
    if fp64(lib, device):
        bound = 2.0**-23 * np.abs(expected) + length * 2.0**-52 * magnitude
    else:
        bound = 1e-5 * magnitude
    for got in (own, general):
        assert np.all(np.abs(got - expected) <= bound), np.max(np.abs(got - expected) - bound)


@pytest.mark.parametrize("sizes", [[1], [3], [257], [1029], [4096 * 3 + 5], [70001],
                                   [1, 3, 257, 1029, 70001]])
@pytest.mark.parametrize("max_norm", [float("inf"), 0.5])
def test_grad_norm_forms_agree(lib, scope, device, rng, monkeypatch, tmp_path, sizes, max_norm):
    grads = [(rng.standard_normal(s) * rng.uniform(0.1, 10)).astype(np.float32) for s in sizes]
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    rtol = 2.0**-22 if fp64(lib, device) else 1e-6
    tensors = [scope.in_(g) for g in grads]
    total = scope.out((1,))

    def run():
        for t, g in zip(tensors, grads):
            t.write(g)
        total.poison()
        ops.clip_grad_norm(device.index, [t.handle for t in tensors], sizes, max_norm,
                           total.handle)
        return total.numpy()[0], [t.numpy() for t in tensors]

    (own, own_grads), (general, general_grads) = both_forms(lib, device, monkeypatch, tmp_path,
                                                            "optim_sum_squares_lanes", run)
    coef = min(1.0, max_norm / (norm + 1e-6))
    for got, scaled in ((own, own_grads), (general, general_grads)):
        assert abs(got - norm) <= rtol * norm, (got, norm)
        for g, s in zip(grads, scaled):  # one rounded factor, one multiplication
            np.testing.assert_allclose(s, g.astype(np.float64) * coef, rtol=2 * rtol, atol=0)
