"""Fused attention on tensor cores (kernels/attention_mma.cl) in the BF16 and FP16 compute modes:
the kernels with emulated warp instructions (AETHERCL_TENSOR_CORES=emulate) on every device, which
checks their fragment layouts, masks, online softmax and tiles, and with the default setting
("auto") the real instructions where the device's GEMM runs on tensor cores (NVIDIA compute
capability 8.0+; elsewhere "auto" must take the portable kernels, within the same bounds). Odd shapes cut every tile (64 rows, 16-column
head_dim steps), both layouts, causal with seq_q <, == and > seq_k, every storage format, poisoned
outputs, guard bytes (support/train_helpers.Scope).

Reference: float64 from the inputs rounded to the compute format, which is what the tensor cores
multiply (test_attention's reference on those values). What the kernels add to that: the
probabilities P and the score gradients dS are rounded to the format before the second products
(relative error u each: u = 2^-8 for BF16, 2^-11 for FP16), so o is within u of max|v| and the
gradients within a few u of their scale; dS = P (dP - D) also carries D_i = dout_i . o_i computed
from the stored o (itself off by u), and every output is rounded once to its storage format (u_s:
0 for float32, 2^-11 f16, 2^-8 bf16). Bounds: o <= 2u + u_s, gradients <= 4u + 2u_s; lse, a
float32 log-sum of unrounded probabilities of the rounded inputs' scores, 1e-5 as the portable
kernels'. Measured on these shapes under emulation (every shape, layout and causality, both modes,
float32 and bf16 storage): with float32 storage o at most 0.8u and the gradients 1.5u; with bf16
storage in FP16 mode o 0.68u_s and the gradients 0.8u_s (the storage rounding dominates); lse
below 1e-7. A wrong fragment, mask or tile gives errors of order 1."""
import ctypes
import json

import numpy as np
import pytest

from aethercl import gemm as g
from aethercl.structs import BF16, F16, F32, COMPUTE_BF16, COMPUTE_FP16
from support.helpers import kernels_launched
from test_attention import Case, assert_close, backward, forward, reference, rel_err

U = {COMPUTE_BF16: 2.0 ** -8, COMPUTE_FP16: 2.0 ** -11}
U_STORAGE = {F32: 0.0, F16: 2.0 ** -11, BF16: 2.0 ** -8}


def rounded(x, compute):
    """x (float64) rounded to the compute format, to nearest even."""
    if compute == COMPUTE_FP16:
        return x.astype(np.float16).astype(np.float64)
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


MMA_KERNELS = {"attention_mma_forward", "attention_mma_dq", "attention_mma_dkdv"}
PORTABLE_KERNELS = {"attention_forward", "attention_dq", "attention_dkdv"}


@pytest.fixture(scope="module")
def gemm_has_tensor_cores(lib, device, tmp_path_factory):
    """Whether a BF16 product runs on the tensor-core GEMM here with the default setting."""
    a = device.upload(np.ones((64, 64), np.float32))
    c = device.upload(np.zeros((64, 64), np.float32))
    desc = g.gemm_desc(a.handle, a.handle, c.handle, 64, 64, 64, compute=g.COMPUTE_MODES["bf16"])
    names, _ = kernels_launched(lib, device.index, tmp_path_factory.mktemp("probe") / "t.json",
                                lambda: lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc),
                                                               None))
    a.free()
    c.free()
    return "gemm_mma_product" in names


def tensor_cores_fit(lib, device, head_dim, emulated) -> bool:
    """Whether the device's reported limits hold the tensor-core kernels (ops/attention_mma.cpp):
    work-groups of 128 and two 64-row tiles of head_dim rounded up to 16..128 (+ 8) 16-bit
    values, 512 bytes of lse and delta, and the emulation's 6 words per work-item."""
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    d = next(b for b in (16, 32, 64, 128) if head_dim <= b)
    local = 2 * 64 * (d + 8) * 2 + 512 + (128 * 6 * 4 if emulated else 0)
    return info["max_work_group_size"] >= 128 and local <= info["local_mem_bytes"]


def check_tensor_cores(case, device, compute, tmp_path, on_tensor_cores=True):
    names, _ = kernels_launched(device.lib, device.index, tmp_path / "trace.json",
                                lambda: (forward(device, case), backward(device, case)))
    ran = MMA_KERNELS if on_tensor_cores else PORTABLE_KERNELS
    assert ran <= set(names) and not (MMA_KERNELS | PORTABLE_KERNELS) - ran & set(names), names
    if on_tensor_cores:
        q, k, v, dout = (rounded(x, compute) for x in (case.q, case.k, case.v, case.dout))
        u, u_s = U[compute], U_STORAGE[case.dtype]
        tol_o, tol_g = 2 * u + u_s, 4 * u + 2 * u_s
    else:  # float32 products of the stored inputs: test_attention's bounds
        q, k, v, dout = case.q, case.k, case.v, case.dout
        u_s = U_STORAGE[case.dtype]
        tol_o, tol_g = (1e-5, 1e-4) if case.dtype == F32 else (1.25 * u_s, 4 * u_s)
    return assert_close(case, reference(q, k, v, dout, case.scale, case.causal), tol_o, tol_g)


SHAPES = [  # batch, heads, seq_q, seq_k, head_dim
    (2, 3, 37, 53, 24),
    (1, 2, 130, 70, 64),
    (1, 1, 65, 129, 128),
    (2, 1, 1, 1, 1),
    (1, 2, 70, 70, 16),
]


@pytest.mark.matrix
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("compute", [COMPUTE_BF16, COMPUTE_FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("instructions", ["emulate", "auto"])
def test_tensor_core_attention(scope, device, rng, monkeypatch, tmp_path, gemm_has_tensor_cores,
                               shape, layout, causal, dtype, compute, instructions):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    case = Case(scope, rng, *shape, layout=layout, causal=causal, dtype=dtype, compute=compute)
    emulated = instructions == "emulate" or not gemm_has_tensor_cores
    check_tensor_cores(case, device, compute, tmp_path,
                       (instructions == "emulate" or gemm_has_tensor_cores) and
                       tensor_cores_fit(device.lib, device, shape[4], emulated))


@pytest.mark.parametrize("shape", [(2, 2, 70, 70, 64), (1, 3, 37, 37, 24)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_tensor_core_packed_layout(scope, device, rng, monkeypatch, tmp_path, shape, causal,
                                   dtype):
    """Layout 2 (q, k, v packed) through the tensor-core kernels, emulated where there are none."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    case = Case(scope, rng, *shape, layout=2, causal=causal, dtype=dtype, compute=COMPUTE_BF16)
    check_tensor_cores(case, device, COMPUTE_BF16, tmp_path,
                       tensor_cores_fit(device.lib, device, shape[4], True))


@pytest.mark.parametrize("seq_q,seq_k", [(20, 45), (70, 70), (100, 30)])
def test_causal_rows_without_keys(scope, device, rng, monkeypatch, tmp_path, seq_q, seq_k):
    """Causal with seq_q > seq_k: the first seq_q - seq_k rows see nothing (o = 0, lse = -inf,
    dq = 0), across the 64-row tiles of the kernels."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    case = Case(scope, rng, 1, 2, seq_q, seq_k, 32, causal=1, compute=COMPUTE_BF16)
    check_tensor_cores(case, device, COMPUTE_BF16, tmp_path,
                       tensor_cores_fit(device.lib, device, 32, True))
    empty = max(0, seq_q - seq_k)
    assert np.all(case.get("o")[:, :, :empty] == 0) and np.all(case.get("dq")[:, :, :empty] == 0)
    assert np.all(np.isneginf(case.get("lse")[:, :, :empty]))


def test_two_runs_bit_identical(scope, device, rng, monkeypatch):
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    case = Case(scope, rng, 1, 2, 70, 90, 48, causal=1, dtype=BF16, compute=COMPUTE_BF16)
    forward(device, case)
    backward(device, case)
    first = {n: case.raw(n) for n in ("o", "lse", "dq", "dk", "dv")}
    for name in ("o", "dq", "dk", "dv"):
        case.t[name].write(case.poisoned(scope, case.t[name].shape).numpy())
    forward(device, case)
    backward(device, case)
    for name, value in first.items():
        assert np.array_equal(case.raw(name).view(np.uint8), value.view(np.uint8)), name


def test_portable_kernels_take_what_tensor_cores_do_not(scope, device, rng, monkeypatch,
                                                        tmp_path):
    """FP32 compute, head_dim above 128, and work-groups capped below four warps
    (AETHERCL_WG_LIMIT) run the portable kernels, within their own float32 bounds."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    for kwargs, limit in (({"dim": 40}, None), ({"dim": 160, "compute": COMPUTE_BF16}, None),
                          ({"dim": 40, "compute": COMPUTE_BF16}, "64")):
        if limit:
            monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
        dim = kwargs.pop("dim")
        case = Case(scope, rng, 1, 2, 21, 17, dim, causal=1, **kwargs)
        names, _ = kernels_launched(device.lib, device.index, tmp_path / "trace.json",
                                    lambda: (forward(device, case), backward(device, case)))
        assert "attention_forward" in names and "attention_mma_forward" not in names, names
        o, *_ = reference(case.q, case.k, case.v, None, case.scale, case.causal)
        assert rel_err(case.get("o"), o) <= 1e-5
        monkeypatch.delenv("AETHERCL_WG_LIMIT", raising=False)
