"""LayerNorm / RMSNorm with optional gamma and beta, and BatchNorm (training with running
statistics, evaluation), forward and backward, against float64 NumPy and finite differences of
the float64 reference; poisoned outputs, guard bytes, both group sizes.

Tolerances: statistics accumulate in acc_t (double on FP64 devices, float otherwise) and each
output is a handful of float32 operations on them: forward rtol 1e-5, atol 2e-5 (normalised
values are O(1), scaled by |gamma| <= 2). Backward values are sums of O(cols) or O(n x spatial)
products: rtol 1e-4, atol 1e-4. Running statistics: rtol 1e-5."""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import close, no_poison


def norm_desc(**fields):
    return T.NormDesc(**fields)


@pytest.mark.parametrize("kind", [T.NORM_LAYER, T.NORM_RMS])
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (5, 300), (17, 33)])
@pytest.mark.parametrize("affine", ["none", "gamma", "both"])
def test_norm_forward_and_backward(scope, device, rng, row_group, kind, rows, cols, affine):
    eps = 1e-5
    rms = kind == T.NORM_RMS
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(np.float32)
    gamma = rng.uniform(0.5, 2, cols).astype(np.float32) if affine != "none" else None
    beta = rng.standard_normal(cols).astype(np.float32) if affine == "both" else None
    tx, ty = scope.in_(x), scope.out((rows, cols))
    tg = scope.in_(gamma) if gamma is not None else None
    tb = scope.in_(beta) if beta is not None else None
    h = lambda t: t.handle if t is not None else None  # noqa: E731
    desc = norm_desc(kind=kind, rows=rows, cols=cols, eps=eps, x=tx.handle, gamma=h(tg),
                     beta=h(tb), y=ty.handle)
    ops.norm_forward(device.index, desc)
    got = ty.numpy()
    no_poison(got)
    close(got, R.norm_forward(x, gamma, beta, eps, rms), 1e-5, 2e-5, "y")

    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    tdy, tdx = scope.in_(dy), scope.out((rows, cols))
    tdg, tdb = scope.out((cols,)), scope.out((cols,))
    desc.set("dy", tdy.handle).set("dx", tdx.handle).set("dgamma", tdg.handle)
    desc.set("dbeta", tdb.handle)
    ops.norm_backward(device.index, desc)
    w = dy.astype(np.float64)
    g64 = gamma.astype(np.float64) if gamma is not None else None
    b64 = beta.astype(np.float64) if beta is not None else None
    if rows * cols <= 300:
        fd = R.numeric_gradient(lambda v: R.norm_forward(v, g64, b64, eps, rms), x, w)
        close(tdx.numpy(), fd, 1e-4, 1e-4, "dx")
    xhat = R.norm_forward(x, None, None, eps, rms)
    close(tdg.numpy(), (w * xhat).sum(0), 1e-4, 1e-4, "dgamma")
    close(tdb.numpy(), w.sum(0), 1e-4, 1e-4, "dbeta")
    if gamma is not None and cols <= 33 and rows <= 5:
        fd_gamma = R.numeric_gradient(lambda g: R.norm_forward(x, g, b64, eps, rms), gamma, w)
        close(tdg.numpy(), fd_gamma, 1e-4, 1e-4, "dgamma fd")


def test_norm_backward_partial_outputs_and_refusals(scope, device, lib, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    tx, tdy, tdg = scope.in_(x), scope.in_(x), scope.out((6,))
    desc = norm_desc(kind=0, rows=4, cols=6, eps=1e-5, x=tx.handle, dy=tdy.handle,
                     dgamma=tdg.handle)
    ops.norm_backward(device.index, desc)
    close(tdg.numpy(), (x * R.norm_forward(x, None, None, 1e-5, False)).sum(0), 1e-4, 1e-4)
    for field, value, words in (("eps", 0.0, "desc.eps"), ("kind", 2, "desc.kind"),
                                ("rows", -1, "desc.rows"), ("dgamma", tx.handle, "same buffer")):
        bad = norm_desc(kind=0, rows=4, cols=6, eps=1e-5, x=tx.handle, dy=tdy.handle,
                        dgamma=tdg.handle)
        bad.set(field, value)
        assert lib.aethercl_norm_backward(device.index, bad.address, None) == 0
        assert words in lib.last_error(), lib.last_error()


@pytest.mark.parametrize("kind", [T.NORM_LAYER, T.NORM_RMS])
@pytest.mark.parametrize("cols", [48, 45])   # register form (whole quads) and row form
@pytest.mark.parametrize("dres_at", ["apart", "in_place"])
def test_norm_backward_adds_dres(scope, device, lib, rng, row_group, kind, cols, dres_at):
    """dx = the normalisation's gradient + dres, one float32 add: bit for bit the float32 dx of a
    call without dres plus dres (in numpy's float32), also with dres = dx; a bf16 dx with a bf16
    dres is that float32 sum rounded once (the float32 call gives the unrounded gradient)."""
    from support.typed_operands import round_bf16
    rows = 7
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    dres = rng.standard_normal((rows, cols)).astype(np.float32)
    tx, tdy, plain = scope.in_(x), scope.in_(dy), scope.out((rows, cols))
    desc = norm_desc(kind=kind, rows=rows, cols=cols, eps=1e-5, x=tx.handle, dy=tdy.handle,
                     dx=plain.handle)
    ops.norm_backward(device.index, desc)
    grad = plain.numpy()
    tres = scope.in_(dres)
    tdx = tres if dres_at == "in_place" else scope.out((rows, cols))
    desc.set("dx", tdx.handle).set("dres", tres.handle)
    ops.norm_backward(device.index, desc)
    np.testing.assert_array_equal(tdx.numpy(), grad + dres)
    # bf16 dx and dres: the same float32 sum, rounded once.
    dres16 = (round_bf16(dres).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    tres16 = scope.in_(dres16)
    tdx16 = tres16 if dres_at == "in_place" else scope.in_(np.zeros((rows, cols), np.uint16))
    for t in {id(tres16): tres16, id(tdx16): tdx16}.values():
        assert lib.aethercl_buffer_set_dtype(device.index, t.handle, 2) == 1
    desc.set("dx", tdx16.handle).set("dres", tres16.handle)
    ops.norm_backward(device.index, desc)
    summed = grad + (dres16.astype(np.uint32) << 16).view(np.float32)
    want = (round_bf16(summed).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(tdx16.numpy(), want)


def test_norm_dres_refusals_and_the_version_3_size(scope, device, lib, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    tx, tdy, tdx, tres = scope.in_(x), scope.in_(x), scope.out((4, 8)), scope.in_(x)
    short, tdg = scope.in_(x[:1]), scope.out((8,))
    base = dict(kind=0, rows=4, cols=8, eps=1e-5, x=tx.handle, dy=tdy.handle)

    def refused(words, **fields):
        desc = norm_desc(**dict(base, **fields))
        assert lib.aethercl_norm_backward(device.index, desc.address, None) == 0
        assert words in lib.last_error(), lib.last_error()

    refused("desc.dres is set but desc.dx is NULL", dres=tres.handle, dgamma=tdg.handle)
    refused("same buffer", dx=tdx.handle, dres=tx.handle)
    refused("same buffer", dx=tdx.handle, dres=tdy.handle)
    big = scope.out((4, 8))   # a dgamma buffer with room for dres too
    refused("same buffer", dx=tdx.handle, dres=big.handle, dgamma=big.handle)
    refused("desc.dres", dx=tdx.handle, dres=short.handle)
    refused("desc.dres", dx=tdx.handle, dres=12345)
    tagged = scope.in_(np.zeros((4, 8), np.uint16))
    assert lib.aethercl_buffer_set_dtype(device.index, tagged.handle, 2) == 1
    refused("desc.dres is stored as AETHERCL_BF16 but desc.dx as AETHERCL_F32", dx=tdx.handle,
            dres=tagged.handle)
    # A version-3 caller's descriptor ends before dres: accepted, and whatever lies past its size
    # is not read (here a dres handle that would be added).
    import ctypes
    old = norm_desc(**dict(base, dx=tdx.handle, dres=tres.handle))
    old.struct_size = T.NormDesc.dres.offset
    assert lib.aethercl_norm_backward(device.index, old.address, None) == 1
    plain = scope.out((4, 8))
    ops.norm_backward(device.index, norm_desc(**dict(base, dx=plain.handle)))
    np.testing.assert_array_equal(tdx.numpy(), plain.numpy())
    old.struct_size = T.NormDesc.dres.offset - ctypes.sizeof(ctypes.c_void_p)
    assert lib.aethercl_norm_backward(device.index, old.address, None) == 0
    assert "struct_size" in lib.last_error()


def bits16(scope, lib, device, values, dtype_code):
    """A buffer of 16-bit patterns tagged with dtype_code (1: f16, 2: bf16)."""
    t = scope.in_(np.ascontiguousarray(values, np.uint16))
    assert lib.aethercl_buffer_set_dtype(device.index, t.handle, dtype_code) == 1
    return t


def as_bf16_bits(values):
    from support.typed_operands import round_bf16
    return (round_bf16(values).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("kind", [T.NORM_LAYER, T.NORM_RMS])
@pytest.mark.parametrize("cols", [48, 45])   # register form (whole quads) and row form
@pytest.mark.parametrize("formats", ["f32+f32", "f32+bf16", "bf16+f16", "x+x"])
def test_norm_forward_adds_res(scope, device, lib, rng, row_group, kind, cols, formats):
    """sum = x + res in float32, rounded once to x's format; y is the normalisation of sum as
    stored, bit for bit the y of a plain call on that sum ("x+x": res is x itself)."""
    rows = 7
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(np.float32)
    r = rng.standard_normal((rows, cols)).astype(np.float32)
    x_fmt, r_fmt = formats.split("+") if formats != "x+x" else ("f32", "x")
    if x_fmt == "bf16":
        x_bits = as_bf16_bits(x)
        tx, ts = bits16(scope, lib, device, x_bits, 2), bits16(scope, lib, device,
                                                               np.full(x.shape, 0xFFFF), 2)
        x = bf16_values(x_bits)
    else:
        tx, ts = scope.in_(x), scope.out((rows, cols))
    if r_fmt == "x":
        tr, r = tx, x
    elif r_fmt == "f32":
        tr = scope.in_(r)
    elif r_fmt == "bf16":
        r_bits = as_bf16_bits(r)
        tr, r = bits16(scope, lib, device, r_bits, 2), bf16_values(r_bits)
    else:
        r16 = r.astype(np.float16)
        tr, r = bits16(scope, lib, device, r16.view(np.uint16), 1), r16.astype(np.float32)
    ty = scope.out((rows, cols))
    desc = norm_desc(kind=kind, rows=rows, cols=cols, eps=1e-5, x=tx.handle, y=ty.handle,
                     res=tr.handle, sum=ts.handle)
    ops.norm_forward(device.index, desc)
    total = x + r
    want_sum = as_bf16_bits(total) if x_fmt == "bf16" else total
    np.testing.assert_array_equal(ts.numpy(), want_sum)
    plain = scope.out((rows, cols))
    ops.norm_forward(device.index, norm_desc(kind=kind, rows=rows, cols=cols, eps=1e-5,
                                             x=ts.handle, y=plain.handle))
    no_poison(ty.numpy())
    np.testing.assert_array_equal(ty.numpy(), plain.numpy())


@pytest.mark.parametrize("cols", [48, 45])
def test_norm_backward_writes_dx_copy(scope, device, lib, rng, row_group, cols):
    """dx_copy holds dx's float32 values rounded once into its format: a bf16 copy of a float32
    dx (with dres added) is that dx rounded, dx itself unchanged; a float32 copy of a bf16 dx
    is the unrounded float32 gradient."""
    rows = 7
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    dres = rng.standard_normal((rows, cols)).astype(np.float32)
    tx, tdy, tres = scope.in_(x), scope.in_(dy), scope.in_(dres)
    plain = scope.out((rows, cols))
    base = dict(kind=T.NORM_LAYER, rows=rows, cols=cols, eps=1e-5, x=tx.handle, dy=tdy.handle)
    ops.norm_backward(device.index, norm_desc(**dict(base, dx=plain.handle, dres=tres.handle)))
    tdx, tcopy = scope.out((rows, cols)), bits16(scope, lib, device, np.full(x.shape, 0xFFFF), 2)
    ops.norm_backward(device.index, norm_desc(**dict(base, dx=tdx.handle, dres=tres.handle,
                                                      dx_copy=tcopy.handle)))
    np.testing.assert_array_equal(tdx.numpy(), plain.numpy())
    np.testing.assert_array_equal(tcopy.numpy(), as_bf16_bits(plain.numpy()))
    unrounded = scope.out((rows, cols))
    ops.norm_backward(device.index, norm_desc(**dict(base, dx=unrounded.handle)))
    tdx16, tcopy32 = bits16(scope, lib, device, np.zeros(x.shape), 2), scope.out((rows, cols))
    ops.norm_backward(device.index, norm_desc(**dict(base, dx=tdx16.handle,
                                                      dx_copy=tcopy32.handle)))
    np.testing.assert_array_equal(tcopy32.numpy(), unrounded.numpy())
    np.testing.assert_array_equal(tdx16.numpy(), as_bf16_bits(unrounded.numpy()))


def test_norm_res_sum_and_dx_copy_refusals(scope, device, lib, rng):
    """Each refusal names its field; a descriptor of the size that ends at res (the first
    version-4 size) is accepted and reads none of the fields past it."""
    import ctypes
    x = rng.standard_normal((4, 8)).astype(np.float32)
    tx, tdy, tdx, ty, tr, ts = (scope.in_(x), scope.in_(x), scope.out((4, 8)), scope.out((4, 8)),
                                scope.in_(x), scope.out((4, 8)))
    tg, short = scope.in_(np.ones(8, np.float32)), scope.out((1, 8))
    base = dict(kind=0, rows=4, cols=8, eps=1e-5, x=tx.handle)

    def refused(call, words, **fields):
        desc = norm_desc(**dict(base, **fields))
        assert getattr(lib, call)(device.index, desc.address, None) == 0
        assert words in lib.last_error(), lib.last_error()

    forward = dict(y=ty.handle)
    refused("aethercl_norm_forward", "desc.res is set but desc.sum is NULL", res=tr.handle,
            **forward)
    refused("aethercl_norm_forward", "desc.sum is set but desc.res is NULL", sum=ts.handle,
            **forward)
    for other in (tx, tr, ty, tg):
        fields = dict(forward, res=tr.handle, sum=other.handle, gamma=tg.handle)
        refused("aethercl_norm_forward", "same buffer" if other is not tg else "desc.sum",
                **fields)
    refused("aethercl_norm_forward", "same buffer", y=ty.handle, res=ty.handle, sum=ts.handle)
    refused("aethercl_norm_forward", "desc.sum", res=tr.handle, sum=short.handle, **forward)
    refused("aethercl_norm_forward", "desc.res", res=12345, sum=ts.handle, **forward)
    tagged = bits16(scope, lib, device, np.zeros((4, 8)), 2)
    refused("aethercl_norm_forward", "desc.sum is stored as AETHERCL_BF16 but desc.x as "
            "AETHERCL_F32", res=tr.handle, sum=tagged.handle, **forward)
    backward = dict(dy=tdy.handle)
    refused("aethercl_norm_backward", "desc.dx_copy is set but desc.dx is NULL",
            dx_copy=ts.handle, dgamma=scope.out((8,)).handle, **backward)
    tres = scope.in_(x)
    for other in (tx, tdy, tdx, tres):
        refused("aethercl_norm_backward", "same buffer", dx=tdx.handle, dres=tres.handle,
                dx_copy=other.handle, **backward)
    refused("aethercl_norm_backward", "desc.dx_copy", dx=tdx.handle, dx_copy=short.handle,
            **backward)
    # The first version-4 size ends at res: res, sum and dx_copy past it are not read.
    desc = norm_desc(**dict(base, y=ty.handle, res=tr.handle, sum=ts.handle))
    desc.struct_size = T.NormDesc.res.offset
    assert lib.aethercl_norm_forward(device.index, desc.address, None) == 1
    plain = scope.out((4, 8))
    ops.norm_forward(device.index, norm_desc(**dict(base, y=plain.handle)))
    np.testing.assert_array_equal(ty.numpy(), plain.numpy())
    desc = norm_desc(**dict(base, dy=tdy.handle, dx=tdx.handle, dx_copy=12345))
    desc.struct_size = T.NormDesc.res.offset
    assert lib.aethercl_norm_backward(device.index, desc.address, None) == 1
    assert ctypes.sizeof(T.NormDesc) == T.NormDesc.dx_copy.offset + ctypes.sizeof(ctypes.c_void_p)


# ---- BatchNorm ------------------------------------------------------------------------------
def bn_desc(**fields):
    return T.BatchNormDesc(**fields)


@pytest.mark.parametrize("n,c,s", [(2, 1, 1), (4, 3, 5), (3, 8, 49), (16, 2, 1)])
@pytest.mark.parametrize("affine", [False, True])
def test_batchnorm_training(scope, device, rng, row_group, n, c, s, affine):
    eps, momentum = 1e-5, 0.1
    x = (rng.standard_normal((n, c, s)) * 2 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 2, c).astype(np.float32) if affine else None
    beta = rng.standard_normal(c).astype(np.float32) if affine else None
    rm0 = rng.standard_normal(c).astype(np.float32)
    rv0 = rng.uniform(0.5, 2, c).astype(np.float32)
    tx, ty = scope.in_(x), scope.out((n, c, s))
    trm, trv = scope.in_(rm0), scope.in_(rv0)
    tsm, tsr = scope.out((c,)), scope.out((c,))
    tg = scope.in_(gamma) if affine else None
    tb = scope.in_(beta) if affine else None
    desc = bn_desc(n=n, channels=c, spatial=s, training=1, momentum=momentum, eps=eps,
                   x=tx.handle, gamma=tg.handle if tg else None, beta=tb.handle if tb else None,
                   running_mean=trm.handle, running_var=trv.handle, save_mean=tsm.handle,
                   save_rstd=tsr.handle, y=ty.handle)
    ops.batchnorm_forward(device.index, desc)
    y, mean, var, unbiased = R.batchnorm_train(x, gamma, beta, eps)
    got = ty.numpy()
    no_poison(got)
    close(got, y, 1e-5, 2e-5, "y")
    close(tsm.numpy(), mean, 1e-5, 1e-6, "save_mean")
    close(tsr.numpy(), 1 / np.sqrt(var + eps), 1e-5, 1e-6, "save_rstd")
    close(trm.numpy(), 0.9 * rm0 + 0.1 * mean, 1e-5, 1e-6, "running_mean")
    close(trv.numpy(), 0.9 * rv0 + 0.1 * unbiased, 1e-5, 1e-6, "running_var")

    dy = rng.standard_normal((n, c, s)).astype(np.float32)
    tdy, tdx, tdg, tdb = scope.in_(dy), scope.out((n, c, s)), scope.out((c,)), scope.out((c,))
    desc.set("dy", tdy.handle).set("dx", tdx.handle).set("dgamma", tdg.handle)
    desc.set("dbeta", tdb.handle)
    ops.batchnorm_backward(device.index, desc)
    w = dy.astype(np.float64)
    g64 = gamma.astype(np.float64) if affine else None
    b64 = beta.astype(np.float64) if affine else None
    fd = R.numeric_gradient(lambda v: R.batchnorm_train(v, g64, b64, eps)[0], x, w)
    close(tdx.numpy(), fd, 1e-4, 1e-4, "dx")
    xhat = R.batchnorm_train(x, None, None, eps)[0]
    close(tdg.numpy(), (w * xhat).sum(axis=(0, 2)), 1e-4, 1e-4, "dgamma")
    close(tdb.numpy(), w.sum(axis=(0, 2)), 1e-4, 1e-4, "dbeta")


def test_batchnorm_evaluation(scope, device, rng):
    n, c, s, eps = 3, 4, 6, 1e-3
    x = rng.standard_normal((n, c, s)).astype(np.float32)
    rm = rng.standard_normal(c).astype(np.float32)
    rv = rng.uniform(0.5, 2, c).astype(np.float32)
    gamma = rng.uniform(0.5, 2, c).astype(np.float32)
    tx, ty, trm, trv, tg = (scope.in_(x), scope.out((n, c, s)), scope.in_(rm), scope.in_(rv),
                            scope.in_(gamma))
    desc = bn_desc(n=n, channels=c, spatial=s, training=0, momentum=0.1, eps=eps, x=tx.handle,
                   gamma=tg.handle, running_mean=trm.handle, running_var=trv.handle, y=ty.handle)
    ops.batchnorm_forward(device.index, desc)
    scale = (gamma / np.sqrt(rv.astype(np.float64) + eps))[None, :, None]
    expected = (x - rm[None, :, None]) * scale
    close(ty.numpy(), expected, 1e-5, 2e-5)
    close(trm.numpy(), rm, 0, 0, "running statistics are read-only in evaluation")
    dy = rng.standard_normal((n, c, s)).astype(np.float32)
    tdy, tdx, tdg = scope.in_(dy), scope.out((n, c, s)), scope.out((c,))
    desc.set("dy", tdy.handle).set("dx", tdx.handle).set("dgamma", tdg.handle)
    ops.batchnorm_backward(device.index, desc)
    close(tdx.numpy(), dy * scale, 1e-5, 1e-6, "dx")
    xhat = (x - rm[None, :, None]) / np.sqrt(rv.astype(np.float64) + eps)[None, :, None]
    close(tdg.numpy(), (dy * xhat).sum(axis=(0, 2)), 1e-4, 1e-4, "dgamma")


def test_batchnorm_refusals(scope, device, lib):
    tx, ty, tc = scope.out((1, 2, 1)), scope.out((1, 2, 1)), scope.out((2,))
    cases = [(dict(training=1), "more than one value per channel"),
             (dict(training=0), "desc.running_mean is NULL"),
             (dict(training=2), "desc.training"), (dict(training=1, momentum=1.5), "momentum"),
             (dict(training=1, eps=0.0), "desc.eps"),
             (dict(training=1, running_mean=tc.handle), "both")]
    for fields, words in cases:
        desc = bn_desc(n=1, channels=2, spatial=1, momentum=0.1, eps=1e-5, x=tx.handle,
                       y=ty.handle)
        for name, value in fields.items():
            desc.set(name, value)
        assert lib.aethercl_batchnorm_forward(device.index, desc.address, None) == 0
        assert words in lib.last_error(), (fields, lib.last_error())
    desc = bn_desc(n=1, channels=2, spatial=1, training=1, momentum=0.1, eps=1e-5, x=tx.handle,
                   dy=ty.handle, dx=tc.handle)
    assert lib.aethercl_batchnorm_backward(device.index, desc.address, None) == 0
    assert "desc.save_mean is NULL" in lib.last_error()
