"""No optional workspace can fail an op (docs/RELIABILITY.md, "Optional workspaces"): every op
family runs in a child under AETHERCL_MEMORY_LIMIT set to the smallest limit where its plain form
fits, gives the unlimited run's result within its documented tolerance (both against float64
NumPy), logs its fallback at debug level, and one byte less gives AETHERCL_OUT_OF_MEMORY with a
message after which the library still works.

The limit rule (driver/runtime/memory_pool.cpp): the pool refuses a block when the capacity of the
blocks handed out plus the new block's capacity exceeds the limit, after releasing its cache, so
cached blocks never count against it. A block's capacity is its size class (size_class below: at
least 256 bytes, then at most 25 % rounding up), a scratch block holds at least 4 bytes
(runtime/scratch.cpp), and host transfers use no pool memory. The plain form's limit is therefore
the sum of the size classes of the op's buffers (its inputs and outputs, allocated first) and of
its intrinsic workspaces (the ones no path does without, named per case), computed from the shapes.
With one byte less either the buffers do not fit (no intrinsic workspace: allocate_gpu_memory is
refused) or the op's intrinsic workspace does not (the op is refused)."""
import json
import os

import numpy as np
import pytest

from support.helpers import run_child

OUT_OF_MEMORY = 4
F32 = 4


def size_class(size):
    """MemoryPool::size_class: 256 B minimum, then four classes per power of two."""
    if size <= 256:
        return 256
    power = 1 << ((size - 1).bit_length() - 1)
    step = power // 4
    return (size + step - 1) // step * step


def scratch(nbytes):
    return size_class(max(nbytes, 4))


CHILD = r"""
import json
import numpy as np
from aethercl import train as ops
from aethercl import train_types as T

spec = json.loads(SPEC)
data = np.load(spec["inputs"])
report = {"stage": "allocate"}
handles = {}


def alloc(name, nbytes):
    handle = lib.allocate_gpu_memory(0, nbytes)
    if not handle:
        raise RuntimeError(f"allocate {name}")
    handles[name] = (handle, nbytes)
    return handle


def matmul_once(m, n, k):
    # A small product on fresh buffers, freed again (the tensor-core probe runs in the first).
    a = np.ones((m, k), np.float32)
    w = np.ones((k, n), np.float32)
    ha, hw, hc = (lib.check_handle("allocate_gpu_memory", 0, s) for s in (a.nbytes, w.nbytes, m * n * 4))
    lib.check("write_host_to_gpu_blocking", 0, ha, 0, a.nbytes, a.ctypes.data)
    lib.check("write_host_to_gpu_blocking", 0, hw, 0, w.nbytes, w.ctypes.data)
    lib.check("execute_matmul_on_gpu", 0, ha, hw, hc, 1, m, n, k)
    c = np.empty((m, n), np.float32)
    lib.check("read_gpu_to_host_blocking", 0, hc, 0, c.nbytes, c.ctypes.data)
    for h in (ha, hw, hc):
        lib.free_gpu_memory(0, h)
    return float(c[0, 0]) == float(k)


def h(name):
    return handles[name][0] if name in handles else None


def run(op, p):
    if op == "matmul":
        lib.check("execute_matmul_on_gpu", 0, h("a"), h("w"), h("c"), 1, p["m"], p["n"], p["k"])
    elif op == "graph_matmul":
        # Captured on the default stream (its scratch, if any, belongs to the graph), replayed
        # twice after the output is poisoned again.
        lib.check("aethercl_graph_capture_begin", 0, None)
        lib.check("execute_matmul_on_gpu", 0, h("a"), h("w"), h("c"), 1, p["m"], p["n"], p["k"])
        graph = lib.check_handle("aethercl_graph_capture_end", 0, None)
        poison = np.full(p["m"] * p["n"], np.nan, np.float32)
        lib.check("write_host_to_gpu_blocking", 0, h("c"), 0, poison.nbytes, poison.ctypes.data)
        for _ in range(2):
            lib.check("aethercl_graph_launch", graph, None)
        lib.check("aethercl_synchronize", 0)
        lib.check("aethercl_graph_destroy", graph)
    elif op == "reduce_sum":
        lib.check("execute_reduce_sum_gpu", 0, h("x"), h("y"), p["b"], p["m"], p["n"])
    elif op == "reduce_backward":
        ops.reduce_backward(0, p["op"], h("x"), h("dy"), h("dx"), p["shape"], p["axis"])
    elif op in ("conv_forward", "conv_backward"):
        desc = T.Conv2dDesc(**p["desc"], x=h("x"), weight=h("weight"), bias=h("bias"), y=h("y"),
                            dy=h("dy"), dx=h("dx"), dweight=h("dweight"), dbias=h("dbias"))
        (ops.conv2d_forward if op == "conv_forward" else ops.conv2d_backward)(0, desc)
    elif op == "attention":
        desc = T.AttentionDesc(**p["desc"], q=h("q"), k=h("k"), v=h("v"), o=h("o"), lse=h("lse"),
                               dout=h("dout"), dq=h("dq"), dk=h("dk"), dv=h("dv"))
        ops.attention_forward(0, desc)
        ops.attention_backward(0, desc)
    elif op == "clip":
        names = [f"g{i}" for i in range(len(p["counts"]))]
        ops.clip_grad_norm(0, [h(n) for n in names], p["counts"], p["max_norm"], h("total"))
    else:
        raise ValueError(op)


try:
    assert lib.initialize_gpu(0) == 1, lib.last_error()
    if spec.get("precision"):
        lib.check("aethercl_set_matmul_precision", 0, spec["precision"])
    if spec.get("warm_up"):
        assert matmul_once(4, 4, 8)
    for name in spec["input_names"]:
        array = data[name]
        alloc(name, array.nbytes)
        lib.check("write_host_to_gpu_blocking", 0, h(name), 0, array.nbytes, array.ctypes.data)
    for name, nbytes in spec["outputs"].items():
        if name in handles:  # updated in place: an input as well
            continue
        alloc(name, nbytes)
        poison = np.full(nbytes // 4, np.nan, np.float32)
        lib.check("write_host_to_gpu_blocking", 0, h(name), 0, nbytes, poison.ctypes.data)
    report["stage"] = "op"
    run(spec["op"], spec["params"])
    lib.check("aethercl_synchronize", 0)
    results = {}
    for name, nbytes in spec["outputs"].items():
        out = np.empty(nbytes // 4, np.float32)
        lib.check("read_gpu_to_host_blocking", 0, h(name), 0, nbytes, out.ctypes.data)
        results[name] = out
    np.savez(spec["results"], **results)
    report["stage"] = "done"
except Exception as error:
    report["error"] = [lib.last_error_code(), lib.last_error(), repr(error)]
for handle, _ in handles.values():
    lib.free_gpu_memory(0, handle)
# Usable afterwards: a product on fresh buffers, within the same limit.
report["usable"] = matmul_once(8, 8, 16)
stats = json.loads(lib.json_call("aethercl_memory_stats", 0))
report["limit"] = stats["limit_bytes"]
report["reserved_end"] = stats["bytes_reserved"]
print("REPORT " + json.dumps(report))
"""


def run_case(tmp_path, tag, case, inputs, limit):
    """Runs case in a child under limit (None: unlimited); returns (report, results, stderr)."""
    inputs_path = tmp_path / f"{tag}_inputs.npz"
    np.savez(inputs_path, **inputs)
    spec = {"op": case["op"], "params": case["params"], "inputs": str(inputs_path),
            "results": str(tmp_path / f"{tag}_results.npz"), "input_names": list(inputs),
            "outputs": case["outputs"], "precision": case.get("precision"),
            "warm_up": case.get("warm_up", False)}
    backup = dict(os.environ)
    os.environ.update(case.get("env", {}))
    os.environ["AETHERCL_LOG_LEVEL"] = "debug"
    if limit is None:
        os.environ.pop("AETHERCL_MEMORY_LIMIT", None)
    else:
        os.environ["AETHERCL_MEMORY_LIMIT"] = str(limit)
    try:
        child = run_child(f"SPEC = {json.dumps(spec)!r}\n" + CHILD, timeout=600)
    finally:
        os.environ.clear()
        os.environ.update(backup)
    assert child.returncode == 0, child.stderr[-3000:]
    line = [l for l in child.stdout.splitlines() if l.startswith("REPORT ")][-1]
    report = json.loads(line[len("REPORT "):])
    results = dict(np.load(spec["results"])) if report["stage"] == "done" else None
    return report, results, child.stderr


def bf16(x):
    """Round-to-nearest-even to bfloat16, as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def tf32(x):
    """Round-to-nearest-even to TF32 (10 mantissa bits), as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.astype(np.uint32).view(np.float32)


def matmul_case(rng, m, n, k, env, marker, precision=None, warm_up=False, op="matmul"):
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    ra, rw = ((bf16(a), bf16(w)) if precision == 4 else
              (tf32(a), tf32(w)) if precision == 2 else (a, w))
    expected = ra.astype(np.float64) @ rw.astype(np.float64)
    # Each element sums k products exact in float64 (bf16 x bf16 is exact in float32 too),
    # accumulated in float32 in some order: |error| <= k * 2^-24 * sum |terms|.
    bound = k * 2.0 ** -24 * (np.abs(ra.astype(np.float64)) @ np.abs(rw.astype(np.float64)))
    return dict(op=op, params=dict(m=m, n=n, k=k), env=env, marker=marker, precision=precision,
                warm_up=warm_up, outputs={"c": m * n * F32}, inputs={"a": a, "w": w},
                intrinsic=[], expected={"c": (expected.ravel(), bound.ravel() + 1e-30)})


def conv_reference(x, wt, b, pad, groups):
    n, c_in, hh, ww = x.shape
    c_out, cg, kh, kw = wt.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    y = np.zeros((n, c_out, oh, ow))
    per = c_out // groups
    for o in range(c_out):
        g = o // per
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + oh, j:j + ow]
                y[:, o] += np.einsum("nchw,c->nhw", patch, wt[o, :, i, j].astype(np.float64))
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def conv_backward_reference(x, wt, dy, pad, groups):
    """dx, dweight, dbias of the float64 convolution, through its linearity."""
    x64 = x.astype(np.float64)
    dw = np.zeros(wt.shape)
    flat = np.zeros(wt.size)
    for e in range(wt.size):
        flat[:] = 0
        flat[e] = 1
        dw.flat[e] = np.sum(conv_reference(x64, flat.reshape(wt.shape), None, pad, groups) * dy)
    dx = np.zeros(x.shape)
    flat = np.zeros(x.size)
    for e in range(x.size):
        flat[:] = 0
        flat[e] = 1
        dx.flat[e] = np.sum(conv_reference(flat.reshape(x.shape), wt, None, pad, groups) * dy)
    return dx, dw, dy.sum(axis=(0, 2, 3))


def conv_case(rng, backward, n, c_in, size, c_out, groups, env, marker):
    kh = kw = 3
    pad = 1
    x = rng.standard_normal((n, c_in, size, size)).astype(np.float32)
    wt = rng.standard_normal((c_out, c_in // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32)
    desc = dict(n=n, c_in=c_in, h=size, w=size, c_out=c_out, kernel_h=kh, kernel_w=kw,
                stride_h=1, stride_w=1, pad_h=pad, pad_w=pad, dilation_h=1, dilation_w=1,
                groups=groups)
    positions = size * size
    depthwise = groups == c_in == c_out
    # One image's column matrix and channel-major matrix: what no chunking does without.
    intrinsic = [] if depthwise else [c_in * kh * kw * positions * F32, c_out * positions * F32]
    # Each output sums c_in/groups * 9 (forward), c_out * 9 (dx) or n * positions (dweight)
    # float32 products; rtol 1e-5 with atol 1e-5 * sqrt(terms) as test_train_conv.py argues.
    if not backward:
        y = conv_reference(x, wt, b, pad, groups)
        terms = c_in // groups * 9
        return dict(op="conv_forward", params=dict(desc=desc), env=env, marker=marker,
                    outputs={"y": y.size * F32}, inputs={"x": x, "weight": wt, "bias": b},
                    intrinsic=intrinsic,
                    expected={"y": (y.ravel(), 1e-5 * np.abs(y.ravel()) + 1e-5 * np.sqrt(terms))})
    dy = rng.standard_normal((n, c_out, size, size)).astype(np.float32)
    dx, dw, db = conv_backward_reference(x, wt, dy.astype(np.float64), pad, groups)
    tol = lambda v, terms: 1e-5 * np.abs(v.ravel()) + 1e-5 * np.sqrt(terms)  # noqa: E731
    return dict(op="conv_backward", params=dict(desc=desc), env=env, marker=marker,
                outputs={"dx": x.size * F32, "dweight": wt.size * F32, "dbias": c_out * F32},
                inputs={"x": x, "weight": wt, "dy": dy}, intrinsic=intrinsic,
                expected={"dx": (dx.ravel(), tol(dx, c_out * 9)),
                          "dweight": (dw.ravel(), tol(dw, n * positions)),
                          "dbias": (db.ravel(), tol(db, n * positions))})


def reduce_sum_case(rng):
    m, n = 4099, 37  # one tile of columns: chunks of rows leave no core idle (ops/column_tiles)
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = x.astype(np.float64).sum(axis=0)
    bound = m * 2.0 ** -24 * np.abs(x.astype(np.float64)).sum(axis=0)
    return dict(op="reduce_sum", params=dict(b=1, m=m, n=n), env={}, marker="row chunks",
                outputs={"y": n * F32}, inputs={"x": x}, intrinsic=[],
                expected={"y": (y, bound)})


def reduce_max_backward_case(rng):
    shape = [1, 30011, 3]  # 90,033 elements (over the one-pass 2^16), one tile: chunks of the axis
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal((1, 3)).astype(np.float32)
    dx = np.zeros(shape)
    picked = x.argmax(axis=1)
    for i in range(3):
        dx[0, picked[0, i], i] = dy[0, i]
    # The index each output picked: intrinsic (int32 per output).
    return dict(op="reduce_backward", params=dict(op=2, shape=shape, axis=1), env={},
                marker="chunks of the axis", outputs={"dx": x.size * F32},
                inputs={"x": x, "dy": dy}, intrinsic=[3 * 4],
                expected={"dx": (dx.ravel(), np.zeros(dx.size))})


def attention_reference(q, k, v, dout, scale):
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    lse = np.log(p.sum(-1)) + s.max(-1)
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    dp = dout @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ dout
    ds = p * (dp - (dout * o).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = ds.transpose(0, 1, 3, 2) @ q * scale
    return o, lse, dq, dk, dv


def attention_case(rng):
    b, heads, seq, d = 1, 2, 17, 8
    q, k, v, dout = (rng.standard_normal((b, heads, seq, d)).astype(np.float32) for _ in range(4))
    scale = 1 / np.sqrt(d)
    o, lse, dq, dk, dv = attention_reference(*(t.astype(np.float64) for t in (q, k, v, dout)),
                                             scale)
    count = q.size * F32
    rows = b * heads * seq
    # Softmax rows of 17 and products of length 8 or 17 in float32: 1e-4 relative to O(1) values.
    tol = lambda t: 1e-4 * (1 + np.abs(t.ravel()))  # noqa: E731
    return dict(op="attention",
                params=dict(desc=dict(batch=b, heads=heads, seq_q=seq, seq_k=seq, head_dim=d,
                                      layout=0, causal=0, scale=0.0, dtype=0, compute=1)),
                env={}, marker=None,
                outputs={"o": count, "lse": rows * F32, "dq": count, "dk": count, "dv": count},
                inputs={"q": q, "k": k, "v": v, "dout": dout},
                intrinsic=[(rows + 1) * F32],  # D_i = dout_i . o_i of the backward
                expected={"o": (o.ravel(), tol(o)), "lse": (lse.ravel(), tol(lse)),
                          "dq": (dq.ravel(), tol(dq)), "dk": (dk.ravel(), tol(dk)),
                          "dv": (dv.ravel(), tol(dv))})


def clip_case(rng):
    counts = [1000, 5000, 9000]  # 1 + 2 + 3 partial sums (chunks of 4096)
    grads = {f"g{i}": rng.standard_normal(c).astype(np.float32) for i, c in enumerate(counts)}
    total = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values()))
    scale = min(1.0, 10.0 / (total + 1e-6))
    expected = {name: (g.astype(np.float64) * scale, 1e-5 * np.abs(g) + 1e-7)
                for name, g in grads.items()}
    expected["total"] = (np.array([total]), np.array([1e-5 * total]))
    outputs = {"total": F32}
    # The gradients are scaled in place: inputs and outputs at once.
    return dict(op="clip", params=dict(counts=counts, max_norm=10.0), env={}, marker=None,
                outputs=outputs, inputs=grads, in_place=list(grads),
                intrinsic=[6 * 8, 4],  # the partial sums (at most 8-byte accumulators), the factor
                expected=expected)


CASES = {
    "matmul_split_k": lambda rng: matmul_case(rng, 16, 8, 1024, {"AETHERCL_CPU_KERNELS": "0"},
                                              "partial products"),
    # Emulated tensor cores (PoCL has none): the BF16 mode's 16-bit operand copies
    # (AETHERCL_GEMM_NARROWING=copies; the default rounds in registers and needs none) do not fit
    # beside operands of 75 KiB, after a warm-up product ran the kernel's probe with room to.
    "matmul_bf16_narrowing": lambda rng: matmul_case(
        rng, 64, 48, 136, {"AETHERCL_TENSOR_CORES": "emulate", "AETHERCL_GEMM_NARROWING": "copies"},
        "copies of a", precision=4, warm_up=True),
    # Emulated warpgroup MMA in TF32: its operand copies (rounded to TF32) do not fit; the
    # mma.sync kernel reads the operands in place.
    "matmul_tf32_warpgroup_packing": lambda rng: matmul_case(
        rng, 128, 96, 136, {"AETHERCL_TENSOR_CORES": "emulate-wgmma"}, "no room to pack",
        precision=2, warm_up=True),
    # Without the warm-up and with smaller operands not even the probe's fits: declined for the
    # product, the portable kernel runs it in the BF16 mode.
    "matmul_bf16_probe": lambda rng: matmul_case(
        rng, 40, 24, 136, {"AETHERCL_TENSOR_CORES": "emulate"}, "no room to probe", precision=4),
    "graph_split_k": lambda rng: matmul_case(rng, 16, 8, 1024, {"AETHERCL_CPU_KERNELS": "0"},
                                             "partial products", op="graph_matmul"),
    "conv_forward": lambda rng: conv_case(rng, False, 5, 3, 9, 4, 1, {}, "convolution columns"),
    "conv_backward": lambda rng: conv_case(rng, True, 4, 2, 6, 3, 1, {}, "convolution columns"),
    "conv_depthwise_backward": lambda rng: conv_case(rng, True, 4, 3, 6, 3, 3,
                                                     {"AETHERCL_CPU_KERNELS": "0"},
                                                     "depthwise weight-gradient partials"),
    "reduce_sum": reduce_sum_case,
    "reduce_max_backward": reduce_max_backward_case,
    "attention": attention_case,
    "clip_grad_norm": clip_case,
}


def plain_form_bytes(case):
    buffers = [a.nbytes for a in case["inputs"].values()] + list(case["outputs"].values())
    return sum(size_class(b) for b in buffers) + sum(scratch(b) for b in case["intrinsic"])


def check_results(case, results, label):
    for name, (expected, bound) in case["expected"].items():
        got = results[name].astype(np.float64)
        assert not np.isnan(got).any(), f"{label}: {name} holds NaN (an unwritten output)"
        error = np.abs(got - expected)
        worst = int(np.argmax(error - bound))
        assert (error <= bound).all(), (f"{label}: {name}[{worst}] = {got[worst]}, expected "
                                        f"{expected[worst]} within {bound[worst]}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_smallest_limit_runs_every_op_family(tmp_path, name):
    rng = np.random.default_rng(sum(map(ord, name)))
    case = CASES[name](rng)
    for in_place in case.get("in_place", []):  # read back as outputs too
        case["outputs"][in_place] = case["inputs"][in_place].nbytes
    plain = plain_form_bytes(case)
    if case.get("in_place"):
        plain -= sum(size_class(case["inputs"][n].nbytes) for n in case["in_place"])

    free_report, free_results, free_log = run_case(tmp_path, "free", case, case["inputs"], None)
    assert free_report["stage"] == "done", free_report
    check_results(case, free_results, "unlimited")

    report, results, log = run_case(tmp_path, "limited", case, case["inputs"], plain)
    assert report["limit"] == plain
    assert report["stage"] == "done", (plain, report)
    check_results(case, results, f"limit {plain}")
    for key in case["expected"]:  # the same result as the unlimited run, within the tolerance
        bound = case["expected"][key][1]
        assert (np.abs(results[key].astype(np.float64) - free_results[key]) <= 2 * bound).all()
    if case["marker"]:
        # The unlimited run had the workspace; the limited one logged taking the path without it.
        assert case["marker"] not in free_log
        fallback = [l for l in log.splitlines() if case["marker"] in l]
        assert fallback and all("debug" in l for l in fallback), log[-3000:]
    assert report["usable"] is True and report["reserved_end"] == 0, report

    report, _, log = run_case(tmp_path, "short", case, case["inputs"], plain - 1)
    assert report["stage"] == ("op" if case["intrinsic"] else "allocate"), report
    code, message, _ = report["error"]
    assert code == OUT_OF_MEMORY, report
    assert "bytes" in message and "exhausted" in message, message
    if case["intrinsic"]:  # the op names the workspace it could not do without
        assert "which no path does without" in message, message
    assert report["usable"] is True and report["reserved_end"] == 0, report


def test_split_k_takes_fewer_slices_before_none(tmp_path):
    """Room for two slices' partial products (16 x 8 floats each, one 1 KiB block) beside the
    plain form: the product runs as two slices after the device's count and its halvings down to
    4 did not fit, not unsplit."""
    case = CASES["matmul_split_k"](np.random.default_rng(7))
    limit = plain_form_bytes(case) + scratch(2 * 16 * 8 * F32)
    report, results, log = run_case(tmp_path, "two", case, case["inputs"], limit)
    assert report["stage"] == "done", report
    check_results(case, results, f"limit {limit}")
    refused = [int(l.split(" k slices")[0].rsplit(" ", 1)[1]) for l in log.splitlines()
               if "partial products" in l]
    assert refused, log[-3000:]
    first = refused[0]  # the device's choice (16 on a PoCL CPU: k / 64)
    if first & (first - 1):
        pytest.skip(f"this device starts at {first} slices, whose halving does not reach 2")
    assert refused == [first >> i for i in range(len(refused))] and refused[-1] == 4, refused
    assert "runs unsplit" not in log
