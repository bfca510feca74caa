"""16-bit (f16 / bf16) operands through the training ops a transformer needs besides GEMM and
attention: aethercl_unary(_backward), aethercl_binary(_backward), aethercl_norm_forward/_backward
and aethercl_cross_entropy, each operand tagged with aethercl_buffer_set_dtype.

Every op runs per format layout (all f16, all bf16, and mixes the header allows: a bf16
activation with a float32 bias row, a float32 residual normalised into bf16, ...) on odd shapes,
with inputs exactly representable in their format, outputs poisoned before the call and guard
bytes checked after every buffer. The float64 NumPy reference is computed from the values the
device reads; support.typed_operands.check compares each output after rounding the reference to
the output's format, with tolerance = the float32 op's own (the rtol/atol its float32 suite
justifies, restated per test) + one unit in the last place of the output format (the single
rounding of the float32 result: see check's docstring). Refused combinations (16-bit tags on the
float32 masters and the loss, non-float tags, sizes counted in the wrong format) return 0 with a
message and leave outputs as they were; untagged and AETHERCL_F32-tagged calls give the same bits.
"""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import ALPHA, KINKS, POSITIVE_DOMAIN, UNARY_EXACT
from support.typed_operands import BF16, F16, F32, FORMATS, TypedTensors, check, read


# Layouts name the format of each operand. "uniform" layouts are what autocast training writes;
# the mixed ones keep one side float32 (a residual stream, a bias row) in each direction.
UNARY_LAYOUTS = {  # x, y, dy, dx
    "f16": (F16, F16, F16, F16), "bf16": (BF16, BF16, BF16, BF16),
    "f32-in-bf16-out": (F32, BF16, BF16, F32), "f16-in-f32-out": (F16, F32, F32, F16)}


@pytest.fixture
def typed(scope, lib):
    return TypedTensors(scope, lib)


def unary_inputs(op, rng, n, fmt):
    if op in POSITIVE_DOMAIN:
        x = rng.uniform(0.2, 4.0, n)
    else:
        x = np.clip(rng.standard_normal(n) * 2.5, -8, 8)  # exp(8) is finite in f16
    x = fmt.exact(x)
    if op in KINKS:  # finite differences stay away from the kink, after rounding too
        near = np.abs(x - KINKS[op]) < 2e-2
        x[near] = fmt.exact(x[near] + 0.05)
        assert (np.abs(x - KINKS[op]) >= 1e-3).all()
    return x


@pytest.mark.matrix
@pytest.mark.parametrize("op", T.UNARY_OPS)
@pytest.mark.parametrize("layout", list(UNARY_LAYOUTS))
@pytest.mark.parametrize("n", [1, 37, 1031])
def test_unary_forward_and_backward(typed, device, rng, op, layout, n):
    """Forward: one float32 evaluation (float32 suite: rtol 2e-6 exact ops, 2e-5 with OpenCL's
    transcendental functions, atol 1e-6). Backward against central differences (h = 1e-6) of the
    float64 reference at the stored x, weighted by the stored dy (float32 suite: rtol 5e-5,
    atol 1e-5). Plus one ulp of the output's format."""
    fx, fy, fdy, fdx = UNARY_LAYOUTS[layout]
    alpha = ALPHA.get(op, 0.0)
    x = unary_inputs(op, rng, n, fx)
    tx, ty = typed.input(x, fx), typed.output((n,), fy)
    ops.unary(device.index, op, tx.handle, ty.handle, n, alpha)
    check(ty, R.unary_forward(op, tx.exact, alpha), 2e-6 if op in UNARY_EXACT else 2e-5, 1e-6,
          f"{op} y")

    m = min(n, 37)  # finite differences cost two reference evaluations per element
    dy = rng.uniform(-3, 3, m)
    tx, tdy, tdx = typed.input(x[:m], fx), typed.input(dy, fdy), typed.output((m,), fdx)
    ops.unary_backward(device.index, op, tx.handle, tdy.handle, tdx.handle, m, alpha)
    fd = R.numeric_gradient(lambda v: R.unary_forward(op, v, alpha), tx.exact, tdy.exact)
    check(tdx, fd, 5e-5, 1e-5, f"{op} dx")


@pytest.mark.parametrize("fmt", [F16, BF16], ids=lambda f: f.name)
def test_unary_in_place(typed, device, rng, fmt):
    """y = x and dx = dy in one 16-bit buffer (each item reads before it writes)."""
    x = fmt.exact(rng.standard_normal(101) * 2)
    t = typed.input(x, fmt)
    ops.unary(device.index, "gelu", t.handle, t.handle, 101)
    t.exact = x
    check(t, R.unary_forward("gelu", x, 0.0), 2e-5, 1e-6, "gelu in place")
    dy = fmt.exact(rng.uniform(-2, 2, 101))
    tx, tdy = typed.input(x, fmt), typed.input(dy, fmt)
    ops.unary_backward(device.index, "relu", tx.handle, tdy.handle, tdy.handle, 101)
    check(tdy, dy * (x > 0), 0, 0, "relu backward in place")


# ---- binary with broadcasting -----------------------------------------------------------------
BINARY_LAYOUTS = {  # a, b, c, dc, da, db
    "f16": (F16,) * 6, "bf16": (BF16,) * 6,
    "bf16-plus-f32-bias": (BF16, F32, BF16, BF16, BF16, F32),
    "f16-bf16-to-f32": (F16, BF16, F32, F32, F16, BF16)}
BINARY_SHAPES = [((7,), (7,)), ((5, 3), (3,)), ((3, 1, 5), (1, 4, 1)), ((2, 3, 5), (1,)),
                 ((9, 1), (9, 11)), ((0, 3), (1, 3))]


def binary_inputs(op, rng, shape_a, shape_b, fa, fb):
    if op == "pow":
        a, b = rng.uniform(0.5, 2.0, shape_a), rng.uniform(-1.5, 1.5, shape_b)
    else:
        a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
        if op == "div":
            b = np.where(np.abs(b) < 0.3, 0.7, b)
    a, b = fa.exact(a), fb.exact(b)
    if op in ("max", "min") and a.size and b.size:  # ties: the gradient splits in halves
        a.reshape(-1)[::3] = fa.exact(b.reshape(-1)[:1])[0]
    return a, b


@pytest.mark.matrix
@pytest.mark.parametrize("op", T.BINARY_OPS)
@pytest.mark.parametrize("layout", list(BINARY_LAYOUTS))
@pytest.mark.parametrize("shape_a,shape_b", BINARY_SHAPES)
def test_binary_forward_and_backward(typed, device, rng, op, layout, shape_a, shape_b):
    """Forward: one float32 operation (float32 suite: rtol 2e-6, 2e-5 for pow, atol 1e-6).
    Backward: float32 products summed over the broadcast dimensions (float32 suite: rtol 5e-5,
    atol 1e-5). Plus one ulp of each output's format."""
    fa, fb, fc, fdc, fda, fdb = BINARY_LAYOUTS[layout]
    a, b = binary_inputs(op, rng, shape_a, shape_b, fa, fb)
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    ta, tb, tc = typed.input(a, fa), typed.input(b, fb), typed.output(out_shape, fc)
    desc = ops.broadcast_desc(shape_a, shape_b, ta.handle, tb.handle, tc.handle)
    ops.binary(device.index, op, desc)
    check(tc, R.BINARY_REF[op](ta.exact, tb.exact), 2e-5 if op == "pow" else 2e-6, 1e-6,
          f"{op} c")

    tdc = typed.input(rng.uniform(-2, 2, out_shape), fdc)
    tda, tdb = typed.output(shape_a, fda), typed.output(shape_b, fdb)
    ops.binary_backward(device.index, op, desc, tdc.handle, tda.handle, tdb.handle)
    ga, gb = R.binary_grads(op, ta.exact, tb.exact, tdc.exact)
    check(tda, ga, 5e-5, 1e-5, f"{op} da")
    check(tdb, gb, 5e-5, 1e-5, f"{op} db")


@pytest.mark.parametrize("fmt", [F16, BF16], ids=lambda f: f.name)
def test_binary_add_backward_without_inputs(typed, device, rng, fmt):
    """ADD and SUB do not read a and b: NULL inputs with 16-bit dc and gradients (dc, read in
    their place, is smaller than a float32 view of the operands would be: no read past it)."""
    dc = rng.standard_normal((5, 7))
    tdc, tda, tdb = typed.input(dc, fmt), typed.output((5, 7), fmt), typed.output((7,), fmt)
    desc = ops.broadcast_desc((5, 7), (7,), None, None, None)
    ops.binary_backward(device.index, "sub", desc, tdc.handle, tda.handle, tdb.handle)
    check(tda, tdc.exact, 0, 0, "da")
    check(tdb, -tdc.exact.sum(0), 5e-5, 1e-5, "db")


# ---- LayerNorm / RMSNorm ----------------------------------------------------------------------
NORM_LAYOUTS = {  # x, y, dy, dx (gamma, beta and their gradients: float32 masters)
    "f16": (F16,) * 4, "bf16": (BF16,) * 4,
    "f32-residual-into-bf16": (F32, BF16, BF16, F32), "bf16-into-f32": (BF16, F32, F32, BF16)}


def norm_dx(x, dy, gamma, eps, rms):
    """Analytic dx of y = xhat gamma + beta (float64)."""
    mean = 0.0 if rms else x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * (gamma if gamma is not None else 1.0)
    mean_g = 0.0 if rms else g.mean(axis=1, keepdims=True)
    return rstd * (g - mean_g - xhat * (g * xhat).mean(axis=1, keepdims=True))


@pytest.mark.matrix
@pytest.mark.parametrize("kind", [T.NORM_LAYER, T.NORM_RMS])
@pytest.mark.parametrize("layout", list(NORM_LAYOUTS))
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (17, 33), (5, 300)])
@pytest.mark.parametrize("affine", ["none", "gamma", "both"])
def test_norm_forward_and_backward(typed, device, rng, row_group, kind, layout, rows, cols,
                                   affine):
    """Statistics from the values read, in the float32 form's accumulator (float32 suite: y rtol
    1e-5, atol 2e-5; dx, dgamma, dbeta, sums of O(cols) or O(rows) products: rtol 1e-4,
    atol 1e-4). Plus one ulp of y's and dx's formats; dgamma and dbeta are float32."""
    fx, fy, fdy, fdx = NORM_LAYOUTS[layout]
    eps, rms = 1e-5, kind == T.NORM_RMS
    x = rng.standard_normal((rows, cols)) * 3 + 1
    gamma = rng.uniform(0.5, 2, cols).astype(np.float32) if affine != "none" else None
    beta = rng.standard_normal(cols).astype(np.float32) if affine == "both" else None
    tx, ty = typed.input(x, fx), typed.output((rows, cols), fy)
    tg = typed.input(gamma, F32) if gamma is not None else None
    tb = typed.input(beta, F32) if beta is not None else None
    h = lambda t: t.handle if t is not None else None  # noqa: E731
    desc = T.NormDesc(kind=kind, rows=rows, cols=cols, eps=eps, x=tx.handle, gamma=h(tg),
                      beta=h(tb), y=ty.handle)
    ops.norm_forward(device.index, desc)
    g64 = gamma.astype(np.float64) if gamma is not None else None
    b64 = beta.astype(np.float64) if beta is not None else None
    check(ty, R.norm_forward(tx.exact, g64, b64, eps, rms), 1e-5, 2e-5, "y")

    tdy = typed.input(rng.standard_normal((rows, cols)), fdy)
    tdx = typed.output((rows, cols), fdx)
    tdg, tdb = typed.output((cols,), F32), typed.output((cols,), F32)
    desc.set("dy", tdy.handle).set("dx", tdx.handle).set("dgamma", tdg.handle)
    desc.set("dbeta", tdb.handle)
    ops.norm_backward(device.index, desc)
    check(tdx, norm_dx(tx.exact, tdy.exact, g64, eps, rms), 1e-4, 1e-4, "dx")
    xhat = R.norm_forward(tx.exact, None, None, eps, rms)
    check(tdg, (tdy.exact * xhat).sum(0), 1e-4, 1e-4, "dgamma")
    check(tdb, tdy.exact.sum(0), 1e-4, 1e-4, "dbeta")


# ---- cross-entropy ----------------------------------------------------------------------------
CE_LAYOUTS = {"f16": (F16, F16), "bf16": (BF16, BF16), "bf16-logits-f32-grad": (BF16, F32),
              "f32-logits-f16-grad": (F32, F16)}  # logits, grad (loss: float32)


@pytest.mark.matrix
@pytest.mark.parametrize("layout", list(CE_LAYOUTS))
@pytest.mark.parametrize("rows,classes,smoothing", [(1, 2, 0.0), (6, 11, 0.1), (33, 517, 0.0)])
@pytest.mark.parametrize("reduction", [T.SUM, T.MEAN, T.NO_REDUCTION])
def test_cross_entropy(typed, device, rng, row_group, layout, rows, classes, smoothing,
                       reduction):
    """float32 suite: loss rtol 1e-5, atol 1e-6; grad (softmax - target distribution) / divisor,
    rtol 1e-5, atol 1e-6. Plus one ulp of grad's format; the loss is float32."""
    flogits, fgrad = CE_LAYOUTS[layout]
    logits = rng.standard_normal((rows, classes)) * 3
    targets = rng.integers(0, classes, rows).astype(np.int32)
    if rows > 2:
        targets[1] = -100  # ignored
    name = {T.SUM: "sum", T.MEAN: "mean", T.NO_REDUCTION: "none"}[reduction]
    tl, tt = typed.input(logits, flogits), typed.scope.in_(targets)
    tloss = typed.output((rows,) if reduction == T.NO_REDUCTION else (1,), F32)
    tgrad = typed.output((rows, classes), fgrad)
    ops.cross_entropy(device.index, T.CrossEntropyDesc(
        rows=rows, classes=classes, ignore_index=-100, label_smoothing=smoothing,
        reduction=reduction, logits=tl.handle, targets=tt.handle, loss=tloss.handle,
        grad=tgrad.handle))
    expected = R.cross_entropy(tl.exact, targets, -100, smoothing, name)
    check(tloss, np.atleast_1d(expected), 1e-5, 1e-6, "loss")
    p = np.exp(R.log_softmax(tl.exact))
    q = np.full_like(p, smoothing / classes)
    valid = targets != -100
    q[np.arange(rows)[valid], targets[valid]] += 1 - smoothing
    g = np.where(valid[:, None], p - q, 0.0)
    check(tgrad, g / (valid.sum() if reduction == T.MEAN else 1), 1e-5, 1e-6, "grad")


# ---- embedding rows ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [F16, BF16], ids=lambda f: f.name)
def test_embedding_rows(typed, device, lib, rng, fmt):
    """The lookup copies float32 weights into 16-bit rows, rounded once: exactly the reference
    rounded to the format (tolerance 0). The backward adds 16-bit rows into float32 d_w in
    ascending position order: at most b*s = 15 float32 additions of O(1) values (rtol, atol
    1e-5). w and d_w are float32 masters: a 16-bit tag is refused."""
    b, s, d, v = 3, 5, 7, 11
    w = rng.standard_normal((v, d)) * 3
    idx = rng.integers(-1, v + 1, (b, s)).astype(np.int32)  # some ids are invalid: zero rows
    tw, ti, to = typed.input(w, F32), typed.scope.in_(idx), typed.output((b, s, d), fmt)
    lib.check("execute_embedding_lookup_gpu", device.index, ti.handle, tw.handle, to.handle,
              b, s, d, v)
    valid = (idx >= 0) & (idx < v)
    check(to, np.where(valid[..., None], tw.exact[np.clip(idx, 0, v - 1)], 0.0), 0, 0, "o")

    tdo, tdw = typed.input(rng.standard_normal((b, s, d)), fmt), typed.input(w, F32)
    lib.check("execute_embedding_backward_gpu", device.index, tdo.handle, ti.handle, tdw.handle,
              b, s, d, v)
    expected = tw.exact.copy()
    for p, row in enumerate(idx.reshape(-1)):
        if 0 <= row < v:
            expected[row] += tdo.exact.reshape(-1, d)[p]
    check(tdw, expected, 1e-5, 1e-5, "d_w")

    narrow = typed.input(w, fmt)
    refused(lib, lib.execute_embedding_lookup_gpu(device.index, ti.handle, narrow.handle,
                                                  to.handle, b, s, d, v), "w", "float32 master")
    refused(lib, lib.execute_embedding_backward_gpu(device.index, tdo.handle, ti.handle,
                                                    narrow.handle, b, s, d, v), "d_w",
            "float32 master")


# ---- what the tags refuse, and float32 unchanged ----------------------------------------------
def refused(lib, result, *words):
    assert result == 0
    message = lib.last_error()
    for word in words:
        assert word in message, message
    return message


def test_refused_tags_name_the_operand_and_change_nothing(typed, device, lib):
    n = 9
    x = typed.input(np.arange(n, dtype=np.float64), F16)
    y = typed.output((n,), F16)
    ints = typed.output((n,), F32)
    lib.check("aethercl_buffer_set_dtype", device.index, ints.handle, 4)  # AETHERCL_I32
    refused(lib, lib.aethercl_unary(device.index, 0, ints.handle, y.handle, n, 0.0, None),
            "aethercl_unary", "x is tagged AETHERCL_I32")
    lib.check("aethercl_buffer_set_dtype", device.index, ints.handle, 3)  # AETHERCL_F64
    refused(lib, lib.aethercl_unary_backward(device.index, 0, x.handle, x.handle, ints.handle, n,
                                             0.0, None), "dx", "AETHERCL_F64")
    assert (np.asarray(y.numpy()).view(np.uint16) == 0x7E5A).all()  # still poison

    # binary: c tagged int8 is refused; a bf16 db is accepted, a u8 one refused.
    c = typed.output((n,), F32)
    lib.check("aethercl_buffer_set_dtype", device.index, c.handle, 6)  # AETHERCL_I8
    desc = ops.broadcast_desc((n,), (n,), x.handle, x.handle, c.handle)
    refused(lib, lib.aethercl_binary(device.index, 0, desc.address, None), "desc.c", "AETHERCL_I8")
    lib.check("aethercl_buffer_set_dtype", device.index, c.handle, 7)  # AETHERCL_U8
    refused(lib, lib.aethercl_binary_backward(device.index, 0, desc.address, x.handle, None,
                                              c.handle, None), "db", "AETHERCL_U8")


def test_float32_masters_and_loss_refuse_16_bit_tags(typed, device, lib, rng):
    rows, cols = 3, 5
    x = typed.input(rng.standard_normal((rows, cols)), BF16)
    y = typed.output((rows, cols), BF16)
    for field, fmt in (("gamma", F16), ("beta", BF16)):
        param = typed.input(np.ones(cols), fmt)
        desc = T.NormDesc(kind=0, rows=rows, cols=cols, eps=1e-5, x=x.handle, y=y.handle)
        desc.set(field, param.handle)
        refused(lib, lib.aethercl_norm_forward(device.index, desc.address, None),
                f"desc.{field}", "float32 master", fmt.name.upper())
    assert (y.numpy() == 0x7FDA).all()
    for field in ("dgamma", "dbeta"):
        grad = typed.output((cols,), F16)
        desc = T.NormDesc(kind=1, rows=rows, cols=cols, eps=1e-5, x=x.handle, dy=x.handle)
        desc.set(field, grad.handle)
        refused(lib, lib.aethercl_norm_backward(device.index, desc.address, None),
                f"desc.{field}", "float32 master")
        assert (np.asarray(grad.numpy()).view(np.uint16) == 0x7E5A).all()
    targets = typed.scope.in_(np.zeros(rows, np.int32))
    loss = typed.output((1,), BF16)
    desc = T.CrossEntropyDesc(rows=rows, classes=cols, ignore_index=-100, reduction=T.MEAN,
                              logits=x.handle, targets=targets.handle, loss=loss.handle)
    refused(lib, lib.aethercl_cross_entropy(device.index, desc.address, None), "desc.loss",
            "float32")
    assert (loss.numpy() == 0x7FDA).all()


def test_sizes_count_elements_of_each_operands_format(typed, device, lib):
    """A buffer of n 16-bit elements serves n elements when tagged, n / 2 floats untagged."""
    n = 10
    half = typed.input(np.linspace(-1, 1, n), F16)
    out = typed.scope.device.upload(F16.poison((n,)), guard=0)  # exactly 2n bytes
    typed.scope.tensors.append(out)
    lib.check("aethercl_buffer_set_dtype", device.index, out.handle, F16.code)
    out.format = F16
    ops.unary(device.index, "neg", half.handle, out.handle, n)
    check(out, -half.exact, 0, 0, "neg")
    lib.check("aethercl_buffer_set_dtype", device.index, out.handle, 0)  # now float32: too small
    refused(lib, lib.aethercl_unary(device.index, 12, half.handle, out.handle, n, 0.0, None),
            "y", f"{2 * n} bytes", f"{4 * n} bytes")


def test_untagged_and_f32_tagged_calls_give_the_same_bits(scope, lib, device, rng):
    """An AETHERCL_F32 tag selects the float32 kernels: the same bits as untagged buffers."""
    results = []
    for tag_f32 in (False, True):
        typed = TypedTensors(scope, lib, tag_f32=tag_f32)
        r = np.random.default_rng(7)
        x = typed.input(r.standard_normal((6, 13)), F32)
        bias = typed.input(r.standard_normal(13), F32)
        y, z = typed.output((6, 13), F32), typed.output((6, 13), F32)
        ops.unary(device.index, "gelu_tanh", x.handle, y.handle, 78)
        ops.binary(device.index, "add", ops.broadcast_desc((6, 13), (13,), y.handle, bias.handle,
                                                           z.handle))
        n = typed.output((6, 13), F32)
        ops.norm_forward(device.index, T.NormDesc(kind=0, rows=6, cols=13, eps=1e-5,
                                                  x=z.handle, gamma=bias.handle, y=n.handle))
        grad, loss = typed.output((6, 13), F32), typed.output((1,), F32)
        targets = scope.in_(np.arange(6, dtype=np.int32))
        ops.cross_entropy(device.index, T.CrossEntropyDesc(
            rows=6, classes=13, ignore_index=-100, reduction=T.MEAN, logits=n.handle,
            targets=targets.handle, loss=loss.handle, grad=grad.handle))
        results.append([read(t).tobytes() for t in (y, z, n, grad, loss)])
    assert results[0] == results[1]


def test_formats_table_is_the_headers():
    """The test's format codes are the header's aethercl_dtype values."""
    from aethercl import dtypes
    assert [FORMATS[name].code for name in ("f32", "f16", "bf16")] == [
        dtypes.F32, dtypes.F16, dtypes.BF16] == [0, 1, 2]
