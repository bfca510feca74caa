"""aethercl_gemm against float64 NumPy: every compute mode x operand dtype x transposition x
batch layout (strided, broadcast A, broadcast B), C dtypes, alpha/beta, leading dimensions and
offsets, zero-work shapes, the seed matmul precision, and the tensor-core kernels' emulation.

Reference and tolerance. Inputs are decoded exactly from their storage (f16/bf16 patterns), then
rounded in NumPy the way the mode says (numeric_formats.cl's rules: TF32, BF16 and FP16 nearest
even); ref = alpha * op(A') @ op(B') + beta * C0 in float64. Products of
rounded inputs are exact in float32, so what remains is float32 accumulation, with
S = |alpha| * |op(A')| @ |op(B')| (the abs-product sum):
    |out - ref| <= (RTOL * sqrt(k) + EXTRA[mode]) * S + 2^-22 * |beta * C0| + OUT[dtype_c]
RTOL = 16 * 2^-24: a sequential float32 sum errs by about 2^-24 * sqrt(k) * S; 8 units cover the
portable kernels (test_matmul uses 8 for FP32), the other 8 the tensor cores, whose float32
accumulation may truncate instead of round. EXTRA[3xtf32] = 4 * 2^-22: a = hi + lo + e with
|e| <= 2^-22 |a| per input, and the dropped lo*lo term is below 2^-22 |ab|. For C stored as f16
(bf16), OUT adds the final rounding, 2^-11 (2^-8) times |ref| plus the bound itself. A mode that
failed to round would miss this bound: its result differs from the rounded inputs' product by
about 2^-11 (TF32) to 2^-8 (BF16) of S, far above RTOL * sqrt(k).

Every output is poisoned (NaN) before the call and every buffer has guard bytes after it."""
import ctypes
import json
import math

import numpy as np
import pytest

from aethercl import gemm as g
from support.helpers import kernels_launched, run_child

RTOL = 16 * 2.0 ** -24
EXTRA = {"3xtf32": 4 * 2.0 ** -22}
OUT_ROUNDING = {g.F32: 0.0, g.F16: 2.0 ** -11, g.BF16: 2.0 ** -8}
DTYPES = {"f32": g.F32, "f16": g.F16, "bf16": g.BF16}
MODES = ["fp32", "tf32", "3xtf32", "bf16", "fp16", "default"]
LAYOUTS = ["single", "batched", "broadcast_a", "broadcast_b"]
POISON_BITS = 0x7FC0DEAD


# ---- number formats in NumPy -------------------------------------------------------------------

def bf16_bits(x):
    """float32 -> bf16 patterns, nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def decode(bits_or_values, dtype):
    if dtype == g.F32:
        return np.asarray(bits_or_values, np.float32)
    if dtype == g.F16:
        return np.asarray(bits_or_values, np.uint16).view(np.float16).astype(np.float32)
    return (np.asarray(bits_or_values, np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(values, dtype):
    """Storage of float32 values: float32, f16 patterns (nearest even) or bf16 patterns."""
    values = np.asarray(values, np.float32)
    if dtype == g.F32:
        return values
    if dtype == g.F16:
        return values.astype(np.float16).view(np.uint16)
    return bf16_bits(values)


def round_tf32(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def as_multiplied(x, mode):
    """The values the mode multiplies (3xTF32 and FP32: the inputs themselves)."""
    if mode == "tf32":
        return round_tf32(x)
    if mode == "bf16":
        return decode(bf16_bits(x), g.BF16)
    if mode == "fp16":
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
    return np.asarray(x, np.float32)


# ---- one product -------------------------------------------------------------------------------

class Operand:
    """A matrix batch stored with a leading dimension, batch stride and offset in one buffer."""

    def __init__(self, device, values, dtype, ld, stride, offset, batch):
        self.values = values                      # float32 (batch, rows, cols) as decoded
        rows, cols = values.shape[1:]
        items = batch if stride else 1
        extent = offset + (items - 1) * stride + (rows - 1) * ld + cols
        storage = np.zeros(max(extent, offset + 1), np.float32)
        for b in range(items):
            for r in range(rows):
                start = offset + b * stride + r * ld
                storage[start:start + cols] = values[b if stride else 0, r]
        self.stored = encode(storage, dtype)
        self.tensor = device.upload(self.stored)
        self.dtype, self.ld, self.stride, self.offset = dtype, ld, stride, offset

    def matrix(self, b):
        return self.values[b if self.stride else 0].astype(np.float64)


def make_values(rng, shape, dtype):
    """Random normal values exactly representable in dtype."""
    return decode(encode(rng.standard_normal(shape).astype(np.float32), dtype), dtype)


def run_gemm(lib, device, rng, *, mode, ab, c_dtype=g.F32, trans_a=0, trans_b=0, m=13, n=11,
             k=19, layout="single", alpha=1.0, beta=0.0, pad=0, offsets=(0, 0, 0),
             c_init=None):
    batch = 1 if layout == "single" else 3
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    lda, ldb, ldc = max(1, a_cols + pad), max(1, b_cols + pad), max(1, n + pad)
    stride_a = 0 if layout == "broadcast_a" else a_rows * lda + pad
    stride_b = 0 if layout == "broadcast_b" else b_rows * ldb + pad
    stride_c = m * ldc + pad
    a_items = 1 if stride_a == 0 else batch
    b_items = 1 if stride_b == 0 else batch
    A = Operand(device, make_values(rng, (a_items, a_rows, a_cols), ab), ab, lda, stride_a,
                offsets[0], batch)
    B = Operand(device, make_values(rng, (b_items, b_rows, b_cols), ab), ab, ldb, stride_b,
                offsets[1], batch)
    if c_init is None:
        c_values = np.full((batch, m, n), np.nan, np.float32)  # beta = 0 must not read these
    else:
        c_values = make_values(rng, (batch, m, n), c_dtype) * c_init
    C = Operand(device, c_values, c_dtype, ldc, stride_c, offsets[2], batch)
    if c_init is None:  # poison the whole C buffer, padding included (NaN in every dtype)
        C.stored = (np.full(C.stored.shape, POISON_BITS, np.uint32).view(np.float32)
                    if c_dtype == g.F32 else np.full(C.stored.shape, 0xFFFF, np.uint16))
        C.tensor.write(C.stored)
    desc = g.gemm_desc(A.tensor.handle, B.tensor.handle, C.tensor.handle, m, n, k,
                       trans_a=trans_a, trans_b=trans_b, batch=batch, lda=lda, ldb=ldb, ldc=ldc,
                       stride_a=stride_a, stride_b=stride_b, stride_c=stride_c, alpha=alpha,
                       beta=beta, offset_a=offsets[0], offset_b=offsets[1],
                       offset_c=offsets[2], dtype_a=ab, dtype_c=c_dtype,
                       compute=g.COMPUTE_MODES[mode])
    g.gemm(lib, device.index, desc)
    raw = C.tensor.numpy()
    got = decode(raw, c_dtype).astype(np.float64)
    effective = "fp32" if mode == "default" else mode
    for b in range(batch):
        a = as_multiplied(A.matrix(b), effective).astype(np.float64)
        w = as_multiplied(B.matrix(b), effective).astype(np.float64)
        op_a, op_b = (a.T if trans_a else a), (w.T if trans_b else w)
        c0 = C.matrix(b) if c_init is not None else np.zeros((m, n))
        ref = alpha * op_a @ op_b + beta * c0
        S = abs(alpha) * np.abs(op_a) @ np.abs(op_b)
        bound = (RTOL * math.sqrt(max(k, 1)) + EXTRA.get(effective, 0.0)) * S
        bound += 2.0 ** -22 * np.abs(beta * c0)
        bound += OUT_ROUNDING[c_dtype] * (np.abs(ref) + bound) + 1e-30
        out = np.stack([got[offsets[2] + b * stride_c + r * ldc:][:n] for r in range(m)])
        bad = ~(np.abs(out - ref) <= bound)
        assert not bad.any(), (f"batch {b}: {bad.sum()} of {bad.size} off; first "
                               f"{np.argwhere(bad)[0]}: got {out[bad][0]}, want {ref[bad][0]}")
    # Nothing outside C's matrices changed (padding, gaps between batch items, the offset).
    written = np.zeros(raw.shape, bool)
    for b in range(batch):
        for r in range(m):
            start = offsets[2] + b * stride_c + r * ldc
            written[start:start + n] = True
    assert np.array_equal(raw[~written].view(np.uint8), C.stored[~written].view(np.uint8))
    for t in (A.tensor, B.tensor, C.tensor):
        assert t.guard_intact()
        t.free()
    return got


@pytest.fixture
def fp32_precision(lib, device):
    """DEFAULT means FP32 here; the matmul precision is restored whatever a test set."""
    lib.check("aethercl_set_matmul_precision", device.index, g.COMPUTE_FP32)
    yield
    lib.check("aethercl_set_matmul_precision", device.index, g.COMPUTE_FP32)


# ---- the full cross: mode x dtype x transposition x batch layout --------------------------------

@pytest.mark.matrix
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("ab", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_modes_dtypes_layouts(lib, device, rng, fp32_precision, mode, ab, trans, layout):
    padded = layout != "single"
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=int(trans[0] == "t"),
             trans_b=int(trans[1] == "t"), layout=layout, alpha=1.5 if padded else 1.0,
             pad=3 if layout == "broadcast_b" else (4 if padded else 0),
             offsets=(4, 8, 2) if layout == "batched" else
             ((3, 5, 1) if padded else (0, 0, 0)))


@pytest.mark.matrix
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("ab", list(DTYPES))
@pytest.mark.parametrize("mode", MODES[:5])
def test_c_dtypes_with_alpha_beta(lib, device, rng, fp32_precision, mode, ab, c_dtype):
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=DTYPES[c_dtype], m=17, n=10,
             k=23, layout="batched", alpha=0.75, beta=-1.25, pad=2, c_init=1.0)


@pytest.mark.parametrize("c_dtype", list(DTYPES))
def test_beta_zero_never_reads_c(lib, device, rng, fp32_precision, c_dtype):
    # C holds NaN patterns: any read of C with beta = 0 would leak them into the result, which
    # run_gemm compares with finite references.
    run_gemm(lib, device, rng, mode="fp32", ab=g.F32, c_dtype=DTYPES[c_dtype], m=9, n=7, k=5,
             layout="batched", alpha=2.0, beta=0.0, pad=1)


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.0, 1.0), (0.0, 0.0), (-2.0, 0.5)])
def test_alpha_beta(lib, device, rng, fp32_precision, alpha, beta):
    run_gemm(lib, device, rng, mode="fp32", ab=g.F32, m=31, n=33, k=7, layout="batched",
             alpha=alpha, beta=beta, pad=1, c_init=None if beta == 0 else 1.0)


@pytest.mark.parametrize("mode", ["fp32", "tf32", "3xtf32", "bf16"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (67, 130, 71), (130, 3, 257), (2, 200, 65)])
def test_shapes_across_tiles(lib, device, rng, fp32_precision, mode, shape):
    m, n, k = shape
    run_gemm(lib, device, rng, mode=mode, ab=g.F32, m=m, n=n, k=k, layout="single")


# Split-K (gemm/split_k.cpp: batch 1, beta 0, few work-items, long k) runs wherever the GPU
# kernel forms run; AETHERCL_CPU_KERNELS=0 gives them to PoCL too. It splits the portable kernel's
# products, so tensor cores are off here. Slices of a k that does not divide (1000, 387) leave a
# tail product; padding and offsets test the slices' strides.
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("fp32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16")])
@pytest.mark.parametrize("shape", [(16, 16, 1024), (5, 17, 1000), (33, 2, 387)])
def test_split_k(lib, device, rng, fp32_precision, monkeypatch, tmp_path, mode, ab, trans,
                 shape):
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "0")
    m, n, k = shape
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=int(trans[0] == "t"),
        trans_b=int(trans[1] == "t"), m=m, n=n, k=k, layout="single", alpha=-1.5, pad=3,
        offsets=(3, 5, 1)))
    assert "gemm_fold_parts" in names


# Split-K on the tensor-core kernels (gemm/tensor_core_gemm.cpp): TF32 and 3xTF32 products of
# fewer tiles than compute units (each shape here is one 64 x 64 tile) run as the same slices, of
# whole K-tiles, each slice product on the mma.sync kernel, emulated here so that PoCL runs its
# layouts; NVIDIA GPUs take decode-like products (16 x 8192 x 8192) this way. Dimensions, offsets
# and leading dimensions keep 16-byte alignment (tensor cores need 4 bytes; 16 keeps every
# cp.async width in play); k = 1000 and 584 leave a tail product after the slices of whole
# 32-element steps. 16-bit products split from k = 2048 on (gemm/tensor_core_gemm.cpp).
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"),
                                     ("fp16", "f16")])
@pytest.mark.parametrize("shape", [(16, 16, 1024), (8, 24, 1000), (40, 56, 584), (8, 24, 2080)])
@pytest.mark.parametrize("tensor_cores", ["emulate", "auto"])
def test_tensor_core_split_k(lib, device, rng, fp32_precision, monkeypatch, tmp_path, mode, ab,
                             trans, shape, tensor_cores):
    # "auto": the hardware kernel where the device has tensor cores, else the portable split.
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", tensor_cores)
    m, n, k = shape
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=int(trans[0] == "t"),
        trans_b=int(trans[1] == "t"), m=m, n=n, k=k, layout="single", alpha=-1.5, pad=8,
        offsets=(8, 16, 1)))
    if tensor_cores == "emulate":
        assert "gemm_mma_product" in names, names
        assert ("gemm_fold_parts" in names) == (ab == "f32" or k >= 2048), names
    else:
        assert "gemm_fold_parts" in names or ab != "f32", names


# A half-precision C is folded from the float32 partial products and rounded once, as an unsplit
# product rounds it; on the portable kernel and on the tensor-core kernel (emulated).
@pytest.mark.matrix
@pytest.mark.parametrize("c_dtype", ["f16", "bf16"])
@pytest.mark.parametrize("mode,ab,tensor_cores", [("fp32", "f32", "0"), ("bf16", "bf16", "0"),
                                                  ("tf32", "f32", "0"), ("tf32", "f32", "emulate"),
                                                  ("3xtf32", "f32", "emulate")])
def test_split_k_half_outputs(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                              tensor_cores, c_dtype, mode, ab):
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", tensor_cores)
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=DTYPES[c_dtype], m=16, n=24,
        k=1000, layout="single", alpha=0.75, pad=8, offsets=(8, 16, 3)))
    assert "gemm_fold_parts" in names, names


def test_split_k_is_not_taken_where_it_does_not_apply(lib, device, rng, fp32_precision,
                                                      monkeypatch, tmp_path):
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    for kwargs in ({"k": 100}, {"k": 1024, "beta": 0.5, "c_init": 1.0},
                   {"k": 1024, "layout": "batched"}):
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode="fp32", ab=g.F32, m=16, n=16, **kwargs))
        assert "gemm_fold_parts" not in names, kwargs


@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"),
                                     ("fp16", "f16"), ("tf32", "bf16"), ("bf16", "f32")])
def test_tensor_core_friendly_shapes(lib, device, rng, fp32_precision, mode, ab, trans):
    # Dimensions and offsets aligned to 16 bytes, so NVIDIA GPUs run these on tensor cores with
    # 16-byte cp.async (elsewhere the portable kernel): edges in M, N and K, a batch.
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=int(trans[0] == "t"),
             trans_b=int(trans[1] == "t"), m=136, n=72, k=200, layout="batched", pad=8,
             offsets=(16, 8, 4), alpha=0.5)


# The warpgroup kernel's forms forced whatever the product's size: the bulk-copy kernel (the
# default tiles, and 3xTF32's), the cp.async one. On compute capability 9.0 the real instructions
# run them; other devices run the portable kernel on the same checks.
@pytest.mark.matrix
@pytest.mark.parametrize("params", ["wgmma=1,bulk=1,row_bytes=32,stages=5,inflight=0",
                                    "wgmma=1,bulk=1,row_bytes=32,bn=64,stages=3,inflight=0",
                                    "wgmma=1"])
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"),
                                     ("fp16", "f16")])
def test_warpgroup_kernel_forms(lib, device, rng, fp32_precision, monkeypatch, params, mode, ab,
                                trans):
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", params)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=136, n=72,
             k=200, layout="batched", pad=8, offsets=(16, 8, 4), alpha=0.5)
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=g.BF16, trans_a=ta,
             trans_b=tb, m=70, n=131, k=45, layout="broadcast_b", pad=4, beta=0.5, c_init=1.0)


@pytest.mark.matrix
@pytest.mark.parametrize("instructions", ["emulate-wgmma", "auto"])
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
def test_tf32_rounded_by_the_warpgroup_kernel_matches_packed_rounding(
        lib, device, fp32_precision, monkeypatch, tmp_path, instructions, trans):
    # tf32_round=2: the cp.async warpgroup kernel rounds each staged tile instead of a packing
    # pass rounding both operands first. Same rounded inputs, same products: the same bits. With
    # A stored m x k and B stored n x k nothing is packed at all; otherwise only the operand
    # stored the other way round is (transposed, not rounded).
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    base = "wgmma=1,bulk=0,bm=64,bn=64,wm=16,wn=64,stages=2,row_bytes=64,inflight=1"
    runs = {}
    for rounding in (1, 2):
        monkeypatch.setenv("AETHERCL_MMA_PARAMS", f"{base},tf32_round={rounding}")
        runs[rounding] = kernels_launched(
            lib, device.index, tmp_path / f"trace{rounding}.json", lambda: run_gemm(
                lib, device, np.random.default_rng(7), mode="tf32", ab=g.F32, trans_a=ta,
                trans_b=tb, m=136, n=72, k=200, layout="batched", pad=8, offsets=(16, 8, 4),
                alpha=0.5))
    (names_packed, packed), (names_in_kernel, in_kernel) = runs[1], runs[2]
    assert np.array_equal(packed.view(np.uint64), in_kernel.view(np.uint64))
    if "gemm_mma_product" not in names_in_kernel:
        assert instructions == "auto", names_in_kernel  # no warpgroup MMA on this device
        return
    packs = {name for name in names_in_kernel if name.startswith("gemm_pack")}
    assert packs == (set() if trans == "nt" else {"gemm_pack_transpose"}), packs
    assert "gemm_pack_copy" in names_packed or "gemm_pack_transpose" in names_packed


def test_tf32_round_2_needs_the_cp_async_warpgroup_kernel(lib, device, fp32_precision,
                                                          monkeypatch):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate-wgmma")
    a, b = device.upload(np.ones((8, 8), np.float32)), device.upload(np.ones((8, 8), np.float32))
    c = device.upload(np.full((8, 8), np.nan, np.float32))
    desc = g.gemm_desc(a.handle, b.handle, c.handle, 8, 8, 8, compute=g.COMPUTE_MODES["tf32"])
    for text in ("tf32_round=2,wgmma=0", "tf32_round=2,wgmma=1,bulk=1,row_bytes=32",
                 "tf32_round=3,wgmma=1", "tf32_round=-1"):
        monkeypatch.setenv("AETHERCL_MMA_PARAMS", text)
        assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 0, text
        assert "tf32_round" in lib.last_error(), text
        assert np.isnan(c.numpy()).all(), text
    for t in (a, b, c):
        assert t.guard_intact()
        t.free()


def test_k_zero_scales_c(lib, device, rng, fp32_precision):
    run_gemm(lib, device, rng, mode="fp32", ab=g.F32, m=5, n=6, k=0, layout="batched",
             beta=-3.0, pad=1, c_init=1.0)
    got = run_gemm(lib, device, rng, mode="tf32", ab=g.F32, m=5, n=6, k=0, layout="single")
    assert (got == 0).all()  # beta = 0 and k = 0: zeros, whatever C held


@pytest.mark.parametrize("zero", ["m", "n", "batch"])
def test_zero_work_touches_nothing(lib, device, rng, zero):
    a, b = device.upload(np.ones(16, np.float32)), device.upload(np.ones(16, np.float32))
    c = device.empty((16,))
    dims = {"m": 4, "n": 4, "batch": 1, zero: 0}
    desc = g.gemm_desc(a.handle, b.handle, c.handle, dims["m"], dims["n"], 4,
                       batch=dims["batch"], stride_c=16)
    g.gemm(lib, device.index, desc)
    assert (c.numpy().view(np.uint32) == POISON_BITS).all() and c.guard_intact()
    for t in (a, b, c):
        t.free()


def test_larger_struct_from_a_newer_header_is_accepted(lib, device, rng):
    a, b = device.upload(np.full(6, 2, np.float32)), device.upload(np.full(6, 3, np.float32))
    c = device.empty((2, 2))
    desc = g.gemm_desc(a.handle, b.handle, c.handle, 2, 2, 3, compute=g.COMPUTE_FP32)
    bigger = (ctypes.c_ubyte * (ctypes.sizeof(desc) + 64))(*([0x7F] * (ctypes.sizeof(desc) + 64)))
    ctypes.memmove(bigger, ctypes.byref(desc), ctypes.sizeof(desc))
    ctypes.cast(bigger, ctypes.POINTER(ctypes.c_size_t))[0] = ctypes.sizeof(bigger)
    lib.check("aethercl_gemm", device.index, bigger, None)
    assert (c.numpy() == 18).all()
    for t in (a, b, c):
        t.free()


# ---- the seed matmul entry points follow the matmul precision ----------------------------------

def test_seed_matmul_follows_matmul_precision(lib, device, rng, fp32_precision):
    B, M, N, K = 2, 9, 12, 64
    a = rng.standard_normal((B, M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    ta, tw = device.upload(a), device.upload(w)

    def matmul():
        tc = device.empty((B, M, N))
        lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, tc.handle, B, M,
                  N, K)
        out = tc.numpy()
        tc.free()
        return out.astype(np.float64)

    exact = matmul()
    ref = a.astype(np.float64) @ w.astype(np.float64)
    S = np.abs(a.astype(np.float64)) @ np.abs(w.astype(np.float64))
    assert (np.abs(exact - ref) <= RTOL / 2 * math.sqrt(K) * S).all()
    for mode in ("tf32", "bf16", "fp16", "3xtf32"):
        lib.check("aethercl_set_matmul_precision", device.index, g.COMPUTE_MODES[mode])
        out = matmul()
        rounded = as_multiplied(a, mode).astype(np.float64) @ as_multiplied(w, mode)
        bound = (RTOL * math.sqrt(K) + EXTRA.get(mode, 0.0)) * S
        assert (np.abs(out - rounded) <= bound).all(), mode
        if mode != "3xtf32":  # the rounding really happened: FP32's bound is missed somewhere
            assert (np.abs(out - ref) > RTOL * math.sqrt(K) * S).any(), mode
    lib.check("aethercl_set_matmul_precision", device.index, g.COMPUTE_DEFAULT)
    np.testing.assert_array_equal(matmul(), exact)  # back to FP32 exact, bit for bit
    ta.free()
    tw.free()


def test_backward_products_follow_matmul_precision(lib, device, rng, fp32_precision):
    B, M, N, K = 1, 8, 40, 48
    a = rng.standard_normal((B, M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    dc = rng.standard_normal((B, M, N)).astype(np.float32)
    ta, tw, tdc = device.upload(a), device.upload(w), device.upload(dc)
    tda, tdw = device.empty(a.shape), device.empty(w.shape)
    lib.check("aethercl_set_matmul_precision", device.index, g.COMPUTE_BF16)
    lib.check("execute_matmul_backward_on_gpu", device.index, ta.handle, tw.handle, tdc.handle,
              tda.handle, tdw.handle, B, M, N, K)
    r = lambda x: as_multiplied(x, "bf16").astype(np.float64)  # noqa: E731
    for got, x, y, length in ((tda.numpy()[0], r(dc[0]), r(w).T, N),
                              (tdw.numpy(), r(a[0]).T, r(dc[0]), M)):
        bound = RTOL * math.sqrt(length) * (np.abs(x) @ np.abs(y))
        assert (np.abs(got - x @ y) <= bound).all()
    for t in (ta, tw, tdc, tda, tdw):
        assert t.guard_intact()
        t.free()


@pytest.mark.parametrize("value,mode", [("tf32", "tf32"), ("BF16", "bf16"), ("fp64", "fp32"),
                                        ("", "fp32")])
def test_matmul_precision_environment(value, mode):
    # The seed matmul in the mode the variable names; a malformed value warns and keeps FP32.
    child = run_child(f"""
        import os
        os.environ['AETHERCL_MATMUL_PRECISION'] = {value!r}
        lib.check("initialize_gpu", 0)
        rng = np.random.default_rng(5)
        a = rng.standard_normal((16, 32)).astype(np.float32)
        w = rng.standard_normal((32, 8)).astype(np.float32)
        c = np.zeros((16, 8), np.float32)
        h = [lib.check_handle("allocate_gpu_memory", 0, x.nbytes) for x in (a, w, c)]
        for handle, x in zip(h, (a, w)):
            lib.check("write_host_to_gpu_blocking", 0, handle, 0, x.nbytes, x.ctypes.data)
        lib.check("execute_matmul_on_gpu", 0, h[0], h[1], h[2], 1, 16, 8, 32)
        lib.check("read_gpu_to_host_blocking", 0, h[2], 0, c.nbytes, c.ctypes.data)
        print("RESULT", " ".join(repr(float(x)) for x in c.reshape(-1)))
        print("INPUTS", " ".join(repr(float(x)) for x in np.concatenate([a.reshape(-1), w.reshape(-1)])))
    """)
    assert child.returncode == 0, child.stderr
    lines = dict(l.split(" ", 1) for l in child.stdout.splitlines() if l[:6] in ("RESULT", "INPUTS"))
    got = np.array(lines["RESULT"].split(), np.float64).reshape(16, 8)
    inputs = np.array(lines["INPUTS"].split(), np.float32)
    a, w = inputs[:16 * 32].reshape(16, 32), inputs[16 * 32:].reshape(32, 8)
    want = as_multiplied(a, mode).astype(np.float64) @ as_multiplied(w, mode)
    bound = RTOL * math.sqrt(32) * (np.abs(a).astype(np.float64) @ np.abs(w))
    assert (np.abs(got - want) <= bound).all()
    if value == "fp64":
        assert "AETHERCL_MATMUL_PRECISION" in child.stderr  # the one warning


def test_set_matmul_precision_refuses_unknown_modes(lib, device):
    for compute in (-1, 6, 99):
        assert lib.cdll.aethercl_set_matmul_precision(device.index, compute) == 0
        assert "compute" in lib.last_error()


# ---- the tensor-core kernels, with emulated warp instructions (any device) ----------------------

EMULATED = [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"), ("fp16", "f16")]


@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", EMULATED)
@pytest.mark.parametrize("instructions", ["emulate", "emulate-wgmma"])
def test_tensor_core_kernels_emulated(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                      mode, ab, trans, instructions):
    """kernels/gemm_mma.cl with MMA_EMULATE=1, mma.sync and warpgroup-MMA kernels (with the
    transposed operand copies of kernels/gemm_pack.cl): the fragment and accumulator layouts,
    swizzles, zero-filled edges and the pipeline, checked on the device under test (on NVIDIA the
    real instructions run in the other tests). Rows of A and B are 8-byte multiples, as cp.async
    needs; the second product's 16-bit C has rows of 16-byte multiples, stored through local
    memory in whole units (MMA_C_STAGED), its last unit cut by N, with beta."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=70, n=68, k=44,
        layout="batched", alpha=1.25, pad=4, offsets=(8, 16, 2)))
    assert "gemm_mma_product" in names, names
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace2.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=g.F16 if ab == "f16" else g.BF16,
        trans_a=ta, trans_b=tb, m=37, n=45, k=41, layout="single", beta=0.5, pad=3,
        c_init=1.0))
    assert "gemm_mma_product" in names, names


@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"),
                                     ("fp16", "f16")])
# Each within 48 KiB of local memory (NVIDIA's) for every kind, with the emulation's scratch.
@pytest.mark.parametrize("params", ["wgmma=1,bulk=1,row_bytes=32,bm=128",
                                    "wgmma=1,bulk=1,row_bytes=64,stages=2",
                                    "wgmma=1,bulk=1,row_bytes=32,bn=120,inflight=0"])
def test_bulk_warpgroup_kernel_emulated(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                        params, mode, ab, trans):
    """The warpgroup kernel fed by bulk copies (MMA_BULK), emulated: gemm_pack_tiles's stage
    images (both swizzles, zero-padded edges of rows and k, broadcast and batched items, 3xTF32's
    TF32 parts and residuals) read back through the descriptors' addressing, whatever the
    alignment of the operands."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate-wgmma")
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", params)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=70, n=67,
             k=45, layout="batched", alpha=1.25, pad=4, offsets=(8, 16, 2))
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=g.BF16, trans_a=ta,
             trans_b=tb, m=9, n=130, k=33, layout="broadcast_b", beta=0.5, pad=8, c_init=1.0)
    # Stored rows at 16-byte multiples are read as whole units (the last one in part where k or
    # the rows end inside it): moved as they are when k runs along them, transposed otherwise;
    # other operands go through gemm_pack_tiles.
    elem = 4 if ab == "f32" else 2
    for m, n, k, pad, layout, offsets in [(70, 67, 40, 8, "batched", (8, 8, 0)),
                                          (70, 67, 45, 3, "single", (8, 8, 0)),
                                          (70, 67, 40, 2, "batched", (2, 2, 0)),
                                          (72, 72, 40, 8, "batched", (8, 8, 0)),
                                          (70, 70, 40, 10, "single", (8, 8, 0))]:
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=m, n=n, k=k,
            layout=layout, pad=pad, offsets=offsets))
        assert "gemm_mma_product" in names, names
        expected = set()
        for k_along, cols, stored_rows, offset in [(not ta, m if ta else k, k if ta else m,
                                                    offsets[0]),
                                                   (tb, k if tb else n, n if tb else k,
                                                    offsets[1])]:
            ld = cols + pad
            aligned = (ld * elem % 16 == 0 and offset * elem % 16 == 0 and
                       (layout == "single" or (stored_rows * ld + pad) * elem % 16 == 0))
            expected.add("gemm_pack_tiles" if not aligned else
                         "gemm_pack_tiles_rows" if k_along else "gemm_pack_tiles_columns")
        assert {name for name in names if name.startswith("gemm_pack_tiles")} == expected, names


# Skinny mma.sync tiles (16 or 32 rows, warps side by side along n), which NVIDIA GPUs take for
# decode-like products of at most 32 rows with A stored m x k: a tile of fewer 16-byte units
# than work-items (16 rows of 4 units for 128 work-items) leaves the rest idle in the copies;
# K-tiles of 64 or 128 bytes per row.
# Rows, columns and k end inside tiles and K-tiles; split-K slices (tf32, 3xtf32), a batch with
# broadcast B, a bfloat16 C with beta.
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt"])
@pytest.mark.parametrize("mode,ab", EMULATED)
@pytest.mark.parametrize("params", ["bm=16,bn=128,wm=16,wn=32,stages=4,row_bytes=64",
                                    "bm=16,bn=64,wm=16,wn=16,stages=3,row_bytes=64",
                                    "bm=32,bn=128,wm=32,wn=32,stages=4,row_bytes=64",
                                    "bm=32,bn=64,wm=16,wn=32,stages=2,row_bytes=64",
                                    "bm=16,bn=64,wm=16,wn=16,stages=3,row_bytes=128",
                                    "bm=16,bn=128,wm=16,wn=32,stages=2,row_bytes=128"])
@pytest.mark.parametrize("instructions", ["emulate", "auto"])
def test_skinny_tensor_core_tiles(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                  instructions, params, mode, ab, trans):
    # "auto": the real instructions where the device has tensor cores, else the portable kernel.
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", params)
    tb = int(trans[1] == "t")
    for m, n, k, layout in [(9, 130, 70, "batched"), (16, 72, 1000, "single"),
                            (30, 72, 40, "broadcast_b")]:
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode=mode, ab=DTYPES[ab], trans_b=tb, m=m, n=n, k=k,
            layout=layout, alpha=1.25, pad=8, offsets=(8, 16, 2)))
        assert "gemm_mma_product" in names or instructions == "auto", (m, n, k, names)
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=g.BF16, trans_b=tb, m=5, n=67,
             k=40, layout="broadcast_b", beta=0.5, pad=8, c_init=1.0)


# mma.sync K-tiles of 128 bytes per row (32 TF32 or 64 16-bit elements of k): the 8-unit swizzle
# of K-contiguous tiles and the longer MN-contiguous ones, every layout, tails of k inside a tile.
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", EMULATED)
@pytest.mark.parametrize("instructions", ["emulate", "auto"])
def test_mma_sync_128_byte_rows(lib, device, rng, fp32_precision, monkeypatch, tmp_path,
                                instructions, mode, ab, trans):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "bm=64,bn=64,wm=32,wn=32,stages=2,row_bytes=128")
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=70, n=72, k=104,
        layout="batched", alpha=1.25, pad=8, offsets=(8, 16, 2)))
    assert "gemm_mma_product" in names or instructions == "auto", names
    run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=g.BF16, trans_a=ta,
             trans_b=tb, m=9, n=65, k=33, layout="broadcast_b", beta=0.5, pad=8, c_init=1.0)


# split=N asks for N k slices of any kind on the mma.sync kernel: whole K-tiles of 32 elements,
# the rest of k as one more slice, folded into C; beta != 0 products and batches stay whole.
@pytest.mark.parametrize("mode,ab", EMULATED)
def test_split_override_slices_k_of_every_kind(lib, device, rng, fp32_precision, monkeypatch,
                                               tmp_path, mode, ab):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "split=3")
    for trans_b, c_dtype in ((1, g.F32), (0, DTYPES[ab])):
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode=mode, ab=DTYPES[ab], c_dtype=c_dtype, trans_b=trans_b, m=21,
            n=70, k=200, alpha=1.25, pad=8, offsets=(8, 16, 2)))
        assert {"gemm_mma_product", "gemm_fold_parts"} <= names, names
    for layout, beta in (("batched", 0.0), ("single", 0.5)):
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode=mode, ab=DTYPES[ab], m=21, n=70, k=200, layout=layout,
            beta=beta, c_init=None if beta == 0.0 else 1.0))
        assert "gemm_mma_product" in names and "gemm_fold_parts" not in names, (layout, names)
    # More slices than k has K-tiles: as many as it has (k = 100: three of 32, the rest of 4).
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "split=64")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], m=5, n=66, k=100))
    assert "gemm_fold_parts" in names, names
    # split=1 keeps a product whole.
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "split=1")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], m=21, n=70, k=200))
    assert "gemm_fold_parts" not in names, names


def test_skinny_override_needs_a_stored_m_by_k(lib, device, rng, fp32_precision, monkeypatch):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "bm=16,bn=64,wm=16,wn=16")
    a = make_values(rng, (24, 20), g.BF16)  # stored k x m
    b = make_values(rng, (24, 16), g.BF16)
    ta, tb = device.upload(encode(a, g.BF16)), device.upload(encode(b, g.BF16))
    tc = device.upload(np.full((20, 16), np.nan, np.float32))
    desc = g.gemm_desc(ta.handle, tb.handle, tc.handle, 20, 16, 24, dtype_a=g.BF16,
                       trans_a=1, compute=g.COMPUTE_MODES["bf16"])
    assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 0
    assert "A stored m x k" in lib.last_error()
    assert np.isnan(tc.numpy()).all()
    # 3 warps: 96 work-items neither divide nor are divided by A's 64 units of a K-tile.
    monkeypatch.setenv("AETHERCL_MMA_PARAMS", "bm=16,bn=96,wm=16,wn=32")
    assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 0
    assert "AETHERCL_MMA_PARAMS" in lib.last_error()
    for t in (ta, tb, tc):
        assert t.guard_intact()
        t.free()


# Valid mma.sync tile configurations (mma_kernel.cpp's rules), from small to the largest there is.
# What each asks of a device on the emulated kernel: MmaConfig::local_bytes, stages x (bm + bn)
# x row_bytes, plus 24 bytes of emulation scratch per work-item; 32 work-items per warp tile.
MMA_CONFIGS_BY_SIZE = [
    dict(bm=64, bn=64, wm=32, wn=32, stages=2, row_bytes=64),        # 128 items, 19 KiB
    dict(bm=128, bn=128, wm=64, wn=64, stages=4, row_bytes=64),      # 128 items, 67 KiB
    dict(bm=128, bn=128, wm=32, wn=32, stages=8, row_bytes=128),     # 512 items, 268 KiB
    dict(bm=32, bn=1024, wm=16, wn=64, stages=8, row_bytes=128),     # 1024 items, 1.03 MiB
    dict(bm=1024, bn=1024, wm=256, wn=128, stages=8, row_bytes=128),  # 1024 items, 2.02 MiB
]


def config_too_large_for(info):
    """The smallest configuration of MMA_CONFIGS_BY_SIZE that needs more local memory or
    work-items per group than the device reports (None where every one fits)."""
    for c in MMA_CONFIGS_BY_SIZE:
        items = (c["bm"] // c["wm"]) * (c["bn"] // c["wn"]) * 32
        local = c["stages"] * (c["bm"] + c["bn"]) * c["row_bytes"] + 24 * items
        if local > info["local_mem_bytes"] or items > info["max_work_group_size"]:
            return ",".join(f"{key}={value}" for key, value in c.items())
    return None


def test_config_too_large_follows_the_device_limits():
    assert config_too_large_for({"local_mem_bytes": 48 << 10, "max_work_group_size": 1024}) == \
        "bm=128,bn=128,wm=64,wn=64,stages=4,row_bytes=64"
    assert config_too_large_for({"local_mem_bytes": 512 << 10, "max_work_group_size": 4096}) == \
        "bm=32,bn=1024,wm=16,wn=64,stages=8,row_bytes=128"
    assert config_too_large_for({"local_mem_bytes": 2 << 20, "max_work_group_size": 4096}) == \
        "bm=1024,bn=1024,wm=256,wn=128,stages=8,row_bytes=128"
    assert config_too_large_for({"local_mem_bytes": 16 << 20, "max_work_group_size": 256}) == \
        "bm=128,bn=128,wm=32,wn=32,stages=8,row_bytes=128"
    assert config_too_large_for({"local_mem_bytes": 16 << 20, "max_work_group_size": 4096}) is None


def test_bad_tensor_core_override_is_refused_and_harmless(lib, device, rng, fp32_precision,
                                                          monkeypatch):
    # Malformed AETHERCL_MMA_PARAMS (the bulk kernel's keys among them) fail the product with a
    # message naming the variable and write nothing; emulation makes every device read it.
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate-wgmma")
    a = make_values(rng, (20, 24), g.BF16)
    b = make_values(rng, (24, 18), g.BF16)
    ta, tb = device.upload(encode(a, g.BF16)), device.upload(encode(b, g.BF16))
    tc = device.upload(np.full((20, 18), np.nan, np.float32))
    desc = g.gemm_desc(ta.handle, tb.handle, tc.handle, 20, 18, 24, dtype_a=g.BF16,
                       compute=g.COMPUTE_MODES["bf16"])
    # Zero, negative and huge sizes are divisors and factors of the checks themselves: refused
    # before any of them divides or overflows, on both kernels' defaults.
    sizes = ("wm=0", "wn=0", "bm=0", "bn=0", "row_bytes=0", "bm=-64", "wm=-16",
             "wm=2147483647", "bm=1073741824,bn=1073741824,wm=16,wn=16", "wgmma=1,bm=32",
             "wgmma=1,bm=32,bulk=1,row_bytes=32", "wgmma=1,bm=0,bulk=0", "split=-1",
             "split=65")
    cases = [("emulate-wgmma", text) for text in (
        "bulk=1,wgmma=0", "row_bytes=32", "wgmma=1,bn=120", "wgmma=1,bulk=1,bn=96",
        "wgmma=1,bulk=1,row_bytes=16", "bulk=2,wgmma=1", "wgmma=1,bulk=1,rows=3") + sizes]
    cases += [("emulate", text) for text in sizes]
    for instructions, text in cases:
        monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
        monkeypatch.setenv("AETHERCL_MMA_PARAMS", text)
        assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 0, text
        assert "AETHERCL_MMA_PARAMS" in lib.last_error(), text
        assert np.isnan(tc.numpy()).all(), text
    # A valid configuration too large for the device is refused with what it needs, not run
    # on other kernels behind the tuner's back. "Too large" comes from the device's own limits
    # (a device of over 2.02 MiB of local memory and 1,024 work-items per group runs every valid
    # configuration; tests/limits runs this suite on devices that report less).
    too_large = config_too_large_for(json.loads(lib.json_call("aethercl_device_info",
                                                              device.index)))
    if too_large is not None:
        monkeypatch.setenv("AETHERCL_MMA_PARAMS", too_large)
        assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 0, too_large
        assert "does not fit" in lib.last_error() and "local memory" in lib.last_error()
        assert np.isnan(tc.numpy()).all()
    monkeypatch.delenv("AETHERCL_MMA_PARAMS")
    g.gemm(lib, device.index, desc)
    assert np.abs(tc.numpy() - a.astype(np.float64) @ b).max() < 1e-3
    for t in (ta, tb, tc):
        assert t.guard_intact()
        t.free()


def test_same_shape_in_every_mode_and_dtype_back_to_back(lib, device, rng, fp32_precision):
    # One shape through every mode, dtype and layout in a row: a kernel chosen for one product
    # must never serve another that differs only in storage, rounding, ld or offset.
    for mode in ("fp32", "tf32", "bf16", "fp32", "fp16", "3xtf32"):
        for ab in ("f32", "bf16", "f16"):
            run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], m=24, n=20, k=36)
            run_gemm(lib, device, rng, mode=mode, ab=DTYPES[ab], m=24, n=20, k=36,
                     layout="batched", pad=1, offsets=(1, 3, 0))


def test_gemm_on_a_stream(lib, device, rng, fp32_precision):
    # The product goes to the stream named; synchronising that stream makes it visible.
    stream = lib.check_handle("aethercl_stream_create", device.index, 0)
    try:
        a = rng.standard_normal((33, 17)).astype(np.float32)
        b = rng.standard_normal((17, 29)).astype(np.float32)
        ta, tb, tc = device.upload(a), device.upload(b), device.empty((33, 29))
        # The uploads ran on the default stream: streams are ordered only by events and by the
        # calls that wait for every stream, so the product's stream must not start before them.
        lib.check("aethercl_synchronize", device.index)
        for mode in ("fp32", "bf16"):
            desc = g.gemm_desc(ta.handle, tb.handle, tc.handle, 33, 29, 17,
                               compute=g.COMPUTE_MODES[mode])
            lib.check("aethercl_gemm", device.index, ctypes.byref(desc), stream)
            lib.check("aethercl_stream_synchronize", device.index, stream)
            want = as_multiplied(a, mode).astype(np.float64) @ as_multiplied(b, mode)
            bound = RTOL * math.sqrt(17) * (np.abs(a).astype(np.float64) @ np.abs(b))
            assert (np.abs(tc.numpy() - want) <= bound).all(), mode
        for t in (ta, tb, tc):
            assert t.guard_intact()
            t.free()
    finally:
        lib.check("aethercl_stream_destroy", device.index, stream)
