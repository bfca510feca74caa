"""Embedding family: lookup (a gather, zero rows for ids outside [0, v)) and the accumulating
scatter-add backward.
Tolerances: lookup is a copy and must be bit-exact. The default (deterministic) backward adds the
dO rows of each id in ascending position order onto the existing dW, so it must equal a float32
sequential loop (np.add.at) bit for bit and repeat bit-identically; against float64 it is within
1e-5 relative + 1e-5 absolute. The opt-in atomic path (AETHERCL_DETERMINISTIC=0) is checked
against float64 with the same tolerance and must lose no update (integer-valued sums are exact)."""
import numpy as np
import pytest

from support.op_checks import (assert_bitwise, check_buffer_refusals, check_dim_refusals,
                       expect_refusal)

INT_MIN, INT_MAX = -2**31, 2**31 - 1
SHAPES = [(1, 1, 1, 1), (16, 64, 16, 53), (3, 7, 5, 11), (2, 13, 33, 1000), (1, 257, 3, 2),
          (5, 1, 300, 7)]


def random_ids(rng, b, s, v, invalid_fraction=0.15):
    ids = rng.integers(0, v, (b, s)).astype(np.int32)
    invalid = rng.random((b, s)) < invalid_fraction
    pool = np.array([-1, v, v + 5, INT_MIN, INT_MAX], np.int64)
    ids[invalid] = rng.choice(pool, int(invalid.sum())).astype(np.int32)
    return ids


def lookup_ref(ids, w):
    v, d = w.shape
    out = np.zeros(ids.shape + (d,), np.float32)
    valid = (ids >= 0) & (ids < v)
    out[valid] = w[ids[valid]]
    return out


def backward_ref32(d_o, ids, d_w):
    """Sequential float32 accumulation in position order (the deterministic kernel's order)."""
    v, d = d_w.shape
    out = d_w.copy()
    flat_ids, flat_rows = ids.reshape(-1), d_o.reshape(-1, d)
    valid = (flat_ids >= 0) & (flat_ids < v)
    np.add.at(out, flat_ids[valid], flat_rows[valid])
    return out


def backward_ref64(d_o, ids, d_w):
    v, d = d_w.shape
    out = d_w.astype(np.float64)
    flat_ids, flat_rows = ids.reshape(-1), d_o.reshape(-1, d).astype(np.float64)
    valid = (flat_ids >= 0) & (flat_ids < v)
    np.add.at(out, flat_ids[valid], flat_rows[valid])
    return out


def run_backward(lib, device, d_o, ids, d_w0):
    b, s, d = d_o.shape
    v = d_w0.shape[0]
    tdo, tidx, tdw = device.upload(d_o), device.upload(ids), device.upload(d_w0)
    lib.check("execute_embedding_backward_gpu", device.index, tdo.handle, tidx.handle, tdw.handle,
              b, s, d, v)
    got = tdw.numpy()
    assert tdw.guard_intact() and tdo.guard_intact() and tidx.guard_intact()
    for t in (tdo, tidx, tdw):
        t.free()
    return got


@pytest.mark.parametrize("b,s,d,v", SHAPES)
def test_lookup(lib, device, rng, b, s, d, v):
    ids = random_ids(rng, b, s, v)
    w = rng.standard_normal((v, d)).astype(np.float32)
    tidx, tw, tout = device.upload(ids), device.upload(w), device.empty((b, s, d))
    lib.check("execute_embedding_lookup_gpu", device.index, tidx.handle, tw.handle, tout.handle,
              b, s, d, v)
    assert_bitwise(tout.numpy(), lookup_ref(ids, w))
    assert tout.guard_intact()
    for t in (tidx, tw, tout):
        t.free()


def test_lookup_with_empty_vocabulary_gives_zero_rows(lib, device, rng):
    ids = np.array([[0, 1, -1]], np.int32)
    tidx, tw, tout = device.upload(ids), device.empty((1,)), device.empty((1, 3, 4))
    lib.check("execute_embedding_lookup_gpu", device.index, tidx.handle, tw.handle, tout.handle,
              1, 3, 4, 0)
    assert_bitwise(tout.numpy(), np.zeros((1, 3, 4), np.float32))
    for t in (tidx, tw, tout):
        t.free()


@pytest.mark.parametrize("b,s,d,v", SHAPES)
def test_backward_accumulates_onto_existing_gradient(lib, device, rng, b, s, d, v):
    ids = random_ids(rng, b, s, v)
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    got = run_backward(lib, device, d_o, ids, d_w0)
    assert_bitwise(got, backward_ref32(d_o, ids, d_w0))
    np.testing.assert_allclose(got, backward_ref64(d_o, ids, d_w0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("limit", ["1", "7", "100"])
def test_backward_with_small_and_odd_work_groups(lib, device, rng, monkeypatch, limit):
    """The segmented kernel's scan and column loop must work for any work-group size."""
    monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    b, s, d, v = 3, 67, 150, 9
    ids = random_ids(rng, b, s, v)
    ids[1, :30] = 4
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    assert_bitwise(run_backward(lib, device, d_o, ids, d_w0), backward_ref32(d_o, ids, d_w0))


def test_backward_with_every_id_equal(lib, device, rng):
    b, s, d, v = 16, 64, 16, 53
    ids = np.full((b, s), 7, np.int32)
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    got = run_backward(lib, device, d_o, ids, d_w0)
    assert_bitwise(got, backward_ref32(d_o, ids, d_w0))
    np.testing.assert_allclose(got, backward_ref64(d_o, ids, d_w0), rtol=1e-5, atol=1e-4)
    untouched = np.arange(v) != 7
    assert_bitwise(got[untouched], d_w0[untouched])


def test_backward_skips_invalid_ids(lib, device, rng):
    b, s, d, v = 2, 5, 3, 4
    ids = np.array([[-1, 4, 5, INT_MIN, INT_MAX], [2, -7, 2, 100, 4]], np.int32)
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    got = run_backward(lib, device, d_o, ids, d_w0)
    expected = d_w0.copy()
    expected[2] = (d_w0[2] + d_o[1, 0]) + d_o[1, 2]
    assert_bitwise(got, expected)


def test_backward_is_bit_reproducible(lib, device, rng):
    b, s, d, v = 8, 129, 37, 19
    ids = rng.integers(0, v, (b, s)).astype(np.int32)
    scale = np.exp(rng.uniform(-8, 8, (b, s, 1)))
    d_o = (rng.standard_normal((b, s, d)) * scale).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    first = run_backward(lib, device, d_o, ids, d_w0)
    for _ in range(2):
        assert_bitwise(run_backward(lib, device, d_o, ids, d_w0), first)


@pytest.mark.parametrize("deterministic", ["1", "0"])
def test_backward_loses_no_update(lib, device, monkeypatch, deterministic):
    """dO = 1 everywhere: each dW element must gain exactly the number of occurrences of its id
    (integer sums are exact in float32), on both the default and the atomic path."""
    monkeypatch.setenv("AETHERCL_DETERMINISTIC", deterministic)
    b, s, d, v = 16, 256, 8, 3
    ids = (np.arange(b * s) % 2).reshape(b, s).astype(np.int32)   # ids 0 and 1 only
    ids[0, :10] = 2
    d_w0 = np.full((v, d), 5.0, np.float32)
    got = run_backward(lib, device, np.ones((b, s, d), np.float32), ids, d_w0)
    counts = np.bincount(ids.reshape(-1), minlength=v).astype(np.float32)
    assert_bitwise(got, 5.0 + np.repeat(counts[:, None], d, axis=1))


@pytest.mark.parametrize("b,s,d,v", [(16, 64, 16, 53), (3, 7, 5, 11), (2, 100, 3, 1)])
def test_atomic_backward_matches_reference(lib, device, rng, monkeypatch, b, s, d, v):
    monkeypatch.setenv("AETHERCL_DETERMINISTIC", "0")
    ids = random_ids(rng, b, s, v)
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    d_w0 = rng.standard_normal((v, d)).astype(np.float32)
    got = run_backward(lib, device, d_o, ids, d_w0)
    np.testing.assert_allclose(got, backward_ref64(d_o, ids, d_w0), rtol=1e-5, atol=1e-4)


def test_backward_matches_finite_differences_of_lookup(lib, device, rng):
    """L(W) = <dO, lookup(W)>: central differences along random directions E must equal
    <embedding_backward(dO) onto zeros, E> (L is linear in W; only rounding separates them)."""
    b, s, d, v = 4, 9, 6, 7
    ids = random_ids(rng, b, s, v)
    ids[0, :4] = 3                                                # duplicates
    d_o = rng.standard_normal((b, s, d)).astype(np.float32)
    grad = run_backward(lib, device, d_o, ids, np.zeros((v, d), np.float32)).astype(np.float64)
    tidx = device.upload(ids)
    w = rng.standard_normal((v, d))

    def loss(weights):
        tw, tout = device.upload(weights.astype(np.float32)), device.empty((b, s, d))
        lib.check("execute_embedding_lookup_gpu", device.index, tidx.handle, tw.handle,
                  tout.handle, b, s, d, v)
        value = float(np.sum(tout.numpy().astype(np.float64) * d_o))
        tw.free(), tout.free()
        return value

    h = 0.25
    for _ in range(3):
        e = rng.standard_normal((v, d))
        numeric = (loss(w + h * e) - loss(w - h * e)) / (2 * h)
        assert numeric == pytest.approx(float(np.sum(grad * e)), rel=1e-5, abs=1e-4)
    tidx.free()


DIMS = (2, 3, 4, 5)   # b, s, d, v


def test_lookup_validation(lib, device):
    b, s, d, v = DIMS
    f = "execute_embedding_lookup_gpu"
    tidx = device.upload(np.zeros((b, s), np.int32), guard=0)
    tw = device.upload(np.ones((v, d), np.float32), guard=0)
    tout = device.empty((b, s, d), guard=0)
    call = lambda h: lib.execute_embedding_lookup_gpu(device.index, *h, *DIMS)  # noqa: E731
    check_buffer_refusals(lib, device, call, [tidx, tw, tout], ["idx", "w", "o"], f)
    tout.poison()
    check_dim_refusals(lib, lambda dims: lib.execute_embedding_lookup_gpu(
        device.index, tidx.handle, tw.handle, tout.handle, *dims), DIMS, ["b", "s", "d", "v"], f,
        [tout], zero_noop_positions=[0, 1, 2])
    expect_refusal(lib, lib.execute_embedding_lookup_gpu(device.index, tidx.handle, tout.handle,
                                                         tout.handle, *DIMS), f, "same buffer")
    for t in (tidx, tw, tout):
        t.free()


def test_backward_validation(lib, device):
    b, s, d, v = DIMS
    f = "execute_embedding_backward_gpu"
    tdo = device.upload(np.ones((b, s, d), np.float32), guard=0)
    tidx = device.upload(np.zeros((b, s), np.int32), guard=0)
    tdw = device.upload(np.zeros((v, d), np.float32), guard=0)
    call = lambda h: lib.execute_embedding_backward_gpu(device.index, *h, *DIMS)  # noqa: E731
    check_buffer_refusals(lib, device, call, [tdo, tidx, tdw], ["d_o", "idx", "d_w"], f)
    tdw.write(np.full((v, d), 3.0, np.float32))
    check_dim_refusals(lib, lambda dims: lib.execute_embedding_backward_gpu(
        device.index, tdo.handle, tidx.handle, tdw.handle, *dims), DIMS, ["b", "s", "d", "v"], f,
        [tdw])
    expect_refusal(lib, lib.execute_embedding_backward_gpu(device.index, tdo.handle, tdw.handle,
                                                           tdw.handle, *DIMS), f, "same buffer")
    for t in (tdo, tidx, tdw):
        t.free()
