"""16-bit activations in the frontend (ocl_llm.mixed, set_activation_precision): Linear and
LayerNorm against float64 NumPy references, a GPT step in bf16 against the float32 step, the step
captured in a graph against the eager one, and the float32 fallbacks of 16-bit tensors.

Tolerances. u = 2^-8 (bf16) or 2^-11 (f16) is the unit roundoff of the stored format, so one
rounding of a value v moves it by at most u |v|. A product over K terms of 16-bit operands
multiplies exactly in float32 (8 x 8 or 11 x 11 significant bits fit 24) and sums in float32:
at most K 2^-24 sum |terms| on top (the float32 suites' bound). Results stored in 16 bits add
one u |v|. Where an input of the product is itself an intermediate rounded on the device (the
GELU slope times the upstream gradient), the reference may round it the other way: one more u on
each term, so the bound uses 2u + K 2^-24 per term there."""
import math
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

import ocl_llm as L  # noqa: E402
from aethercl import bfloat16  # noqa: E402
from ocl_llm import mixed  # noqa: E402
from ocl_llm.graph_step import CapturedStep  # noqa: E402
from ocl_llm.loss import cross_entropy_loss_and_backward  # noqa: E402
from ocl_llm.model import Linear, SimpleModel  # noqa: E402
from ocl_llm.optimizers import AdamOptimizer  # noqa: E402
from ocl_llm.tensor import OclTensor, convert_into  # noqa: E402
from ocl_llm import model as model_module  # noqa: E402
from ocl_llm import weight_copies as weight_copies_module  # noqa: E402
from ocl_llm.weight_copies import packed_weight_copies, weight_copies  # noqa: E402

erf = np.vectorize(math.erf)
FORMATS = {"bf16": (bfloat16, 2.0 ** -8), "f16": (np.float16, 2.0 ** -11)}


@pytest.fixture
def frontend(device):
    L.ocl_initialize(device.index, verbose=False)
    yield
    L.set_activation_precision("fp32")
    L.ocl_shutdown(shutdown_driver=False)


def rounded(values: np.ndarray, fmt) -> np.ndarray:
    """values rounded to fmt (nearest even), as float64."""
    x = np.asarray(values, np.float32)
    if fmt is np.float16:
        return x.astype(np.float16).astype(np.float64)
    bits = x.view(np.uint32).astype(np.uint64)
    kept = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return kept.astype(np.uint32).view(np.float32).astype(np.float64)


def gelu(x):
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def gelu_slope(x):
    return 0.5 * (1 + erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def assert_within(got, want, bound, what):
    excess = np.abs(np.asarray(got, np.float64) - want) - bound
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess.max() <= 0, (f"{what}: {got[worst]} vs {want[worst]} at {worst} "
                               f"(bound {bound[worst]:.3g})")


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("shape", [(37, 45), (64, 32), (1, 70), (130, 66), (66, 131),
                                   (100, 132)])
def test_weight_copies_round_as_convert_does(frontend, rng, name, shape):
    """W16 and W16T are aethercl_convert's bits (nearest even; ties, overflow, inf and NaN
    included) in both layouts."""
    fmt, _ = FORMATS[name]
    w = (rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))).astype(np.float32)
    flat = w.reshape(-1)
    flat[:6] = [np.inf, -np.inf, np.nan, -np.nan, 3.4e38, 1 + 2.0 ** -8][:flat.size]
    W = OclTensor(w)
    w16, w16t = weight_copies(W, fmt)
    want = OclTensor.empty(shape, dtype=fmt)
    convert_into(W, want)
    bits = want.data.read(shape, np.uint16)
    np.testing.assert_array_equal(w16.data.read(shape, np.uint16), bits)
    np.testing.assert_array_equal(w16t.data.read(shape[::-1], np.uint16), bits.T)


@pytest.mark.parametrize("shape", [(37, 45), (33, 32)])
def test_packed_weight_copies_sit_side_by_side(frontend, rng, shape):
    """Three weights in one launch: W16 (rows, 3 cols) holds each in its columns and W16T
    (3 cols, rows) each transpose in its rows, bit for bit as weight_copies of each alone."""
    weights = [OclTensor(rng.standard_normal(shape).astype(np.float32)) for _ in range(3)]
    w16, w16t = packed_weight_copies(weights, bfloat16)
    rows, cols = shape
    got, got_t = w16.data.read((rows, 3 * cols), np.uint16), w16t.data.read((3 * cols, rows),
                                                                             np.uint16)
    for z, W in enumerate(weights):
        alone, _ = weight_copies(W, bfloat16)
        bits = alone.data.read(shape, np.uint16)
        np.testing.assert_array_equal(got[:, z * cols:(z + 1) * cols], bits)
        np.testing.assert_array_equal(got_t[z * cols:(z + 1) * cols], bits.T)
    with pytest.raises(ValueError, match="one shape"):
        packed_weight_copies([weights[0], OclTensor(np.zeros((2, 2), np.float32))], bfloat16)


def test_copies_of_many_groups_match_each_alone(frontend, rng):
    """copies_of: more groups than one launch takes (JOBS weights), one to three weights each,
    odd shapes and an empty one, bit for bit as packed_weight_copies of each group alone;
    `prepared` hands those copies out for its groups only, and only inside the block."""
    shapes = [(37, 45), (1, 70), (68, 100), (0, 5), (66, 131), (5, 1), (132, 64)]
    groups = [[OclTensor(rng.standard_normal(shapes[i % len(shapes)]).astype(np.float32))
               for _ in range(1 + i % 3)] for i in range(13)]
    assert sum(map(len, groups)) > weight_copies_module.JOBS
    made = weight_copies_module.copies_of(groups, bfloat16)
    for weights, (w16, w16t) in zip(groups, made):
        alone, alone_t = packed_weight_copies(weights, bfloat16)
        assert w16.shape == alone.shape and w16t.shape == alone_t.shape
        np.testing.assert_array_equal(w16.data.read(w16.shape, np.uint16),
                                      alone.data.read(alone.shape, np.uint16))
        np.testing.assert_array_equal(w16t.data.read(w16t.shape, np.uint16),
                                      alone_t.data.read(alone_t.shape, np.uint16))
    with weight_copies_module.prepared(groups[:2], bfloat16):
        inside = packed_weight_copies(groups[1], bfloat16)
        assert packed_weight_copies(groups[1], bfloat16) is inside
        assert packed_weight_copies(groups[1][:1], bfloat16) is not inside
        assert packed_weight_copies(groups[1], np.float16) is not inside
    assert packed_weight_copies(groups[1], bfloat16) is not inside


@pytest.mark.parametrize("fused_paths", ["", "1"], ids=["default", "fused"])
def test_gpt_forward_makes_every_weight_copy_at_once(frontend, rng, monkeypatch, fused_paths):
    """A 16-bit forward asks copies_of once, for every Linear's weights grouped as the layers
    ask for them (a layer asking for another group would copy again), and gives the same logits
    as copies made layer by layer."""
    monkeypatch.setenv("OCL_LLM_FUSED", fused_paths)
    L.set_activation_precision("bf16")
    ids = rng.integers(1, 53, (2, 16)).astype(np.int32)
    model = SimpleModel(GPT)
    calls = []
    copies_of = weight_copies_module.copies_of
    monkeypatch.setattr(weight_copies_module, "copies_of",
                        lambda groups, dtype: calls.append(len(groups)) or copies_of(groups, dtype))
    logits = model(ids).to_host()
    per_layer = 4 if fused_paths else 6
    assert calls == [GPT["num_layers"] * per_layer + 1]
    monkeypatch.setattr(weight_copies_module, "prepared", lambda groups, dtype: nullcontext())
    monkeypatch.setattr(model_module, "prepared", lambda groups, dtype: nullcontext())
    calls.clear()
    np.testing.assert_array_equal(model(ids).to_host(), logits)
    assert len(calls) == GPT["num_layers"] * per_layer + 1
    model.free_memory()


@pytest.mark.parametrize("name", list(FORMATS))
def test_qkv_linear_against_float64(frontend, rng, name):
    """The packed q, k, v projection: [x Wq | x Wk | x Wv] in 16 bits, dx = sum_z dqkv_z W16_z^T
    in one product over 3 out, and each dW_z = x^T dqkv_z (float32), with the bounds above."""
    fmt, u = FORMATS[name]
    rows, K, N = 29, 21, 19
    x_host = rounded(rng.standard_normal((rows, K)), fmt)
    Ws = [OclTensor(rng.standard_normal((K, N)).astype(np.float32), requires_grad=True)
          for _ in range(3)]
    x = OclTensor(x_host.astype(np.float32), requires_grad=True, dtype=fmt)
    out = mixed.qkv_linear(x, *Ws, fmt)
    assert out.shape == (rows, 3 * N) and out.dtype == x.dtype
    W16 = np.concatenate([rounded(W.to_host(), fmt) for W in Ws], axis=1)
    want = x_host @ W16
    size = np.abs(x_host) @ np.abs(W16)
    assert_within(out.to_host(), want, u * size + K * 2.0 ** -24 * size + 1e-6, "qkv")
    g = rounded(rng.standard_normal((rows, 3 * N)), fmt)
    out.backward(OclTensor(g.astype(np.float32), dtype=fmt))
    per_term = max(rows, 3 * N) * 2.0 ** -24
    dx_want = g @ W16.T
    dx_size = np.abs(g) @ np.abs(W16.T)
    assert x.grad.dtype == x.dtype
    assert_within(x.grad.to_host(), dx_want, u * dx_size + per_term * dx_size + 1e-7, "dx")
    for z, W in enumerate(Ws):
        gz = g[:, z * N:(z + 1) * N]
        dW_want = x_host.T @ gz
        assert W.grad.dtype == np.float32
        assert_within(W.grad.to_host(), dW_want,
                      per_term * (np.abs(x_host.T) @ np.abs(gz)) + 1e-7, f"dW{z}")


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("bias,use_gelu", [(True, False), (True, True), (False, False),
                                           (False, True)])
def test_linear_in_16_bits_against_float64(frontend, rng, name, bias, use_gelu):
    fmt, u = FORMATS[name]
    rows, K, N = 37, 19, 23
    x_host = rounded(rng.standard_normal((rows, K)), fmt)
    layer = Linear(K, N, bias=bias, rng=rng)
    if bias:
        layer.b.data.write(rng.standard_normal((1, N)).astype(np.float32))
    x = OclTensor(x_host.astype(np.float32), requires_grad=True, dtype=fmt)
    out = layer(x, gelu=use_gelu)
    assert out.dtype == x.dtype
    W16 = rounded(layer.W.to_host(), fmt)
    b = layer.b.to_host().astype(np.float64) if bias else 0.0
    pre = x_host @ W16 + b
    size = np.abs(x_host) @ np.abs(W16) + np.abs(b)
    if use_gelu:
        # GELU of the float32 pre-activation (|slope| < 1.13), rounded once; the pre-activation
        # is also stored, rounded to fmt, for the backward, which takes its slope there.
        stored_pre = out._ctx.saved_data[1].to_host().astype(np.float64)
        assert_within(stored_pre, pre, u * np.abs(pre) + K * 2.0 ** -24 * size, "pre")
        want, want_size = gelu(pre), np.abs(gelu(pre))
        size = 1.13 * size
    else:
        stored_pre, want, want_size = None, pre, size
    assert_within(out.to_host(), want, u * want_size + K * 2.0 ** -24 * size + 1e-6, "out")

    g = rounded(rng.standard_normal((rows, N)), fmt)
    out.backward(OclTensor(g.astype(np.float32), dtype=fmt))
    dpre = g * gelu_slope(stored_pre) if use_gelu else g
    # dpre is exact without GELU; with it, one device rounding the reference may not match.
    per_term = (2 * u if use_gelu else 0.0) + max(rows, N) * 2.0 ** -24
    assert x.grad.dtype == x.dtype and layer.W.grad.dtype == np.float32
    dx_want = dpre @ W16.T
    assert_within(x.grad.to_host(), dx_want,
                  u * np.abs(dx_want) + per_term * (np.abs(dpre) @ np.abs(W16.T)) + 1e-7, "dx")
    dW_want = x_host.T @ dpre
    assert_within(layer.W.grad.to_host(), dW_want,
                  per_term * (np.abs(x_host.T) @ np.abs(dpre)) + 1e-7, "dW")
    if bias:
        db_want = dpre.sum(0, keepdims=True)
        assert_within(layer.b.grad.to_host(), db_want,
                      per_term * np.abs(dpre).sum(0, keepdims=True) + 1e-7, "db")


@pytest.mark.parametrize("name", list(FORMATS))
def test_feed_forward_in_16_bits_against_float64(frontend, rng, name):
    """The feed-forward pair as one node: y = GELU(x W1 + b1) W2 + b2 forward, and a backward
    whose dh takes GELU's slope in the product's store (DGELU), against float64 with the bounds
    above (dpre is the device intermediate the reference may round the other way: 2u per term)."""
    fmt, u = FORMATS[name]
    rows, K, F, N = 29, 19, 37, 23
    x_host = rounded(rng.standard_normal((rows, K)), fmt)
    W1 = OclTensor(rng.standard_normal((K, F)).astype(np.float32), requires_grad=True)
    W2 = OclTensor((rng.standard_normal((F, N)) * 0.3).astype(np.float32), requires_grad=True)
    b1 = OclTensor(rng.standard_normal((1, F)).astype(np.float32), requires_grad=True)
    b2 = OclTensor(rng.standard_normal((1, N)).astype(np.float32), requires_grad=True)
    x = OclTensor(x_host.astype(np.float32), requires_grad=True, dtype=fmt)
    y = mixed.feed_forward(x, W1, b1, W2, b2, fmt)
    assert y.shape == (rows, N) and y.dtype == x.dtype
    W1r, W2r = rounded(W1.to_host(), fmt), rounded(W2.to_host(), fmt)
    _, _, pre_t, h_t, _ = y._ctx.saved_data
    pre, h = pre_t.to_host().astype(np.float64), h_t.to_host().astype(np.float64)
    pre_want = x_host @ W1r + b1.to_host()
    size1 = np.abs(x_host) @ np.abs(W1r) + np.abs(b1.to_host())
    assert_within(pre, pre_want, u * np.abs(pre_want) + K * 2.0 ** -24 * size1, "pre")
    # h is GELU of the float32 value before pre's rounding, rounded once.
    h_want = gelu(pre_want)
    assert_within(h, h_want, u * np.abs(h_want) + 1.13 * K * 2.0 ** -24 * size1 + 1e-6, "h")
    y_want = h @ W2r + b2.to_host()
    size2 = np.abs(h) @ np.abs(W2r) + np.abs(b2.to_host())
    assert_within(y.to_host(), y_want, u * size2 + F * 2.0 ** -24 * size2 + 1e-6, "y")

    g = rounded(rng.standard_normal((rows, N)), fmt)
    y.backward(OclTensor(g.astype(np.float32), dtype=fmt))
    per_term = 2 * u + max(rows, F, N) * 2.0 ** -24
    dW2_want, db2_want = h.T @ g, g.sum(0, keepdims=True)
    assert_within(W2.grad.to_host(), dW2_want, rows * 2.0 ** -24 * (np.abs(h.T) @ np.abs(g)) + 1e-7,
                  "dW2")
    assert_within(b2.grad.to_host(), db2_want, rows * 2.0 ** -24 * np.abs(g).sum(0, keepdims=True)
                  + 1e-7, "db2")
    dpre = (g @ W2r.T) * gelu_slope(pre)
    dpre_size = (np.abs(g) @ np.abs(W2r.T)) * 1.13
    dx_want = dpre @ W1r.T
    assert x.grad.dtype == x.dtype
    assert_within(x.grad.to_host(), dx_want,
                  u * np.abs(dx_want) + per_term * (dpre_size @ np.abs(W1r.T)) + 1e-6, "dx")
    assert_within(W1.grad.to_host(), x_host.T @ dpre,
                  per_term * (np.abs(x_host.T) @ dpre_size) + 1e-6, "dW1")
    assert_within(b1.grad.to_host(), dpre.sum(0, keepdims=True),
                  per_term * dpre_size.sum(0, keepdims=True) + 1e-6, "db1")
    assert all(t.grad.dtype == np.float32 for t in (W1, W2, b1, b2))


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("node", ["linear", "feed_forward"])
def test_residual_added_in_the_product_store(frontend, rng, name, node):
    """r + Linear(x) (or + the feed-forward pair) with r float32: the float32 sum of r and the
    product, written once (no 16-bit rounding of the branch: bound K 2^-24 of the product's
    magnitude plus one float32 rounding); r's gradient is g itself and the branch gets g rounded
    to 16 bits, so x's gradient is the one of the branch alone fed that rounded g."""
    fmt, u = FORMATS[name]
    rows, K, F, N = 23, 17, 29, 19
    x_host = rounded(rng.standard_normal((rows, K)), fmt)
    r_host = rng.standard_normal((rows, N)).astype(np.float32)
    g_host = rng.standard_normal((rows, N)).astype(np.float32)
    weights = dict(W1=(K, F), b1=(1, F), W2=(F, N), b2=(1, N)) if node == "feed_forward" else \
        dict(W2=(K, N), b2=(1, N))
    values = {k: (rng.standard_normal(v) * 0.3).astype(np.float32) for k, v in weights.items()}
    grads = []
    for residual in (True, False):
        params = {k: OclTensor(v, requires_grad=True) for k, v in values.items()}
        x = OclTensor(x_host.astype(np.float32), requires_grad=True, dtype=fmt)
        r = OclTensor(r_host, requires_grad=True) if residual else None
        if node == "feed_forward":
            out = mixed.feed_forward(x, params["W1"], params["b1"], params["W2"], params["b2"],
                                     fmt, residual=r)
        else:
            out = mixed.linear(x, params["W2"], params["b2"], False, fmt, residual=r)
        if residual:
            assert out.dtype == np.float32 and out.shape == (rows, N)
            if node == "linear":
                W16 = rounded(values["W2"], fmt)
                v = x_host @ W16 + values["b2"]
                size = np.abs(x_host) @ np.abs(W16) + np.abs(values["b2"])
                want = r_host + v
                assert_within(out.to_host(), want,
                              K * 2.0 ** -24 * size + 2.0 ** -23 * np.abs(want) + 1e-7, "out")
            out.backward(OclTensor(g_host))
            np.testing.assert_array_equal(r.grad.to_host(), g_host)
        else:
            out.backward(OclTensor(rounded(g_host, fmt).astype(np.float32), dtype=fmt))
        grads.append([x.grad.to_host()] + [params[k].grad.to_host() for k in sorted(params)])
    for with_r, without in zip(*grads):   # the same branch gradients, bit for bit
        np.testing.assert_array_equal(with_r, without)


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("cols", [48, 45])   # whole quads (register kernels) and not
def test_layer_norm_normalises_float32_into_16_bits(frontend, rng, name, cols):
    """y: the float32 statistics (float32 suite: rtol 1e-5, atol 1e-5) plus one rounding to
    fmt. dx stays float32: the float32 suite's rtol 1e-4, atol 1e-5 from the stored dy."""
    fmt, u = FORMATS[name]
    L.set_activation_precision("bf16" if fmt is bfloat16 else "fp16")
    rows, eps = 29, 1e-5
    x_host = (rng.standard_normal((rows, cols)) * 3 + 1).astype(np.float32)
    x = OclTensor(x_host, requires_grad=True)
    y = L.LayerNorm(eps)(x)
    assert y.dtype == fmt
    xd = x_host.astype(np.float64)
    mean = xd.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((xd - mean) ** 2).mean(1, keepdims=True) + eps)
    want = (xd - mean) * rstd
    assert_within(y.to_host(), want, (u + 1e-5) * np.abs(want) + 1e-5, "y")
    dy = rounded(rng.standard_normal((rows, cols)), fmt)
    y.backward(OclTensor(dy.astype(np.float32), dtype=fmt))
    xhat = want
    dx_want = rstd * (dy - dy.mean(1, keepdims=True) - xhat * (dy * xhat).mean(1, keepdims=True))
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.to_host(), dx_want, rtol=1e-4, atol=1e-5)


GPT = dict(L.DEFAULT_CONFIG, embed_dim=32, num_heads=2, d_ff=64, num_layers=2, max_len=16,
           vocab_size=53)


def gpt_gradients(precision: str, ids, targets):
    L.set_activation_precision(precision)
    model = SimpleModel(GPT)
    logits = model(ids)
    loss = cross_entropy_loss_and_backward(logits, targets)
    grads = [p.grad for p in model.parameters()]
    return model, logits.dtype, loss, grads


@pytest.mark.parametrize("fused_paths", ["", "1"], ids=["default", "fused"])
def test_gpt_step_in_bf16_follows_float32(frontend, rng, monkeypatch, fused_paths):
    """Same initial weights, one forward and backward: loss and every parameter gradient of the
    bf16 step against the float32 one. Each stored activation or gradient adds a rounding of
    u = 2^-8; the chain through two blocks stores about twenty, whose errors add like a random
    walk (sqrt(20) u = 1.7 %): gradients within 6 % in norm, the loss within 1 %. "fused" takes
    the flash attention (as GPUs do by default), in bf16 on the packed q, k, v projection."""
    monkeypatch.setenv("OCL_LLM_FUSED", fused_paths)
    from ocl_llm import fused
    packed_calls = []
    packed = fused.packed_attention
    monkeypatch.setattr(fused, "packed_attention",
                        lambda *args: packed_calls.append(1) or packed(*args))
    ids = rng.integers(1, 53, (3, 16)).astype(np.int32)
    targets = np.roll(ids, -1, 1)
    model32, dtype32, loss32, grads32 = gpt_gradients("fp32", ids, targets)
    model16, dtype16, loss16, grads16 = gpt_gradients("bf16", ids, targets)
    assert dtype32 == np.float32 and dtype16 is bfloat16
    assert abs(loss16 - loss32) <= 1e-2 * abs(loss32)
    for p, g32, g16 in zip(model16.parameters(), grads32, grads16):
        assert p.dtype == np.float32 and g16.dtype == np.float32, p.name
        a, b = g32.to_host().astype(np.float64), g16.to_host().astype(np.float64)
        assert np.linalg.norm(a - b) <= 0.06 * np.linalg.norm(a) + 1e-7, p.name
    assert len(packed_calls) == (GPT["num_layers"] if fused_paths else 0)
    for model in (model32, model16):
        model.free_memory()


def test_gpt_step_adds_residuals_in_its_layer_norms(frontend, lib, device, rng, tmp_path,
                                                    monkeypatch):
    """A 16-bit GPT step with the flash attention (as GPUs run it) launches no add and converts
    no float32 gradient for a branch: each residual add runs in the LayerNorm after it
    (desc.res, desc.sum) and each branch takes the 16-bit copy the LayerNorm backward wrote
    beside its float32 dx (desc.dx_copy). The gradients are bit for bit the ones of the step
    with the adds and conversions on their own. (The op-by-op attention adds the gradients of
    q, k and v's shared input and converts its scores: adds of its own.)"""
    monkeypatch.setenv("OCL_LLM_FUSED", "attention")
    from support.helpers import kernels_launched
    ids = rng.integers(1, 53, (2, 16)).astype(np.int32)
    targets = np.roll(ids, -1, 1)
    names, (model, _, loss, grads) = kernels_launched(
        lib, device.index, tmp_path / "trace.json", lambda: gpt_gradients("bf16", ids, targets))
    assert not {n for n in names if n.startswith(("binary_add", "convert_f32"))}, names
    fused_add = mixed.add_layer_norm
    monkeypatch.setattr(mixed, "add_layer_norm",
                        lambda x, r, eps, dtype: (lambda s: (s, mixed.layer_norm(s, eps, dtype)))(
                            x.add(r)))
    monkeypatch.setattr(OclTensor, "rounded_copy", None, raising=False)
    plain_norm = mixed.NormContext.backward

    def without_copy(ctx, g):
        (dx,) = plain_norm(ctx, g)
        dx.rounded_copy = None
        return (dx,)
    monkeypatch.setattr(mixed.NormContext, "backward", without_copy)
    names, (plain, _, plain_loss, plain_grads) = kernels_launched(
        lib, device.index, tmp_path / "trace2.json", lambda: gpt_gradients("bf16", ids, targets))
    assert {n for n in names if n.startswith(("binary_add", "convert_f32"))}, names
    assert fused_add is not mixed.add_layer_norm and loss == plain_loss
    for p, a, b in zip(model.parameters(), grads, plain_grads):
        np.testing.assert_array_equal(a.to_host(), b.to_host(), err_msg=p.name)
    for m in (model, plain):
        m.free_memory()


@pytest.mark.parametrize("fused_paths", ["", "1"], ids=["default", "fused"])
def test_captured_bf16_step_replays_the_eager_step(frontend, rng, monkeypatch, fused_paths):
    """A captured step runs the same kernels on the same values: losses and weights agree bit
    for bit with train_step's over three steps (fp16 activations train too). "fused": every fused
    path (packed attention, the residual in the product's store) captured as well."""
    monkeypatch.setenv("OCL_LLM_FUSED", fused_paths)
    L.set_activation_precision("bf16")
    batches = [rng.integers(1, 53, (2, 16)).astype(np.int32) for _ in range(4)]
    eager, captured = SimpleModel(GPT), SimpleModel(GPT)
    opt_e = AdamOptimizer(eager.parameters(), lr=1e-3)
    opt_c = AdamOptimizer(captured.parameters(), lr=1e-3)
    step = None
    for ids in batches[:3]:
        targets = np.roll(ids, -1, 1)
        loss_e = L.train_step(eager, opt_e, ids, targets)
        if step is None:
            step = CapturedStep(captured, opt_c, ids, targets)
            loss_c = step.first_loss
        else:
            loss_c = step(ids, targets)
        assert loss_c == loss_e
    for a, b in zip(eager.parameters(), captured.parameters()):
        np.testing.assert_array_equal(a.to_host(), b.to_host())
    step.close()
    L.set_activation_precision("fp16")
    losses = [L.train_step(eager, opt_e, ids, np.roll(ids, -1, 1)) for ids in batches]
    assert all(np.isfinite(losses))
    for model in (eager, captured):
        model.free_memory()


def test_16_bit_tensors_reach_float32_ops_converted(frontend, rng):
    """Ops with float32 kernels only take a 16-bit tensor converted (exactly: 16-bit values are
    float32 values); its gradient comes back in its own format."""
    host = rounded(rng.standard_normal((5, 7)), bfloat16).astype(np.float32)
    x = OclTensor(host, requires_grad=True, dtype=bfloat16)
    np.testing.assert_array_equal(x.to_host(), host)
    y = x.gelu()
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.to_host(), gelu(host.astype(np.float64)), rtol=2e-5, atol=1e-6)
    y.backward(np.ones((5, 7), np.float32))
    assert x.grad.dtype is bfloat16
    want = rounded(gelu_slope(host.astype(np.float64)), bfloat16)
    np.testing.assert_allclose(x.grad.to_host(), want, rtol=2.0 ** -7, atol=1e-6)
    s = x.add(OclTensor(host))   # bf16 + float32 promotes to float32, as PyTorch
    assert s.dtype == np.float32
    np.testing.assert_array_equal(s.to_host(), 2 * host)


def test_precision_settings_are_checked_and_reach_the_config(frontend):
    with pytest.raises(ValueError, match="activation precision"):
        L.set_activation_precision("int8")
    L.set_activation_precision("bf16")
    assert mixed.activation_dtype(L.current_runtime()) is bfloat16
    L.set_activation_precision("fp32")
    assert mixed.activation_dtype(L.current_runtime()) is None
    args = L.build_arg_parser().parse_args(["--precision", "bf16"])
    config = L.config_from_args(args)
    assert config["matmul_precision"] == "bf16" and config["activations"] == "bf16"
    plain = L.config_from_args(L.build_arg_parser().parse_args([]))
    assert plain["activations"] == "fp32"


def test_loss_scaler_backs_off_grows_and_refuses_bad_settings():
    for bad in (dict(init_scale=3.0), dict(init_scale=0.0), dict(growth_factor=1.0),
                dict(backoff_factor=2.0), dict(growth_interval=0), dict(init_scale=float("inf"))):
        with pytest.raises(ValueError):
            L.LossScaler(**bad)
    scaler = L.LossScaler(init_scale=2.0 ** 10, growth_interval=2)
    scaler.update(False)
    assert (scaler.scale, scaler.skipped, scaler.good_steps) == (2.0 ** 9, 1, 0)
    scaler.update(True)
    scaler.update(True)
    assert (scaler.scale, scaler.skipped, scaler.good_steps) == (2.0 ** 10, 1, 0)


def test_fp16_gradients_are_scaled_unscaled_and_overflows_skipped(frontend, rng):
    """fp16 activations with a LossScaler: an overflowing scale (2^24: the logits' gradient alone
    exceeds fp16's 65504) skips the step, leaves the weights as they were and halves the scale;
    with a safe scale the unscaled float32 gradients follow float32's (u = 2^-11 per stored
    value, twenty-odd roundings: within 2 % in norm). A captured step makes the same decisions
    and the same weights as the eager one."""
    ids = rng.integers(1, 53, (3, 16)).astype(np.int32)
    targets = np.roll(ids, -1, 1)
    _, _, _, grads32 = gpt_gradients("fp32", ids, targets)
    L.set_activation_precision("fp16")
    model = SimpleModel(GPT)
    optimizer = AdamOptimizer(model.parameters(), lr=1e-3)
    before = [p.to_host() for p in model.parameters()]
    scaler = L.LossScaler(init_scale=2.0 ** 24)
    loss = L.train_step(model, optimizer, ids, targets, scaler)
    assert np.isfinite(loss) and scaler.skipped == 1 and scaler.scale == 2.0 ** 23
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.to_host(), b)
    scaler.scale = 2.0 ** 8
    L.train_step(model, optimizer, ids, targets, scaler)
    assert scaler.skipped == 1 and scaler.good_steps == 1
    for p, g32 in zip(model.parameters(), grads32):
        a, b = g32.to_host().astype(np.float64), p.grad.to_host().astype(np.float64)
        assert np.linalg.norm(a - b) <= 0.02 * np.linalg.norm(a) + 1e-7, p.name
    assert any(not np.array_equal(p.to_host(), b) for p, b in zip(model.parameters(), before))

    eager, captured = SimpleModel(GPT), SimpleModel(GPT)
    opt_e = AdamOptimizer(eager.parameters(), lr=1e-3)
    opt_c = AdamOptimizer(captured.parameters(), lr=1e-3)
    scale_e, scale_c = L.LossScaler(2.0 ** 22), L.LossScaler(2.0 ** 22)
    step = None
    for _ in range(3):
        loss_e = L.train_step(eager, opt_e, ids, targets, scale_e)
        if step is None:
            step = CapturedStep(captured, opt_c, ids, targets, scaler=scale_c)
            loss_c = step.first_loss
        else:
            loss_c = step(ids, targets)
        assert loss_c == loss_e and scale_c.scale == scale_e.scale
    assert scale_e.skipped == scale_c.skipped
    for a, b in zip(eager.parameters(), captured.parameters()):
        np.testing.assert_array_equal(a.to_host(), b.to_host())
    step.close()
    for m in (model, eager, captured):
        m.free_memory()


def test_sampling_reads_16_bit_logits(frontend):
    L.set_activation_precision("bf16")
    tokenizer = L.TinyTokenizer()
    model = SimpleModel(dict(GPT, vocab_size=tokenizer.vocab_size))
    text = L.generate(model, tokenizer, "to be", 7, temperature=0.5)
    assert len(text) >= 7
    model.free_memory()
