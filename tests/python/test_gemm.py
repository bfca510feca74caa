"""aethercl_gemm against float64 NumPy on the portable kernels: every compute mode x operand
dtype x transposition x batch layout (strided, broadcast A, broadcast B), C dtypes, alpha/beta,
leading dimensions and offsets, split-K, zero-work shapes, the seed matmul precision and streams.
Reference and tolerance: support/gemm_checks.py."""
import ctypes
import math

import numpy as np
import pytest

from aethercl import gemm as g
from support.gemm_checks import (as_multiplied, run_gemm, DTYPES, EXTRA, LAYOUTS, MODES,
                                 POISON_BITS, RTOL)
from support.helpers import kernels_launched, run_child


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


def test_split_k_is_not_taken_where_it_does_not_apply(lib, device, rng, fp32_precision,
                                                      monkeypatch, tmp_path):
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    for kwargs in ({"k": 100}, {"k": 1024, "beta": 0.5, "c_init": 1.0},
                   {"k": 1024, "layout": "batched"}):
        names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
            lib, device, rng, mode="fp32", ab=g.F32, m=16, n=16, **kwargs))
        assert "gemm_fold_parts" not in names, kwargs


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
