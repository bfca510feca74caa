"""Layout family: transpose, transpose_backward, transpose_batched, transpose_12_batched.
Tolerance: none. Every layout op is a pure copy, so results must equal the NumPy transpose bit for
bit (NaN payloads, signed zeros, infinities and denormals included)."""
import numpy as np
import pytest

from support.helpers import Tensor
from support.op_checks import (assert_bitwise, check_buffer_refusals, check_dim_refusals,
                       expect_refusal, special_values)

pytestmark = pytest.mark.usefixtures("kernel_forms")  # CPU and GPU kernel forms

SHAPES_2D = [(1, 1), (1, 7), (7, 1), (16, 16), (17, 31), (64, 4), (4, 64), (97, 131), (256, 3),
             (1009, 17)]
SHAPES_BATCHED = [(1, 1, 1), (2, 3, 3), (2, 3, 5), (3, 5, 2), (64, 64, 4), (64, 4, 64),
                  (5, 17, 33), (3, 100, 7), (1, 1, 257), (13, 16, 16)]
SHAPES_12 = [(16, 64, 4, 4), (16, 4, 64, 4), (1, 1, 1, 1), (2, 3, 5, 7), (3, 17, 19, 1),
             (2, 33, 1, 5), (1, 5, 7, 3), (4, 1, 9, 2), (7, 13, 11, 1)]


def _transpose(lib, device, rng, function, shape, dims, reference):
    x = special_values(rng, shape)
    tin = device.upload(x)
    tout = device.empty(reference(x).shape)
    lib.check(function, device.index, tin.handle, tout.handle, *dims)
    assert_bitwise(tout.numpy(), reference(x))
    assert_bitwise(tin.numpy(), x)
    assert tout.guard_intact() and tin.guard_intact()
    tin.free(), tout.free()


@pytest.mark.parametrize("rows,cols", SHAPES_2D)
def test_transpose(lib, device, rng, rows, cols):
    _transpose(lib, device, rng, "execute_transpose_on_gpu", (rows, cols), (rows, cols),
               lambda x: x.T)


@pytest.mark.parametrize("rows_a,cols_a", SHAPES_2D)
def test_transpose_backward(lib, device, rng, rows_a, cols_a):
    # dC is (cols_A, rows_A); dA = dC^T is (rows_A, cols_A).
    _transpose(lib, device, rng, "execute_transpose_backward_on_gpu", (cols_a, rows_a),
               (rows_a, cols_a), lambda dc: dc.T)


@pytest.mark.parametrize("b,d1,d2", SHAPES_BATCHED)
def test_transpose_batched(lib, device, rng, b, d1, d2):
    _transpose(lib, device, rng, "execute_transpose_batched_gpu", (b, d1, d2), (b, d1, d2),
               lambda x: x.transpose(0, 2, 1))


@pytest.mark.parametrize("b,d1,d2", [(64, 64, 4), (2, 3, 2), (7, 300, 5), (1, 1000, 1)])
def test_transpose_batched_with_d1_above_d2_stays_inside_the_output(lib, device, rng, b, d1, d2):
    """The original kernel wrote up to 15,120 bytes past the (64,4,64) output (docs/ABI.md §10.1): a
    guard region larger than that must come back untouched, and every element must be right."""
    x = rng.standard_normal((b, d1, d2)).astype(np.float32)
    tin = device.upload(x)
    tout = device.empty((b, d2, d1), guard=16384)
    lib.check("execute_transpose_batched_gpu", device.index, tin.handle, tout.handle, b, d1, d2)
    assert tout.guard_intact()
    got = tout.numpy()
    flat = got.reshape(-1)
    for bi, i, j in [(0, 0, 0), (b - 1, d1 - 1, d2 - 1), (b // 2, d1 // 3, d2 // 2)]:
        assert flat[bi * d1 * d2 + j * d1 + i] == x[bi, i, j]   # docs/ABI.md §4.7 index formula
    assert_bitwise(got, x.transpose(0, 2, 1))
    tin.free(), tout.free()


@pytest.mark.parametrize("b,d1,d2,d3", SHAPES_12)
def test_transpose_12(lib, device, rng, b, d1, d2, d3):
    _transpose(lib, device, rng, "execute_transpose_12_batched_gpu", (b, d1, d2, d3),
               (b, d1, d2, d3), lambda x: x.transpose(0, 2, 1, 3))


@pytest.mark.parametrize("b,d1,d2,d3", [(16, 64, 4, 4), (16, 4, 64, 4), (3, 17, 19, 1),
                                        (2, 5, 9, 3)])
def test_transpose_12_twice_with_swapped_dims_is_identity(lib, device, rng, b, d1, d2, d3):
    x = special_values(rng, (b, d1, d2, d3))
    tin, tmid, tout = device.upload(x), device.empty((b, d2, d1, d3)), device.empty(x.shape)
    lib.check("execute_transpose_12_batched_gpu", device.index, tin.handle, tmid.handle,
              b, d1, d2, d3)
    lib.check("execute_transpose_12_batched_gpu", device.index, tmid.handle, tout.handle,
              b, d2, d1, d3)
    assert_bitwise(tout.numpy(), x)
    assert tmid.guard_intact() and tout.guard_intact()
    for t in (tin, tmid, tout):
        t.free()


def test_transpose_batched_is_repeatable_after_other_shapes(lib, device, rng):
    """Kernels are shared objects: a call with new sizes must not inherit the previous ones."""
    for shape in [(3, 5, 7), (64, 64, 4), (3, 5, 7), (1, 2, 1)]:
        _transpose(lib, device, rng, "execute_transpose_batched_gpu", shape, shape,
                   lambda x: x.transpose(0, 2, 1))


@pytest.mark.parametrize("rows_a,cols_a", [(7, 5), (16, 64), (33, 1)])
def test_transpose_backward_matches_finite_differences(lib, device, rng, rows_a, cols_a):
    """L(A) = <dC, transpose(A)>: central differences along random directions E must equal
    <transpose_backward(dC), E> (the op is linear, so only rounding separates them)."""
    a = rng.standard_normal((rows_a, cols_a))
    dc = rng.standard_normal((cols_a, rows_a)).astype(np.float32)
    tdc, tda = device.upload(dc), device.empty((rows_a, cols_a))
    lib.check("execute_transpose_backward_on_gpu", device.index, tdc.handle, tda.handle,
              rows_a, cols_a)
    grad = tda.numpy().astype(np.float64)

    def loss(values):
        tin, tout = device.upload(values.astype(np.float32)), device.empty((cols_a, rows_a))
        lib.check("execute_transpose_on_gpu", device.index, tin.handle, tout.handle,
                  rows_a, cols_a)
        result = float(np.sum(tout.numpy().astype(np.float64) * dc))
        tin.free(), tout.free()
        return result

    h = 0.5
    for _ in range(3):
        e = rng.standard_normal((rows_a, cols_a))
        numeric = (loss(a + h * e) - loss(a - h * e)) / (2 * h)
        assert numeric == pytest.approx(float(np.sum(grad * e)), rel=1e-5, abs=1e-4)
    tdc.free(), tda.free()


LAYOUT_OPS = [
    ("execute_transpose_on_gpu", ["buffer_input", "buffer_output"], ["rows", "cols"], (5, 7)),
    ("execute_transpose_backward_on_gpu", ["buffer_dC", "buffer_dA"], ["rows_A", "cols_A"], (5, 7)),
    ("execute_transpose_batched_gpu", ["in", "out"], ["B_flat", "d1", "d2"], (3, 5, 7)),
    ("execute_transpose_12_batched_gpu", ["buffer_in", "buffer_out"], ["B", "D1", "D2", "D3"],
     (2, 3, 5, 4)),
]


@pytest.mark.parametrize("function,names,dim_names,dims", LAYOUT_OPS)
def test_validation(lib, device, function, names, dim_names, dims):
    count = int(np.prod(dims))
    tin = device.upload(np.arange(count, dtype=np.float32), guard=0)
    tout = device.empty((count,), guard=0)
    call = getattr(lib, function)
    check_buffer_refusals(lib, device, lambda h: call(device.index, *h, *dims), [tin, tout],
                          names, function)
    tout.poison()
    check_dim_refusals(lib, lambda d: call(device.index, tin.handle, tout.handle, *d), dims,
                       dim_names, function, [tout])
    expect_refusal(lib, call(device.index, tin.handle, tin.handle, *dims), function, "same buffer")
    assert call(device.index, tin.handle, tout.handle, *dims) == 1   # still works
    tin.free(), tout.free()


def test_buffers_larger_than_needed_are_accepted(lib, device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    tin = device.upload(x)
    big = Tensor(device, (100,), np.float32).poison()
    lib.check("execute_transpose_on_gpu", device.index, tin.handle, big.handle, 4, 6)
    got = big.numpy()
    assert_bitwise(got[:24], x.T.reshape(-1))
    assert np.isnan(got[24:]).all()   # nothing past the 24 elements the op owns
    tin.free(), big.free()


@pytest.mark.parametrize("limit", ["1", "7", "100"])
def test_small_and_odd_work_group_sizes(lib, device, rng, monkeypatch, limit):
    """AETHERCL_WG_LIMIT caps the work-group size these kernels choose: tiles must still be
    covered completely with 1, 7 or 100 work-items per group."""
    monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    _transpose(lib, device, rng, "execute_transpose_on_gpu", (97, 131), (97, 131), lambda x: x.T)
    _transpose(lib, device, rng, "execute_transpose_batched_gpu", (5, 17, 33), (5, 17, 33),
               lambda x: x.transpose(0, 2, 1))
    for shape in [(3, 17, 19, 1), (2, 5, 9, 3)]:
        _transpose(lib, device, rng, "execute_transpose_12_batched_gpu", shape, shape,
                   lambda x: x.transpose(0, 2, 1, 3))
