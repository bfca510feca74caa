"""aethercl_gemm's tensor-core kernels against float64 NumPy: on NVIDIA GPUs the real instructions,
elsewhere the same kernels with emulated warp instructions (AETHERCL_TENSOR_CORES=emulate,
emulate-wgmma): mma.sync and warpgroup forms, bulk copies, skinny tiles, split-K, tuning overrides
and their refusals. Reference and tolerance: support/gemm_checks.py."""
import ctypes
import json
import re

import numpy as np
import pytest

from aethercl import gemm as g
from aethercl.errors import InvalidArgumentError
from support.gemm_checks import encode, make_values, run_gemm, DTYPES
from support.helpers import kernels_launched


TOO_LARGE = re.compile(r"does not fit device \d+: (\d+) bytes of local memory \((\d+) available\), "
                       r"(\d+) work-items per group \((\d+) allowed\)")


def runs_within_device_limits(lib, device, call) -> bool:
    """call() under an explicit AETHERCL_MMA_PARAMS: True when the product ran. A configuration
    the device's reported limits cannot hold must be refused saying so, with figures that are the
    device's own and really exceed them (False: the case has checked that and ends)."""
    try:
        call()
        return True
    except InvalidArgumentError as error:
        found = TOO_LARGE.search(str(error))
        if not found:
            raise
        need, have, items, allowed = map(int, found.groups())
        info = json.loads(lib.json_call("aethercl_device_info", device.index))
        assert (have, allowed) == (info["local_mem_bytes"], info["max_work_group_size"]), error
        assert need > have or items > allowed, error
        return False


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


# Float32 operands in BF16 or FP16 mode, by default (AETHERCL_GEMM_NARROWING=registers): the
# mma.sync kernel copies them as TF32's and rounds each pair of fragments into one 16-bit fragment
# in registers (kernels/gemm_mma.cl MMA_NARROW), so no pass over the operands runs at all; odd
# shapes, offsets, batch strides, a broadcast operand, every transposition, and products split in
# k (8 x 24 x 1000 is one tile of a 64 x 64 configuration, fewer than the compute units: slices of
# 32 elements and a tail). The reference rounds the inputs as the mode says (support/gemm_checks).
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode", ["bf16", "fp16"])
@pytest.mark.parametrize("layout,shape", [("batched", (70, 37, 45)), ("broadcast_b", (33, 70, 29)),
                                          ("single", (8, 24, 1000))])
def test_float32_operands_rounded_in_registers(lib, device, rng, fp32_precision, monkeypatch,
                                               tmp_path, mode, trans, layout, shape):
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    m, n, k = shape
    product = lambda: run_gemm(  # noqa: E731
        lib, device, rng, mode=mode, ab=g.F32, trans_a=ta, trans_b=tb, m=m, n=n, k=k,
        layout=layout, alpha=-0.75, pad=3, offsets=(5, 3, 2))
    product()  # the first product of a kind in a process also runs that kind's probe products
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", product)
    assert not [name for name in names if name.startswith("gemm_pack")], names
    assert "gemm_mma_product" in names, names


# By default the products a warpgroup kernel takes keep the narrowing copies that feed it
# (measured faster on an H200 than mma.sync rounding in registers: docs/PERFORMANCE.md); under
# emulate-wgmma every 16-bit product takes the warpgroup form.
@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_warpgroup_products_keep_the_narrowing_copies(lib, device, rng, fp32_precision,
                                                       monkeypatch, tmp_path, mode):
    monkeypatch.delenv("AETHERCL_GEMM_NARROWING", raising=False)
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate-wgmma")
    product = lambda: run_gemm(  # noqa: E731
        lib, device, rng, mode=mode, ab=g.F32, trans_a=0, trans_b=1, m=70, n=37, k=45,
        layout="single", alpha=0.5, pad=2, offsets=(4, 2, 1))
    product()
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", product)
    assert "gemm_pack_narrow_pair" in names and "gemm_mma_product" in names, names


# With AETHERCL_GEMM_NARROWING=copies, float32 operands in BF16 or FP16 mode
# (gemm/narrow_operands.h) are copied into that 16-bit format
# as A m x k and B n x k, both in one launch (gemm_pack_narrow_pair; rows of any length, offsets,
# batch strides and a broadcast operand), then the 16-bit tensor-core kernels, which read those in
# place; the reference rounds the inputs as the mode says.
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode", ["bf16", "fp16"])
@pytest.mark.parametrize("instructions", ["emulate", "emulate-wgmma"])
@pytest.mark.parametrize("layout", ["batched", "broadcast_b"])
def test_float32_operands_narrowed_for_16_bit_modes(lib, device, rng, fp32_precision, monkeypatch,
                                                    tmp_path, mode, trans, instructions, layout):
    monkeypatch.setenv("AETHERCL_GEMM_NARROWING", "copies")
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    product = lambda: run_gemm(  # noqa: E731
        lib, device, rng, mode=mode, ab=g.F32, trans_a=ta, trans_b=tb, m=70, n=37, k=45,
        layout=layout, alpha=-0.75, pad=3, offsets=(5, 3, 2))
    product()  # the first product of a kind in a process also runs that kind's probe products
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", product)
    # Both operands narrowed in one launch (A transposed when stored k x m, B when stored k x n),
    # and no other pass.
    assert {name for name in names if name.startswith("gemm_pack")} == \
        {"gemm_pack_narrow_pair"}, names
    assert "gemm_mma_product" in names, names


# Rows of whole 16-byte units (leading dimensions and offsets multiples of four floats, one item
# or a broadcast one) are narrowed four columns at a time (PACK_NARROW_COPY4), in tiles 128
# columns wide: k = 130 leaves a second tile with a two-column tail.
@pytest.mark.matrix
@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode", ["bf16", "fp16"])
@pytest.mark.parametrize("layout", ["single", "broadcast_a"])
def test_narrowing_whole_units(lib, device, rng, fp32_precision, monkeypatch, tmp_path, mode,
                               trans, layout):
    monkeypatch.setenv("AETHERCL_GEMM_NARROWING", "copies")
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    product = lambda: run_gemm(  # noqa: E731
        lib, device, rng, mode=mode, ab=g.F32, trans_a=ta, trans_b=tb, m=130, n=130, k=130,
        layout=layout, alpha=0.5, pad=2, offsets=(8, 4, 2))
    product()
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", product)
    assert {name for name in names if name.startswith("gemm_pack")} == \
        {"gemm_pack_narrow_pair"}, names


@pytest.mark.parametrize("narrowing", ["registers", "copies"])
def test_narrowing_keeps_specials(lib, device, fp32_precision, monkeypatch, narrowing):
    # NaN stays NaN and infinities and overflow past the 16-bit range stay infinite, as the
    # portable kernel's rounding keeps them (numeric_formats.cl).
    monkeypatch.setenv("AETHERCL_GEMM_NARROWING", narrowing)
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    a = np.zeros((16, 16), np.float32)
    a[0, 0], a[1, 1], a[2, 2], a[3, 3] = np.nan, np.inf, -np.inf, 1e30
    b = np.eye(16, dtype=np.float32)
    for mode, big in (("bf16", 1e30), ("fp16", np.inf)):
        ta, tb = device.upload(a), device.upload(b)
        tc = device.upload(np.zeros((16, 16), np.float32))
        desc = g.gemm_desc(ta.handle, tb.handle, tc.handle, 16, 16, 16,
                           compute=g.COMPUTE_MODES[mode])
        assert lib.cdll.aethercl_gemm(device.index, ctypes.byref(desc), None) == 1
        c = tc.numpy()
        assert np.isnan(c[0, 0]) and c[1, 1] == np.inf and c[2, 2] == -np.inf, (mode, c[:4, :4])
        assert np.isclose(c[3, 3], big, rtol=1e-2) if np.isfinite(big) else c[3, 3] == big, mode
        for t in (ta, tb, tc):
            assert t.guard_intact()
            t.free()


# ---- the tensor-core kernels, with emulated warp instructions (any device) ----------------------

EMULATED = [("tf32", "f32"), ("3xtf32", "f32"), ("bf16", "bf16"), ("fp16", "f16")]


@pytest.mark.parametrize("trans", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("mode,ab", [("bf16", "bf16"), ("fp16", "f16")])
@pytest.mark.parametrize("instructions", ["emulate", "emulate-wgmma"])
def test_odd_16_bit_rows_are_realigned_for_the_tensor_cores(lib, device, rng, fp32_precision,
                                                            monkeypatch, tmp_path, mode, ab,
                                                            trans, instructions):
    """16-bit operands whose rows, offsets and batch strides are odd numbers of elements (a
    vocabulary of 53 or 50,257 columns), which cp.async cannot read: multiplied on the
    tensor-core kernels, never the portable ones, the same products. mma.sync reads copies with
    16-byte rows (gemm_pack_copy); the warpgroup kernel's bulk packing reads any alignment."""
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", instructions)
    ta, tb = int(trans[0] == "t"), int(trans[1] == "t")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
        lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=29, n=53, k=37,
        layout="batched", alpha=0.75, beta=0.5, c_init=1.0, pad=0, offsets=(1, 3, 1)))
    assert "gemm_mma_product" in names, names
    assert not {"gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt"} & set(names), names
    assert instructions != "emulate" or "gemm_pack_copy" in names, names


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
    if not runs_within_device_limits(lib, device, lambda: run_gemm(
            lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=70, n=67,
            k=45, layout="batched", alpha=1.25, pad=4, offsets=(8, 16, 2))):
        return
    # A warpgroup per 64 rows of the tile and the copying warp: where the device's groups cannot
    # hold them, the products above ran on mma.sync (checked correct); nothing to pack.
    bm = int(dict(item.split("=") for item in params.split(",")).get("bm", 64))
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    if bm // 64 * 128 + 32 > info["max_work_group_size"]:
        return
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
        launched = []
        if not runs_within_device_limits(lib, device, lambda: launched.append(kernels_launched(
                lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
                    lib, device, rng, mode=mode, ab=DTYPES[ab], trans_b=tb, m=m, n=n, k=k,
                    layout=layout, alpha=1.25, pad=8, offsets=(8, 16, 2)))[0])):
            return
        assert "gemm_mma_product" in launched[0] or instructions == "auto", (m, n, k, launched)
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
    launched = []
    if not runs_within_device_limits(lib, device, lambda: launched.append(kernels_launched(
            lib, device.index, tmp_path / "trace.json", lambda: run_gemm(
                lib, device, rng, mode=mode, ab=DTYPES[ab], trans_a=ta, trans_b=tb, m=70, n=72,
                k=104, layout="batched", alpha=1.25, pad=8, offsets=(8, 16, 2)))[0])):
        return
    assert "gemm_mma_product" in launched[0] or instructions == "auto", launched
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
