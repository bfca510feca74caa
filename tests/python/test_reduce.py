"""Reductions and broadcasts: reduce_sum, broadcast_add, add_broadcast_pe.
Tolerances: broadcast_add and add_broadcast_pe are one float32 addition per element, so they must
equal NumPy's float32 result exactly. reduce_sum is compared with a float64 sum:
|out[n] - ref[n]| <= 2**-22 * |ref[n]| + 2**-32 * sum_rows |in[., n]| (the kernel carries a
float-float (hi, lo) pair per lane and through its tree, so only the final rounding and second-
order terms remain), and repeated calls must be bit-identical. The column-sum shapes reach every
path of kernels/reduce.cl's tiles: one pass and chunks of rows with their fold, columns not a
multiple of 4 (vload4 and the scalar tail) or of a 64-column tile, fewer rows than row lanes, one
row, one column, odd group sizes; with AETHERCL_CPU_KERNELS=0 also the GPU forms (a tree over row
lanes) on a CPU device, whose own forms are blocks of columns per work-item
(test_reduce_cpu_forms.py compares the two)."""
import numpy as np
import pytest

from support.helpers import Tensor
from support.op_checks import (assert_bitwise, check_buffer_refusals, check_dim_refusals,
                       expect_refusal)

REDUCE_SHAPES = [(1, 1, 1), (1, 1, 7), (3, 5, 7), (16, 64, 16), (16, 64, 53), (2, 1000, 3),
                 (7, 13, 257), (1, 100003, 1), (4, 3, 1009), (1, 1, 65537), (5, 1, 33)]


def cpu_forms(lib, device, kernel_forms):
    """Whether the column sums run in their CPU form (kernels/reduce.cl reduce_sum_columns_lanes):
    the device's own forms on a CPU device."""
    import json
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    return kernel_forms == "device-default" and info["type"] == "cpu"


def reduce_tolerance(x, ref):
    return 2.0**-22 * np.abs(ref) + 2.0**-32 * np.abs(x.astype(np.float64)).sum(axis=(0, 1))


@pytest.mark.parametrize("b,m,n", REDUCE_SHAPES)
def test_reduce_sum(lib, device, rng, b, m, n):
    x = (rng.standard_normal((b, m, n)) * rng.uniform(0.1, 10, n)).astype(np.float32)
    tin, tout = device.upload(x), device.empty((n,))
    lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, b, m, n)
    got = tout.numpy()
    ref = x.astype(np.float64).sum(axis=(0, 1))
    assert np.all(np.abs(got - ref) <= reduce_tolerance(x, ref)), np.max(np.abs(got - ref))
    assert tout.guard_intact() and tin.guard_intact()
    assert_bitwise(tin.numpy(), x)
    lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, b, m, n)
    assert_bitwise(tout.numpy(), got)   # deterministic
    tin.free(), tout.free()


@pytest.mark.parametrize("limit", ["1", "7", "100"])
@pytest.mark.parametrize("b,m,n", [(7, 13, 257), (2, 1000, 3), (1, 5000, 1), (3, 5, 40)])
def test_reduce_sum_with_small_and_odd_work_groups(lib, device, rng, monkeypatch, limit, b, m, n):
    """AETHERCL_WG_LIMIT caps the kernel's work-group size: any size (1, 7, 100: not powers of
    two) must give a correct and repeatable sum."""
    monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    test_reduce_sum(lib, device, rng, b, m, n)


TWO_LEVEL_SHAPES = [(4, 5000, 33), (1, 70001, 1), (3, 999, 37), (2, 4100, 16)]


@pytest.mark.parametrize("fold", ["same_launch", "second_launch"])
@pytest.mark.parametrize("limit", [None, "7"])
@pytest.mark.parametrize("b,m,n", TWO_LEVEL_SHAPES)
def test_reduce_sum_two_level(lib, device, rng, monkeypatch, tmp_path, kernel_forms, limit, b, m,
                              n, fold):
    """Tall inputs (at least 2^16 floats, rows for two chunks) are summed in two passes: chunks of
    rows into scratch partials, then their fold in chunk order, by each column tile's last
    work-group in the same launch (its stream's counters, left zero for the next call), or by a
    second launch (AETHERCL_LAUNCH_COUNTERS=0). Same bound, and bit-identical on repeated calls
    (the chunks depend only on the shape and the device)."""
    from support.helpers import kernels_launched
    if limit:
        monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    monkeypatch.setenv("AETHERCL_LAUNCH_COUNTERS", "1" if fold == "same_launch" else "0")
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json",
                                lambda: test_reduce_sum(lib, device, rng, b, m, n))
    if cpu_forms(lib, device, kernel_forms):  # blocks of columns, always folded by a second launch
        assert {"reduce_sum_columns_lanes", "reduce_sum_columns_lanes_fold"} <= names, names
        return
    assert "reduce_sum_columns_tile" in names, names
    assert ("reduce_sum_columns_fold" in names) == (fold == "second_launch"), names


def test_reduce_sum_folded_in_a_captured_graph(lib, device, rng, kernel_forms):
    """A captured two-level sum has counters of its own, which every replay leaves zero: three
    replays on other values (and eager calls on the stream's counters in between) give the
    eager call's bits each time."""
    b, m, n = TWO_LEVEL_SHAPES[0]
    x = [(rng.standard_normal((b, m, n)) * 4).astype(np.float32) for _ in range(3)]
    tin, tout, eager = device.upload(x[0]), device.empty((n,)), device.empty((n,))
    index = device.index
    assert lib.aethercl_graph_capture_begin(index, None) == 1, lib.last_error()
    lib.check("execute_reduce_sum_gpu", index, tin.handle, tout.handle, b, m, n)
    graph = lib.aethercl_graph_capture_end(index, None)
    assert graph, lib.last_error()
    try:
        for values in x + x[:1]:
            tin.write(values)
            assert lib.aethercl_graph_launch(graph, None) == 1, lib.last_error()
            lib.check("execute_reduce_sum_gpu", index, tin.handle, eager.handle, b, m, n)
            assert_bitwise(tout.numpy(), eager.numpy())
            ref = values.astype(np.float64).sum(axis=(0, 1))
            assert np.all(np.abs(tout.numpy() - ref) <= reduce_tolerance(values, ref))
    finally:
        assert lib.aethercl_graph_destroy(graph) == 1
    tin.free(), tout.free(), eager.free()


def test_reduce_sum_small_inputs_keep_one_kernel(lib, device, rng, tmp_path, kernel_forms):
    from support.helpers import kernels_launched
    names, _ = kernels_launched(lib, device.index, tmp_path / "trace.json",
                                lambda: test_reduce_sum(lib, device, rng, 2, 1000, 3))
    kernel = "reduce_sum_columns_lanes" if cpu_forms(lib, device, kernel_forms) else \
        "reduce_sum_columns_tile"
    assert {name for name in names if name.startswith("reduce")} == {kernel}, names


# (B, M, N): one row (N below, at and past a float4 lane and a tile); fewer rows than row lanes;
# one column and fewer than four; tall inputs over chunks with N not a multiple of 4 or of 64;
# whole aligned tiles (N a multiple of 64), in one pass and in chunks.
COLUMN_TILE_SHAPES = [(1, 1, 1), (1, 1, 5), (1, 1, 4099), (1, 3, 6), (2, 1, 130), (1, 3000, 1),
                      (1, 700, 2), (1, 9000, 3), (2, 2100, 68), (1, 4200, 70), (3, 1500, 131),
                      (1, 257, 1024), (1, 4096, 64), (1, 1100, 768)]


@pytest.mark.parametrize("limit", [None, "7"])
@pytest.mark.parametrize("b,m,n", COLUMN_TILE_SHAPES)
def test_reduce_sum_column_tiles(lib, device, rng, monkeypatch, kernel_forms, limit, b, m, n):
    if limit:
        monkeypatch.setenv("AETHERCL_WG_LIMIT", limit)
    test_reduce_sum(lib, device, rng, b, m, n)


def test_reduce_sum_two_level_is_accurate_and_propagates_specials(lib, device, rng):
    """Cancelling large values in one block and small ones in others, inf in one block and NaN
    in another: the fold keeps each block's error term and propagates inf and NaN."""
    rows, n = 40000, 4
    x = np.empty((1, rows, n), np.float32)
    x[0, :, 0] = 1e-3
    x[0, 5, 0], x[0, rows - 3, 0] = 1e4, -1e4
    x[0, :, 1] = rng.uniform(0, 1, rows).astype(np.float32)
    x[0, :, 2] = 1.0
    x[0, 17, 2] = np.inf
    x[0, :, 3] = 1.0
    x[0, rows - 1, 3] = np.nan
    tin, tout = device.upload(x), device.empty((n,))
    lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, 1, rows, n)
    got = tout.numpy()
    ref = x[..., :2].astype(np.float64).sum(axis=(0, 1))
    np.testing.assert_allclose(got[:2], ref, rtol=1e-6)
    assert got[2] == np.inf and np.isnan(got[3])
    tin.free(), tout.free()


def test_reduce_sum_is_accurate_on_ill_conditioned_columns(lib, device, rng):
    """Large values that cancel plus many small ones: a plain float32 running sum loses the small
    part, the documented bound does not allow that."""
    rows, n = 20000, 3
    x = np.empty((1, rows, n), np.float32)
    x[0, :, 0] = 1e-3
    x[0, 0, 0] = 1e4
    x[0, 1, 0] = -1e4
    x[0, :, 1] = rng.uniform(0, 1, rows).astype(np.float32)
    x[0, :, 2] = 0.1
    tin, tout = device.upload(x), device.empty((n,))
    lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, 1, rows, n)
    got = tout.numpy()
    ref = x.astype(np.float64).sum(axis=(0, 1))
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    tin.free(), tout.free()


def test_reduce_sum_propagates_inf_and_nan(lib, device):
    x = np.ones((2, 50, 4), np.float32)
    x[1, 7, 0] = np.inf
    x[0, 3, 1] = np.nan
    x[0, 0, 2], x[1, 1, 2] = np.inf, -np.inf
    tin, tout = device.upload(x), device.empty((4,))
    lib.check("execute_reduce_sum_gpu", device.index, tin.handle, tout.handle, 2, 50, 4)
    got = tout.numpy()
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == 100.0
    tin.free(), tout.free()


BROADCAST_SHAPES = [(1, 1, 1), (2, 3, 5), (16, 64, 16), (16, 64, 53), (1, 1, 1009), (7, 33, 1),
                    (3, 257, 17)]


@pytest.mark.parametrize("b,m,n", BROADCAST_SHAPES)
def test_broadcast_add(lib, device, rng, b, m, n):
    a = rng.standard_normal((b, m, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ta, tbias, tc = device.upload(a), device.upload(bias), device.empty((b, m, n))
    lib.check("execute_broadcast_add_gpu", device.index, ta.handle, tbias.handle, tc.handle,
              b, m, n)
    assert_bitwise(tc.numpy(), a + bias)
    assert tc.guard_intact() and tbias.guard_intact()
    for t in (ta, tbias, tc):
        t.free()


@pytest.mark.parametrize("b,s,e", [(16, 64, 16), (1, 1, 1), (3, 7, 5), (2, 33, 17), (8, 64, 16),
                                   (1, 64, 16), (4, 1, 129)])
def test_add_broadcast_pe(lib, device, rng, b, s, e):
    x = rng.standard_normal((b, s, e)).astype(np.float32)
    pe = rng.standard_normal((s, e)).astype(np.float32)
    # pe holds exactly S*E floats: no slack after it.
    tx, tpe, ty = device.upload(x), device.upload(pe, guard=0), device.empty((b, s, e))
    lib.check("execute_add_broadcast_pe_gpu", device.index, tx.handle, tpe.handle, ty.handle,
              b, s, e)
    assert_bitwise(ty.numpy(), x + pe)
    assert ty.guard_intact()
    assert_bitwise(tpe.numpy(), pe)
    for t in (tx, tpe, ty):
        t.free()


def test_add_broadcast_pe_uses_only_the_first_s_rows_of_a_longer_table(lib, device, rng):
    b, s, e, max_len = 2, 5, 3, 64
    table = rng.standard_normal((max_len, e)).astype(np.float32)
    x = rng.standard_normal((b, s, e)).astype(np.float32)
    tx, ttable, ty = device.upload(x), device.upload(table), device.empty((b, s, e))
    lib.check("execute_add_broadcast_pe_gpu", device.index, tx.handle, ttable.handle, ty.handle,
              b, s, e)
    assert_bitwise(ty.numpy(), x + table[:s])
    for t in (tx, ttable, ty):
        t.free()


def test_reduce_sum_validation(lib, device):
    b, m, n = 2, 3, 5
    tin = device.upload(np.ones((b, m, n), np.float32), guard=0)
    tout = device.empty((n,), guard=0)
    f = "execute_reduce_sum_gpu"
    check_buffer_refusals(lib, device,
                          lambda h: lib.execute_reduce_sum_gpu(device.index, *h, b, m, n),
                          [tin, tout], ["in", "out"], f)
    tout.poison()
    check_dim_refusals(lib, lambda d: lib.execute_reduce_sum_gpu(device.index, tin.handle,
                                                                 tout.handle, *d),
                       (b, m, n), ["B", "M", "N"], f, [tout])
    expect_refusal(lib, lib.execute_reduce_sum_gpu(device.index, tin.handle, tin.handle, b, m, n),
                   f, "same buffer")
    tin.free(), tout.free()


@pytest.mark.parametrize("function,names,dim_names,bias_elements", [
    ("execute_broadcast_add_gpu", ["a", "b", "c"], ["B", "M", "N"], lambda d: d[2]),
    ("execute_add_broadcast_pe_gpu", ["input", "pe_slice", "output"], ["B", "S", "E"],
     lambda d: d[1] * d[2]),
])
def test_broadcast_validation(lib, device, function, names, dim_names, bias_elements):
    dims = (2, 3, 5)
    count = int(np.prod(dims))
    ta = device.upload(np.ones(count, np.float32), guard=0)
    tbias = device.upload(np.ones(bias_elements(dims), np.float32), guard=0)
    tc = device.empty((count,), guard=0)
    call = getattr(lib, function)
    check_buffer_refusals(lib, device, lambda h: call(device.index, *h, *dims), [ta, tbias, tc],
                          names, function)
    tc.poison()
    check_dim_refusals(lib, lambda d: call(device.index, ta.handle, tbias.handle, tc.handle, *d),
                       dims, dim_names, function, [tc])
    expect_refusal(lib, call(device.index, ta.handle, tc.handle, tc.handle, *dims), function,
                   "same buffer")
    for t in (ta, tbias, tc):
        t.free()
