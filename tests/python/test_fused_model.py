"""The frontend's fused paths (ocl_llm.fused: Linear's bias and GELU in the GEMM's store, attention
as one flash-style kernel each way) against its op-by-op forms (OCL_LLM_FUSED=0): the same model,
inputs and three training steps give the same losses and parameters.

Tolerance: the fused forms round the same float32 values in another order (the bias added inside
the GEMM's accumulator store, the softmax computed online over key tiles), so results differ by
float32 rounding that three Adam steps carry on: losses agree to rtol 1e-5, each parameter to 1e-4
of its largest magnitude (observed: 6e-6 for the fused Linear on PoCL)."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from ocl_llm import fused, ocl_initialize, ocl_shutdown, set_matmul_precision  # noqa: E402
from ocl_llm.config import DEFAULT_CONFIG  # noqa: E402
from ocl_llm.model import SimpleModel  # noqa: E402
from ocl_llm.train import make_optimizer, train_step  # noqa: E402
from support.helpers import kernels_launched  # noqa: E402

CONFIG = dict(DEFAULT_CONFIG, vocab_size=37, max_len=24, batch_size=3, embed_dim=32, num_heads=4,
              d_ff=48, num_layers=2)


def train_three_steps(device, monkeypatch, paths: str, precision: str = "fp32"):
    monkeypatch.setenv("OCL_LLM_FUSED", paths)
    ocl_initialize(device.index, verbose=False)
    try:
        set_matmul_precision(precision)
        model = SimpleModel(CONFIG)
        optimizer = make_optimizer(model, CONFIG)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(3):
            inputs = rng.integers(1, 37, (3, 24)).astype(np.int32)
            targets = rng.integers(1, 37, (3, 24)).astype(np.int32)
            losses.append(train_step(model, optimizer, inputs, targets))
        return losses, {name: value.copy() for name, value in model.state_dict().items()}
    finally:
        set_matmul_precision("fp32")  # the device keeps it across ocl_shutdown
        ocl_shutdown(shutdown_driver=False)


def test_the_library_offers_the_fused_paths(device, monkeypatch):
    """Where the fused functions are exported they are taken as OCL_LLM_FUSED says (this build
    has them): by default the scores GEMM, the GEMM epilogue on a GPU, attention too in the
    16-bit precisions on a GPU; every path with 1, a chosen list, none with 0."""
    monkeypatch.delenv("OCL_LLM_FUSED", raising=False)
    assert fused.scores_enabled(device)
    assert not fused.attention_enabled(device) and not fused.linear_enabled(device)  # no runtime
    ocl_initialize(device.index, verbose=False)
    try:
        for precision in ("bf16", "fp16", "tf32"):
            set_matmul_precision(precision)
            info = json.loads(device.lib.json_call("aethercl_device_info", device.index))
            gpu = info["type"] == "gpu"
            assert fused.attention_enabled(device) == (gpu and precision != "tf32"), precision
            assert fused.linear_enabled(device) == gpu, precision
    finally:
        set_matmul_precision("fp32")
        ocl_shutdown(shutdown_driver=False)
    assert not fused.attention_enabled(device)
    monkeypatch.setenv("OCL_LLM_FUSED", "1")
    assert fused.linear_enabled(device) and fused.attention_enabled(device)
    assert fused.scores_enabled(device)
    monkeypatch.setenv("OCL_LLM_FUSED", "attention")
    assert fused.attention_enabled(device) and not fused.linear_enabled(device)
    assert not fused.scores_enabled(device)
    monkeypatch.setenv("OCL_LLM_FUSED", "linear,flash")
    with pytest.raises(ValueError, match="flash"):
        fused.linear_enabled(device)


# "1": the flash-style attention and the Linear epilogue; "linear,scores": the default (the
# unfused attention with its scaled scores as one GEMM each way); "scores" alone.
@pytest.mark.parametrize("paths", ["1", "linear,scores", "scores"])
def test_fused_training_matches_the_op_by_op_forms(device, monkeypatch, paths):
    plain_losses, plain = train_three_steps(device, monkeypatch, "0")
    fused_losses, fused_params = train_three_steps(device, monkeypatch, paths)
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5)
    for name, value in plain.items():
        scale = max(float(np.abs(value).max()), 1e-30)
        assert np.abs(fused_params[name] - value).max() <= 1e-4 * scale, name


def test_bf16_attention_on_tensor_cores_trains_like_the_unfused_form(device, monkeypatch,
                                                                    tmp_path):
    """In BF16 mode the fused attention runs on the tensor-core kernels (emulated here; their own
    float64 checks are in test_attention_tensor_cores) and the unfused attention on BF16 GEMMs:
    both round the products' inputs to bf16 (u = 2^-8), in other places (P and dS in the fused
    kernels' registers; the probabilities as GEMM operands unfused). The three losses must agree
    within u/4 relative (measured: 1e-5; a wrong mask or tile moves the first loss by more than
    1e-2). Parameters are not compared: Adam turns the bf16-sized differences of gradients near
    zero into steps of about the learning rate either way."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    plain_losses, _ = train_three_steps(device, monkeypatch, "linear,scores", "bf16")
    names, (fused_losses, _) = kernels_launched(
        device.lib, device.index, tmp_path / "trace.json",
        lambda: train_three_steps(device, monkeypatch, "linear,attention", "bf16"))
    assert {"attention_mma_forward", "attention_mma_dkdv", "attention_mma_dq"} <= names, names
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=2.0 ** -10)


def test_switched_off_takes_the_op_by_op_forms(device, monkeypatch):
    monkeypatch.setenv("OCL_LLM_FUSED", "0")
    assert not fused.linear_enabled(device)
    assert not fused.attention_enabled(device)
    assert not fused.scores_enabled(device)


def test_scaled_scores_against_float64(device, monkeypatch):
    # Odd sizes; the reference in float64. Tolerance: float32 products of d (or S) terms in any
    # order, 4 * n * 2^-24 of the sum of magnitudes.
    from ocl_llm.tensor import OclTensor
    ocl_initialize(device.index, verbose=False)
    try:
        rng = np.random.default_rng(3)
        batch, S, T, d, scale = 5, 7, 9, 11, 0.37
        q0 = rng.standard_normal((batch, S, d)).astype(np.float32)
        k0 = rng.standard_normal((batch, T, d)).astype(np.float32)
        g0 = rng.standard_normal((batch, S, T)).astype(np.float32)
        q, k = OclTensor(q0, requires_grad=True), OclTensor(k0, requires_grad=True)
        s = fused.scaled_scores(q, k, scale)
        s.backward(OclTensor(g0))
        qd, kd, gd = (x.astype(np.float64) for x in (q0, k0, g0))
        kt, kt_abs = kd.transpose(0, 2, 1), np.abs(kd).transpose(0, 2, 1)
        checks = [(s, scale * qd @ kt, scale * np.abs(qd) @ kt_abs, d),
                  (q.grad, scale * gd @ kd, scale * np.abs(gd) @ np.abs(kd), T),
                  (k.grad, scale * gd.transpose(0, 2, 1) @ qd,
                   scale * np.abs(gd).transpose(0, 2, 1) @ np.abs(qd), S)]
        for got, want, magnitude, n in checks:
            assert np.all(np.abs(got.to_host() - want) <= 4 * n * 2.0 ** -24 * magnitude + 1e-30)
    finally:
        ocl_shutdown(shutdown_driver=False)
