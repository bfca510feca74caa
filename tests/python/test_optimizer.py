"""Adam (docs/ABI.md §4.9) against NumPy models of the specification, over steps t = 1..5.
Tolerances: m and v use only float32 additions and multiplications (the kernel disables FMA
contraction), so they must equal the float32 model bit for bit while weight decay is off; with
weight decay, and for p (which goes through sqrt and a division the device may round within
OpenCL's few-ulp limits), p, m and v are within 4 float32 ulps of the float32 model
(rtol 5e-7, atol 1e-30 for m and v). p also gets an absolute allowance of 8 ulps of the step
size lr per step taken (atol t*8*2^-24*lr): where p nearly cancels, a few-ulp difference in the
update (seen on NVIDIA, whose divide and sqrt are not correctly rounded) is a large relative error. Against the float64 model (beta^t as double pow rounded to float), all
three are within rtol 1e-5 after 5 steps (atol 1e-7 for m and v, which pass through zero)."""
import math

import numpy as np
import pytest

from support.op_checks import assert_bitwise, check_buffer_refusals, expect_refusal

F = "execute_adam_update_on_gpu"
LR, B1, B2, EPS = 3e-4, 0.9, 0.999, 1e-8
f32 = np.float32


def model(p, g, m, v, t, lr, beta1, beta2, eps, wd, dtype):
    """One step of docs/ABI.md §4.9 in `dtype` arithmetic (float32 mirrors the kernel's
    roundings)."""
    c = lambda x: dtype(x)  # noqa: E731
    p, g, m, v = (x.astype(dtype) for x in (p, g, m, v))
    lr, beta1, beta2, eps, wd = (c(f32(x)) for x in (lr, beta1, beta2, eps, wd))
    beta1_t = c(f32(math.pow(float(beta1), t)))
    beta2_t = c(f32(math.pow(float(beta2), t)))
    if wd > 0:
        g = g + wd * p
    m = beta1 * m + (c(1) - beta1) * g
    v = beta2 * v + (c(1) - beta2) * (g * g)
    m_hat = m / ((c(1) - beta1_t) + c(1e-9))
    v_hat = v / ((c(1) - beta2_t) + c(1e-9))
    p = p - (lr * m_hat) / (np.sqrt(v_hat) + eps)
    return p, m, v


def upload_state(device, p, g, m, v, guard=64):
    return [device.upload(x.astype(np.float32), guard=guard) for x in (p, g, m, v)]


@pytest.mark.parametrize("n", [1, 53, 1000, 65537])
@pytest.mark.parametrize("wd", [0.0, 0.02])
def test_adam_steps(lib, device, rng, n, wd):
    p = rng.standard_normal(n).astype(np.float32)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    tensors = upload_state(device, p, np.zeros(n), m, v)
    tp, tg, tm, tv = tensors
    p32, m32, v32 = p, m, v
    p64, m64, v64 = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    for t in range(1, 6):
        g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1, n)).astype(np.float32)
        tg.write(g)
        lib.check(F, device.index, tp.handle, tg.handle, tm.handle, tv.handle, n, t, LR, B1, B2,
                  EPS, wd)
        p32, m32, v32 = model(p32, g, m32, v32, t, LR, B1, B2, EPS, wd, np.float32)
        p64, m64, v64 = model(p64, g, m64, v64, t, LR, B1, B2, EPS, wd, np.float64)
        gp, gm, gv = tp.numpy(), tm.numpy(), tv.numpy()
        if wd == 0.0:
            assert_bitwise(gm, m32)
            assert_bitwise(gv, v32)
        p_atol = t * 8 * 2.0**-24 * LR
        for got, ref, atol in ((gp, p32, p_atol), (gm, m32, 1e-30), (gv, v32, 1e-30)):
            np.testing.assert_allclose(got, ref, rtol=5e-7, atol=atol)
        np.testing.assert_allclose(gp, p64, rtol=1e-5)
        np.testing.assert_allclose(gm, m64, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(gv, v64, rtol=1e-5, atol=1e-7)
        assert_bitwise(tg.numpy(), g)   # the gradient is read-only
    assert all(x.guard_intact() for x in tensors)
    for x in tensors:
        x.free()


@pytest.mark.parametrize("limit", ["1", "7"])
def test_adam_with_small_and_odd_work_groups(lib, device, rng, monkeypatch, limit):
    monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    test_adam_steps(lib, device, rng, 1000, 0.02)


def test_adam_first_step_moves_each_parameter_by_about_lr(lib, device, rng):
    """With m = v = 0 and t = 1 the bias-corrected step is lr * g / (|g| + eps) ~ lr * sign(g)."""
    n = 101
    p = rng.standard_normal(n).astype(np.float32)
    g = (rng.choice([-1.0, 1.0], n) * rng.uniform(0.1, 2.0, n)).astype(np.float32)
    tp, tg, tm, tv = upload_state(device, p, g, np.zeros(n), np.zeros(n))
    lib.check(F, device.index, tp.handle, tg.handle, tm.handle, tv.handle, n, 1, 1e-2, B1, B2,
              EPS, 0.0)
    np.testing.assert_allclose(tp.numpy(), p - 1e-2 * np.sign(g), rtol=0, atol=2e-5)
    for x in (tp, tg, tm, tv):
        x.free()


def test_weight_decay_is_coupled_l2(lib, device):
    """g = 0 with wd > 0: the update comes only from wd * p inside the moments."""
    n = 4
    p = np.array([1.0, -2.0, 0.5, 0.0], np.float32)
    tp, tg, tm, tv = upload_state(device, p, np.zeros(n), np.zeros(n), np.zeros(n))
    lib.check(F, device.index, tp.handle, tg.handle, tm.handle, tv.handle, n, 1, 0.1, B1, B2,
              EPS, 0.5)
    np.testing.assert_allclose(tm.numpy(), (1 - f32(0.9)) * 0.5 * p, rtol=1e-6)
    got = tp.numpy()
    np.testing.assert_allclose(got[:3], p[:3] - 0.1 * np.sign(p[:3]), rtol=1e-5)
    assert got[3] == 0.0
    for x in (tp, tg, tm, tv):
        x.free()


BAD_HYPER = [
    ("t", 0, "t = 0"), ("t", -3, "t = -3"), ("lr", -1e-3, "lr"), ("lr", math.nan, "lr"),
    ("lr", math.inf, "lr"), ("beta1", 1.0, "beta1"), ("beta1", -0.1, "beta1"),
    ("beta1", math.nan, "beta1"), ("beta2", 1.0, "beta2"), ("beta2", 1.5, "beta2"),
    ("beta2", math.nan, "beta2"), ("eps", -1e-8, "eps"), ("eps", math.nan, "eps"),
    ("weight_decay", -0.01, "weight_decay"), ("weight_decay", math.nan, "weight_decay"),
    ("weight_decay", math.inf, "weight_decay"),
]
GOOD = dict(t=1, lr=LR, beta1=B1, beta2=B2, eps=EPS, weight_decay=0.02)


def _call(lib, device, handles, n, **overrides):
    h = dict(GOOD, **overrides)
    return lib.execute_adam_update_on_gpu(device.index, *handles, n, h["t"], h["lr"], h["beta1"],
                                          h["beta2"], h["eps"], h["weight_decay"])


@pytest.mark.parametrize("name,value,fragment", BAD_HYPER)
def test_bad_hyper_parameters_are_refused_without_touching_state(lib, device, rng, name, value,
                                                                  fragment):
    n = 53
    state = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    tensors = upload_state(device, *state)
    handles = [x.handle for x in tensors]
    expect_refusal(lib, _call(lib, device, handles, n, **{name: value}), F, fragment)
    for x, original in zip(tensors, state):
        assert_bitwise(x.numpy(), original)
    # num_elements == 0 succeeds before the hyper-parameters are looked at, touching nothing.
    assert _call(lib, device, handles, 0, **{name: value}) == 1, lib.last_error()
    for x, original in zip(tensors, state):
        assert_bitwise(x.numpy(), original)
    assert _call(lib, device, handles, n) == 1
    for x in tensors:
        x.free()


@pytest.mark.parametrize("overrides", [dict(beta1=0.0), dict(beta2=0.0), dict(eps=0.0),
                                       dict(lr=0.0), dict(weight_decay=0.0),
                                       dict(t=2**31 - 1), dict(beta1=0.9999999, beta2=0.9999999)])
def test_boundary_hyper_parameters_are_accepted(lib, device, rng, overrides):
    n = 7
    p = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    tensors = upload_state(device, p, g, np.zeros(n), np.zeros(n))
    assert _call(lib, device, [x.handle for x in tensors], n, **overrides) == 1, lib.last_error()
    h = dict(GOOD, **overrides)
    ref, _, _ = model(p, g, np.zeros(n), np.zeros(n), h["t"], h["lr"], h["beta1"], h["beta2"],
                      h["eps"], h["weight_decay"], np.float64)
    np.testing.assert_allclose(tensors[0].numpy(), ref, rtol=1e-5, atol=1e-6)
    for x in tensors:
        x.free()


def test_buffer_and_count_validation(lib, device):
    n = 53
    tensors = [device.upload(np.ones(n, np.float32), guard=0) for _ in range(4)]
    names = ["param_buffer", "grad_buffer", "m_buffer", "v_buffer"]
    check_buffer_refusals(lib, device, lambda h: _call(lib, device, h, n), tensors, names, F)
    handles = [x.handle for x in tensors]
    before = [x.numpy().tobytes() for x in tensors]
    expect_refusal(lib, _call(lib, device, handles, -1), F, "num_elements", "negative")
    expect_refusal(lib, _call(lib, device, handles, n + 1), F, "bytes")
    expect_refusal(lib, _call(lib, device, [None] * 4, 0), F, "NULL")
    assert [x.numpy().tobytes() for x in tensors] == before
    for x in tensors:
        x.free()
