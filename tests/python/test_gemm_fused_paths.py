"""aethercl_gemm_fused against float64 NumPy (support/gemm_fused_checks.py: the reference, its
tolerance and the checks both halves run), second half of test_gemm_fused.py (a suite of its own,
so that a cold run builds the two halves' kernel variants side by side): the epilogue kinds without
a bias (relu, gelu, dgelu) x C dtype x transposition x alpha/beta on odd shapes; those kinds in
batched products, in the GPU kernel forms, with a residual, fused against unfused, and on NaN and
large values; then the other paths: the compute modes, split-K (the epilogue in the fold), the
tensor-core kernels emulated (mma.sync and warpgroup forms, with and without `pre`) and the
residual on every kernel form that stores C."""
import numpy as np
import pytest

from aethercl import gemm as g
from support.gemm_checks import DTYPES
from support.gemm_fused_checks import (KIND_PRE_NO_BIAS, KINDS, KINDS_NO_BIAS, act_ref,
                                       batched_shares_the_bias, fused_matches_unfused,
                                       gpu_kernel_forms, kind_dtype_transpose_case,
                                       residual_added_after_the_epilogue, run_fused,
                                       split_k_applies_the_epilogue_in_the_fold)
from support.helpers import kernels_launched

# Layouts the emulated tensor-core kernels store in pairs (even ldc and offsets) and in staged
# 16-byte units (16-bit C, rows of 16-byte multiples); see TC_LAYOUTS below.
TC_LAYOUTS_PAIRS = dict(m=70, n=68, k=44, batch=2, pad=4, offsets=(8, 16, 2))
TC_LAYOUTS_STAGED = dict(m=37, n=45, k=41, batch=1, pad=3, offsets=(0, 0, 0))


# ---- the kinds without a bias: kind x C dtype x transposition x alpha/beta -----------------------

# test_gemm_fused.py's matrix for relu, gelu and dgelu (bias_dtype stays a parameter: these
# kinds are given no bias, whatever its dtype says).
@pytest.mark.matrix
@pytest.mark.parametrize("alpha_beta", [(1.0, 0.0), (-0.75, 0.0), (1.25, -0.5)])
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("bias_dtype", list(DTYPES))
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind,with_pre", KIND_PRE_NO_BIAS)
def test_activation_kinds_dtypes_transposes(lib, device, rng, fp32_precision, kind, c_dtype,
                                            bias_dtype, trans, alpha_beta, with_pre):
    kind_dtype_transpose_case(lib, device, rng, kind, c_dtype, bias_dtype, trans, alpha_beta,
                              with_pre)


@pytest.mark.parametrize("kind", KINDS_NO_BIAS)
def test_batched_shares_the_bias(lib, device, rng, fp32_precision, kind):
    batched_shares_the_bias(lib, device, rng, kind)


@pytest.mark.parametrize("kind", KINDS_NO_BIAS)
def test_gpu_kernel_forms(lib, device, rng, fp32_precision, monkeypatch, tmp_path, kind):
    gpu_kernel_forms(lib, device, rng, monkeypatch, tmp_path, kind)


# ---- the residual, added after the epilogue ------------------------------------------------------

@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS_NO_BIAS)
def test_residual_added_after_the_epilogue(lib, device, rng, fp32_precision, kind, c_dtype):
    residual_added_after_the_epilogue(lib, device, rng, kind, c_dtype)


# ---- fused against unfused -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS_NO_BIAS)
def test_fused_matches_unfused(lib, device, rng, fp32_precision, kind):
    """support/gemm_fused_checks.py: fused_matches_unfused."""
    fused_matches_unfused(lib, device, rng, kind)


def test_nan_and_large_values_pass_through_the_activations(lib, device, fp32_precision):
    # relu keeps NaN (as aethercl_unary's relu); GELU of large magnitudes is x or -0.
    m, n, k = 1, 6, 1
    a = np.array([[1.0]], np.float32)
    b = np.array([[np.nan, -30.0, 30.0, -0.5, 0.5, 0.0]], np.float32)
    ta, tb = device.upload(a), device.upload(b)
    for kind, want in [("relu", [np.nan, 0.0, 30.0, 0.0, 0.5, 0.0]),
                       ("gelu", [np.nan, 0.0, 30.0, act_ref("gelu", np.array(-0.5)),
                                 act_ref("gelu", np.array(0.5)), 0.0])]:
        c = device.empty((m, n))
        desc = g.gemm_desc(ta.handle, tb.handle, c.handle, m, n, k)
        g.gemm_fused(lib, device.index, desc, g.gemm_epilogue(kind))
        got = c.numpy()[0].astype(np.float64)
        np.testing.assert_allclose(got, np.array(want, np.float64), rtol=1e-6, atol=1e-30)
        c.free()
    ta.free()
    tb.free()


# ---- split-K: the epilogue applied in the fold ---------------------------------------------------

@pytest.mark.matrix
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS_NO_BIAS)
def test_split_k_applies_the_epilogue_in_the_fold(lib, device, rng, fp32_precision, monkeypatch,
                                                  tmp_path, kind, c_dtype):
    split_k_applies_the_epilogue_in_the_fold(lib, device, rng, monkeypatch, tmp_path, kind,
                                             c_dtype)


# ---- the tensor-core kernels, emulated -----------------------------------------------------------

# Product layouts of the emulated tensor-core kernels: "pairs" (even ldc and offsets: the
# fragments' two-column stores; batch 2, edges in M and N), "staged" (16-bit C with rows of
# 16-byte multiples: through local memory in whole units, the last one cut by N; float32 C takes
# the pair stores). Rows of A and B are 8-byte multiples, as cp.async needs.
TC_LAYOUTS = {"pairs": dict(m=70, n=68, k=44, batch=2, pad=4, offsets=(8, 16, 2), offset_pre=6),
              "staged": dict(m=37, n=45, k=41, batch=1, pad=3, offsets=(0, 0, 0), offset_pre=3)}


@pytest.mark.matrix
@pytest.mark.parametrize("layout", list(TC_LAYOUTS))
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("mode,ab", [("tf32", g.F32), ("bf16", g.BF16), ("fp16", g.F16)])
@pytest.mark.parametrize("instructions", ["emulate", "emulate-wgmma"])
def test_tensor_core_kernels_emulated(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                      c_dtype, mode, ab, instructions, layout):
    """kernels/gemm_mma.cl with MMA_EMULATE=1 (as test_gemm_tensor_cores.py): the epilogue in
    each store form of the mma.sync and warpgroup kernels, with beta and pre. The kind rotates
    over the cases (each kind's activation is the same code on every path; the portable tests
    cover every kind with every dtype)."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    # (Chosen so that the pairwise sample of this matrix meets all six kinds.)
    case = (list(DTYPES).index(c_dtype) + ["tf32", "bf16", "fp16"].index(mode) +
            3 * (layout == "staged"))
    kind = KINDS[case % len(KINDS)]
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, mode=mode, ab=ab, c_dtype=DTYPES[c_dtype], alpha=1.25,
        beta=0.5, offset_bias=2, **TC_LAYOUTS[layout]))
    assert "gemm_mma_product" in names, names


@pytest.mark.parametrize("kind", ["bias_relu", "gelu"])
def test_tensor_core_split_k_emulated(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                      kind):
    # TF32 slices on the emulated mma.sync kernel, folded with the epilogue.
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, mode="tf32", m=16, n=16, k=1024, pad=8, offsets=(8, 16, 1)))
    assert "gemm_mma_product" in names and "gemm_fold_parts" in names, names


# ---- the compute modes ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bias_gelu", "relu", "bias_gelu_tanh"])
@pytest.mark.parametrize("mode,ab", [("fp32", g.F32), ("bf16", g.BF16), ("tf32", g.F32)])
def test_compute_modes(lib, device, rng, fp32_precision, kind, mode, ab):
    run_fused(lib, device, rng, kind=kind, mode=mode, ab=ab, c_dtype=g.BF16, m=33, n=41, k=57)


# Each kernel form that stores C: the tiled GPU kernel, the split-K fold, and the emulated
# tensor-core kernels' pair and staged (16-byte unit) stores.
RESIDUAL_FORMS = {
    "gpu_tiled": (dict(AETHERCL_CPU_KERNELS="0", AETHERCL_TENSOR_CORES="0"), "gemm_nn",
                  dict(m=67, n=70, k=45, batch=2, beta=0.5, pad=2, offsets=(0, 4, 4))),
    "split_k": (dict(AETHERCL_CPU_KERNELS="0", AETHERCL_TENSOR_CORES="0"), "gemm_fold_parts",
                dict(m=16, n=24, k=1000, pad=8, offsets=(8, 16, 3))),
    "mma_pairs": (dict(AETHERCL_TENSOR_CORES="emulate"), "gemm_mma_product",
                  dict(mode="bf16", ab=g.BF16, **TC_LAYOUTS_PAIRS)),
    "mma_staged": (dict(AETHERCL_TENSOR_CORES="emulate-wgmma"), "gemm_mma_product",
                   dict(mode="bf16", ab=g.BF16, **TC_LAYOUTS_STAGED)),
}


@pytest.mark.parametrize("form,kind",
                         list(zip(RESIDUAL_FORMS, ["bias", "dgelu", "bias_gelu", "dgelu"])))
def test_residual_on_every_kernel_form(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                       form, kind):
    # (One kind per form: each form's residual is one line of code shared by the kinds.)
    env, kernel, shape = RESIDUAL_FORMS[form]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    c_dtype = g.F32 if form != "mma_staged" else g.BF16
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, c_dtype=c_dtype, offset_bias=1, offset_pre=2,
        offset_residual=7, alpha=1.25, **shape))
    assert kernel in names, names
