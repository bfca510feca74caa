"""Matrix-product family (docs/ABI.md §4.4) against float64 NumPy: matmul, matmul_backward,
matmul_batched, matmul_batched_backward, plus finite-difference checks and hostile input.

Tolerance: the reference is computed in float64 from the same float32 inputs, so the only error is
the float32 accumulation. Every output element must satisfy
    |out - ref| <= RTOL * sqrt(L) * sum_l |x_l * y_l|
where L is the length of that element's reduction (K for C, N for dA, B*M resp. M for dW/dB) and
the sum is the abs-product sum of the dot product (float64). RTOL = 8 * 2^-24 (8 units of float32
rounding): a sequential float32 sum has a typical error of about 2^-24 * sqrt(L) times that sum.
"""
import math

import numpy as np
import pytest

from support.helpers import kernels_launched

RTOL = 8 * 2.0 ** -24
POISON_BITS = 0x7FC0DEAD
INT_MAX = 2**31 - 1

# (B, M, N, K): units, primes, non-multiples of every tile, the llm.py shapes of docs/ABI.md §7.9
# and §7.11, skinny shapes and a larger one.
SHAPES = [(1, 1, 1, 1), (3, 17, 13, 29), (2, 65, 33, 127), (5, 1, 7, 3), (1, 7, 1, 1),
          (16, 64, 16, 16), (16, 64, 256, 16), (16, 64, 16, 256), (16, 64, 53, 16),
          (1, 64, 53, 16), (1, 1024, 16, 16), (1, 256, 300, 257)]
BATCHED_SHAPES = [(1, 1, 1, 1), (3, 17, 13, 29), (2, 65, 33, 127), (7, 1, 9, 5), (2, 130, 67, 3),
                  (64, 64, 64, 4), (64, 64, 4, 64), (4, 64, 64, 4), (3, 256, 97, 129)]


def f64(x):
    return np.asarray(x, np.float64)


def assert_product(out, x, y, length):
    """out ~= x @ y (float64 matmul with broadcasting), under the documented bound."""
    ref = np.matmul(f64(x), f64(y))
    bound = RTOL * math.sqrt(max(length, 1)) * np.matmul(np.abs(f64(x)), np.abs(f64(y)))
    assert out.shape == ref.shape
    error = np.abs(f64(out) - ref)
    bad = ~(error <= bound)  # NaN (an unwritten element) counts as bad
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements off; first at "
                           f"{np.argwhere(bad)[0]}: got {out[bad][0]}, want {ref[bad][0]}")


def randn(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def free(*tensors):
    for t in tensors:
        if t is not None:
            t.free()


def handle(t):
    return t.handle if t is not None else None


def untouched(t):
    """True when t still holds the poison pattern of helpers.Device.empty and its guard."""
    return bool((t.numpy().view(np.uint32) == POISON_BITS).all()) and t.guard_intact()


# ---- forward products ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matmul(lib, device, rng, shape):
    B, M, N, K = shape
    a, w = randn(rng, (B, M, K)), randn(rng, (K, N))
    ta, tw, tc = device.upload(a), device.upload(w), device.empty((B, M, N))
    lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, tc.handle, B, M, N, K)
    assert_product(tc.numpy(), a, w, K)
    assert tc.guard_intact() and ta.guard_intact() and tw.guard_intact()
    np.testing.assert_array_equal(ta.numpy(), a)  # inputs are read-only
    np.testing.assert_array_equal(tw.numpy(), w)
    free(ta, tw, tc)


@pytest.mark.parametrize("shape", BATCHED_SHAPES, ids=str)
def test_matmul_batched(lib, device, rng, shape):
    B, M, N, K = shape
    a, b = randn(rng, (B, M, K)), randn(rng, (B, K, N))
    ta, tb, tc = device.upload(a), device.upload(b), device.empty((B, M, N))
    lib.check("execute_matmul_batched_on_gpu", device.index, ta.handle, tb.handle, tc.handle,
              B, M, N, K)
    assert_product(tc.numpy(), a, b, K)
    assert tc.guard_intact() and ta.guard_intact() and tb.guard_intact()
    free(ta, tb, tc)


def test_matmul_2d_and_3d_views_agree(lib, device, rng):
    # llm.py passes B = 1 for a 2-D A; the same memory viewed as (B, M) rows must give the same C.
    B, M, N, K = 4, 9, 11, 6
    a, w = randn(rng, (B, M, K)), randn(rng, (K, N))
    ta, tw = device.upload(a), device.upload(w)
    c3, c2 = device.empty((B, M, N)), device.empty((B * M, N))
    lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, c3.handle, B, M, N, K)
    lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, c2.handle, 1, B * M,
              N, K)
    np.testing.assert_array_equal(c3.numpy().reshape(B * M, N), c2.numpy())
    free(ta, tw, c3, c2)


# ---- backward products -----------------------------------------------------------------------

def run_backward(lib, device, name, a, b, dc, shape, outputs):
    B, M, N, K = shape
    ta, tb, tdc = device.upload(a), device.upload(b), device.upload(dc)
    tda = device.empty(a.shape) if outputs in ("both", "da") else None
    tdb = device.empty(b.shape) if outputs in ("both", "db") else None
    lib.check(name, device.index, ta.handle, tb.handle, tdc.handle, handle(tda), handle(tdb),
              B, M, N, K)
    got_da = tda.numpy() if tda else None
    got_db = tdb.numpy() if tdb else None
    for t in (ta, tb, tdc, tda, tdb):
        assert t is None or t.guard_intact()
    free(ta, tb, tdc, tda, tdb)
    return got_da, got_db


# Both outputs on every shape; each single output (the other NULL) on the odd shapes.
BACKWARD_CASES = ([(shape, "both") for shape in SHAPES]
                  + [(shape, single) for shape in SHAPES[:4] for single in ("da", "db")])


@pytest.mark.parametrize("shape,outputs", BACKWARD_CASES, ids=str)
def test_matmul_backward(lib, device, rng, shape, outputs):
    B, M, N, K = shape
    a, w, dc = randn(rng, (B, M, K)), randn(rng, (K, N)), randn(rng, (B, M, N))
    da, dw = run_backward(lib, device, "execute_matmul_backward_on_gpu", a, w, dc, shape, outputs)
    if outputs in ("both", "da"):
        assert_product(da, dc, w.T, N)
    if outputs in ("both", "db"):
        assert_product(dw, a.reshape(B * M, K).T, dc.reshape(B * M, N), B * M)


BATCHED_BACKWARD_CASES = ([(shape, "both") for shape in BATCHED_SHAPES]
                          + [(shape, single) for shape in BATCHED_SHAPES[:4]
                             for single in ("da", "db")])


@pytest.mark.parametrize("shape", [(16, 64, 16, 16), (16, 64, 53, 16), (7, 143, 5, 3)])
def test_matmul_backward_split_k(lib, device, rng, monkeypatch, tmp_path, shape):
    # Weight gradients of one output tile (llm.py: dW over k = B*M = 1024) and an odd one (k = 1001)
    # through split-K, which runs with the GPU kernel forms (gemm/split_k.cpp).
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    B, M, N, K = shape
    a, w, dc = randn(rng, (B, M, K)), randn(rng, (K, N)), randn(rng, (B, M, N))
    names, (da, dw) = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: (
        run_backward(lib, device, "execute_matmul_backward_on_gpu", a, w, dc, shape, "both")))
    assert "gemm_fold_parts" in names
    assert_product(dw, a.reshape(-1, K).T, dc.reshape(-1, N), B * M)
    assert_product(da, dc, w.T, N)


@pytest.mark.parametrize("shape,outputs", BATCHED_BACKWARD_CASES, ids=str)
def test_matmul_batched_backward(lib, device, rng, shape, outputs):
    B, M, N, K = shape
    a, b, dc = randn(rng, (B, M, K)), randn(rng, (B, K, N)), randn(rng, (B, M, N))
    da, db = run_backward(lib, device, "execute_matmul_batched_backward_on_gpu", a, b, dc, shape,
                          outputs)
    if outputs in ("both", "da"):
        assert_product(da, dc, b.transpose(0, 2, 1), N)
    if outputs in ("both", "db"):
        assert_product(db, a.transpose(0, 2, 1), dc, M)


@pytest.mark.parametrize("name,batched", [("execute_matmul_backward_on_gpu", False),
                                          ("execute_matmul_batched_backward_on_gpu", True)])
def test_backward_overwrites_and_repeats(lib, device, rng, name, batched):
    # Outputs are overwritten: a second call into the same (now finite) buffers gives the same
    # values, bit for bit, instead of accumulating.
    B, M, N, K = 3, 19, 10, 7
    a, dc = randn(rng, (B, M, K)), randn(rng, (B, M, N))
    b = randn(rng, (B, K, N) if batched else (K, N))
    ta, tb, tdc = device.upload(a), device.upload(b), device.upload(dc)
    tda, tdb = device.upload(np.full(a.shape, 1e6, np.float32)), device.empty(b.shape)
    args = (device.index, ta.handle, tb.handle, tdc.handle, tda.handle, tdb.handle, B, M, N, K)
    lib.check(name, *args)
    first = tda.numpy(), tdb.numpy()
    lib.check(name, *args)
    np.testing.assert_array_equal(tda.numpy(), first[0])
    np.testing.assert_array_equal(tdb.numpy(), first[1])
    assert_product(first[0], dc, np.swapaxes(b, -1, -2), N)
    free(ta, tb, tdc, tda, tdb)


# ---- finite differences: backward against its own forward ------------------------------------

def numeric_gradient(forward, x, g, h=2.0 ** -4):
    """d/dx of sum(g * forward(x)) by float64 central differences, element by element. The
    step actually taken is measured on the float32 values, so rounding of x +- h cancels."""
    grad = np.zeros(x.shape)
    flat = x.reshape(-1)
    for i in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += np.float32(h)
        minus[i] -= np.float32(h)
        lp = np.sum(f64(g) * forward(plus.reshape(x.shape)))
        lm = np.sum(f64(g) * forward(minus.reshape(x.shape)))
        grad.reshape(-1)[i] = (lp - lm) / (f64(plus[i]) - f64(minus[i]))
    return grad


@pytest.mark.parametrize("batched", [False, True], ids=["matmul", "batched"])
def test_backward_matches_finite_differences(lib, device, rng, batched):
    B, M, N, K = 2, 3, 4, 5
    suffix = "matmul_batched" if batched else "matmul"
    a = randn(rng, (B, M, K))
    b = randn(rng, (B, K, N) if batched else (K, N))
    g = randn(rng, (B, M, N))  # dL/dC of the scalar loss L = sum(g * C)
    tc = device.empty((B, M, N))

    def forward(a_host, b_host):
        ta, tb = device.upload(a_host), device.upload(b_host)
        lib.check(f"execute_{suffix}_on_gpu", device.index, ta.handle, tb.handle, tc.handle,
                  B, M, N, K)
        free(ta, tb)
        return tc.numpy()

    num_da = numeric_gradient(lambda x: forward(x, b), a, g)
    num_db = numeric_gradient(lambda x: forward(a, x), b, g)
    da, db = run_backward(lib, device, f"execute_{suffix}_backward_on_gpu", a, b, g,
                          (B, M, N, K), "both")
    np.testing.assert_allclose(da, num_da, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, num_db, rtol=1e-4, atol=1e-4)
    free(tc)


# ---- tile parameters, grid splitting ---------------------------------------------------------

# Every kernel variant of kernels/gemm.cl through AETHERCL_GEMM_PARAMS: the tiled kernel with
# scalar and vector loads, A k-major and m-major in local memory, aligned and unaligned local
# vector reads, odd depths and tiles, the GPU configurations the tuner offers (large work-groups:
# PoCL runs them too), the same with the next K-tile prefetched (dbuf=1: tiles whose loads do and
# do not divide evenly among the work-items), and the direct kernel with every row-vector width
# class.
TILED = "direct=0,a_kmajor={},vec={},pad={},"
VARIANTS = [
    TILED.format(1, 1, 0) + "tile_m=32,tile_n=16,tile_k=5,wpt_m=2,wpt_n=4",
    TILED.format(0, 1, 3) + "tile_m=8,tile_n=24,tile_k=3,wpt_m=1,wpt_n=3",
    TILED.format(1, 4, 4) + "tile_m=128,tile_n=128,tile_k=16,wpt_m=8,wpt_n=8",  # GPU: 256 items
    TILED.format(1, 4, 0) + "tile_m=128,tile_n=64,tile_k=8,wpt_m=8,wpt_n=4",    # GPU: 256 items
    TILED.format(0, 4, 4) + "tile_m=64,tile_n=64,tile_k=16,wpt_m=4,wpt_n=4",
    TILED.format(0, 2, 1) + "tile_m=32,tile_n=32,tile_k=8,wpt_m=4,wpt_n=4",     # unaligned rows
    TILED.format(1, 4, 2) + "tile_m=48,tile_n=32,tile_k=8,wpt_m=3,wpt_n=4",     # scalar A reads
    TILED.format(1, 4, 4) + "tile_m=64,tile_n=64,tile_k=16,wpt_m=8,wpt_n=8,dbuf=1",  # H100 best
    TILED.format(0, 4, 0) + "tile_m=128,tile_n=64,tile_k=8,wpt_m=8,wpt_n=4,dbuf=1",  # B < items
    TILED.format(0, 1, 3) + "tile_m=24,tile_n=20,tile_k=7,wpt_m=3,wpt_n=5,dbuf=1",   # ragged
    "direct=1,vec=16,tile_m=96,tile_n=128,tile_k=4,wpt_m=12,wpt_n=32",
    "direct=1,vec=8,tile_m=16,tile_n=32,tile_k=1,wpt_m=2,wpt_n=16",
    "direct=1,vec=1,tile_m=6,tile_n=10,tile_k=3,wpt_m=3,wpt_n=5",
]
# Odd sizes (scalar global loads, partial tiles and blocks) and sizes that are multiples of 4
# (vector global loads where the tiles allow), each with more than one tile in M.
VARIANT_SHAPES = [(2, 133, 70, 41), (2, 136, 132, 40)]


# Each variant builds once per shape class (vector global loads or not), an LLVM build of a minute
# under PoCL on a busy 2-core machine: the default run takes each variant with one of the two
# shapes, alternating (--full: both).
@pytest.mark.matrix(strength=1)
@pytest.mark.parametrize("shape", VARIANT_SHAPES, ids=["odd", "aligned"])
@pytest.mark.parametrize("params", VARIANTS)
def test_kernel_variants(lib, device, rng, monkeypatch, params, shape):
    monkeypatch.setenv("AETHERCL_GEMM_PARAMS", params)
    B, M, N, K = shape
    a, b, dc = randn(rng, (B, M, K)), randn(rng, (B, K, N)), randn(rng, (B, M, N))
    w = randn(rng, (K, N))
    ta, tb, tw, tc = device.upload(a), device.upload(b), device.upload(w), device.empty((B, M, N))
    lib.check("execute_matmul_batched_on_gpu", device.index, ta.handle, tb.handle, tc.handle,
              B, M, N, K)
    assert_product(tc.numpy(), a, b, K)
    assert tc.guard_intact()
    # The weight broadcast over the batch (one GEMM over B*M rows).
    tc.poison()
    lib.check("execute_matmul_on_gpu", device.index, ta.handle, tw.handle, tc.handle, B, M, N, K)
    assert_product(tc.numpy(), a, w, K)
    assert tc.guard_intact()
    # Transposed B (dA) and transposed A (dB).
    da, db = run_backward(lib, device, "execute_matmul_batched_backward_on_gpu", a, b, dc,
                          (B, M, N, K), "both")
    assert_product(da, dc, b.transpose(0, 2, 1), N)
    assert_product(db, a.transpose(0, 2, 1), dc, M)
    free(ta, tb, tw, tc)


def test_bad_tile_override_is_refused_and_harmless(lib, device, rng, monkeypatch):
    ta, tb, tc = device.upload(randn(rng, (2, 2))), device.upload(randn(rng, (2, 2))), device.empty((2, 2))
    for text in ("tile_m=8,wpt_m=3", "tile_x=4", "tile_m=256,tile_n=256,wpt_m=1,wpt_n=1",
                 "direct=0,vec=8,wpt_n=8", "vec=4,wpt_n=2"):
        monkeypatch.setenv("AETHERCL_GEMM_PARAMS", text)
        assert lib.execute_matmul_on_gpu(device.index, ta.handle, tb.handle, tc.handle,
                                         1, 2, 2, 2) == 0
        assert "GEMM" in lib.last_error() and "execute_matmul_on_gpu" in lib.last_error()
        assert untouched(tc)
    monkeypatch.delenv("AETHERCL_GEMM_PARAMS")
    lib.check("execute_matmul_on_gpu", device.index, ta.handle, tb.handle, tc.handle, 1, 2, 2, 2)
    free(ta, tb, tc)


@pytest.mark.parametrize("shape", [(1, 1, 65535 * 4 + 3, 2), (1, 65535 * 4 + 7, 1, 2),
                                   (65539, 1, 1, 2)],
                         ids=["n-tiles", "m-tiles", "batch"])
def test_grids_beyond_one_launch(lib, device, rng, monkeypatch, shape):
    # With 4x4 tiles each of these needs more than 65535 groups in one dimension, so the engine
    # splits it into several launches with tile offsets.
    monkeypatch.setenv("AETHERCL_GEMM_PARAMS",
                       "tile_m=4,tile_n=4,tile_k=4,wpt_m=4,wpt_n=4,pad=0,vec=1,direct=0")
    B, M, N, K = shape
    a, b = randn(rng, (B, M, K)), randn(rng, (B, K, N))
    ta, tb, tc = device.upload(a), device.upload(b), device.empty((B, M, N))
    lib.check("execute_matmul_batched_on_gpu", device.index, ta.handle, tb.handle, tc.handle,
              B, M, N, K)
    assert_product(tc.numpy(), a, b, K)
    assert tc.guard_intact()
    free(ta, tb, tc)


# ---- NULL outputs and zero dimensions --------------------------------------------------------

BACKWARDS = ["execute_matmul_backward_on_gpu", "execute_matmul_batched_backward_on_gpu"]
FORWARDS = ["execute_matmul_on_gpu", "execute_matmul_batched_on_gpu"]


@pytest.mark.parametrize("name", BACKWARDS)
def test_backward_with_no_outputs(lib, device, name):
    t = [device.empty((4,)) for _ in range(3)]
    h = [x.handle for x in t]
    # Both outputs NULL: success before any dimension check, nothing touched.
    assert getattr(lib, name)(device.index, *h, None, None, 1, 1, 1, 1) == 1
    assert getattr(lib, name)(device.index, *h, None, None, -1, 5, -7, 2**31 - 1) == 1
    assert all(untouched(x) for x in t)
    # ... but only after the NULL test on the inputs.
    for position in range(3):
        bad = list(h)
        bad[position] = None
        assert getattr(lib, name)(device.index, *bad, None, None, 1, 1, 1, 1) == 0
        assert "NULL" in lib.last_error() and name in lib.last_error()
    free(*t)


def dims_shapes(name, B, M, N, K):
    """The shapes of (A, B-operand, C or dC, dA, dB) for an entry point."""
    b_shape = (B, K, N) if "batched" in name else (K, N)
    return [(B, M, K), b_shape, (B, M, N), (B, M, K), b_shape]


@pytest.mark.parametrize("name", FORWARDS + BACKWARDS)
@pytest.mark.parametrize("zero", ["B", "M", "N", "K"])
def test_zero_dimension_succeeds_without_touching_memory(lib, device, name, zero):
    # docs/ABI.md §3.6: any zero dimension returns 1 and writes nothing. For the forward product
    # with K == 0 that means C is left unwritten (mathematically it would be zeros).
    dims = dict(B=3, M=5, N=4, K=2)
    dims[zero] = 0
    shapes = dims_shapes(name, **dims)
    count = 5 if "backward" in name else 3
    tensors = [device.empty(s) for s in shapes[:count]]
    assert getattr(lib, name)(device.index, *[t.handle for t in tensors],
                              dims["B"], dims["M"], dims["N"], dims["K"]) == 1
    assert all(untouched(t) for t in tensors)
    free(*tensors)


@pytest.mark.parametrize("name", FORWARDS + BACKWARDS)
def test_validation(lib, device, name):
    B, M, N, K = 2, 3, 5, 4
    shapes = dims_shapes(name, B, M, N, K)
    count = 5 if "backward" in name else 3
    arg_names = (["buffer_a", "buffer_b", "buffer_dc", "buffer_da", "buffer_db"] if count == 5
                 else ["buffer_a", "buffer_b", "buffer_c"])
    outputs = range(3, 5) if count == 5 else range(2, 3)
    good = [device.empty(s) if i in outputs else device.upload(np.ones(s, np.float32))
            for i, s in enumerate(shapes[:count])]
    handles = [t.handle for t in good]
    call = getattr(lib, name)

    # Negative dimensions, each one alone.
    for position in range(4):
        dims = [B, M, N, K]
        dims[position] = -1
        assert call(device.index, *handles, *dims) == 0
        assert "negative" in lib.last_error() and name in lib.last_error()
    # Overflowing element counts.
    assert call(device.index, *handles, INT_MAX, INT_MAX, INT_MAX, INT_MAX) == 0
    assert "overflow" in lib.last_error()
    # Huge but representable: refused by the buffer size check.
    assert call(device.index, *handles, 1, INT_MAX, 1, INT_MAX) == 0
    assert "bytes" in lib.last_error()
    # Each operand one element short, and NULL where a buffer is required.
    for position in range(count):
        elements = int(np.prod(shapes[position]))
        small = device.empty((elements - 1,), guard=0)
        bad = list(handles)
        bad[position] = small.handle
        assert call(device.index, *bad, B, M, N, K) == 0
        error = lib.last_error()
        assert arg_names[position] in error
        assert f"{4 * (elements - 1)} bytes" in error and f"{4 * elements} bytes" in error
        small.free()
        if position < 3:
            bad[position] = None
            assert call(device.index, *bad, B, M, N, K) == 0
            assert "NULL" in lib.last_error() and arg_names[position] in lib.last_error()
    # A freed handle.
    dead = device.alloc(4)
    lib.free_gpu_memory(device.index, dead)
    bad = list(handles)
    bad[0] = dead
    assert call(device.index, *bad, B, M, N, K) == 0
    assert "buffer_a" in lib.last_error()
    # Nothing was written by any refused call, and the library still works.
    for position in outputs:
        assert untouched(good[position])
    assert call(device.index, *handles, B, M, N, K) == 1
    for position in outputs:
        assert not np.isnan(good[position].numpy()).any()
        assert good[position].guard_intact()
    free(*good)
