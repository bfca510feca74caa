"""What the aethercl_gemm_fused suites share (test_gemm_fused.py, test_gemm_fused_paths.py):
run_fused, one fused product against float64 NumPy with poisoned outputs and guard bytes.

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

from aethercl import gemm as g
from support.gemm_checks import (Operand, OUT_ROUNDING, POISON_BITS, RTOL, EXTRA, DTYPES,
                                 as_multiplied, decode, encode, make_values)
from support.helpers import kernels_launched

KINDS = list(g.EPILOGUES)
HAS_BIAS = {"bias", "bias_relu", "bias_gelu", "bias_gelu_tanh"}
KINDS_BIAS = [kind for kind in KINDS if kind in HAS_BIAS]
KINDS_NO_BIAS = [kind for kind in KINDS if kind not in HAS_BIAS]


def gelu_slope(x):
    erf = np.vectorize(math.erf)
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# Every kind with and without pre, but DGELU, which needs pre (refused without it: test_refusals),
# split between the two suites' matrices: the kinds that add a bias (test_gemm_fused.py) and
# those that do not (test_gemm_fused_paths.py).
KIND_PRE = [(kind, with_pre) for kind in KINDS for with_pre in (True, False)
            if kind != "dgelu" or with_pre]
KIND_PRE_BIAS = [(kind, with_pre) for kind, with_pre in KIND_PRE if kind in HAS_BIAS]
KIND_PRE_NO_BIAS = [(kind, with_pre) for kind, with_pre in KIND_PRE if kind not in HAS_BIAS]


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


# ---- checks each suite runs for its kinds (test_gemm_fused.py: those with a bias; the others in
# test_gemm_fused_paths.py), so that the two suites build disjoint sets of kernel variants ---------

def kind_dtype_transpose_case(lib, device, rng, kind, c_dtype, bias_dtype, trans, alpha_beta,
                              with_pre):
    """One case of the matrix both halves run (kind x C dtype x bias dtype x transposition x
    alpha/beta): dtype names of gemm_checks.DTYPES, trans "nn" ... "tt", on odd shapes, padded
    leading dimensions and offsets."""
    alpha, beta = alpha_beta
    run_fused(lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype],
              bias_dtype=DTYPES[bias_dtype], trans_a=int(trans[0] == "t"),
              trans_b=int(trans[1] == "t"), m=37, n=53, k=29, alpha=alpha, beta=beta,
              with_pre=with_pre, pad=3, offsets=(2, 5, 1), offset_bias=3, offset_pre=4)


def batched_shares_the_bias(lib, device, rng, kind):
    # Three batch items, padded and offset, one bias of n elements added to every item's rows.
    run_fused(lib, device, rng, kind=kind, batch=3, m=19, n=23, k=31, pad=2, offsets=(1, 3, 2),
              offset_pre=5, alpha=0.5, beta=0.25)


def gpu_kernel_forms(lib, device, rng, monkeypatch, tmp_path, kind):
    # The tiled kernel GPUs run (AETHERCL_CPU_KERNELS=0 runs it here): vector stores and the
    # element-wise stores of the N edge, batch 2; beta != 0 keeps the product whole (no split).
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "0")
    c_dtype = list(DTYPES)[KINDS.index(kind) % 3]
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=67, n=70, k=45, batch=2,
        alpha=-1.5, beta=0.5, pad=2, offsets=(0, 4, 4), offset_bias=1, offset_pre=1))
    assert {name for name in names if name.startswith("gemm")} == {"gemm_nn"}, names


def residual_added_after_the_epilogue(lib, device, rng, kind, c_dtype):
    run_fused(lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=29, n=37, k=23, batch=2,
              pad=3, offsets=(1, 2, 3), offset_bias=1, offset_pre=2, offset_residual=5,
              alpha=0.75, beta=0.5)


UNARY = {"relu": 0, "gelu": 5, "gelu_tanh": 6}


def fused_matches_unfused(lib, device, rng, kind):
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


def split_k_applies_the_epilogue_in_the_fold(lib, device, rng, monkeypatch, tmp_path, kind,
                                             c_dtype):
    # The GPU kernel forms on this device (AETHERCL_CPU_KERNELS=0) split small products with a long
    # k (16 x 24 x 1000, as test_gemm's split-K cases); the trace shows the fold ran.
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "0")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_fused(
        lib, device, rng, kind=kind, c_dtype=DTYPES[c_dtype], m=16, n=24, k=1000, pad=8,
        offsets=(8, 16, 3), alpha=0.75, offset_bias=1, offset_pre=2))
    assert "gemm_fold_parts" in names, names
    assert not any(name.startswith(("unary", "reduce_add", "elementwise")) for name in names)
