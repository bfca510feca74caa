"""The ocl_framework frontend through the driver: gradient checks of every OclTensor operation
against float64 central differences, the whole model's gradient, a short training run whose loss
must fall, the entry points a training step reaches, and a checkpoint round trip that resumes with
the same losses.

Gradient checks: the driver computes in float32; the scalar loss L = sum(out * R) (R random, fixed)
is summed in float64 on the host and differentiated with central differences of step H. Tolerance
GRAD_RTOL relative to the largest gradient plus GRAD_ATOL: the differences carry float32 rounding
of L divided by 2H (about 1e-5) and an O(H^2) truncation error.
OCL_TEST_BACKEND=reference runs the same tests on tests/python/support/reference_backend.py (a NumPy
stand-in) to check the frontend alone; by default everything runs on the driver."""
from __future__ import annotations

import math
import os
from collections import Counter

import numpy as np
import pytest

import ocl_framework as F

H = 1e-2
GRAD_RTOL, GRAD_ATOL = 3e-3, 3e-4
MAX_COORDS = 24  # per input: every coordinate of small inputs, a random subset otherwise


class CountingLibrary:
    """Forwards to a library and counts the entry points called through check/check_handle."""

    def __init__(self, inner):
        self.inner = inner
        self.counts = Counter()

    def check(self, name, *args):
        self.counts[name] += 1
        return self.inner.check(name, *args)

    def check_handle(self, name, *args):
        self.counts[name] += 1
        return self.inner.check_handle(name, *args)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def fw(lib, gpu_index):
    inner = lib
    if os.environ.get("OCL_TEST_BACKEND") == "reference":
        from support.reference_backend import ReferenceLibrary
        inner = ReferenceLibrary()
    counting = CountingLibrary(inner)
    F.ocl_initialize(gpu_index, library=counting, verbose=False)
    yield counting
    F.ocl_shutdown(shutdown_driver=False)   # frees the frontend's buffers; the driver stays up


def _tensors(inputs, requires):
    return {k: F.OclTensor(v.astype(np.float32), requires_grad=(k in requires))
            for k, v in inputs.items()}


def gradcheck(build, inputs, rng, requires=None, int_inputs=None):
    """build(dict of OclTensor) -> OclTensor; checks d sum(out*R)/d input for `requires`."""
    requires = list(inputs) if requires is None else requires
    inputs = {k: np.asarray(v, np.float64) for k, v in inputs.items()}
    tensors = _tensors(inputs, requires)
    out = build(tensors)
    R = rng.standard_normal(out.shape)
    out.backward(R.astype(np.float32))
    analytic = {k: tensors[k].grad.to_host().astype(np.float64) for k in requires}
    assert all(tensors[k].grad is not None for k in requires)

    def loss(values):
        with F.OclTensor.no_grad():
            result = build(_tensors(values, []))
            return float((result.to_host().astype(np.float64) * R).sum())

    for name in requires:
        x = inputs[name]
        flat = np.arange(x.size)
        if x.size > MAX_COORDS:
            flat = rng.choice(x.size, MAX_COORDS, replace=False)
        numeric = np.empty(len(flat))
        for j, i in enumerate(flat):
            plus, minus = x.copy().reshape(-1), x.copy().reshape(-1)
            plus[i] += H
            minus[i] -= H
            lp = loss(dict(inputs, **{name: plus.reshape(x.shape)}))
            lm = loss(dict(inputs, **{name: minus.reshape(x.shape)}))
            numeric[j] = (lp - lm) / (2 * H)
        got = analytic[name].reshape(-1)[flat]
        scale = max(np.abs(numeric).max(), 1e-3)
        np.testing.assert_allclose(got, numeric, rtol=0, atol=GRAD_RTOL * scale + GRAD_ATOL,
                                   err_msg=f"gradient of {name}")
    return analytic


def normal(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


# --- one test per operation ------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((5, 3), (3, 4)), ((1, 7), (7, 1)), ((2, 5, 3), (3, 4)),
                                    ((3, 1, 6), (6, 5))])
def test_matmul_shared_weight(fw, rng, shapes):
    sa, sb = shapes
    gradcheck(lambda t: t["a"].matmul(t["b"]),
              {"a": normal(rng, *sa), "b": normal(rng, *sb)}, rng)


@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 5, 2)), ((2, 2, 3, 4), (2, 2, 4, 3))])
def test_matmul_batched(fw, rng, shapes):
    sa, sb = shapes
    gradcheck(lambda t: t["a"] @ t["b"], {"a": normal(rng, *sa), "b": normal(rng, *sb)}, rng)


def test_matmul_only_one_side_requires_grad(fw, rng):
    gradcheck(lambda t: t["a"] @ t["w"], {"a": normal(rng, 2, 3, 4), "w": normal(rng, 4, 5)},
              rng, requires=["w"])
    gradcheck(lambda t: t["a"] @ t["b"], {"a": normal(rng, 2, 3, 4), "b": normal(rng, 2, 4, 5)},
              rng, requires=["a"])


def test_add_equal_shapes(fw, rng):
    gradcheck(lambda t: t["a"] + t["b"], {"a": normal(rng, 3, 7), "b": normal(rng, 3, 7)}, rng)


def test_add_scalar(fw, rng):
    gradcheck(lambda t: (t["x"] + 0.75).gelu(), {"x": normal(rng, 2, 5)}, rng)


@pytest.mark.parametrize("shape", [(2, 5, 7), (4, 3), (1, 1, 1)])
def test_add_bias_broadcast(fw, rng, shape):
    gradcheck(lambda t: t["x"].add(t["b"]),
              {"x": normal(rng, *shape), "b": normal(rng, 1, shape[-1])}, rng)


def test_mul_tensor_tensor(fw, rng):
    gradcheck(lambda t: t["a"] * t["b"], {"a": normal(rng, 4, 5), "b": normal(rng, 4, 5)}, rng)


def test_mul_scalar_and_div_scalar(fw, rng):
    gradcheck(lambda t: t["x"].mul_scalar(-0.37), {"x": normal(rng, 3, 4)}, rng)
    gradcheck(lambda t: t["x"].div_scalar(4.0), {"x": normal(rng, 2, 3, 2)}, rng)


def test_gelu(fw, rng):
    gradcheck(lambda t: t["x"].gelu(), {"x": normal(rng, 5, 7, scale=2.0)}, rng)


def test_softmax(fw, rng):
    gradcheck(lambda t: t["x"].softmax(-1), {"x": normal(rng, 2, 3, 6)}, rng)


def test_layer_norm(fw, rng):
    gradcheck(lambda t: t["x"].layer_norm(1e-5), {"x": normal(rng, 4, 7, scale=2.0)}, rng)


def test_transpose_2d(fw, rng):
    gradcheck(lambda t: t["x"].T @ t["w"], {"x": normal(rng, 3, 5), "w": normal(rng, 3, 2)}, rng)


def test_transpose_last_two_axes(fw, rng):
    gradcheck(lambda t: t["x"].transpose(-2, -1), {"x": normal(rng, 2, 3, 5)}, rng)
    gradcheck(lambda t: t["x"].transpose(2, 3), {"x": normal(rng, 2, 2, 3, 4)}, rng)


def test_transpose_axes_1_2(fw, rng):
    gradcheck(lambda t: t["x"].transpose(1, 2), {"x": normal(rng, 2, 3, 4, 5)}, rng)


def test_transpose_other_axes_via_host(fw, rng):
    gradcheck(lambda t: t["x"].transpose(0, 2), {"x": normal(rng, 2, 3, 4)}, rng)


def test_reshape_keeps_the_graph(fw, rng):
    gradcheck(lambda t: t["x"].reshape(3, 2, 4).softmax(-1).reshape(6, 4),
              {"x": normal(rng, 6, 4)}, rng)


def test_embedding_with_repeated_ids(fw, rng):
    ids = np.array([[1, 4, 1, 0], [4, 4, 2, 6]], np.int32)

    def build(t):
        layer = F.Embedding.__new__(F.Embedding)
        layer.vocab_size, layer.embed_dim = 7, 3
        layer.weight_param = t["w"]
        return layer(ids)
    grads = gradcheck(build, {"w": normal(rng, 7, 3)}, rng)
    assert np.all(grads["w"][[3, 5]] == 0), "rows of unused ids must get no gradient"


def test_positional_encoding_and_mask_add(fw, rng):
    pe = F.PositionalEncoding(6, 4)
    gradcheck(lambda t: pe(t["x"]).gelu(), {"x": normal(rng, 2, 5, 4)}, rng)
    gradcheck(lambda t: t["x"]._add_broadcast_pe(F.causal_mask(3)).softmax(),
              {"x": normal(rng, 2, 3, 3)}, rng)
    pe.free_memory()


def test_gradients_accumulate_over_two_uses(fw, rng):
    gradcheck(lambda t: (t["x"] * t["x"]) + t["x"].gelu(), {"x": normal(rng, 3, 4)}, rng)


def test_cross_entropy_gradient_masks_padding(fw, rng):
    B, S, V = 2, 4, 5
    targets = np.array([[1, 0, 3, 4], [0, 2, 2, 1]], np.int32)
    x = normal(rng, B, S, V)
    logits = F.OclTensor(x.astype(np.float32), requires_grad=True)
    loss = F.cross_entropy_loss_and_backward(logits, targets)
    grad = logits.grad.to_host().astype(np.float64)

    def reference_loss(values):
        lse = np.log(np.exp(values).sum(-1))
        lp = values - lse[..., None]
        valid = targets != 0
        picked = np.take_along_axis(lp, targets[..., None], -1)[..., 0]
        return float(-(picked * valid).sum() / valid.sum())
    assert loss == pytest.approx(reference_loss(x), rel=1e-5)
    numeric = np.zeros_like(x)
    for i in range(x.size):
        p, m = x.copy().reshape(-1), x.copy().reshape(-1)
        p[i] += H
        m[i] -= H
        with F.OclTensor.no_grad():
            lp = F.cross_entropy_loss_and_backward(F.OclTensor(p.reshape(x.shape)), targets)
            lm = F.cross_entropy_loss_and_backward(F.OclTensor(m.reshape(x.shape)), targets)
        numeric.reshape(-1)[i] = (lp - lm) / (2 * H)
    np.testing.assert_allclose(grad, numeric, rtol=0, atol=3e-4)
    assert np.all(grad[targets == 0] == 0), "padding rows must get a zero gradient"


TINY = dict(F.DEFAULT_CONFIG, vocab_size=11, embed_dim=8, num_heads=2, d_ff=12, num_layers=1,
            max_len=6, init_seed=7)


@pytest.mark.parametrize("causal", [True, False])
def test_whole_model_gradient(fw, rng, causal):
    """Every parameter of a one-block model against central differences of the mean loss."""
    model = F.SimpleModel(dict(TINY, causal=causal))
    ids = rng.integers(1, 11, size=(2, 5)).astype(np.int32)
    targets = np.roll(ids, -1, axis=1)
    targets[0, -1] = 0
    F.cross_entropy_loss_and_backward(model(ids), targets)
    params = model.parameters()
    assert len(params) == 1 + 9 + 2
    for index, p in enumerate(params):
        assert p.grad is not None, f"parameter {index} ({p.name}) got no gradient"
        analytic = p.grad.to_host().astype(np.float64).reshape(-1)
        base = p.to_host().astype(np.float64)
        coords = rng.choice(p.numel, min(4, p.numel), replace=False)
        for i in coords:
            values = []
            for sign in (1, -1):
                v = base.copy().reshape(-1)
                v[i] += sign * H
                p.data.write(v.reshape(p.shape).astype(np.float32))
                with F.OclTensor.no_grad():
                    values.append(F.cross_entropy_loss_and_backward(model(ids), targets))
            p.data.write(base.astype(np.float32))
            numeric = (values[0] - values[1]) / (2 * H)
            assert analytic[i] == pytest.approx(numeric, abs=5e-4 + 5e-3 * abs(numeric)), \
                f"{p.name}[{i}]"
    model.free_memory()


# --- training, entry points, checkpoints ---------------------------------------------------------

SMALL = dict(F.DEFAULT_CONFIG, embed_dim=16, num_heads=2, d_ff=32, num_layers=1, max_len=24,
             batch_size=8, lr=3e-3, wd=0.0, eval_batches=2, seed=5,
             data_file=str(F.BUNDLED_CORPUS))


def _setup(config):
    tokenizer = F.TinyTokenizer()
    config = dict(config, vocab_size=tokenizer.vocab_size)
    model = F.SimpleModel(config)
    optimizer = F.AdamOptimizer(model.parameters(), lr=config["lr"], betas=config["betas"],
                                eps=config["eps"], weight_decay=config["wd"])
    text = F.BUNDLED_CORPUS.read_text(encoding="utf-8")
    data = F.TextData(np.asarray(tokenizer.encode(text), np.int32), config["max_len"],
                      config["batch_size"], config["val_split"], config["seed"])
    return config, tokenizer, model, optimizer, data


def test_a_training_step_reaches_every_backward_entry_point(fw, monkeypatch):
    # The op-by-op forms (OCL_LLM_FUSED=0): the documented seed calls. By default Linear's bias
    # goes into aethercl_gemm_fused instead of execute_broadcast_add_gpu (test_fused_model.py).
    monkeypatch.setenv("OCL_LLM_FUSED", "0")
    config, _, model, optimizer, data = _setup(SMALL)
    fw.counts.clear()
    inputs, targets = data.train_batch(0, 0)
    F.train_step(model, optimizer, inputs, targets)
    called = set(fw.counts)
    for name in ["execute_matmul_backward_on_gpu", "execute_matmul_batched_backward_on_gpu",
                 "execute_layernorm_backward_on_gpu", "execute_softmax_backward_on_gpu",
                 "execute_gelu_backward_on_gpu", "execute_transpose_12_batched_gpu",
                 "execute_transpose_batched_gpu", "execute_mul_backward_on_gpu",
                 "execute_broadcast_add_gpu", "execute_reduce_sum_gpu",
                 "execute_embedding_lookup_gpu", "execute_embedding_backward_gpu",
                 "execute_add_broadcast_pe_gpu", "execute_log_softmax_stable_gpu",
                 "execute_cross_entropy_loss_grad_gpu"]:
        assert name in called, name
    n = len(model.parameters())
    assert fw.counts["execute_adam_update_on_gpu"] == n, "every parameter must be updated"
    # the only reads are the per-row losses (one per step)
    assert fw.counts["read_gpu_to_host_blocking"] == 1
    # transpose_batched runs forward (K^T) and backward once per block
    assert fw.counts["execute_transpose_batched_gpu"] == 2 * config["num_layers"]
    optimizer.free_memory()
    model.free_memory()


def test_no_buffer_leaks_across_steps(fw):
    config, _, model, optimizer, data = _setup(SMALL)
    F.train_step(model, optimizer, *data.train_batch(0, 0))
    before = _live_buffers(fw)
    for step in range(1, 3):
        F.train_step(model, optimizer, *data.train_batch(0, step))
    assert _live_buffers(fw) == before
    optimizer.free_memory()
    model.free_memory()


def _live_buffers(fw):
    import json
    return json.loads(fw.inner.json_call("aethercl_memory_stats", F.current_device().index))[
        "live_buffers"]


def test_short_training_run_lowers_the_loss(fw):
    config, _, model, optimizer, data = _setup(SMALL)
    batches = data.val_batches(2)
    before = F.evaluate(model, batches)
    assert before == pytest.approx(math.log(config["vocab_size"]), rel=0.05)
    losses = [F.train_step(model, optimizer, *data.train_batch(0, s)) for s in range(60)]
    after = F.evaluate(model, batches)
    assert all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:5])
    assert after < 0.85 * before, (before, after)
    optimizer.free_memory()
    model.free_memory()


def test_checkpoint_round_trip_resumes_with_the_same_losses(fw, tmp_path):
    config, tokenizer, model, optimizer, data = _setup(SMALL)
    for step in range(3):
        F.train_step(model, optimizer, *data.train_batch(0, step))
    progress = {"epoch": 0, "step_in_epoch": 3, "global_step": 3, "best_val_loss": None,
                "history": {"train": [], "val": []}}
    path = F.save_checkpoint(tmp_path / "ck.npz", model, optimizer, tokenizer, config, progress)
    assert path.with_suffix(".json").is_file()
    with np.load(path, allow_pickle=False) as archive:
        assert archive["model/param_0"].dtype == np.float32
    expected = [F.train_step(model, optimizer, *data.train_batch(0, s)) for s in (3, 4)]
    state_after = [p.to_host() for p in model.parameters()]
    optimizer.free_memory()
    model.free_memory()

    model2, optimizer2, tokenizer2, config2, progress2 = F.load_checkpoint(path)
    assert optimizer2.t == 3 and progress2 == progress and config2 == config
    assert tokenizer2.get_vocab() == tokenizer.get_vocab()
    resumed = [F.train_step(model2, optimizer2, *data.train_batch(0, s)) for s in (3, 4)]
    np.testing.assert_allclose(resumed, expected, rtol=1e-6)
    for got, want in zip(model2.parameters(), state_after):
        np.testing.assert_allclose(got.to_host(), want, rtol=1e-5, atol=1e-6)
    optimizer2.free_memory()
    model2.free_memory()


def test_tokenizer_round_trip():
    tok = F.TinyTokenizer()
    assert tok.vocab_size == 53 and tok.pad_id == 0 and tok.unk_id == 52
    ids = tok.encode("Hello, Wörld; ok", max_len=20)
    assert len(ids) == 20 and ids[-1] == 0 and 52 in ids
    assert tok.decode(ids) == "hello, wörld_ ok"


# --- the matmul precision ---------------------------------------------------------------------

def test_matmul_precision_reaches_the_products(fw, rng):
    if os.environ.get("OCL_TEST_BACKEND") == "reference":
        pytest.skip("the reference backend computes in float64 only")
    a = rng.standard_normal((9, 64)).astype(np.float32)
    b = rng.standard_normal((64, 7)).astype(np.float32)
    with F.OclTensor.no_grad():
        exact = (F.OclTensor(a) @ F.OclTensor(b)).to_host().astype(np.float64)
        F.set_matmul_precision("bf16")
        try:
            rounded = (F.OclTensor(a) @ F.OclTensor(b)).to_host().astype(np.float64)
        finally:
            F.set_matmul_precision("fp32")
    def bf16(x):  # nearest even, as the driver rounds
        u = x.view(np.uint32).astype(np.uint64)
        return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    want = bf16(a).astype(np.float64) @ bf16(b).astype(np.float64)
    bound = 16 * 2.0 ** -24 * 8 * (np.abs(a).astype(np.float64) @ np.abs(b))
    assert (np.abs(rounded - want) <= bound).all()
    assert (np.abs(exact - want) > bound).any()   # fp32 really is not bf16


def test_matmul_precision_option_and_refusals(fw):
    args = F.build_arg_parser().parse_args(["--matmul_precision", "tf32"])
    assert F.config_from_args(args)["matmul_precision"] == "tf32"
    assert F.DEFAULT_CONFIG["matmul_precision"] == "fp32"
    with pytest.raises(SystemExit):
        F.build_arg_parser().parse_args(["--matmul_precision", "fp64"])
    with pytest.raises(ValueError):
        F.set_matmul_precision("fp64")
