"""aethercl_gemm_fused against float64 NumPy: every epilogue kind x C dtype x bias dtype x
transposition x alpha/beta on odd shapes, batched products (one bias for the batch), split-K (the
epilogue in the fold), the tensor-core kernels emulated (mma.sync and warpgroup forms), with and
without `pre`; fused against unfused (aethercl_gemm, then the library's bias add and
aethercl_unary); refusals with their messages.

Reference and tolerance. v = alpha * op(A) op(B) + beta * C0 + bias in float64 from the decoded
inputs, with aethercl_gemm's bound on the product (support/gemm_checks.py: bound_v) plus 2^-23 |v|
for the float32 bias addition. act is applied in float64: relu is exact; the GELUs have slopes
below 1.13, so the input's error passes at most 1.2 times, and OpenCL's float32 erf (16 ulp) and
tanh (5 ulp) add at most 16 * 2^-24 to 1 + erf(.) (or 1 + tanh(.)), i.e. 2^-20 * 0.5 |x| after the
multiplication; 2^-18 |x| leaves a margin of 8. C's rounding adds OUT_ROUNDING[dtype] of the
value (f16 2^-11, bf16 2^-8). pre = v rounded to C's dtype, with v's bound.
DGELU reads pre (random values stored in C's dtype, left unchanged) and stores v * gelu'(pre):
the slope is below 1.13 in magnitude, so v's error passes at most 1.13 times, and the slope's own
float32 evaluation (erf 16 ulp, exp 4 ulp) is within 2^-19 of it: 2^-18 |v| again leaves room.
Outputs (C and pre) are poisoned with NaN before the call; every buffer has guard bytes, and
nothing outside C's and pre's matrices changes."""
import ctypes
import math

import numpy as np
import pytest

from aethercl import gemm as g
from support.gemm_checks import (Operand, OUT_ROUNDING, POISON_BITS, RTOL, EXTRA, DTYPES,
                                 as_multiplied, decode, encode, make_values)
from support.helpers import kernels_launched

KINDS = list(g.EPILOGUES)
# Layouts the emulated tensor-core kernels store in pairs (even ldc and offsets) and in staged
# 16-byte units (16-bit C, rows of 16-byte multiples); see TC_LAYOUTS below.
TC_LAYOUTS_PAIRS = dict(m=70, n=68, k=44, batch=2, pad=4, offsets=(8, 16, 2))
TC_LAYOUTS_STAGED = dict(m=37, n=45, k=41, batch=1, pad=3, offsets=(0, 0, 0))
HAS_BIAS = {"bias", "bias_relu", "bias_gelu", "bias_gelu_tanh"}


def gelu_slope(x):
    erf = np.vectorize(math.erf)
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# Every kind with and without pre, but DGELU, which needs pre (refused without it: test_refusals).
KIND_PRE = [(kind, with_pre) for kind in KINDS for with_pre in (True, False)
            if kind != "dgelu" or with_pre]


def act_ref(kind, x):
    if kind in ("bias", ):
        return x
    if kind in ("bias_relu", "relu"):
        return np.where(x < 0, 0.0, x)
    if kind in ("bias_gelu", "gelu"):
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + np.tanh(inner))


def poisoned(operand, dtype):
    """Fills an output operand's whole buffer with NaN patterns."""
    operand.stored = (np.full(operand.stored.shape, POISON_BITS, np.uint32).view(np.float32)
                      if dtype == g.F32 else np.full(operand.stored.shape, 0xFFFF, np.uint16))
    operand.tensor.write(operand.stored)


def written_mask(size, offset, batch, stride, m, n, ld):
    mask = np.zeros(size, bool)
    for b in range(batch):
        for r in range(m):
            start = offset + b * stride + r * ld
            mask[start:start + n] = True
    return mask


def run_fused(lib, device, rng, *, kind, mode="fp32", ab=g.F32, c_dtype=g.F32, bias_dtype=g.F32,
              trans_a=0, trans_b=0, m=37, n=53, k=29, batch=1, alpha=1.0, beta=0.0, pad=0,
              offsets=(0, 0, 0), with_pre=True, offset_bias=0, offset_pre=0, scale=1.0,
              offset_residual=None):
    # offset_residual: a residual in C's layout and dtype from that element, added after act.
    """One fused product checked against float64; returns (C as float64 (batch, m, n), names of
    the kernels launched is up to the caller)."""
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    lda, ldb, ldc = max(1, a_cols + pad), max(1, b_cols + pad), max(1, n + pad)
    stride_a = a_rows * lda + pad
    stride_b = b_rows * ldb + pad
    stride_c = m * ldc + pad
    A = Operand(device, make_values(rng, (batch, a_rows, a_cols), ab) * np.float32(scale), ab,
                lda, stride_a, offsets[0], batch)
    B = Operand(device, make_values(rng, (batch, b_rows, b_cols), ab), ab, ldb, stride_b,
                offsets[1], batch)
    if beta != 0.0:
        c_values = make_values(rng, (batch, m, n), c_dtype)
    else:
        c_values = np.full((batch, m, n), np.nan, np.float32)
    C = Operand(device, c_values, c_dtype, ldc, stride_c, offsets[2], batch)
    if beta == 0.0:
        poisoned(C, c_dtype)
    has_bias = kind in HAS_BIAS
    dgelu = kind == "dgelu"
    assert with_pre or not dgelu
    bias_values = make_values(rng, (n,), bias_dtype)
    bias_stored = encode(np.concatenate([np.full(offset_bias, 7.0, np.float32), bias_values]),
                         bias_dtype)
    bias = device.upload(bias_stored) if has_bias else None
    pre = None
    if with_pre:
        pre_values = (make_values(rng, (batch, m, n), c_dtype) if dgelu else
                      np.zeros((batch, m, n), np.float32))
        pre = Operand(device, pre_values, c_dtype, ldc, stride_c, offset_pre, batch)
        if not dgelu:  # an output: poisoned; DGELU's input: random values
            poisoned(pre, c_dtype)
    res = None
    if offset_residual is not None:
        res = Operand(device, make_values(rng, (batch, m, n), c_dtype), c_dtype, ldc, stride_c,
                      offset_residual, batch)
    desc = g.gemm_desc(A.tensor.handle, B.tensor.handle, C.tensor.handle, m, n, k,
                       trans_a=trans_a, trans_b=trans_b, batch=batch, lda=lda, ldb=ldb, ldc=ldc,
                       stride_a=stride_a, stride_b=stride_b, stride_c=stride_c, alpha=alpha,
                       beta=beta, offset_a=offsets[0], offset_b=offsets[1],
                       offset_c=offsets[2], dtype_a=ab, dtype_c=c_dtype,
                       compute=g.COMPUTE_MODES[mode])
    epilogue = g.gemm_epilogue(kind, bias=bias.handle if bias else None, offset_bias=offset_bias,
                               dtype_bias=bias_dtype, pre=pre.tensor.handle if pre else None,
                               offset_pre=offset_pre,
                               residual=res.tensor.handle if res else None,
                               offset_residual=offset_residual or 0)
    g.gemm_fused(lib, device.index, desc, epilogue)
    raw = C.tensor.numpy()
    got = decode(raw, c_dtype).astype(np.float64)
    raw_pre = pre.tensor.numpy() if pre else None
    got_pre = decode(raw_pre, c_dtype).astype(np.float64) if pre else None
    effective = "fp32" if mode == "default" else mode
    outs = []
    for b in range(batch):
        a = as_multiplied(A.matrix(b), effective).astype(np.float64)
        w = as_multiplied(B.matrix(b), effective).astype(np.float64)
        op_a, op_b = (a.T if trans_a else a), (w.T if trans_b else w)
        c0 = C.matrix(b) if beta != 0.0 else np.zeros((m, n))
        v = alpha * op_a @ op_b + beta * c0
        S = abs(alpha) * np.abs(op_a) @ np.abs(op_b)
        bound_v = (RTOL * math.sqrt(max(k, 1)) + EXTRA.get(effective, 0.0)) * S
        bound_v += 2.0 ** -22 * np.abs(beta * c0)
        if has_bias:
            v = v + bias_values.astype(np.float64)[None, :]
        bound_v += 2.0 ** -23 * np.abs(v) + 1e-30
        if dgelu:
            ref = v * gelu_slope(pre.matrix(b))
            bound = 1.13 * bound_v + 2.0 ** -18 * np.abs(v)
        else:
            ref = act_ref(kind, v)
            bound = bound_v if kind in ("bias", "bias_relu", "relu") else (
                1.2 * bound_v + 2.0 ** -18 * np.abs(v))
        if res is not None:  # added in float32 after act: one more float32 rounding
            ref = ref + res.matrix(b)
            bound = bound + 2.0 ** -23 * np.abs(ref)
        bound = bound + OUT_ROUNDING[c_dtype] * (np.abs(ref) + bound) + 1e-30
        rows = lambda flat, off: np.stack(  # noqa: E731
            [flat[off + b * stride_c + r * ldc:][:n] for r in range(m)])
        out = rows(got, offsets[2])
        bad = ~(np.abs(out - ref) <= bound)
        assert not bad.any(), (f"{kind} batch {b}: {bad.sum()} of {bad.size} off; first "
                               f"{np.argwhere(bad)[0]}: got {out[bad][0]}, want {ref[bad][0]}")
        if pre and not dgelu:
            pre_bound = bound_v + OUT_ROUNDING[c_dtype] * (np.abs(v) + bound_v) + 1e-30
            out_pre = rows(got_pre, offset_pre)
            bad = ~(np.abs(out_pre - v) <= pre_bound)
            assert not bad.any(), (f"pre {kind} batch {b}: {bad.sum()} off; first "
                                   f"{np.argwhere(bad)[0]}: got {out_pre[bad][0]}, "
                                   f"want {v[bad][0]}")
        outs.append(out)
    # Nothing outside C's (and pre's) matrices changed; every guard intact.
    mask = written_mask(raw.size, offsets[2], batch, stride_c, m, n, ldc)
    assert np.array_equal(raw[~mask].view(np.uint8), C.stored[~mask].view(np.uint8))
    if pre:
        mask = written_mask(raw_pre.size, offset_pre, batch, stride_c, m, n, ldc)
        if dgelu:  # read only
            mask[:] = False
        assert np.array_equal(raw_pre[~mask].view(np.uint8), pre.stored[~mask].view(np.uint8))
    tensors = [A.tensor, B.tensor, C.tensor] + ([bias] if bias else []) + (
        [pre.tensor] if pre else []) + ([res.tensor] if res else [])
    if res is not None:  # read only
        assert np.array_equal(res.tensor.numpy().view(np.uint8), res.stored.view(np.uint8))
    for t in tensors:
        assert t.guard_intact()
        t.free()
    return np.stack(outs)


# ---- the matrix: kind x C dtype x bias dtype x transposition x alpha/beta ----------------------

@pytest.mark.matrix
@pytest.mark.parametrize("alpha_beta", [(1.0, 0.0), (-0.75, 0.0), (1.25, -0.5)])
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("bias_dtype", list(DTYPES))
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind,with_pre", KIND_PRE)
def test_kinds_dtypes_transposes(lib, device, rng, fp32_precision, kind, c_dtype, bias_dtype,
                                 trans, alpha_beta, with_pre):
    alpha, beta = alpha_beta
    run_fused(lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype],
              bias_dtype=DTYPES[bias_dtype], trans_a=int(trans[0] == "t"),
              trans_b=int(trans[1] == "t"), m=37, n=53, k=29, alpha=alpha, beta=beta,
              with_pre=with_pre, pad=3, offsets=(2, 5, 1), offset_bias=3, offset_pre=4)


@pytest.mark.parametrize("kind", KINDS)
def test_batched_shares_the_bias(lib, device, rng, fp32_precision, kind):
    # Three batch items, padded and offset, one bias of n elements added to every item's rows.
    run_fused(lib, device, rng, kind=kind, batch=3, m=19, n=23, k=31, pad=2, offsets=(1, 3, 2),
              offset_pre=5, alpha=0.5, beta=0.25)


@pytest.mark.parametrize("kind", ["bias_gelu", "relu", "bias_gelu_tanh"])
@pytest.mark.parametrize("mode,ab", [("fp32", g.F32), ("bf16", g.BF16), ("tf32", g.F32)])
def test_compute_modes(lib, device, rng, fp32_precision, kind, mode, ab):
    run_fused(lib, device, rng, kind=kind, mode=mode, ab=ab, c_dtype=g.BF16, m=33, n=41, k=57)


@pytest.mark.parametrize("kind", KINDS)
def test_gpu_kernel_forms(lib, device, rng, fp32_precision, monkeypatch, tmp_path, kind):
    # The tiled kernel GPUs run (AETHERCL_CPU_KERNELS=0 runs it here): vector stores and the
    # element-wise stores of the N edge, batch 2; beta != 0 keeps the product whole (no split).
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "0")
    c_dtype = list(DTYPES)[KINDS.index(kind) % 3]
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=67, n=70, k=45, batch=2,
        alpha=-1.5, beta=0.5, pad=2, offsets=(0, 4, 4), offset_bias=1, offset_pre=1))
    assert {name for name in names if name.startswith("gemm")} == {"gemm_nn"}, names


# ---- the residual, added after the epilogue ------------------------------------------------------

@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS)
def test_residual_added_after_the_epilogue(lib, device, rng, fp32_precision, kind, c_dtype):
    run_fused(lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=29, n=37, k=23, batch=2,
              pad=3, offsets=(1, 2, 3), offset_bias=1, offset_pre=2, offset_residual=5,
              alpha=0.75, beta=0.5)


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


# ---- split-K: the epilogue applied in the fold ---------------------------------------------------

@pytest.mark.matrix
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS)
def test_split_k_applies_the_epilogue_in_the_fold(lib, device, rng, fp32_precision, monkeypatch,
                                                  tmp_path, kind, c_dtype):
    # The GPU kernel forms on this device (AETHERCL_CPU_KERNELS=0) split small products with a long
    # k (16 x 24 x 1000, as test_gemm's split-K cases); the trace shows the fold ran.
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "0")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=16, n=24, k=1000, pad=8,
        offsets=(8, 16, 3), alpha=0.75, offset_bias=1, offset_pre=2))
    assert "gemm_fold_parts" in names, names
    assert not any(name.startswith(("unary", "reduce_add", "elementwise")) for name in names)


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


# ---- fused against unfused -----------------------------------------------------------------------

UNARY = {"relu": 0, "gelu": 5, "gelu_tanh": 6}


@pytest.mark.parametrize("kind", KINDS)
def test_fused_matches_unfused(lib, device, rng, fp32_precision, kind):
    """aethercl_gemm, then execute_broadcast_add_gpu for the bias and aethercl_unary for the
    activation (float32 C, dense layout, batch 2) against the fused product: the same float32
    operations, up to the compiler's contraction of alpha * sum + bias into one fused multiply-add
    (one rounding fewer: 2^-23 of the value, through the activation's slope below 1.13)."""
    batch, m, n, k = 2, 29, 45, 33
    a = make_values(rng, (batch, m, k), g.F32)
    b = make_values(rng, (batch, k, n), g.F32)
    bias = make_values(rng, (n,), g.F32)
    ta, tb, tbias = device.upload(a), device.upload(b), device.upload(bias)
    c1 = device.empty((batch, m, n))
    c2 = device.empty((batch, m, n))
    desc = g.gemm_desc(ta.handle, tb.handle, c1.handle, m, n, k, batch=batch, alpha=0.5)
    g.gemm(lib, device.index, desc)
    if kind in HAS_BIAS:
        lib.check("execute_broadcast_add_gpu", device.index, c1.handle, tbias.handle, c1.handle,
                  batch, m, n)
    activation = kind.replace("bias_", "").replace("bias", "")
    tpre = device.upload(make_values(rng, (batch, m, n), g.F32)) if kind == "dgelu" else None
    if kind == "dgelu":  # the unfused backward: aethercl_unary_backward's GELU slope at pre
        lib.check("aethercl_unary_backward", device.index, UNARY["gelu"], tpre.handle, c1.handle,
                  c1.handle, batch * m * n, ctypes.c_float(0.0), None)
    elif activation:
        lib.check("aethercl_unary", device.index, UNARY[activation], c1.handle, c1.handle,
                  batch * m * n, ctypes.c_float(0.0), None)
    desc.c = c2.handle
    g.gemm_fused(lib, device.index, desc,
                 g.gemm_epilogue(kind, bias=tbias.handle if kind in HAS_BIAS else None,
                                 pre=tpre.handle if tpre else None))
    unfused, fused = c1.numpy().astype(np.float64), c2.numpy().astype(np.float64)
    scale = np.abs(np.einsum("bmk,bkn->bmn", a, b)) * 0.5 + np.abs(bias)
    assert np.all(np.abs(fused - unfused) <= 2.0 ** -21 * scale + 1e-30)
    for t in (ta, tb, tbias, c1, c2) + ((tpre,) if tpre else ()):
        assert t.guard_intact()
        t.free()


def test_null_epilogue_is_aethercl_gemm(lib, device, rng, fp32_precision):
    m, n, k = 21, 17, 13
    a, b = make_values(rng, (m, k), g.F32), make_values(rng, (k, n), g.F32)
    ta, tb = device.upload(a), device.upload(b)
    c1, c2 = device.empty((m, n)), device.empty((m, n))
    desc = g.gemm_desc(ta.handle, tb.handle, c1.handle, m, n, k, alpha=1.5)
    g.gemm(lib, device.index, desc)
    desc.c = c2.handle
    g.gemm_fused(lib, device.index, desc, None)
    assert np.array_equal(c1.numpy().view(np.uint32), c2.numpy().view(np.uint32))
    for t in (ta, tb, c1, c2):
        t.free()


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


def test_zero_work_touches_nothing(lib, device, fp32_precision):
    a, b, c = device.upload(np.ones(4, np.float32)), device.upload(np.ones(4, np.float32)), \
        device.empty((4,))
    bias = device.upload(np.ones(1, np.float32))
    for m, n, batch in [(0, 2, 1), (2, 0, 1), (2, 2, 0)]:
        desc = g.gemm_desc(a.handle, b.handle, c.handle, m, n, 1, batch=batch, ldc=2)
        g.gemm_fused(lib, device.index, desc, g.gemm_epilogue("bias_gelu", bias=bias.handle))
    assert np.isnan(c.numpy()).all()
    for t in (a, b, c, bias):
        assert t.guard_intact()
        t.free()


# ---- refusals ------------------------------------------------------------------------------------

class Case:
    """A small valid product (m=3, n=4, k=2) with its buffers, to break one field at a time."""

    def __init__(self, device):
        self.device = device
        self.a = device.upload(np.ones(6, np.float32))
        self.b = device.upload(np.ones(8, np.float32))
        self.c = device.empty((12,))
        self.bias = device.upload(np.ones(4, np.float32))
        self.pre = device.empty((12,))

    def desc(self, **kw):
        return g.gemm_desc(self.a.handle, self.b.handle, kw.pop("c", self.c.handle), 3, 4, 2, **kw)

    def free(self):
        for t in (self.a, self.b, self.c, self.bias, self.pre):
            assert t.guard_intact()
            t.free()


def refused(lib, device, desc, epilogue, *fragments):
    from aethercl import AetherCLError
    with pytest.raises(AetherCLError) as info:
        g.gemm_fused(lib, device.index, desc, epilogue)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_refusals(lib, device, fp32_precision):
    case = Case(device)
    ok = dict(bias=case.bias.handle)
    refused(lib, device, case.desc(), g.gemm_epilogue(0, **ok), "epilogue->kind = 0")
    refused(lib, device, case.desc(), g.gemm_epilogue(8, **ok), "epilogue->kind = 8")
    # The residual: sized as C, apart from C and pre; a descriptor of the first version-4 size
    # (ending at offset_pre) is accepted and adds none.
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.pre.handle,
                                                      offset_residual=1000, **ok),
            "epilogue->residual")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.c.handle, **ok),
            "epilogue->residual overlaps", "desc->c")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle,
                                                      residual=case.pre.handle),
            "epilogue->residual overlaps")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.pre.handle,
                                                      offset_residual=2 ** 62, **ok),
            "epilogue->residual")
    first = g.gemm_epilogue("bias", residual=case.pre.handle, **ok)
    first.struct_size = g.GemmEpilogue.residual.offset
    g.gemm_fused(lib, device.index, case.desc(), first)
    np.testing.assert_array_equal(case.c.numpy()[:12], np.full(12, 3.0, np.float32))
    first.struct_size = g.GemmEpilogue.residual.offset - 1
    refused(lib, device, case.desc(), first, "epilogue->struct_size")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu"), "epilogue->pre is NULL", "DGELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu", pre=case.pre.handle, **ok),
            "epilogue->bias is set", "DGELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu", pre=case.c.handle),
            "epilogue->pre overlaps desc->c")
    small = g.gemm_epilogue("bias", **ok)
    small.struct_size = g.GemmEpilogue.residual.offset - 1
    refused(lib, device, case.desc(), small, "epilogue->struct_size")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias_relu"), "epilogue->bias is NULL")
    refused(lib, device, case.desc(), g.gemm_epilogue("gelu", **ok), "epilogue->bias is set",
            "GELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", dtype_bias=g.F64, **ok),
            "epilogue->dtype_bias = 3")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", dtype_bias=9, **ok),
            "epilogue->dtype_bias = 9")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", offset_bias=1000, **ok),
            "epilogue->bias")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", bias=ctypes.c_void_p(0x1234)),
            "epilogue->bias")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=ctypes.c_void_p(0x1234)),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle, offset_pre=1000),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle,
                                                      offset_pre=2 ** 62),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", offset_bias=2 ** 63, **ok),
            "epilogue->bias")
    # Aliasing: pre over A, B or C; C over the bias; pre over the bias.
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.c.handle),
            "epilogue->pre overlaps desc->c")
    big = device.empty((64,))
    desc = g.gemm_desc(big.handle, case.b.handle, case.c.handle, 3, 4, 2)
    refused(lib, device, desc, g.gemm_epilogue("relu", pre=big.handle, offset_pre=4),
            "epilogue->pre overlaps desc->a")
    refused(lib, device, case.desc(c=big.handle),
            g.gemm_epilogue("bias", bias=big.handle, offset_bias=8), "desc->c overlaps "
            "epilogue->bias")
    refused(lib, device, case.desc(c=big.handle),
            g.gemm_epilogue("bias", bias=case.bias.handle, pre=case.bias.handle),
            "epilogue->pre")
    # Disjoint parts of one buffer are fine: C at 0, pre at 16, bias at 40.
    g.gemm_fused(lib, device.index, case.desc(c=big.handle),
                 g.gemm_epilogue("bias_relu", bias=big.handle, offset_bias=40, pre=big.handle,
                                 offset_pre=16))
    # The descriptor is checked first, with aethercl_gemm's messages.
    refused(lib, device, case.desc(trans_a=2), g.gemm_epilogue("bias", **ok), "desc->trans_a")
    # A larger struct_size (a newer header) is accepted.
    larger = g.gemm_epilogue("bias", **ok)
    larger.struct_size = ctypes.sizeof(g.GemmEpilogue) + 64
    g.gemm_fused(lib, device.index, case.desc(), larger)
    lib.check("aethercl_synchronize", device.index)
    np.testing.assert_array_equal(case.c.numpy(), np.full(12, 3.0, np.float32))
    big.free()
    case.free()
