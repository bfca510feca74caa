"""2-D convolution (stride, padding, dilation, groups, depthwise; forward, backward-data,
backward-weights, bias) and max / average pooling against float64 NumPy, backward passes against
finite differences of the float64 reference, with poisoned outputs and guard bytes.

Tolerances: each output is a dot product of K = c_in/groups * kh * kw float32 terms accumulated
in float32 by the GEMM engine: error <= K * 2^-24 * sum |terms|, so rtol 1e-5 and atol 1e-5
* sqrt(K) for O(1) data. Gradients are sums of up to n * oh * ow (weights) or kh * kw * c_out
(data) products: atol 1e-4. Pooling: max is exact, average one float32 sum and division."""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import close, no_poison

# (n, c_in, h, w, c_out, k, stride, pad, dilation, groups)
CONV_CASES = [
    (1, 1, 5, 5, 1, (3, 3), (1, 1), (0, 0), (1, 1), 1),
    (2, 3, 7, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (3, 4, 9, 8, 6, (3, 2), (2, 1), (1, 0), (1, 1), 2),
    (2, 6, 8, 8, 6, (3, 3), (1, 1), (1, 1), (1, 1), 6),     # depthwise (direct kernels)
    (2, 4, 9, 7, 4, (3, 2), (2, 1), (1, 1), (2, 1), 4),     # depthwise, strided and dilated
    (1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1), 4),     # grouped, two filters per group
    (1, 2, 11, 10, 3, (3, 3), (2, 2), (2, 1), (2, 3), 1),   # dilation
    (4, 8, 5, 5, 16, (1, 1), (1, 1), (0, 0), (1, 1), 1),    # 1x1
    (2, 4, 6, 6, 8, (2, 2), (2, 2), (0, 0), (1, 1), 4),
    (1, 3, 1, 1, 2, (3, 3), (1, 1), (1, 1), (1, 1), 1),     # only the centre tap is real
    # images x positions = 8450: off CPU devices (the GPU forms) the weight gradient is split
    # along K into four slices of 2112 and a tail of 2
    (2, 2, 65, 65, 3, (3, 3), (1, 1), (1, 1), (1, 1), 1),
]


pytestmark = pytest.mark.usefixtures("kernel_forms")  # CPU and GPU kernel forms

def conv_desc(case, **buffers):
    n, c_in, h, w, c_out, k, stride, pad, dilation, groups = case
    return T.Conv2dDesc(n=n, c_in=c_in, h=h, w=w, c_out=c_out, kernel_h=k[0], kernel_w=k[1],
                        stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1],
                        dilation_h=dilation[0], dilation_w=dilation[1], groups=groups,
                        **buffers)


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_forward_and_backward(scope, device, rng, row_group, case, bias):
    n, c_in, h, w, c_out, k, stride, pad, dilation, groups = case
    x = rng.standard_normal((n, c_in, h, w)).astype(np.float32)
    wt = rng.standard_normal((c_out, c_in // groups, *k)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32) if bias else None
    expected = R.conv2d(x, wt, b, stride, pad, dilation, groups)
    tx, tw = scope.in_(x), scope.in_(wt)
    tb = scope.in_(b) if bias else None
    ty = scope.out(expected.shape)
    desc = conv_desc(case, x=tx.handle, weight=tw.handle, bias=tb.handle if bias else None,
                     y=ty.handle)
    ops.conv2d_forward(device.index, desc)
    got = ty.numpy()
    no_poison(got)
    kk = c_in // groups * k[0] * k[1]
    close(got, expected, 1e-5, 1e-5 * np.sqrt(kk), "y")

    dy = rng.standard_normal(expected.shape).astype(np.float32)
    tdy, tdx, tdw = scope.in_(dy), scope.out(x.shape), scope.out(wt.shape)
    tdb = scope.out((c_out,))
    desc.set("dy", tdy.handle).set("dx", tdx.handle).set("dweight", tdw.handle)
    desc.set("dbias", tdb.handle)
    ops.conv2d_backward(device.index, desc)
    w64 = dy.astype(np.float64)
    fx = lambda v: R.conv2d(v, wt, None, stride, pad, dilation, groups)  # noqa: E731
    fw = lambda v: R.conv2d(x, v, None, stride, pad, dilation, groups)  # noqa: E731
    if x.size <= 400:
        close(tdx.numpy(), R.numeric_gradient(fx, x, w64), 1e-4, 1e-4, "dx")
    if wt.size <= 200:
        # Each dweight element sums n * oh * ow float32 products: the absolute bound grows like
        # the square root of that count (1e-4 up to 100 terms, as before; 9.2e-4 for 8450).
        terms = n * expected.shape[2] * expected.shape[3]
        close(tdw.numpy(), R.numeric_gradient(fw, wt, w64), 1e-4,
              max(1e-4, 1e-5 * np.sqrt(terms)), "dweight")
    close(tdb.numpy(), w64.sum(axis=(0, 2, 3)), 1e-5, 1e-5, "dbias")
    # Large cases: the adjoint identities <dy, conv(x)> = <dx, x> and <dy, conv_w(w)> = <dw, w>.
    dot = float((w64 * fx(x)).sum())
    close([float((tdx.numpy() * x).sum())], [dot], 1e-4, 1e-3, "<dx, x>")
    close([float((tdw.numpy() * wt).sum())], [dot], 1e-4, 1e-3, "<dw, w>")


@pytest.mark.parametrize("cols_bytes", ["1", "5000"])
def test_conv2d_in_chunks_of_images(scope, device, rng, monkeypatch, cols_bytes):
    """AETHERCL_CONV_COLS_BYTES shrinks the im2col budget: one image (1 byte) or two images
    (5000 bytes) per chunk, so the weight gradient accumulates across chunks and outputs land at
    image offsets; results must equal the single-chunk reference."""
    monkeypatch.setenv("AETHERCL_CONV_COLS_BYTES", cols_bytes)
    case = (5, 3, 6, 7, 4, (3, 3), (1, 2), (1, 1), (1, 1), 1)  # 27 x 24 x 4 B = 2592 B per image
    n, c_in, h, w, c_out = case[:5]
    x = rng.standard_normal((n, c_in, h, w)).astype(np.float32)
    wt = rng.standard_normal((c_out, c_in, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32)
    expected = R.conv2d(x, wt, b, (1, 2), (1, 1), (1, 1), 1)
    dy = rng.standard_normal(expected.shape).astype(np.float32)
    tx, tw, tb, tdy = scope.in_(x), scope.in_(wt), scope.in_(b), scope.in_(dy)
    ty, tdw, tdx = scope.out(expected.shape), scope.out(wt.shape), scope.out(x.shape)
    desc = conv_desc(case, x=tx.handle, weight=tw.handle, bias=tb.handle, y=ty.handle,
                     dy=tdy.handle, dx=tdx.handle, dweight=tdw.handle)
    ops.conv2d_forward(device.index, desc)
    ops.conv2d_backward(device.index, desc)
    close(ty.numpy(), expected, 1e-5, 1e-4, "y")
    f = lambda v: R.conv2d(x, v, None, (1, 2), (1, 1), (1, 1), 1)  # noqa: E731
    close(tdw.numpy(), R.numeric_gradient(f, wt, dy.astype(np.float64)), 1e-4, 1e-4, "dweight")
    g = lambda v: R.conv2d(v, wt, None, (1, 2), (1, 1), (1, 1), 1)  # noqa: E731
    close(tdx.numpy(), R.numeric_gradient(g, x, dy.astype(np.float64)), 1e-4, 1e-4, "dx")


@pytest.mark.parametrize("compute,rtol", [(1, 1e-5), (2, 3e-3), (3, 1e-5), (4, 2e-2), (5, 3e-3)])
def test_conv2d_compute_modes(scope, device, rng, compute, rtol):
    """Every product of the convolution runs in the descriptor's compute mode (FP32, TF32,
    3xTF32, BF16, FP16: inputs rounded to 10 / 7 mantissa bits, FP32 accumulation): the result
    stays within the mode's input rounding (2^-11 TF32/FP16, 2^-8 BF16 relative per product)
    times sqrt(K) of the float64 reference."""
    case = (2, 8, 6, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1)
    x = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    wt = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    expected = R.conv2d(x, wt, None, (1, 1), (1, 1), (1, 1), 1)
    tx, tw, ty = scope.in_(x), scope.in_(wt), scope.out(expected.shape)
    ops.conv2d_forward(device.index, conv_desc(case, x=tx.handle, weight=tw.handle, y=ty.handle,
                                               compute=compute))
    scale = np.sqrt(72) * np.abs(expected).mean()
    assert np.abs(ty.numpy() - expected).max() <= rtol * scale + 1e-5


def test_conv2d_refusals(scope, device, lib):
    t = scope.out((200,))
    base = (1, 4, 5, 5, 4, (3, 3), (1, 1), (0, 0), (1, 1), 1)
    for change, words, code in (
            (dict(groups=3), "desc.groups", 1), (dict(stride_h=0), "desc.stride_h", 1),
            (dict(kernel_w=9), "exceeds the padded input", 1), (dict(pad_h=-1), "negative", 1),
            (dict(compute=7), "desc.compute", 1),
            (dict(x=None), "desc.x is NULL", 1),
            (dict(y=t.handle), "same buffer", 1)):
        desc = conv_desc(base, x=t.handle, weight=t.handle, y=scope.out((100,)).handle)
        for name, value in change.items():
            desc.set(name, value)
        assert lib.aethercl_conv2d_forward(device.index, desc.address, None) == 0
        assert words in lib.last_error(), (change, lib.last_error())
        assert lib.aethercl_last_error_code() == code


# ---- pooling ----------------------------------------------------------------------------------
POOL_CASES = [((2, 3, 8, 8), (2, 2), (2, 2), (0, 0)), ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1)),
              ((2, 1, 5, 5), (3, 2), (1, 1), (1, 1)), ((1, 4, 6, 6), (2, 2), (1, 1), (0, 0)),
              ((3, 2, 1, 4), (1, 2), (1, 2), (0, 1))]


@pytest.mark.parametrize("shape,kernel,stride,pad", POOL_CASES)
@pytest.mark.parametrize("kind", ["max", "avg", "avg_include_pad"])
def test_pool2d(scope, device, rng, shape, kernel, stride, pad, kind):
    x = rng.standard_normal(shape).astype(np.float32)
    include = kind == "avg_include_pad"
    pool_kind = "max" if kind == "max" else "avg"
    y, idx = R.pool2d(x, pool_kind, kernel, stride, pad, include)
    tx, ty, ti = scope.in_(x), scope.out(y.shape), scope.out(y.shape, np.int32)
    desc = T.Pool2dDesc(kind=T.POOL_MAX if kind == "max" else T.POOL_AVG, n=shape[0],
                        channels=shape[1], h=shape[2], w=shape[3], kernel_h=kernel[0],
                        kernel_w=kernel[1], stride_h=stride[0], stride_w=stride[1],
                        pad_h=pad[0], pad_w=pad[1], count_include_pad=int(include),
                        x=tx.handle, y=ty.handle, indices=ti.handle if kind == "max" else None)
    ops.pool2d_forward(device.index, desc)
    got = ty.numpy()
    no_poison(got)
    close(got, y, 1e-6, 1e-6, "y")
    if kind == "max":
        assert np.array_equal(ti.numpy(), idx)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    tdy, tdx = scope.in_(dy), scope.out(shape)
    desc.set("dy", tdy.handle).set("dx", tdx.handle)
    ops.pool2d_backward(device.index, desc)
    fd = R.numeric_gradient(lambda v: R.pool2d(v, pool_kind, kernel, stride, pad, include)[0],
                            x, dy.astype(np.float64))
    close(tdx.numpy(), fd, 1e-5, 1e-5, "dx")


def test_max_pool_nan_and_ties(scope, device):
    x = np.array([[[[1, 1], [np.nan, 0]]]], np.float32)
    tx, ty, ti = scope.in_(x), scope.out((1, 1, 1, 1)), scope.out((1, 1, 1, 1), np.int32)
    ops.pool2d_forward(device.index, T.Pool2dDesc(
        kind=T.POOL_MAX, n=1, channels=1, h=2, w=2, kernel_h=2, kernel_w=2, stride_h=2,
        stride_w=2, x=tx.handle, y=ty.handle, indices=ti.handle))
    assert np.isnan(ty.numpy()[0, 0, 0, 0]) and ti.numpy()[0, 0, 0, 0] == 2
    x = np.array([[[[3, 3], [1, 3]]]], np.float32)
    tx = scope.in_(x)
    ops.pool2d_forward(device.index, T.Pool2dDesc(
        kind=T.POOL_MAX, n=1, channels=1, h=2, w=2, kernel_h=2, kernel_w=2, stride_h=2,
        stride_w=2, x=tx.handle, y=ty.handle, indices=ti.handle))
    assert ti.numpy()[0, 0, 0, 0] == 0


def test_pool2d_refusals(scope, device, lib):
    t = scope.out((64,))
    base = dict(kind=T.POOL_MAX, n=1, channels=1, h=4, w=4, kernel_h=2, kernel_w=2, stride_h=2,
                stride_w=2, x=t.handle, y=scope.out((4,)).handle)
    for change, words in ((dict(pad_h=2), "exceeds half"), (dict(kind=5), "desc.kind"),
                          (dict(stride_w=0), "desc.stride_w"), (dict(h=0), "empty input"),
                          (dict(count_include_pad=3), "count_include_pad")):
        desc = T.Pool2dDesc(**dict(base, **change))
        assert lib.aethercl_pool2d_forward(device.index, desc.address, None) == 0
        assert words in lib.last_error(), (change, lib.last_error())
    desc = T.Pool2dDesc(**dict(base, dy=t.handle, dx=scope.out((16,)).handle))
    assert lib.aethercl_pool2d_backward(device.index, desc.address, None) == 0
    assert "desc.indices is NULL" in lib.last_error()
