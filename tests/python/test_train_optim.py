"""SGD (momentum, dampening, Nesterov, weight decay), AdamW and global gradient-norm clipping,
several steps against float64 NumPy transcriptions of PyTorch's update rules; MSE and
cross-entropy (ignore_index, label smoothing, SUM / MEAN / per-row) with their gradients checked
against finite differences of the float64 reference.

Tolerances: an update is a few float32 operations per element: rtol 1e-5, atol 1e-6 per step,
compounding over 5 steps to rtol 5e-5. Clipping: the norm is an acc_t sum (rtol 1e-6); scaled
gradients one multiplication (rtol 1e-6). Losses: acc_t sums of float32 terms, rtol 1e-5;
gradients rtol 1e-5, atol 1e-6 (1e-4 with label smoothing's extra terms)."""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import close, no_poison


def sgd_reference(p, grads, lr, wd, momentum, dampening, nesterov):
    p = p.astype(np.float64).copy()
    buf = None
    for g in grads:
        g = g.astype(np.float64) + wd * p
        if momentum > 0:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def adamw_reference(p, grads, lr, wd, b1, b2, eps):
    p = p.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    return p


@pytest.mark.parametrize("momentum,dampening,nesterov,wd", [
    (0.0, 0.0, 0, 0.0), (0.0, 0.0, 0, 0.01), (0.9, 0.0, 0, 0.0), (0.9, 0.1, 0, 1e-3),
    (0.9, 0.0, 1, 1e-2)])
@pytest.mark.parametrize("n", [1, 1031])
def test_sgd_steps(scope, device, rng, momentum, dampening, nesterov, wd, n):
    p = rng.standard_normal(n).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(5)]
    tp, tg, tb = scope.in_(p), scope.out((n,)), scope.out((n,))
    for step, g in enumerate(grads, start=1):
        tg.write(g)
        desc = T.OptimizerDesc(kind=T.OPTIMIZER_SGD, count=n, param=tp.handle, grad=tg.handle,
                               state1=tb.handle if momentum else None, lr=0.05, weight_decay=wd,
                               momentum=momentum, dampening=dampening, nesterov=nesterov,
                               step=step)
        ops.optimizer_step(device.index, desc)
    close(tp.numpy(), sgd_reference(p, grads, 0.05, wd, momentum, dampening, nesterov), 5e-5,
          1e-6)


@pytest.mark.parametrize("wd", [0.0, 0.01, 0.5])
@pytest.mark.parametrize("n", [3, 4097])
def test_adamw_steps(scope, device, rng, wd, n):
    p = rng.standard_normal(n).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) * 0.1 for _ in range(5)]
    tp, tg = scope.in_(p), scope.out((n,))
    tm, tv = scope.in_(np.zeros(n, np.float32)), scope.in_(np.zeros(n, np.float32))
    for step, g in enumerate(grads, start=1):
        tg.write(g)
        ops.optimizer_step(device.index, T.OptimizerDesc(
            kind=T.OPTIMIZER_ADAMW, count=n, param=tp.handle, grad=tg.handle, state1=tm.handle,
            state2=tv.handle, lr=1e-2, weight_decay=wd, beta1=0.9, beta2=0.999, eps=1e-8,
            step=step))
    close(tp.numpy(), adamw_reference(p, grads, 1e-2, wd, 0.9, 0.999, 1e-8), 5e-5, 1e-6)


def test_optimizer_refusals(scope, device, lib):
    t = [scope.out((4,)) for _ in range(4)]
    base = dict(kind=T.OPTIMIZER_ADAMW, count=4, param=t[0].handle, grad=t[1].handle,
                state1=t[2].handle, state2=t[3].handle, lr=1e-3, beta1=0.9, beta2=0.999,
                eps=1e-8, step=1)
    cases = [(dict(step=0), "desc.step"), (dict(kind=2), "desc.kind"),
             (dict(beta1=1.0), "desc.beta1"), (dict(lr=float("nan")), "desc.lr"),
             (dict(eps=-1.0), "desc.eps"), (dict(state2=None), "desc.state2 is NULL"),
             (dict(state2=t[0].handle), "same buffer"),
             (dict(kind=T.OPTIMIZER_SGD, momentum=0.9, state1=None), "desc.state1 is NULL"),
             (dict(kind=T.OPTIMIZER_SGD, nesterov=1, momentum=0.0), "Nesterov"),
             (dict(kind=T.OPTIMIZER_SGD, nesterov=1, momentum=0.9, dampening=0.1), "Nesterov")]
    for change, words in cases:
        desc = T.OptimizerDesc(**dict(base, **change))
        assert lib.aethercl_optimizer_step(device.index, desc.address, None) == 0
        assert words in lib.last_error(), (change, lib.last_error())
    # SGD without momentum needs no state.
    desc = T.OptimizerDesc(**dict(base, kind=T.OPTIMIZER_SGD, state1=None, state2=None))
    assert lib.aethercl_optimizer_step(device.index, desc.address, None) == 1


# ---- clipping ---------------------------------------------------------------------------------
@pytest.mark.parametrize("max_norm", [0.5, 1e6, float("inf"), 0.0])
def test_clip_grad_norm(scope, device, rng, max_norm):
    sizes = [1, 4099, 37, 0, 70_001]
    grads = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    tensors = [scope.in_(g) if g.size else scope.out((1,)) for g in grads]
    total = scope.out((1,))
    ops.clip_grad_norm(device.index, [t.handle for t in tensors], sizes, max_norm, total.handle)
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    close(total.numpy(), [norm], 1e-6, 0)
    coef = min(1.0, max_norm / (norm + 1e-6))
    for t, g in zip(tensors, grads):
        if g.size:
            close(t.numpy(), g * coef, 1e-6, 1e-30)


def test_clip_leaves_nonfinite_gradients_alone(scope, device):
    g = np.array([1.0, np.inf, 2.0], np.float32)
    t, total = scope.in_(g), scope.out((1,))
    ops.clip_grad_norm(device.index, [t.handle], [3], 1.0, total.handle)
    assert np.isinf(total.numpy()[0]) and np.array_equal(t.numpy(), g)


def test_clip_refusals(scope, device, lib):
    a, b = scope.out((4,)), scope.out((4,))
    with pytest.raises(Exception, match="appears twice"):
        ops.clip_grad_norm(device.index, [a.handle, a.handle], [4, 4], 1.0)
    with pytest.raises(Exception, match="max_norm"):
        ops.clip_grad_norm(device.index, [a.handle], [4], -1.0)
    with pytest.raises(Exception, match=r"grads\[1\]"):
        ops.clip_grad_norm(device.index, [a.handle, b.handle], [4, 100], 1.0)
    with pytest.raises(Exception, match="total_norm"):
        ops.clip_grad_norm(device.index, [a.handle], [4], 1.0, a.handle)
    assert lib.aethercl_clip_grad_norm(device.index, -1, None, None, 1.0, None, None) == 0
    assert lib.aethercl_clip_grad_norm(device.index, 0, None, None, 1.0, None, None) == 1


# ---- losses -----------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", [T.SUM, T.MEAN])
@pytest.mark.parametrize("n", [1, 7, 10_007])
def test_mse(scope, device, rng, reduction, n):
    p = rng.standard_normal(n).astype(np.float32)
    t = rng.standard_normal(n).astype(np.float32)
    tp, tt, tl, tg = scope.in_(p), scope.in_(t), scope.out((1,)), scope.out((n,))
    ops.mse_loss(device.index, tp.handle, tt.handle, tl.handle, tg.handle, n, reduction)
    d = p.astype(np.float64) - t
    div = n if reduction == T.MEAN else 1
    close(tl.numpy(), [(d * d).sum() / div], 1e-6, 0)
    close(tg.numpy(), 2 * d / div, 1e-6, 1e-12)
    if n <= 7:
        fd = R.numeric_gradient(lambda v: ((v - t) ** 2).sum() / div, p, np.ones(()))
        close(tg.numpy(), fd, 1e-5, 1e-6)


CE_CASES = [(1, 2, 0.0), (5, 7, 0.0), (6, 11, 0.1), (33, 1000, 0.0), (4, 3, 1.0)]


@pytest.mark.parametrize("rows,classes,smoothing", CE_CASES)
@pytest.mark.parametrize("reduction", [T.SUM, T.MEAN, T.NO_REDUCTION])
def test_cross_entropy(scope, device, rng, row_group, rows, classes, smoothing, reduction):
    logits = (rng.standard_normal((rows, classes)) * 3).astype(np.float32)
    targets = rng.integers(0, classes, rows).astype(np.int32)
    if rows > 2:
        targets[1] = -100  # ignored
    name = {T.SUM: "sum", T.MEAN: "mean", T.NO_REDUCTION: "none"}[reduction]
    tl, tt = scope.in_(logits), scope.in_(targets)
    tloss = scope.out((rows,) if reduction == T.NO_REDUCTION else (1,))
    tgrad = scope.out((rows, classes))
    ops.cross_entropy(device.index, T.CrossEntropyDesc(
        rows=rows, classes=classes, ignore_index=-100, label_smoothing=smoothing,
        reduction=reduction, logits=tl.handle, targets=tt.handle, loss=tloss.handle,
        grad=tgrad.handle))
    expected = R.cross_entropy(logits, targets, -100, smoothing, name)
    close(tloss.numpy(), np.atleast_1d(expected), 1e-5, 1e-6, "loss")
    grad = tgrad.numpy()
    no_poison(grad)
    weights = np.ones(rows) if reduction == T.NO_REDUCTION else np.ones(())
    f = lambda v: np.asarray(R.cross_entropy(v, targets, -100, smoothing, name))  # noqa: E731
    if rows * classes <= 100:
        fd = R.numeric_gradient(f, logits, weights)
        close(grad, fd, 1e-5, 1e-4 if smoothing else 1e-6, "grad")
    else:  # analytic: (softmax - target distribution) / valid rows
        p = np.exp(R.log_softmax(logits))
        q = np.full_like(p, smoothing / classes)
        valid = targets != -100
        q[np.arange(rows)[valid], targets[valid]] += 1 - smoothing
        g = np.where(valid[:, None], p - q, 0.0)
        close(grad, g / (valid.sum() if reduction == T.MEAN else 1), 1e-5, 1e-6, "grad")


def test_cross_entropy_invalid_targets_all_ignored_and_no_rows(scope, device):
    logits = np.zeros((3, 4), np.float32)
    for targets, reduction, expected in (([0, 9, -100], T.NO_REDUCTION, [np.log(4), np.nan, 0]),
                                          ([-100, -100, -100], T.MEAN, [np.nan]),
                                          ([-100, -100, -100], T.SUM, [0.0])):
        tl, tt = scope.in_(logits), scope.in_(np.array(targets, np.int32))
        tloss, tgrad = scope.out((3,) if reduction == T.NO_REDUCTION else (1,)), scope.out((3, 4))
        ops.cross_entropy(device.index, T.CrossEntropyDesc(
            rows=3, classes=4, ignore_index=-100, reduction=reduction, logits=tl.handle,
            targets=tt.handle, loss=tloss.handle, grad=tgrad.handle))
        close(tloss.numpy(), expected, 1e-6, 1e-6)
        grad = tgrad.numpy()
        for r, t in enumerate(targets):
            if t == -100:
                assert (grad[r] == 0).all()
            elif t >= 4:
                assert np.isnan(grad[r]).all()
    tloss = scope.out((1,))
    ops.cross_entropy(device.index, T.CrossEntropyDesc(
        rows=0, classes=4, ignore_index=-100, reduction=T.MEAN, logits=tl.handle,
        targets=tt.handle, loss=tloss.handle))
    assert np.isnan(tloss.numpy()[0])


def test_loss_refusals(scope, device, lib):
    a, b = scope.out((4,)), scope.out((4,))
    assert lib.aethercl_mse_loss(device.index, a.handle, b.handle, None, None, 4, T.MAX,
                                 None) == 0
    assert "reduction" in lib.last_error()
    assert lib.aethercl_mse_loss(device.index, a.handle, b.handle, a.handle, None, 4, T.SUM,
                                 None) == 0
    desc = T.CrossEntropyDesc(rows=2, classes=2, reduction=T.MEAN, logits=a.handle,
                              targets=b.handle, loss=b.handle, label_smoothing=1.5)
    assert lib.aethercl_cross_entropy(device.index, desc.address, None) == 0
    assert "label_smoothing" in lib.last_error()
