"""Gather and scatter-add along one axis of 1-D to 4-D tensors (aethercl_gather /
aethercl_scatter_add) against NumPy (take_along_axis / np.add.at), with poisoned outputs and guard
bytes; invalid indices; the gradient pairing; refusals.

Tolerances: gather copies values (bit-exact). scatter_add adds float32 values to x in ascending
order of the axis position, exactly the order of a sequential np.add.at over the same float32
array, so it is bit-exact too."""
import numpy as np
import pytest

import aethercl
from aethercl import train as ops
from support.train_helpers import no_poison

# (shape of x, length of the index along the axis, axis)
CASES = [((7,), 5, 0), ((4, 6), 3, 1), ((4, 6), 9, 0), ((3, 1, 5), 4, 1), ((2, 3, 4, 5), 2, 3),
         ((2, 3, 4, 5), 6, -3), ((1, 1, 1, 300), 17, 3), ((257, 3), 1000, 0), ((2, 0, 3), 2, 2)]


def shapes(shape, length, axis):
    index_shape = list(shape)
    index_shape[axis] = length
    return tuple(index_shape)


def random_index(rng, index_shape, limit, invalid=False):
    index = rng.integers(0, max(limit, 1), size=index_shape).astype(np.int32)
    if invalid and index.size:
        flat = index.reshape(-1)
        flat[::3] = -1
        flat[1::5] = limit          # one past the end
        flat[2::7] = np.iinfo(np.int32).max
    return index


def numpy_gather(x, index, axis):
    valid = (index >= 0) & (index < x.shape[axis])
    safe = np.where(valid, index, 0)
    out = np.take_along_axis(x, safe, axis=axis) if x.shape[axis] else np.zeros(index.shape, x.dtype)
    return np.where(valid, out, np.float32(0))


def numpy_scatter_add(x, index, y, axis):
    out = x.copy()
    moved_out, moved_index, moved_y = (np.moveaxis(a, axis, 0) for a in (out, index, y))
    for k in range(moved_index.shape[0]):          # ascending along the axis, like the kernel
        for position in np.ndindex(moved_index.shape[1:]):
            i = int(moved_index[(k, *position)])
            if 0 <= i < moved_out.shape[0]:
                moved_out[(i, *position)] += moved_y[(k, *position)]
    return out


@pytest.mark.parametrize("shape,length,axis", CASES)
@pytest.mark.parametrize("invalid", [False, True])
def test_gather(scope, device, rng, shape, length, axis, invalid):
    index_shape = shapes(shape, length, axis)
    x = rng.standard_normal(shape).astype(np.float32)
    index = random_index(rng, index_shape, shape[axis], invalid)
    tx, ti, ty = scope.in_(x), scope.in_(index), scope.out(index_shape)
    ops.gather(device.index,
               ops.index_desc(shape, index_shape, axis, tx.handle, ti.handle, ty.handle))
    got = ty.numpy()
    no_poison(got)
    assert np.array_equal(got, numpy_gather(x, index, axis))


@pytest.mark.parametrize("shape,length,axis", CASES)
@pytest.mark.parametrize("invalid", [False, True])
def test_scatter_add(scope, device, rng, shape, length, axis, invalid):
    index_shape = shapes(shape, length, axis)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(index_shape).astype(np.float32)
    index = random_index(rng, index_shape, shape[axis], invalid)
    tx, ti, ty = scope.in_(x), scope.in_(index), scope.in_(y)
    ops.scatter_add(device.index,
                    ops.index_desc(shape, index_shape, axis, tx.handle, ti.handle, ty.handle))
    expected = numpy_scatter_add(x, index, y, axis)
    assert np.array_equal(tx.numpy(), expected)
    assert np.array_equal(ti.numpy(), index) and np.array_equal(ty.numpy(), y)  # inputs unchanged


def test_scatter_add_of_gather_is_its_adjoint(scope, device, rng):
    """<gather(x), dy> = <x, scatter_add(0, dy)>: scatter_add is gather's gradient."""
    shape, index_shape, axis = (5, 8, 3), (5, 13, 3), 1
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(index_shape).astype(np.float32)
    index = random_index(rng, index_shape, shape[1])
    tx, ti, ty = scope.in_(x), scope.in_(index), scope.out(index_shape)
    tdx, tdy = scope.in_(np.zeros(shape, np.float32)), scope.in_(dy)
    ops.gather(device.index,
               ops.index_desc(shape, index_shape, axis, tx.handle, ti.handle, ty.handle))
    ops.scatter_add(device.index,
                    ops.index_desc(shape, index_shape, axis, tdx.handle, ti.handle, tdy.handle))
    lhs = float((ty.numpy().astype(np.float64) * dy).sum())
    rhs = float((x.astype(np.float64) * tdx.numpy()).sum())
    assert abs(lhs - rhs) <= 1e-5 * (np.abs(dy).sum() * np.abs(x).max())


@pytest.mark.parametrize("change,words", [
    (dict(ndim=0), "desc.ndim = 0"), (dict(ndim=5), "desc.ndim = 5"),
    (dict(axis=2), "desc.axis = 2"), (dict(axis=-3), "desc.axis = -3"),
    (dict(shape_a=[5, 6, 1, 1]), "differ outside the axis"),
    (dict(shape_b=[-1, 6, 1, 1]), "desc.shape_b[0]"),
])
def test_refusals_name_the_field_and_leave_memory_alone(scope, device, rng, change, words):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    index = random_index(rng, (4, 3), 6)
    tx, ti, ty = scope.in_(x), scope.in_(index), scope.out((4, 3))
    desc = ops.index_desc((4, 6), (4, 3), 1, tx.handle, ti.handle, ty.handle)
    for field, value in change.items():
        desc.set(field, value)
    for function in (ops.gather, ops.scatter_add):
        with pytest.raises(aethercl.AetherCLError) as refused:
            function(device.index, desc)
        assert words in str(refused.value)
    assert np.array_equal(tx.numpy(), x)


def test_aliasing_is_refused(scope, device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    tx = scope.in_(x)
    ti = scope.in_(random_index(rng, (4, 6), 6))
    for desc in (ops.index_desc((4, 6), (4, 6), 1, tx.handle, ti.handle, tx.handle),
                 ops.index_desc((4, 6), (4, 6), 1, tx.handle, tx.handle, ti.handle)):
        for function in (ops.gather, ops.scatter_add):
            with pytest.raises(aethercl.AetherCLError):
                function(device.index, desc)
    with pytest.raises(aethercl.AetherCLError):  # gather's y may not be its index either
        ops.gather(device.index, ops.index_desc((4, 6), (4, 6), 1, tx.handle, ti.handle, ti.handle))
    assert np.array_equal(tx.numpy(), x)


def test_short_buffers_are_refused(scope, device, rng):
    tx = scope.in_(np.zeros(1, np.float32))   # 24 floats needed (the guard bytes add 16)
    ti = scope.in_(random_index(rng, (4, 3), 6))
    ty = scope.out((4, 3))
    with pytest.raises(aethercl.AetherCLError) as refused:
        ops.gather(device.index, ops.index_desc((4, 6), (4, 3), 1, tx.handle, ti.handle, ty.handle))
    assert "desc.x" in str(refused.value)
