"""Loss family against float64 NumPy: log_softmax_stable and cross_entropy_loss_grad.

Tolerances (float32 storage; references are float64 on the same float32 inputs):
  log_softmax   |err| <= 2e-6 * max(1, |ref|) (x - max rounds to ~|x - max| * 6e-8; float32 sum)
  CE gradient   rtol 2e-6, atol 2e-7 (one float32 exp, then one subtraction of 1)
  CE loss       exact: the float32 negation of lp[t]; 0 for a target outside [0, V)
Determinism is checked bit for bit.
"""
import ctypes

import numpy as np
import pytest

from support.helpers import POISON_F32


# Every case runs with the device's own row group size and with groups of up to 64 items.
pytestmark = pytest.mark.usefixtures("row_group")

LSM_TOL = 2e-6
GRAD_RTOL, GRAD_ATOL = 2e-6, 2e-7
INVALID_TARGETS = [-1, -(2**31), 2**31 - 1]  # and V itself, per shape


def log_softmax_ref(x):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True) + 1e-9)


def log_softmax(lib, device, x):
    b, s, v = x.shape
    tx, tout = device.upload(x.astype(np.float32)), device.empty((b, s, v))
    lib.check("execute_log_softmax_stable_gpu", device.index, tx.handle, tout.handle, b, s, v)
    out = tout.numpy()
    assert tout.guard_intact() and tx.guard_intact()
    tx.free(), tout.free()
    return out


def cross_entropy(lib, device, lp, targets):
    b, s, v = lp.shape
    tlp = device.upload(lp.astype(np.float32))
    ttg = device.upload(targets.astype(np.int32))
    tgrad, tloss = device.empty((b, s, v)), device.empty((b * s,))
    lib.check("execute_cross_entropy_loss_grad_gpu", device.index, tlp.handle, ttg.handle,
              tgrad.handle, tloss.handle, b, s, v)
    grad, loss = tgrad.numpy(), tloss.numpy()
    assert all(t.guard_intact() for t in (tlp, ttg, tgrad, tloss))
    for t in (tlp, ttg, tgrad, tloss):
        t.free()
    return grad, loss


def cross_entropy_ref(lp, targets):
    """grad = exp(lp) - onehot for valid targets, plain exp(lp) otherwise; loss = -lp[t] or 0."""
    b, s, v = lp.shape
    flat, t = lp.reshape(-1, v), targets.reshape(-1).astype(np.int64)
    grad = np.exp(flat.astype(np.float64))
    valid = (t >= 0) & (t < v)
    rows = np.nonzero(valid)[0]
    grad[rows, t[rows]] -= 1.0
    loss = np.zeros(b * s, np.float32)
    loss[rows] = -flat[rows, t[rows]]
    return grad.reshape(b, s, v), loss


SHAPES = [(1, 1, 1), (1, 1, 2), (1, 3, 3), (2, 5, 16), (16, 64, 53), (3, 7, 64), (1, 2, 127),
          (2, 3, 257), (1, 4, 1000), (1, 3, 4099), (1, 1, 100003)]


@pytest.mark.parametrize("shape", SHAPES)
def test_log_softmax(lib, device, rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    out = log_softmax(lib, device, x)
    ref = log_softmax_ref(x)
    assert np.all(np.abs(out - ref) <= LSM_TOL * np.maximum(1.0, np.abs(ref)))


@pytest.mark.parametrize("center", [80.0, -80.0, 0.0])
def test_log_softmax_large_magnitude_is_stable(lib, device, rng, center):
    x = rng.standard_normal((2, 3, 53)) + center
    if center == 0.0:
        x += np.where(rng.random(x.shape) < 0.5, 80.0, -80.0)
    x = x.astype(np.float32)
    out = log_softmax(lib, device, x)
    ref = log_softmax_ref(x)
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out - ref) <= LSM_TOL * np.maximum(1.0, np.abs(ref)))


@pytest.mark.parametrize("shape", SHAPES)
def test_cross_entropy(lib, device, rng, shape):
    b, s, v = shape
    lp = log_softmax_ref(rng.standard_normal(shape) * 3).astype(np.float32)
    targets = rng.integers(0, v, (b, s)).astype(np.int32)
    targets.reshape(-1)[0] = 0  # the padding id is an ordinary class
    grad, loss = cross_entropy(lib, device, lp, targets)
    grad_ref, loss_ref = cross_entropy_ref(lp, targets)
    np.testing.assert_allclose(grad, grad_ref, rtol=GRAD_RTOL, atol=GRAD_ATOL)
    np.testing.assert_array_equal(loss, loss_ref)


def test_cross_entropy_invalid_targets_give_zero_loss_and_probability_rows(lib, device, rng):
    b, s, v = 2, 8, 53
    lp = log_softmax_ref(rng.standard_normal((b, s, v))).astype(np.float32)
    targets = rng.integers(0, v, (b, s)).astype(np.int32)
    invalid = INVALID_TARGETS + [v]
    flat = targets.reshape(-1)
    flat[1:1 + len(invalid)] = invalid
    grad, loss = cross_entropy(lib, device, lp, targets)
    grad_ref, loss_ref = cross_entropy_ref(lp, targets)
    rows = slice(1, 1 + len(invalid))
    assert np.all(loss[rows] == 0.0)
    np.testing.assert_allclose(grad.reshape(-1, v)[rows], np.exp(lp.reshape(-1, v)[rows]
                                                                 .astype(np.float64)),
                               rtol=GRAD_RTOL, atol=GRAD_ATOL)
    np.testing.assert_allclose(grad, grad_ref, rtol=GRAD_RTOL, atol=GRAD_ATOL)
    np.testing.assert_array_equal(loss, loss_ref)


def test_llm_pipeline_log_softmax_then_cross_entropy(lib, device, rng):
    """The llm.py sequence (16, 64, 53): both calls back to back, then a read of the loss."""
    b, s, v = 16, 64, 53
    logits = (rng.standard_normal((b, s, v)) * 2).astype(np.float32)
    targets = rng.integers(0, v, (b, s)).astype(np.int32)
    tlogits, ttg = device.upload(logits), device.upload(targets)
    tlp, tgrad, tloss = device.empty((b, s, v)), device.empty((b, s, v)), device.empty((b * s,))
    lib.check("execute_log_softmax_stable_gpu", device.index, tlogits.handle, tlp.handle, b, s, v)
    lib.check("execute_cross_entropy_loss_grad_gpu", device.index, tlp.handle, ttg.handle,
              tgrad.handle, tloss.handle, b, s, v)
    loss = tloss.numpy()
    lp_ref = log_softmax_ref(logits)
    rows = np.arange(b * s)
    loss_ref = -lp_ref.reshape(-1, v)[rows, targets.reshape(-1)]
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-5, atol=LSM_TOL)
    grad_ref = np.exp(lp_ref).reshape(-1, v)
    grad_ref[rows, targets.reshape(-1)] -= 1.0
    np.testing.assert_allclose(tgrad.numpy().reshape(-1, v), grad_ref, rtol=1e-5, atol=1e-6)
    first = (tlp.numpy().tobytes(), tgrad.numpy().tobytes(), loss.tobytes())
    # Determinism: a second run over the same inputs is bit-identical.
    lib.check("execute_log_softmax_stable_gpu", device.index, tlogits.handle, tlp.handle, b, s, v)
    lib.check("execute_cross_entropy_loss_grad_gpu", device.index, tlp.handle, ttg.handle,
              tgrad.handle, tloss.handle, b, s, v)
    assert (tlp.numpy().tobytes(), tgrad.numpy().tobytes(), tloss.numpy().tobytes()) == first
    assert all(t.guard_intact() for t in (tlogits, ttg, tlp, tgrad, tloss))
    for t in (tlogits, ttg, tlp, tgrad, tloss):
        t.free()


# ---- validation ------------------------------------------------------------------------------

def poisoned(t):
    return np.all(t.numpy().view(np.uint32) == POISON_F32.view(np.uint32))


def test_log_softmax_validation(lib, device):
    b, s, v = 2, 3, 10
    call, name = lib.execute_log_softmax_stable_gpu, "execute_log_softmax_stable_gpu"
    tin = device.upload(np.zeros((b, s, v), np.float32))
    out = device.empty((b, s, v))
    small = device.empty((b * s * v - 1,), guard=0)
    handles = [tin.handle, out.handle]
    for dims in [(0, s, v), (b, 0, v), (b, s, 0)]:
        assert call(device.index, *handles, *dims) == 1
    assert poisoned(out)
    for dims in [(-1, s, v), (b, -1, v), (b, s, -1), (0, -1, 0)]:
        assert call(device.index, *handles, *dims) == 0
        assert "negative" in lib.last_error() and name in lib.last_error()
    big = 2**31 - 1
    assert call(device.index, *handles, big, big, big) == 0
    assert "overflows" in lib.last_error()
    assert call(device.index, *handles, big, big, 1) == 0     # 2^62 elements: no such buffer
    for position in range(2):
        bad = list(handles)
        bad[position] = small.handle
        assert call(device.index, *bad, b, s, v) == 0
        assert "236 bytes" in lib.last_error() and "240 bytes" in lib.last_error()
        bad[position] = None
        assert call(device.index, *bad, b, s, v) == 0
        assert "NULL" in lib.last_error()
        bad[position] = ctypes.c_void_p(0xDEAD0000)
        assert call(device.index, *bad, b, s, v) == 0
    assert call(device.index, *handles, b, s, v) == 1
    for t in (tin, out, small):
        t.free()


def test_cross_entropy_validation(lib, device):
    b, s, v = 2, 3, 10
    call, name = lib.execute_cross_entropy_loss_grad_gpu, "execute_cross_entropy_loss_grad_gpu"
    lp = device.upload(np.full((b, s, v), -np.log(v), np.float32))
    tg = device.upload(np.zeros((b, s), np.int32))
    grad, loss = device.empty((b, s, v)), device.empty((b * s,))
    handles = [lp.handle, tg.handle, grad.handle, loss.handle]
    for dims in [(0, s, v), (b, 0, v), (b, s, 0)]:
        assert call(device.index, *handles, *dims) == 1
    assert poisoned(grad) and poisoned(loss)
    for dims in [(-1, s, v), (b, -1, v), (b, s, -1)]:
        assert call(device.index, *handles, *dims) == 0
        assert "negative" in lib.last_error() and name in lib.last_error()
    big = 2**31 - 1
    assert call(device.index, *handles, big, big, big) == 0
    assert "overflows" in lib.last_error()
    assert call(device.index, *handles, big, big, 1) == 0
    # Undersized by one element: the (B*S, V) float buffers and the (B*S) int32/float buffers.
    smalls = [device.empty((b * s * v - 1,), guard=0),
              device.empty((b * s - 1,), np.int32, guard=0),
              device.empty((b * s * v - 1,), guard=0), device.empty((b * s - 1,), guard=0)]
    sizes = [("236 bytes", "240 bytes"), ("20 bytes", "24 bytes"), ("236 bytes", "240 bytes"),
             ("20 bytes", "24 bytes")]
    for position in range(4):
        bad = list(handles)
        bad[position] = smalls[position].handle
        assert call(device.index, *bad, b, s, v) == 0
        message = lib.last_error()
        assert all(size in message for size in sizes[position]), message
        bad[position] = None
        assert call(device.index, *bad, b, s, v) == 0
        assert "NULL" in lib.last_error()
        bad[position] = ctypes.c_void_p(0xDEAD0000)
        assert call(device.index, *bad, b, s, v) == 0
    assert call(device.index, *handles, b, s, v) == 1
    np.testing.assert_allclose(loss.numpy(), np.log(v), rtol=1e-6)
    for t in [lp, tg, grad, loss] + smalls:
        t.free()
