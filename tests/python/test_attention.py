"""Fused attention (aethercl_attention_forward / _backward) against a float64 NumPy reference:
odd shapes, the three layouts (2: q, k, v packed in one buffer, as are dq, dk, dv), causal with
seq_q <, == and > seq_k, f32/f16/bf16 storage, lse, the
analytic gradients, poisoned outputs, guard bytes, bit-identical reruns, refusals and a long
sequence (8192) checked in chunks.

Relative error of a tensor: max|got - ref| / max|ref| over the whole tensor (so one small element
of a large-valued tensor is judged against the tensor's scale, as the contract states it).
Tolerances with float32 storage (the contract): 1e-5 on o, 1e-4 on dq, dk and dv; lse (values of
order log(seq_k) + |scores|) to 1e-5 relative too.
With f16 / bf16 storage the reference is computed in float64 from the same rounded inputs, so
the error is the float32 arithmetic (about 1e-6, far below the bounds) plus the one final
rounding of each output to the format: at most u = 2^-11 (f16) or 2^-8 (bf16) of each value,
hence <= u of the tensor's max: we allow 1.25u on o. The backward also reads o in the format:
D_i = dout_i.o_i then differs from the exact row sum by up to u sum_d |dout_i,d o_i,d|, which
reaches the gradients through dS = P (dP - D); measured on these shapes the gradients stay within
1.25u (o within 0.9u), so 4u leaves room for other draws without hiding a real error (a wrong
tile or mask gives errors of order 1)."""
import numpy as np
import pytest

from aethercl import ops as gen
from aethercl import train_types as T
from aethercl.structs import BF16, F16, F32, COMPUTE_DEFAULT, COMPUTE_FP32, COMPUTE_TF32

U = {F32: None, F16: 2.0 ** -11, BF16: 2.0 ** -8}
POISON16 = 0x7FFF  # a NaN in f16 and in bf16: no finite computation writes it


# ---- storage formats -----------------------------------------------------------------------
def to_bf16_bits(x):
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def encode(x, dtype):
    """(device array, the float64 values it holds)."""
    if dtype == F32:
        a = np.ascontiguousarray(x, np.float32)
        return a, a.astype(np.float64)
    if dtype == F16:
        a = np.ascontiguousarray(x, np.float16)
        return a.view(np.uint16), a.astype(np.float64)
    bits = to_bf16_bits(x)
    return bits, from_bf16_bits(bits).astype(np.float64)


def decode(raw, dtype):
    if dtype == F32:
        return raw.astype(np.float64)
    if dtype == F16:
        return raw.view(np.float16).astype(np.float64)
    return from_bf16_bits(raw).astype(np.float64)


def storage(dtype):
    return np.float32 if dtype == F32 else np.uint16


# ---- float64 reference ---------------------------------------------------------------------
def to_bhsd(x, layout):
    return x if layout == 0 else x.transpose(0, 2, 1, 3)


def from_bhsd(x, layout):
    return x if layout == 0 else np.ascontiguousarray(x.transpose(0, 2, 1, 3))


def visible(seq_q, seq_k, causal, q0=0, q1=None):
    q1 = seq_q if q1 is None else q1
    i = np.arange(q0, q1)[:, None]
    j = np.arange(seq_k)[None, :]
    return np.ones((q1 - q0, seq_k), bool) if not causal else j <= i + seq_k - seq_q


def reference(q, k, v, dout, scale, causal, q_chunk=None):
    """o, lse, dq, dk, dv in float64 for [b, h, s, d] arrays (dout None: forward only). Chunks of
    q_chunk query rows keep the long-sequence case within memory (each chunk is exact)."""
    b, h, sq, d = q.shape
    sk = k.shape[2]
    q_chunk = q_chunk or max(sq, 1)
    o = np.zeros((b, h, sq, d))
    lse = np.full((b, h, sq), -np.inf)
    dq = np.zeros_like(o)
    dk = np.zeros((b, h, sk, d))
    dv = np.zeros_like(dk)
    for q0 in range(0, sq, q_chunk):
        q1 = min(sq, q0 + q_chunk)
        mask = visible(sq, sk, causal, q0, q1)
        s = scale * np.einsum("bhid,bhjd->bhij", q[:, :, q0:q1], k)
        s = np.where(mask, s, -np.inf)
        m = s.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        total = e.sum(-1, keepdims=True)
        p = np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
        o[:, :, q0:q1] = p @ v
        with np.errstate(divide="ignore"):
            lse[:, :, q0:q1] = np.where(total[..., 0] > 0, m[..., 0] + np.log(total[..., 0]),
                                        -np.inf)
        if dout is None:
            continue
        do = dout[:, :, q0:q1]
        dv += np.einsum("bhij,bhid->bhjd", p, do)
        dp = do @ v.transpose(0, 1, 3, 2)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True))
        dq[:, :, q0:q1] = scale * ds @ k
        dk += scale * np.einsum("bhij,bhid->bhjd", ds, q[:, :, q0:q1])
    return o, lse, dq, dk, dv


def rel_err(got, ref):
    """max|got - ref| / max|ref| over the tensor (1 when ref is all zero: absolute error)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    if got.size == 0:
        return 0.0
    scale = np.abs(ref).max()
    return np.abs(got - ref).max() / (scale if scale > 0 else 1.0)


# ---- driving the entry points --------------------------------------------------------------
PARTS = {"q": 0, "k": 1, "v": 2, "dq": 0, "dk": 1, "dv": 2}


class Case:
    """Inputs, outputs and the descriptor of one attention problem on the device. Layout 2 packs
    q, k and v into one [batch, seq, 3, heads, dim] buffer (and dq, dk, dv into another)."""

    def __init__(self, scope, rng, batch, heads, seq_q, seq_k, dim, layout=0, causal=0,
                 dtype=F32, scale=0.0, compute=COMPUTE_DEFAULT, lse=True):
        self.dtype, self.layout, self.causal = dtype, layout, causal
        self.shape_q = (batch, heads, seq_q, dim) if layout == 0 else (batch, seq_q, heads, dim)
        self.shape_k = (batch, heads, seq_k, dim) if layout == 0 else (batch, seq_k, heads, dim)
        self.scale = scale if scale != 0.0 else (1.0 / np.sqrt(dim) if dim else 1.0)
        raw = {}
        if layout == 2:
            assert seq_q == seq_k
            packed = (batch, seq_q, 3, heads, dim)
            raw["q"], values = encode(rng.standard_normal(packed), dtype)
            for name in ("q", "k", "v"):
                setattr(self, name, to_bhsd(values[:, :, PARTS[name]], layout))
            raw["dout"], values = encode(rng.standard_normal(self.shape_q), dtype)
            self.dout = to_bhsd(values, layout)
            self.t = {name: scope.in_(raw[name]) for name in raw}
            self.t["k"] = self.t["v"] = self.t["q"]
            self.t["o"] = self.poisoned(scope, self.shape_q)
            self.t["dq"] = self.t["dk"] = self.t["dv"] = self.poisoned(scope, packed)
        else:
            for name, shape in (("q", self.shape_q), ("k", self.shape_k), ("v", self.shape_k),
                                ("dout", self.shape_q)):
                raw[name], setattr_value = encode(rng.standard_normal(shape), dtype)
                setattr(self, name, to_bhsd(setattr_value, layout))
            self.t = {name: scope.in_(raw[name]) for name in raw}
            for name, shape in (("o", self.shape_q), ("dq", self.shape_q), ("dk", self.shape_k),
                                ("dv", self.shape_k)):
                self.t[name] = self.poisoned(scope, shape)
        self.t["lse"] = scope.out((batch, heads, seq_q)) if lse else None
        self.desc = T.AttentionDesc(batch=batch, heads=heads, seq_q=seq_q, seq_k=seq_k,
                                    head_dim=dim, layout=layout, causal=causal, scale=scale,
                                    dtype=dtype, compute=compute,
                                    **{n: (t.handle if t is not None else None)
                                       for n, t in self.t.items()})

    def poisoned(self, scope, shape):
        if self.dtype == F32:
            return scope.out(shape)
        return scope.in_(np.full(shape, POISON16, np.uint16))

    def get(self, name):
        raw = self.t[name].numpy()
        if name == "lse":
            return raw.astype(np.float64)
        if self.dtype != F32:
            assert not (raw == POISON16).any(), f"{name}: an element was never written"
        value = decode(raw, self.dtype)
        if self.dtype == F32:
            assert not np.isnan(value).any(), f"{name}: NaN or an element never written"
        if self.layout == 2 and name in PARTS:
            value = value[:, :, PARTS[name]]
        return to_bhsd(value, self.layout)

    def raw(self, name):
        return self.t[name].numpy()


def forward(device, case, stream=None):
    gen.attention_forward(device.index, case.desc.address, stream)


def backward(device, case, stream=None):
    gen.attention_backward(device.index, case.desc.address, stream)


def check(case, device, q_chunk=None, grads=True):
    forward(device, case)
    if grads:
        # The backward's o: what the forward stored (in dtype), as a training step passes it.
        backward(device, case)
    expected = reference(case.q, case.k, case.v, case.dout if grads else None, case.scale,
                         case.causal, q_chunk)
    u = U[case.dtype]
    tol_o, tol_g = (1e-5, 1e-4) if u is None else (1.25 * u, 4 * u)
    return assert_close(case, expected, tol_o, tol_g, grads)


def assert_close(case, expected, tol_o, tol_g, grads=True):
    """The device's o (and lse, and the gradients with grads) against expected = reference(...):
    relative errors within tol_o on o, tol_g on each gradient, 1e-5 on lse (the reference lse is
    exact for the inputs it was given; the device's is a float32 sum). Returns the errors."""
    o, lse, dq, dk, dv = expected
    errors = {"o": rel_err(case.get("o"), o)}
    if case.t["lse"] is not None:
        got_lse = case.get("lse")
        assert np.array_equal(np.isneginf(got_lse), np.isneginf(lse)), "lse -inf rows"
        finite = np.isfinite(lse)
        errors["lse"] = rel_err(got_lse[finite], lse[finite])
        assert errors["lse"] <= 1e-5, errors
    assert errors["o"] <= tol_o, errors
    if grads:
        for name, ref in (("dq", dq), ("dk", dk), ("dv", dv)):
            errors[name] = rel_err(case.get(name), ref)
            assert errors[name] <= tol_g, errors
    return errors


# ---- numerics ------------------------------------------------------------------------------
SHAPES = [  # batch, heads, seq_q, seq_k, head_dim
    (2, 3, 37, 53, 24),
    (1, 2, 53, 37, 64),
    (2, 1, 40, 40, 80),
    (1, 1, 1, 1, 1),
    (1, 2, 65, 130, 128),
]


@pytest.mark.matrix
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_attention_matches_float64(scope, device, rng, shape, layout, causal, dtype):
    case = Case(scope, rng, *shape, layout=layout, causal=causal, dtype=dtype)
    check(case, device)


PACKED_SHAPES = [(2, 3, 37, 37, 24), (1, 1, 1, 1, 1), (2, 2, 70, 70, 64), (1, 2, 65, 65, 128)]


@pytest.mark.parametrize("shape", PACKED_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_packed_layout_matches_float64(scope, device, rng, shape, causal, dtype):
    """Layout 2: each part of the packed gradient is written (the poison check covers the whole
    buffer) and matches the reference of the three separate tensors."""
    check(Case(scope, rng, *shape, layout=2, causal=causal, dtype=dtype), device)


def test_packed_layout_refusals(scope, device, lib, rng):
    case = Case(scope, rng, 1, 2, 9, 9, 8, layout=2)
    other = Case(scope, rng, 1, 2, 9, 9, 8, layout=1)
    fwd, bwd = "aethercl_attention_forward", "aethercl_attention_backward"
    refused(lib, device, fwd, fresh(case, seq_k=8), "seq_q = desc.seq_k")
    refused(lib, device, fwd, fresh(case, k=other.t["k"].handle), "desc.k must be desc.q")
    refused(lib, device, fwd, fresh(case, v=other.t["v"].handle), "desc.v must be desc.q")
    refused(lib, device, bwd, fresh(case, dk=other.t["dk"].handle), "desc.dk must be desc.dq")
    refused(lib, device, bwd, fresh(case, dv=other.t["dv"].handle), "desc.dv must be desc.dq")
    # One tensor's worth is not the packed three: the buffers are checked for all of them.
    q1 = other.t["q"].handle
    refused(lib, device, fwd, fresh(case, q=q1, k=q1, v=q1), "desc.q")
    dq1 = other.t["dq"].handle
    refused(lib, device, bwd, fresh(case, dq=dq1, dk=dq1, dv=dq1), "desc.dq")
    refused(lib, device, bwd, fresh(case, dq=case.t["q"].handle, dk=case.t["q"].handle,
                                    dv=case.t["q"].handle), "same buffer")
    check(case, device)  # nothing above wrote anything


@pytest.mark.parametrize("seq_q,seq_k", [(20, 45), (33, 33), (45, 20)])
def test_causal_alignment_and_empty_rows(scope, device, rng, seq_q, seq_k):
    """Causal with seq_q <, == and > seq_k: query i sees keys j <= i + seq_k - seq_q; with
    seq_q > seq_k the first seq_q - seq_k rows see nothing: o = 0, lse = -inf, dq = 0."""
    case = Case(scope, rng, 2, 3, seq_q, seq_k, 24, causal=1)
    check(case, device)
    empty = max(0, seq_q - seq_k)
    o, lse, dq = case.get("o"), case.get("lse"), case.get("dq")
    assert np.all(o[:, :, :empty] == 0) and np.all(dq[:, :, :empty] == 0)
    assert np.all(np.isneginf(lse[:, :, :empty]))
    assert np.all(np.isfinite(lse[:, :, empty:]))


def test_head_dim_256_and_explicit_scale(scope, device, rng):
    case = Case(scope, rng, 1, 2, 19, 23, 256, layout=1, causal=1, scale=0.37)
    check(case, device)


def test_compute_modes_are_float32(scope, device, rng):
    """Every compute mode runs the float32 kernel here: TF32 gives FP32's bits."""
    a = Case(scope, rng, 1, 2, 21, 17, 40, compute=COMPUTE_FP32)
    check(a, device)
    b_desc = T.AttentionDesc(**{f: getattr(a.desc, f) for f, _ in a.desc._fields_
                                if f != "struct_size"})
    o_fp32 = a.raw("o")
    b_desc.compute = COMPUTE_TF32
    gen.attention_forward(device.index, b_desc.address, None)
    assert np.array_equal(a.raw("o"), o_fp32)


def test_lse_optional_in_forward(scope, device, rng):
    case = Case(scope, rng, 1, 3, 29, 31, 32, causal=1, lse=False)
    check(case, device, grads=False)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_two_runs_bit_identical(scope, device, rng, dtype):
    case = Case(scope, rng, 2, 2, 70, 90, 48, causal=1, dtype=dtype)
    forward(device, case)
    backward(device, case)
    first = {n: case.raw(n) for n in ("o", "lse", "dq", "dk", "dv")}
    for name in ("o", "dq", "dk", "dv"):
        case.t[name].write(case.poisoned(scope, case.t[name].shape).numpy())
    forward(device, case)
    backward(device, case)
    for name, value in first.items():
        assert np.array_equal(case.raw(name).view(np.uint8), value.view(np.uint8)), name


def test_odd_work_group_sizes(scope, device, rng, monkeypatch):
    """Any local size the launcher may pick (AETHERCL_WG_LIMIT caps it) gives correct tiles."""
    for limit in ("1", "7"):
        monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
        case = Case(scope, rng, 1, 2, 23, 19, 24, causal=1, layout=1)
        check(case, device)
        check(Case(scope, rng, 1, 2, 21, 21, 24, causal=1, layout=2), device)


def test_gpu_forms_on_this_device(scope, device, rng, monkeypatch):
    """AETHERCL_CPU_KERNELS=0 builds the unrolled (GPU) form: it must agree as well."""
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    case = Case(scope, rng, 1, 2, 33, 41, 64, causal=1, dtype=F16)
    check(case, device)
    check(Case(scope, rng, 1, 2, 37, 37, 64, causal=1, dtype=BF16, layout=2), device)


def test_zero_work(scope, device, rng, lib):
    """Zero sizes are not errors: nothing is written where nothing exists; seq_k = 0 gives o = 0,
    lse = -inf and dq = 0; seq_q = 0 gives dk = dv = 0."""
    case = Case(scope, rng, 1, 2, 5, 0, 8)
    forward(device, case)
    backward(device, case)
    assert np.all(case.get("o") == 0) and np.all(np.isneginf(case.get("lse")))
    assert np.all(case.get("dq") == 0)
    case = Case(scope, rng, 1, 2, 0, 6, 8)
    forward(device, case)
    backward(device, case)
    assert np.all(case.get("dk") == 0) and np.all(case.get("dv") == 0)
    empty = Case(scope, rng, 0, 2, 5, 6, 8)
    assert lib.aethercl_attention_forward(device.index, empty.desc.address, None) == 1
    assert lib.aethercl_attention_backward(device.index, empty.desc.address, None) == 1
    # head_dim = 0: every score is 0, so lse_i = log(number of keys row i sees).
    case = Case(scope, rng, 1, 2, 6, 4, 0, causal=1)
    forward(device, case)
    backward(device, case)
    seen = visible(6, 4, 1).sum(1).astype(np.float64)
    with np.errstate(divide="ignore"):
        expected = np.broadcast_to(np.log(seen), (1, 2, 6))
    np.testing.assert_allclose(case.get("lse"), expected, rtol=1e-6)


# ---- refusals ------------------------------------------------------------------------------
def refused(lib, device, function, desc, words):
    assert getattr(lib, function)(device.index, desc.address, None) == 0
    message = lib.last_error()
    assert words in message, message


def fresh(case, **changes):
    desc = T.AttentionDesc(**{f: getattr(case.desc, f) for f, _ in case.desc._fields_
                              if f != "struct_size"})
    for name, value in changes.items():
        desc.set(name, value)
    return desc


@pytest.mark.parametrize("field,value,words", [
    ("batch", -1, "desc.batch"), ("heads", -2, "desc.heads"), ("seq_q", -1, "desc.seq_q"),
    ("seq_k", -1, "desc.seq_k"), ("head_dim", -1, "desc.head_dim"),
    ("head_dim", 257, "supported maximum 256"), ("layout", 3, "desc.layout"),
    ("layout", -1, "desc.layout"),
    ("causal", -1, "desc.causal"), ("dtype", 3, "desc.dtype"), ("dtype", 7, "desc.dtype"),
    ("compute", 6, "desc.compute"), ("compute", -1, "desc.compute"),
    ("scale", float("nan"), "desc.scale"), ("scale", float("inf"), "desc.scale"),
    ("q", None, "desc.q"), ("v", 12345, "desc.v"), ("o", None, "desc.o"),
    # one more row or column than the buffers hold (beyond their 64 guard bytes)
    ("seq_q", 9, "desc.q"), ("seq_k", 10, "desc.k"), ("head_dim", 10, "desc.q"),
    ("heads", 1 << 30, "desc.q"),
])
def test_forward_refusals(scope, device, lib, rng, field, value, words):
    case = Case(scope, rng, 1, 2, 7, 8, 8)
    refused(lib, device, "aethercl_attention_forward", fresh(case, **{field: value}), words)


@pytest.mark.parametrize("function", ["aethercl_attention_forward", "aethercl_attention_backward"])
def test_size_overflow_refused(scope, device, lib, rng, function):
    case = Case(scope, rng, 1, 2, 7, 8, 8)
    huge = 1 << 30
    refused(lib, device, function, fresh(case, batch=huge, heads=huge, seq_q=huge), "overflows")
    refused(lib, device, function, fresh(case, batch=1 << 16, heads=1 << 16), "2^31 - 1")


def test_struct_size_rule(scope, device, lib, rng):
    case = Case(scope, rng, 1, 2, 7, 8, 8)
    small = fresh(case)
    small.struct_size -= 8
    refused(lib, device, "aethercl_attention_forward", small, "struct_size")
    refused(lib, device, "aethercl_attention_backward", small, "struct_size")
    assert lib.aethercl_attention_forward(device.index, None, None) == 0
    assert "desc is NULL" in lib.last_error()
    # A larger struct (a newer header) is accepted: only the known prefix is read.
    import ctypes
    blob = (ctypes.c_ubyte * (ctypes.sizeof(case.desc) + 64))()
    ctypes.memmove(blob, case.desc.address, ctypes.sizeof(case.desc))
    ctypes.c_size_t.from_buffer(blob).value = ctypes.sizeof(blob)
    assert lib.aethercl_attention_forward(device.index, ctypes.addressof(blob), None) == 1
    check(case, device, grads=False)


def test_lse_too_small_and_backward_needs_lse(scope, device, lib, rng):
    case = Case(scope, rng, 2, 2, 7, 8, 8)
    short = scope.out((2, 2, 1))  # 24 floats short: more than the 64 guard bytes
    refused(lib, device, "aethercl_attention_forward", fresh(case, lse=short.handle), "desc.lse")
    refused(lib, device, "aethercl_attention_backward", fresh(case, lse=None), "desc.lse")
    refused(lib, device, "aethercl_attention_backward", fresh(case, dout=None), "desc.dout")
    refused(lib, device, "aethercl_attention_backward", fresh(case, dk=None), "desc.dk")


@pytest.mark.parametrize("function,out,other", [
    ("aethercl_attention_forward", "o", "q"), ("aethercl_attention_forward", "o", "v"),
    ("aethercl_attention_forward", "lse", "o"),
    ("aethercl_attention_backward", "dq", "q"), ("aethercl_attention_backward", "dk", "dout"),
    ("aethercl_attention_backward", "dv", "o"), ("aethercl_attention_backward", "dq", "dk"),
    ("aethercl_attention_backward", "dv", "dk"),
])
def test_aliasing_refused(scope, device, lib, rng, function, out, other):
    case = Case(scope, rng, 1, 1, 8, 8, 8)  # every tensor the same size, so only aliasing fails
    desc = fresh(case, **{out: case.t[other].handle})
    refused(lib, device, function, desc, "same buffer")


def test_inputs_may_share_a_buffer(scope, device, rng):
    case = Case(scope, rng, 1, 2, 9, 9, 16, causal=1)
    case.desc.set("k", case.t["q"].handle).set("v", case.t["q"].handle)
    case.k = case.v = case.q
    check(case, device)


def test_dtype_tags(scope, device, lib, rng):
    case = Case(scope, rng, 1, 2, 7, 8, 8, dtype=F16)
    assert lib.aethercl_buffer_set_dtype(device.index, case.t["k"].handle, F16) == 1
    assert lib.aethercl_buffer_set_dtype(device.index, case.t["lse"].handle, F32) == 1
    check(case, device)  # consistent tags are fine
    assert lib.aethercl_buffer_set_dtype(device.index, case.t["v"].handle, BF16) == 1
    refused(lib, device, "aethercl_attention_forward", case.desc, "desc.v is tagged AETHERCL_BF16")
    assert lib.aethercl_buffer_set_dtype(device.index, case.t["v"].handle, F16) == 1
    assert lib.aethercl_buffer_set_dtype(device.index, case.t["lse"].handle, F16) == 1
    refused(lib, device, "aethercl_attention_forward", case.desc, "desc.lse is tagged")


def test_on_a_created_stream(scope, device, lib, rng):
    """Work issued on a stream of the device; the friendly wrappers of aethercl.train too."""
    from aethercl import train
    stream = lib.aethercl_stream_create(device.index, 0)
    assert stream, lib.last_error()
    try:
        case = Case(scope, rng, 2, 2, 31, 17, 40, causal=1, layout=1, dtype=BF16)
        # The uploads are ordered on the default stream only: let them land first.
        assert lib.aethercl_synchronize(device.index) == 1
        train.attention_forward(device.index, case.desc, stream)
        train.attention_backward(device.index, case.desc, stream)
        assert lib.aethercl_stream_synchronize(device.index, stream) == 1
        o, lse, dq, dk, dv = reference(case.q, case.k, case.v, case.dout, case.scale, 1)
        u = U[BF16]
        assert rel_err(case.get("o"), o) <= 1.25 * u
        for name, ref in (("dq", dq), ("dk", dk), ("dv", dv)):
            assert rel_err(case.get(name), ref) <= 4 * u, name
    finally:
        lib.aethercl_stream_destroy(device.index, stream)


def test_foreign_stream_refused(scope, device, lib, rng):
    case = Case(scope, rng, 1, 1, 4, 4, 4)
    assert lib.aethercl_attention_forward(device.index, case.desc.address, 0xDEAD0) == 0
    assert "stream" in lib.last_error()


# ---- long context --------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [1])
def test_long_sequence_8192(scope, device, rng, causal):
    """seq 8192 (batch 1, heads 1, head_dim 64) forward and backward within O(seq) device memory,
    checked against the float64 reference computed 512 query rows at a time."""
    case = Case(scope, rng, 1, 1, 8192, 8192, 64, causal=causal)
    errors = check(case, device, q_chunk=512)
    assert errors["o"] <= 1e-5
