"""What the aethercl_gemm suites share: number formats in NumPy, one product run against a float64
reference with poisoned outputs and guard bytes, (the FP32 matmul-precision fixture is
conftest.py's fp32_precision).

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
import math

import numpy as np

from aethercl import gemm as g

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
