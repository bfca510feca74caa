"""aethercl_gemm_fused against float64 NumPy (support/gemm_fused_checks.py: the reference, its
tolerance and the checks both halves run), first half: the epilogue kinds that add a bias (bias,
bias_relu, bias_gelu, bias_gelu_tanh) x C dtype x bias dtype x transposition x alpha/beta on odd
shapes; those kinds in batched products (one bias for the batch), in the GPU kernel forms, with a
residual, and fused against unfused (aethercl_gemm, then the library's bias add and
aethercl_unary); the null epilogue, zero-sized work and the refusals with their messages.
test_gemm_fused_paths.py has the kinds without a bias and the other kernel paths: a suite of its
own, so that a cold run (ctest, one suite per core) builds the two halves' kernel variants, which
do not overlap, side by side."""
import ctypes

import numpy as np
import pytest

from aethercl import gemm as g
from support.gemm_checks import DTYPES, make_values
from support.gemm_fused_checks import (KIND_PRE_BIAS, KINDS_BIAS, batched_shares_the_bias,
                                       fused_matches_unfused, gpu_kernel_forms,
                                       kind_dtype_transpose_case,
                                       residual_added_after_the_epilogue,
                                       split_k_applies_the_epilogue_in_the_fold)


# ---- the matrix: kind x C dtype x bias dtype x transposition x alpha/beta ------------------------

# The kinds that add a bias; test_gemm_fused_paths.py has the others (the same matrix).
@pytest.mark.matrix
@pytest.mark.parametrize("alpha_beta", [(1.0, 0.0), (-0.75, 0.0), (1.25, -0.5)])
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("bias_dtype", list(DTYPES))
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind,with_pre", KIND_PRE_BIAS)
def test_bias_kinds_dtypes_transposes(lib, device, rng, fp32_precision, kind, c_dtype, bias_dtype,
                                      trans, alpha_beta, with_pre):
    kind_dtype_transpose_case(lib, device, rng, kind, c_dtype, bias_dtype, trans, alpha_beta,
                              with_pre)


@pytest.mark.parametrize("kind", KINDS_BIAS)
def test_batched_shares_the_bias(lib, device, rng, fp32_precision, kind):
    batched_shares_the_bias(lib, device, rng, kind)


@pytest.mark.parametrize("kind", KINDS_BIAS)
def test_gpu_kernel_forms(lib, device, rng, fp32_precision, monkeypatch, tmp_path, kind):
    gpu_kernel_forms(lib, device, rng, monkeypatch, tmp_path, kind)


# ---- the residual, added after the epilogue ------------------------------------------------------

@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS_BIAS)
def test_residual_added_after_the_epilogue(lib, device, rng, fp32_precision, kind, c_dtype):
    residual_added_after_the_epilogue(lib, device, rng, kind, c_dtype)


# ---- fused against unfused -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS_BIAS)
def test_fused_matches_unfused(lib, device, rng, fp32_precision, kind):
    """support/gemm_fused_checks.py: fused_matches_unfused."""
    fused_matches_unfused(lib, device, rng, kind)


# ---- split-K: the epilogue applied in the fold ---------------------------------------------------

@pytest.mark.matrix
@pytest.mark.parametrize("c_dtype", list(DTYPES))
@pytest.mark.parametrize("kind", KINDS_BIAS)
def test_split_k_applies_the_epilogue_in_the_fold(lib, device, rng, fp32_precision, monkeypatch,
                                                  tmp_path, kind, c_dtype):
    split_k_applies_the_epilogue_in_the_fold(lib, device, rng, monkeypatch, tmp_path, kind,
                                             c_dtype)


def test_null_epilogue_is_aethercl_gemm(lib, device, rng, fp32_precision):
    m, n, k = 21, 17, 13
    a, b = make_values(rng, (m, k), g.F32), make_values(rng, (k, n), g.F32)
    ta, tb = device.upload(a), device.upload(b)
    c1, c2 = device.empty((m, n)), device.empty((m, n))
    desc = g.gemm_desc(ta.handle, tb.handle, c1.handle, m, n, k, alpha=1.5)
    g.gemm(lib, device.index, desc)
    desc.c = c2.handle
    g.gemm_fused(lib, device.index, desc, None)
    assert np.array_equal(c1.numpy().view(np.uint32), c2.numpy().view(np.uint32))
    for t in (ta, tb, c1, c2):
        t.free()


def test_zero_work_touches_nothing(lib, device, fp32_precision):
    a, b, c = device.upload(np.ones(4, np.float32)), device.upload(np.ones(4, np.float32)), \
        device.empty((4,))
    bias = device.upload(np.ones(1, np.float32))
    for m, n, batch in [(0, 2, 1), (2, 0, 1), (2, 2, 0)]:
        desc = g.gemm_desc(a.handle, b.handle, c.handle, m, n, 1, batch=batch, ldc=2)
        g.gemm_fused(lib, device.index, desc, g.gemm_epilogue("bias_gelu", bias=bias.handle))
    assert np.isnan(c.numpy()).all()
    for t in (a, b, c, bias):
        assert t.guard_intact()
        t.free()


# ---- refusals ------------------------------------------------------------------------------------

class Case:
    """A small valid product (m=3, n=4, k=2) with its buffers, to break one field at a time."""

    def __init__(self, device):
        self.device = device
        self.a = device.upload(np.ones(6, np.float32))
        self.b = device.upload(np.ones(8, np.float32))
        self.c = device.empty((12,))
        self.bias = device.upload(np.ones(4, np.float32))
        self.pre = device.empty((12,))

    def desc(self, **kw):
        return g.gemm_desc(self.a.handle, self.b.handle, kw.pop("c", self.c.handle), 3, 4, 2, **kw)

    def free(self):
        for t in (self.a, self.b, self.c, self.bias, self.pre):
            assert t.guard_intact()
            t.free()


def refused(lib, device, desc, epilogue, *fragments):
    from aethercl import AetherCLError
    with pytest.raises(AetherCLError) as info:
        g.gemm_fused(lib, device.index, desc, epilogue)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_refusals(lib, device, fp32_precision):
    case = Case(device)
    ok = dict(bias=case.bias.handle)
    refused(lib, device, case.desc(), g.gemm_epilogue(0, **ok), "epilogue->kind = 0")
    refused(lib, device, case.desc(), g.gemm_epilogue(8, **ok), "epilogue->kind = 8")
    # The residual: sized as C, apart from C and pre; a descriptor of the first version-4 size
    # (ending at offset_pre) is accepted and adds none.
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.pre.handle,
                                                      offset_residual=1000, **ok),
            "epilogue->residual")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.c.handle, **ok),
            "epilogue->residual overlaps", "desc->c")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle,
                                                      residual=case.pre.handle),
            "epilogue->residual overlaps")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", residual=case.pre.handle,
                                                      offset_residual=2 ** 62, **ok),
            "epilogue->residual")
    first = g.gemm_epilogue("bias", residual=case.pre.handle, **ok)
    first.struct_size = g.GemmEpilogue.residual.offset
    g.gemm_fused(lib, device.index, case.desc(), first)
    np.testing.assert_array_equal(case.c.numpy()[:12], np.full(12, 3.0, np.float32))
    first.struct_size = g.GemmEpilogue.residual.offset - 1
    refused(lib, device, case.desc(), first, "epilogue->struct_size")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu"), "epilogue->pre is NULL", "DGELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu", pre=case.pre.handle, **ok),
            "epilogue->bias is set", "DGELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("dgelu", pre=case.c.handle),
            "epilogue->pre overlaps desc->c")
    small = g.gemm_epilogue("bias", **ok)
    small.struct_size = g.GemmEpilogue.residual.offset - 1
    refused(lib, device, case.desc(), small, "epilogue->struct_size")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias_relu"), "epilogue->bias is NULL")
    refused(lib, device, case.desc(), g.gemm_epilogue("gelu", **ok), "epilogue->bias is set",
            "GELU")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", dtype_bias=g.F64, **ok),
            "epilogue->dtype_bias = 3")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", dtype_bias=9, **ok),
            "epilogue->dtype_bias = 9")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", offset_bias=1000, **ok),
            "epilogue->bias")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", bias=ctypes.c_void_p(0x1234)),
            "epilogue->bias")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=ctypes.c_void_p(0x1234)),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle, offset_pre=1000),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.pre.handle,
                                                      offset_pre=2 ** 62),
            "epilogue->pre")
    refused(lib, device, case.desc(), g.gemm_epilogue("bias", offset_bias=2 ** 63, **ok),
            "epilogue->bias")
    # Aliasing: pre over A, B or C; C over the bias; pre over the bias.
    refused(lib, device, case.desc(), g.gemm_epilogue("relu", pre=case.c.handle),
            "epilogue->pre overlaps desc->c")
    big = device.empty((64,))
    desc = g.gemm_desc(big.handle, case.b.handle, case.c.handle, 3, 4, 2)
    refused(lib, device, desc, g.gemm_epilogue("relu", pre=big.handle, offset_pre=4),
            "epilogue->pre overlaps desc->a")
    refused(lib, device, case.desc(c=big.handle),
            g.gemm_epilogue("bias", bias=big.handle, offset_bias=8), "desc->c overlaps "
            "epilogue->bias")
    refused(lib, device, case.desc(c=big.handle),
            g.gemm_epilogue("bias", bias=case.bias.handle, pre=case.bias.handle),
            "epilogue->pre")
    # Disjoint parts of one buffer are fine: C at 0, pre at 16, bias at 40.
    g.gemm_fused(lib, device.index, case.desc(c=big.handle),
                 g.gemm_epilogue("bias_relu", bias=big.handle, offset_bias=40, pre=big.handle,
                                 offset_pre=16))
    # The descriptor is checked first, with aethercl_gemm's messages.
    refused(lib, device, case.desc(trans_a=2), g.gemm_epilogue("bias", **ok), "desc->trans_a")
    # A larger struct_size (a newer header) is accepted.
    larger = g.gemm_epilogue("bias", **ok)
    larger.struct_size = ctypes.sizeof(g.GemmEpilogue) + 64
    g.gemm_fused(lib, device.index, case.desc(), larger)
    lib.check("aethercl_synchronize", device.index)
    np.testing.assert_array_equal(case.c.numpy(), np.full(12, 3.0, np.float32))
    big.free()
    case.free()
