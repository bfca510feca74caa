"""The vendor-engine layer (driver/vendor/, docs/ARCHITECTURE.md decision 26) without a GPU, through
the fake engines tests/CMakeLists.txt builds (tests/vendor/fake_cuda.c, fake_nccl.c): libcuda and
libnccl look-alikes whose "device memory" is host memory and whose NCCL calls compute on the
host.

The seam that makes this honest: OpenCL cannot import CUDA memory on PoCL (no
cl_khr_external_memory), so the layer has two OpenCL sides (driver/vendor/cl_import.h,
device_match.h). A CUDA library exporting the symbol aethercl_engine_host_memory (only the fake
does) declares its memory to be host memory: its device i is then the CPU OpenCL device of
gpu_index i, and the descriptor cuMemExportToShareableHandle gives (a memfd) is mapped and wrapped
in a CL_MEM_USE_HOST_PTR buffer, which PoCL uses in place. Everything above that seam is the code
NVIDIA machines run: loading and symbol resolution, the staging copies and host waits, NCCL's
group over the ranks, stream synchronisation, error reporting and fallback. What is not covered
here: the import through cl_khr_external_memory_opaque_fd, UUID/PCI matching, real NCCL and CUDA
(tools/gpu/nccl.sh runs those on two GPUs).

Each scenario runs in a child process (support/vendor_child.py) because the engines load once per
process. POCL_DEVICES="pthread pthread pthread" gives three PoCL devices (most scenarios use two).
The fake's streams are deferred (work runs at cuStreamSynchronize), so a result read right after a
call returns is wrong unless the layer waited for NCCL before copying back: the reads below check
the header's ordering promise.

Tolerances (engine path against float64 NumPy on the stored inputs): the fake, like NCCL, folds in
its own order (reverse rank order) and rounds to the dtype after each of the P-1 additions, and
once more for MEAN's division; each rounding errs by at most half an ulp of a value no larger than
sum |x_i|, so |got - exact| <= P * eps(dtype) * sum |x_i| holds. The OpenCL paths are bit-exact and
are compared byte for byte."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = ROOT / "tests" / "python" / "support" / "vendor_child.py"
BUILD = Path(os.environ.get("AETHERCL_BUILD_DIR", ROOT / "build"))
FAKES = BUILD / "fake_engines"
GUARD = 64
F32, F16, BF16 = 0, 1, 2
SUM, MEAN, MAX = 0, 1, 2
EPS = {F32: 2.0 ** -24, F16: 2.0 ** -11, BF16: 2.0 ** -8}
ELEMENT = {F32: 4, F16: 2, BF16: 2}
DEVICE_ERROR, NOT_IMPLEMENTED, OUT_OF_MEMORY = 8, 9, 4

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="vendor engines are Linux-only")


@pytest.fixture(scope="module", autouse=True)
def pocl_cpu_devices(lib):
    """The fake engines serve CPU OpenCL devices (PoCL); elsewhere (the GPU machine, whose
    OpenCL shows its GPUs first) this file has nothing to test: tools/gpu/nccl.sh covers it."""
    info = json.loads(lib.json_call("aethercl_device_info", 0))
    if info["type"] != "cpu":
        pytest.skip(f"device 0 is {info['name']} ({info['type']}): the fake engines serve PoCL "
                    f"CPU devices")


def fake(name):
    path = FAKES / f"lib{name}.so"
    assert path.exists(), f"{path} is missing: build the test targets (cmake --build build)"
    return str(path)


def engine_env(cuda="fake_cuda", nccl="fake_nccl"):
    return {"AETHERCL_LIBCUDA": fake(cuda), "AETHERCL_LIBNCCL": fake(nccl)}


def run_child(tmp_path, steps, env, name="run"):
    """Runs steps in a child; returns (records, arrays, warnings, stderr, trace lines)."""
    trace = tmp_path / f"{name}.trace"
    out = tmp_path / f"{name}.npz"
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AETHERCL_LIB", "AETHERCL_VENDOR", "AETHERCL_PEER_PATH",
                                      "FAKE_"))}
    child_env.update({"AETHERCL_LIBRARY": os.environ.get("AETHERCL_LIBRARY",
                                                         str(BUILD / "driver.so")),
                      "POCL_DEVICES": "pthread pthread pthread", "AETHERCL_LOG_LEVEL": "info",
                      "AETHERCL_COLLECTIVE_CHUNK": "1024", "FAKE_ENGINE_TRACE": str(trace)})
    child_env.update(env)
    done = subprocess.run([sys.executable, str(CHILD), json.dumps(steps), str(out)],
                          env=child_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"child failed:\n{done.stdout}\n{done.stderr}"
    with np.load(out) as archive:
        records = json.loads(str(archive["records"]))
        arrays = {key: archive[key] for key in archive.files if key != "records"}
    # Warnings of the layer; a failed call's own message (the entry point warns with it for
    # device faults) is the call's result, checked through the records.
    warnings = [line for line in done.stderr.splitlines() if line.startswith("[aethercl warning]")
                and not re.match(r"\[aethercl warning\] aethercl_\w+: ", line)]
    lines = trace.read_text().splitlines() if trace.exists() else []
    return records, arrays, warnings, done.stderr, lines


def widen(dtype, raw):
    if dtype == F32:
        return raw.view(np.float32).astype(np.float64)
    if dtype == F16:
        return raw.view(np.float16).astype(np.float64)
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def payload(arrays, key, nbytes):
    raw = arrays[key]
    assert raw.size == nbytes + GUARD
    assert bytes(raw[nbytes:]) == b"\x5a" * GUARD, f"{key}: guard bytes overwritten"
    return raw[:nbytes]


def inputs_of(arrays, index, dtype, count, step, ranks=2):
    """The inputs a step wrote, as float64, recomputed exactly as the child made them."""
    rng = np.random.default_rng(1000 + index)
    n = count * ranks if step["op"] == "reduce_scatter" else count
    values = []
    for _ in range(ranks):
        drawn = rng.standard_normal(n).astype(np.float32) * 3
        if dtype == F32:
            values.append(drawn.astype(np.float64))
        elif dtype == F16:
            values.append(drawn.astype(np.float16).astype(np.float64))
        else:
            bits = drawn.view(np.uint32).astype(np.uint64)
            rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint32)
            values.append((rounded << 16).view(np.float32).astype(np.float64))
    return values


def check_against_float64(arrays, index, step):
    dtype, count = step["dtype"], step["count"]
    x = inputs_of(arrays, index, dtype, count, step)
    size = ELEMENT[dtype] * count
    op = step["op"]
    if op in ("all_reduce", "reduce_scatter"):
        exact = x[0] + x[1]
        bound = 2 * EPS[dtype] * (np.abs(x[0]) + np.abs(x[1]))
        if step["red"] == MEAN:
            exact = exact / 2
        for r in range(2):
            part = slice(None) if op == "all_reduce" else slice(r * count, (r + 1) * count)
            got = widen(dtype, payload(arrays, f"s{index}_out{r}", size))
            assert np.all(np.abs(got - exact[part]) <= bound[part]), (op, dtype, count, r)
    elif op == "all_gather":
        for r in range(2):
            got = widen(dtype, payload(arrays, f"s{index}_out{r}", 2 * size))
            assert np.array_equal(got, np.concatenate(x)), (op, dtype, count, r)
    elif op == "broadcast":
        for r in range(2):
            got = widen(dtype, payload(arrays, f"s{index}_out{r}", size))
            assert np.array_equal(got, x[step["root"]]), (op, dtype, count, r)


COLLECTIVE_STEPS = [{"op": "comm"}]
for _dtype in (F32, F16, BF16):
    for _count in (1, 1003, 4099):
        COLLECTIVE_STEPS += [
            {"op": "all_reduce", "dtype": _dtype, "count": _count, "red": SUM},
            {"op": "all_reduce", "dtype": _dtype, "count": _count, "red": MEAN},
            {"op": "reduce_scatter", "dtype": _dtype, "count": _count, "red": SUM},
            {"op": "all_gather", "dtype": _dtype, "count": _count},
            {"op": "broadcast", "dtype": _dtype, "count": _count, "root": 1},
        ]
COLLECTIVE_STEPS += [{"op": "all_reduce", "dtype": F32, "count": 777, "red": MAX},
                     {"op": "copy_peer", "count": 5001}]
NCCL_CALLS = {"all_reduce": "ncclAllReduce", "reduce_scatter": "ncclReduceScatter",
              "all_gather": "ncclAllGather", "broadcast": "ncclBroadcast"}


def expected_trace(steps):
    calls = []
    for step in steps:
        if step["op"] in NCCL_CALLS and step.get("red") != MAX:
            calls += [NCCL_CALLS[step["op"]]] * 2
        elif step["op"] == "copy_peer":
            calls.append("cuMemcpyPeerAsync")
    return calls


def outputs(arrays):
    return {key: bytes(value) for key, value in arrays.items()}


@pytest.fixture(scope="module")
def exact_run(tmp_path_factory):
    """The collectives with the engines turned off: the reference bytes of the OpenCL path."""
    tmp = tmp_path_factory.mktemp("exact")
    records, arrays, warnings, _, trace = run_child(
        tmp, COLLECTIVE_STEPS, {**engine_env(), "AETHERCL_VENDOR_ENGINES": "0"})
    assert all(r["status"] == 1 for r in records), records
    assert warnings == [] and trace == []
    return arrays


def test_collectives_run_on_the_fake_engine_and_match_float64(tmp_path, exact_run):
    records, arrays, warnings, stderr, trace = run_child(
        tmp_path, COLLECTIVE_STEPS, {**engine_env(), "AETHERCL_LOG_LEVEL": "debug"})
    assert all(r["status"] == 1 for r in records), records
    assert warnings == []
    assert "CUDA driver 12.4" in stderr and "host-memory test engine" in stderr
    assert "engine path (NCCL 2.21.5, CUDA devices [0, 1])" in stderr
    # Every collective reached NCCL once per rank, in order; MAX stayed on the OpenCL path.
    nccl_and_peer = [line for line in trace if line.startswith(("nccl", "cuMemcpyPeer"))]
    assert nccl_and_peer == ["ncclCommInitAll"] + expected_trace(COLLECTIVE_STEPS) + \
        ["ncclCommDestroy", "ncclCommDestroy"]
    for index, step in enumerate(COLLECTIVE_STEPS):
        if step["op"] in NCCL_CALLS and step.get("red") != MAX:
            check_against_float64(arrays, index, step)
        elif step["op"] != "comm":  # MAX and the peer copy are exact: same bytes as the OpenCL path
            for key in (k for k in arrays if k.startswith(f"s{index}_")):
                assert bytes(arrays[key]) == bytes(exact_run[key]), key
    copied = payload(arrays, f"s{len(COLLECTIVE_STEPS) - 1}_out0", 5006)
    source = payload(arrays, f"s{len(COLLECTIVE_STEPS) - 1}_in0", 5004)
    assert bytes(copied[:5]) == b"\xff" * 5 and bytes(copied[5:]) == bytes(source[3:3 + 5001])


def test_staging_larger_than_one_import_is_several_pieces(tmp_path, exact_run):
    """AETHERCL_ENGINE_IMPORT_BYTES (NVIDIA's OpenCL crashes importing 512 MiB at once) cuts the
    staging into pieces, each imported into OpenCL on its own and mapped back to back for NCCL: at
    one page per piece every collective above spans several, copies in and out are cut where
    pieces meet (at offsets that are not the pieces'), the peer copy goes a piece at a time, and
    the results are those of the staging in one piece."""
    page = os.sysconf("SC_PAGESIZE")
    records, arrays, warnings, _, trace = run_child(
        tmp_path, COLLECTIVE_STEPS, {**engine_env(), "AETHERCL_ENGINE_IMPORT_BYTES": str(page)})
    assert all(r["status"] == 1 for r in records), records
    assert warnings == []
    nccl_and_peer = [line for line in trace if line.startswith(("nccl", "cuMemcpyPeer"))]
    peer_chunks = -(-5001 // page)
    assert nccl_and_peer == ["ncclCommInitAll"] + expected_trace(COLLECTIVE_STEPS)[:-1] + \
        ["cuMemcpyPeerAsync"] * peer_chunks + ["ncclCommDestroy", "ncclCommDestroy"]
    # The largest staging (all_gather of 4099 float32 per rank: 32 KiB) is eight pieces or more.
    assert trace.count("cuMemCreate") >= 2 * 8, trace.count("cuMemCreate")
    for index, step in enumerate(COLLECTIVE_STEPS):
        if step["op"] in NCCL_CALLS and step.get("red") != MAX:
            check_against_float64(arrays, index, step)
        elif step["op"] != "comm":
            for key in (k for k in arrays if k.startswith(f"s{index}_")):
                assert bytes(arrays[key]) == bytes(exact_run[key]), key


def buffers_allocated(steps):
    """How many buffers the child allocates for steps (two ranks)."""
    per_step = {"all_reduce": 2, "broadcast": 2, "reduce_scatter": 4, "all_gather": 4,
                "copy_peer": 2}
    return sum(per_step.get(step["op"], 0) for step in steps)


def test_engine_buffers_are_reduced_in_place(tmp_path, exact_run):
    """Buffers from aethercl_comm_alloc on the engine path are engine memory (one import each),
    and collectives and the peer copy hand them to NCCL and CUDA as they are: no staging is ever
    allocated and no copy goes through one, yet every result matches float64 and MAX
    (the OpenCL path on the same buffers) and the peer copy keep the OpenCL path's bytes. The fake
    CUDA runs stream work only when a stream is synchronised, so a result read without the
    collective's wait would be stale."""
    steps = [{"op": "comm", "alloc": True}] + COLLECTIVE_STEPS[1:]
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, engine_env())
    assert all(r["status"] == 1 for r in records), records
    assert warnings == []
    # Every allocation is a buffer's own: the peer copy between two engine buffers is one
    # cuMemcpyPeerAsync from one to the other, with no staging either.
    assert trace.count("cuMemCreate") == buffers_allocated(steps), trace.count("cuMemCreate")
    assert trace.count("cuMemcpyPeerAsync") == 1
    nccl_and_peer = [line for line in trace if line.startswith(("nccl", "cuMemcpyPeer"))]
    assert nccl_and_peer[:-3] == ["ncclCommInitAll"] + expected_trace(steps)[:-1]
    for index, step in enumerate(steps):
        if step["op"] in NCCL_CALLS and step.get("red") != MAX:
            check_against_float64(arrays, index, step)
        elif step["op"] != "comm":
            for key in (k for k in arrays if k.startswith(f"s{index}_")):
                assert bytes(arrays[key]) == bytes(exact_run[key]), key


def test_engine_buffers_above_one_import_are_pool_buffers(tmp_path, exact_run):
    """Above AETHERCL_ENGINE_IMPORT_BYTES aethercl_comm_alloc hands out ordinary buffers, which
    the collectives stage as before; smaller ones stay engine memory. Results as above."""
    page = os.sysconf("SC_PAGESIZE")
    steps = [{"op": "comm", "alloc": True},
             {"op": "all_reduce", "dtype": F32, "count": 3, "red": SUM},
             {"op": "all_reduce", "dtype": F32, "count": 4099, "red": SUM},
             {"op": "all_gather", "dtype": BF16, "count": 4099}]
    records, arrays, warnings, _, trace = run_child(
        tmp_path, steps, {**engine_env(), "AETHERCL_ENGINE_IMPORT_BYTES": str(page)})
    assert all(r["status"] == 1 for r in records), records
    assert warnings == []
    # Two engine buffers (step 1), then each rank's staging for 4099 float32 (the all-gather's
    # 2 x 4099 bf16 fit in it) in page-sized pieces.
    assert trace.count("cuMemCreate") == 2 + 2 * -(-4099 * 4 // page), trace
    for index, step in enumerate(steps[1:], start=1):
        check_against_float64(arrays, index, step)


@pytest.mark.parametrize("wish", ["auto", "engine"])
def test_an_nccl_failure_on_engine_buffers_fails_the_call(tmp_path, wish):
    """In place there is no untouched copy to fall back on: the call returns 0 with
    AETHERCL_DEVICE_ERROR naming the NCCL function whatever the path wish, the communicator
    drops its engine (one warning), and later calls on the same buffers' kind succeed on the
    OpenCL path."""
    function, step = FAILING_CALLS[0]
    steps = [{"op": "comm", "alloc": True}, {"op": "env", "set": {"FAKE_NCCL_FAIL": function}},
             step, {"op": "env", "unset": ["FAKE_NCCL_FAIL"]}] + LATER
    env = {**engine_env(), **({"AETHERCL_PEER_PATH": "engine"} if wish == "engine" else {})}
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, env)
    assert records[2]["status"] == 0 and records[2]["code"] == DEVICE_ERROR, records[2]
    assert function in records[2]["error"], records[2]
    assert len(warnings) == 1 and "vendor engines failed" in warnings[0], warnings
    check_later_calls(records, arrays, trace, step)


def test_a_malformed_import_size_warns_and_keeps_the_default(tmp_path):
    steps = [{"op": "comm"}, {"op": "all_reduce", "dtype": F32, "count": 1003, "red": SUM},
             {"op": "all_reduce", "dtype": F32, "count": 4099, "red": SUM}]
    records, arrays, warnings, _, trace = run_child(
        tmp_path, steps, {**engine_env(), "AETHERCL_ENGINE_IMPORT_BYTES": "lots"})
    assert all(r["status"] == 1 for r in records), records
    assert len(warnings) == 1 and "AETHERCL_ENGINE_IMPORT_BYTES" in warnings[0], warnings
    # One piece per staging (256 MiB holds them): a staging per rank, grown once for the second.
    assert trace.count("cuMemCreate") == 4, trace
    for index in (1, 2):
        check_against_float64(arrays, index, steps[index])


def bf16_round(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint32)
    return (rounded << 16).view(np.float32)


def test_results_come_from_the_engine_not_the_opencl_path(tmp_path):
    """On three ranks the summation order shows: the fake (like NCCL) folds in its own order,
    (x2 + x1) + x0, the OpenCL path in rank order, (x0 + x1) + x2, both in float32. The engine's
    bits equal the fake's fold everywhere, which differs from the rank-order fold somewhere."""
    steps = [{"op": "comm", "ranks": 3},
             {"op": "all_reduce", "dtype": F32, "count": 4099, "red": SUM}]
    records, arrays, _, stderr, trace = run_child(tmp_path, steps, engine_env())
    assert records[1]["status"] == 1, records
    assert "CUDA devices [0, 1, 2]" in stderr
    assert trace.count("ncclAllReduce") == 3
    x = [v.astype(np.float32) for v in inputs_of(arrays, 1, F32, 4099, steps[1], ranks=3)]
    engine_fold = ((x[2] + x[1]).astype(np.float32) + x[0]).astype(np.float32)
    rank_fold = ((x[0] + x[1]).astype(np.float32) + x[2]).astype(np.float32)
    assert not np.array_equal(engine_fold, rank_fold)
    for r in range(3):
        got = payload(arrays, f"s1_out{r}", 4 * 4099).view(np.float32)
        assert np.array_equal(got, engine_fold), r


@pytest.mark.parametrize("scenario", ["off", "absent", "host_path", "device_path"])
def test_without_the_engines_the_bytes_are_those_of_the_opencl_path(tmp_path, exact_run,
                                                                     scenario):
    env = {"off": {**engine_env(), "AETHERCL_VENDOR_ENGINES": "0"},
           "absent": {},
           "host_path": {**engine_env(), "AETHERCL_PEER_PATH": "host"},
           "device_path": {**engine_env(), "AETHERCL_PEER_PATH": "device"}}[scenario]
    if scenario == "absent":
        import ctypes
        try:
            ctypes.CDLL("libcuda.so.1")
            pytest.skip("this machine has a libcuda.so.1: 'absent' cannot be arranged")
        except OSError:
            pass  # absent, as the driver's dlopen will find
    records, arrays, warnings, stderr, trace = run_child(tmp_path, COLLECTIVE_STEPS, env)
    assert all(r["status"] == 1 for r in records), records
    assert warnings == [], warnings
    assert trace == []
    if scenario in ("off", "absent"):
        assert outputs(arrays) == outputs(exact_run)
    else:
        # host/device: the exact OpenCL path whatever auto would pick (the peer copy too).
        assert outputs(arrays) == outputs(exact_run)


@pytest.mark.parametrize("cuda,nccl,named", [("fake_cuda_incomplete", "fake_nccl",
                                               "cuMemExportToShareableHandle"),
                                              ("fake_cuda", "fake_nccl_incomplete",
                                               "ncclReduceScatter")])
def test_a_library_missing_a_symbol_gives_one_warning_and_the_opencl_path(tmp_path, exact_run,
                                                                           cuda, nccl, named):
    steps = COLLECTIVE_STEPS + [{"op": "comm"}, {"op": "all_reduce", "dtype": F32, "count": 9,
                                                 "red": SUM}]
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, engine_env(cuda, nccl))
    assert all(r["status"] == 1 for r in records), records
    assert len(warnings) == 1, warnings
    assert named in warnings[0] and "OpenCL paths" in warnings[0]
    assert [line for line in trace if line.startswith("nccl")] == []
    for key, value in exact_run.items():
        assert bytes(arrays[key]) == bytes(value), key


def test_cuinit_failing_gives_one_warning(tmp_path, exact_run):
    steps = COLLECTIVE_STEPS[:3]
    records, arrays, warnings, _, _ = run_child(tmp_path, steps,
                                                {**engine_env(), "FAKE_CUDA_FAIL": "cuInit"})
    assert all(r["status"] == 1 for r in records)
    assert len(warnings) == 1 and "cuInit failed" in warnings[0], warnings
    for key in arrays:
        assert bytes(arrays[key]) == bytes(exact_run[key]), key


def test_malformed_switch_warns_and_keeps_the_engines_on(tmp_path):
    steps = [{"op": "comm"}, {"op": "all_reduce", "dtype": F32, "count": 31, "red": SUM}]
    records, arrays, warnings, _, trace = run_child(
        tmp_path, steps, {**engine_env(), "AETHERCL_VENDOR_ENGINES": "sometimes"})
    assert all(r["status"] == 1 for r in records)
    assert len(warnings) == 1 and "AETHERCL_VENDOR_ENGINES" in warnings[0], warnings
    assert trace.count("ncclAllReduce") == 2
    check_against_float64(arrays, 1, steps[1])


FAILING_CALLS = [
    ("ncclAllReduce", {"op": "all_reduce", "dtype": F32, "count": 1003, "red": SUM}),
    ("ncclGroupEnd", {"op": "all_gather", "dtype": F16, "count": 1003}),
    ("ncclBroadcast", {"op": "broadcast", "dtype": BF16, "count": 1003, "root": 0})]
LATER = [{"op": "all_reduce", "dtype": F32, "count": 1003, "red": SUM},
         {"op": "reduce_scatter", "dtype": BF16, "count": 517, "red": MEAN},
         {"op": "all_gather", "dtype": F32, "count": 9},
         {"op": "broadcast", "dtype": F16, "count": 99, "root": 1}]


def check_later_calls(records, arrays, trace, step):
    for index, later_step in enumerate(LATER, start=4):
        assert records[index]["status"] == 1, records[index]
        check_against_float64(arrays, index, later_step)
    assert trace.count(NCCL_CALLS[step["op"]]) <= 2  # nothing reached NCCL after the failure


@pytest.mark.parametrize("function,step", FAILING_CALLS)
def test_an_nccl_failure_falls_back_to_the_opencl_path(tmp_path, function, step):
    """auto: the failing call still succeeds, computed on the OpenCL path from the user's buffers
    (the engine had touched only its staging); one warning names the NCCL function and its error,
    the NCCL side is aborted, and later calls of every kind run on the OpenCL path."""
    steps = [{"op": "comm"}, {"op": "env", "set": {"FAKE_NCCL_FAIL": function}}, step,
             {"op": "env", "unset": ["FAKE_NCCL_FAIL"]}] + LATER
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, engine_env())
    assert records[2]["status"] == 1, records[2]
    check_against_float64(arrays, 2, step)
    assert len(warnings) == 1 and "vendor engines failed" in warnings[0], warnings
    assert function in warnings[0] and "asked by FAKE_NCCL_FAIL" in warnings[0], warnings
    assert "ncclCommAbort" in trace  # a failed NCCL communicator is aborted, not waited for
    check_later_calls(records, arrays, trace, step)


@pytest.mark.parametrize("function,step", FAILING_CALLS)
def test_an_nccl_failure_is_reported_where_the_engine_is_required(tmp_path, function, step):
    """AETHERCL_PEER_PATH=engine: the failing call returns 0 with AETHERCL_DEVICE_ERROR naming the
    NCCL function and NCCL's error string, the user's buffers are as they were, and later calls
    succeed on the OpenCL path."""
    steps = [{"op": "comm"}, {"op": "env", "set": {"FAKE_NCCL_FAIL": function}}, step,
             {"op": "env", "unset": ["FAKE_NCCL_FAIL"]}] + LATER
    records, arrays, warnings, _, trace = run_child(
        tmp_path, steps, {**engine_env(), "AETHERCL_PEER_PATH": "engine"})
    failed = records[2]
    assert failed["status"] == 0 and failed["code"] == DEVICE_ERROR, failed
    assert function in failed["error"] and "asked by FAKE_NCCL_FAIL" in failed["error"], failed
    dtype, count = step["dtype"], step["count"]
    size = ELEMENT[dtype] * count
    if step["op"] in ("all_reduce", "broadcast"):  # in place: the inputs are untouched
        x = inputs_of(arrays, 2, dtype, count, step)
        for r in range(2):
            assert np.array_equal(widen(dtype, payload(arrays, f"s2_out{r}", size)), x[r])
    else:  # the outputs keep their poison
        for r in range(2):
            assert bytes(payload(arrays, f"s2_out{r}", 2 * size)) == b"\xff" * (2 * size)
    assert len(warnings) == 1 and "vendor engines failed" in warnings[0], warnings
    check_later_calls(records, arrays, trace, step)


@pytest.mark.parametrize("wish", ["auto", "engine"])
def test_staging_out_of_memory(tmp_path, wish):
    """No room for the staging: auto computes the call on the OpenCL path (one warning naming
    cuMemCreate); engine reports AETHERCL_OUT_OF_MEMORY naming it. Later calls succeed."""
    steps = [{"op": "comm"}, {"op": "env", "set": {"FAKE_CUDA_FAIL": "cuMemCreate"}},
             {"op": "all_reduce", "dtype": F32, "count": 2049, "red": SUM},
             {"op": "env", "unset": ["FAKE_CUDA_FAIL"]},
             {"op": "all_reduce", "dtype": F32, "count": 2049, "red": SUM}]
    env = {**engine_env(), **({"AETHERCL_PEER_PATH": "engine"} if wish == "engine" else {})}
    records, arrays, warnings, _, _ = run_child(tmp_path, steps, env)
    if wish == "engine":
        assert records[2]["status"] == 0 and records[2]["code"] == OUT_OF_MEMORY, records[2]
        assert "cuMemCreate" in records[2]["error"]
        assert "CUDA_ERROR_OUT_OF_MEMORY" in records[2]["error"]
    else:
        assert records[2]["status"] == 1, records[2]
        check_against_float64(arrays, 2, steps[2])
        assert len(warnings) == 1 and "cuMemCreate" in warnings[0], warnings
    assert records[4]["status"] == 1
    check_against_float64(arrays, 4, steps[4])


def test_engine_path_required_where_it_cannot_run(tmp_path):
    """AETHERCL_PEER_PATH=engine without engines: communicators of two devices and peer copies
    are refused naming the reason; a communicator of one device (which moves nothing) is not."""
    steps = [{"op": "comm"}, {"op": "copy_peer", "count": 100}, {"op": "comm", "ranks": 1},
             {"op": "all_reduce", "dtype": F32, "count": 5, "red": SUM}]
    records, arrays, _, _, _ = run_child(tmp_path, steps, {**engine_env(),
                                                           "AETHERCL_VENDOR_ENGINES": "0",
                                                           "AETHERCL_PEER_PATH": "engine"})
    assert records[0]["status"] == 0 and records[0]["code"] == NOT_IMPLEMENTED, records[0]
    assert "AETHERCL_PEER_PATH=engine" in records[0]["error"]
    assert "AETHERCL_VENDOR_ENGINES=0" in records[0]["error"]
    assert records[1]["status"] == 0 and records[1]["code"] == NOT_IMPLEMENTED, records[1]
    assert "AETHERCL_VENDOR_ENGINES=0" in records[1]["error"]
    assert bytes(payload(arrays, "s1_out0", 105)) == b"\xff" * 105
    assert records[2]["status"] == 1 and records[3]["status"] == 1, records


def test_communicator_creation_failing_in_cuda(tmp_path, exact_run):
    """Required: comm_create fails naming the CUDA call. auto: the communicator takes its OpenCL
    path with one warning and gives the exact bytes."""
    fail_env = {**engine_env(), "FAKE_CUDA_FAIL": "cuDevicePrimaryCtxRetain"}
    records, _, _, _, _ = run_child(tmp_path, [{"op": "comm"}],
                                    {**fail_env, "AETHERCL_PEER_PATH": "engine"}, "required")
    assert records[0]["status"] == 0 and records[0]["code"] == DEVICE_ERROR, records[0]
    assert "cuDevicePrimaryCtxRetain" in records[0]["error"]
    steps = COLLECTIVE_STEPS[:6]
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, fail_env, "auto")
    assert all(r["status"] == 1 for r in records)
    assert len(warnings) == 1 and "cuDevicePrimaryCtxRetain" in warnings[0], warnings
    assert [line for line in trace if line.startswith("nccl")] == []
    for key in arrays:
        assert bytes(arrays[key]) == bytes(exact_run[key]), key


@pytest.mark.parametrize("wish", ["auto", "engine"])
def test_a_failed_peer_copy_falls_back(tmp_path, wish):
    """cuMemcpyPeerAsync failing: auto redoes the copy on the OpenCL path (one warning) and later
    copies of that pair take the OpenCL path; engine fails it with AETHERCL_DEVICE_ERROR naming
    the call, nothing arriving, and refuses later copies of the pair (the engine no longer serves
    it)."""
    steps = [{"op": "env", "set": {"FAKE_CUDA_FAIL": "cuMemcpyPeerAsync"}},
             {"op": "copy_peer", "count": 4097},
             {"op": "env", "unset": ["FAKE_CUDA_FAIL"]},
             {"op": "copy_peer", "count": 4097}]
    env = {**engine_env(), **({"AETHERCL_PEER_PATH": "engine"} if wish == "engine" else {})}
    records, arrays, warnings, _, trace = run_child(tmp_path, steps, env)
    if wish == "engine":
        assert records[1]["status"] == 0 and records[1]["code"] == DEVICE_ERROR, records[1]
        assert "cuMemcpyPeerAsync" in records[1]["error"]
        assert bytes(payload(arrays, "s1_out0", 4102)) == b"\xff" * 4102  # nothing arrived
    else:
        assert records[1]["status"] == 1, records[1]
        copied, source = payload(arrays, "s1_out0", 4102), payload(arrays, "s1_in0", 4100)
        assert bytes(copied[5:]) == bytes(source[3:])
    assert len(warnings) == 1 and "OpenCL path from now on" in warnings[0], warnings
    assert "cuMemcpyPeerAsync" in warnings[0], warnings
    if wish == "engine":
        assert records[3]["status"] == 0 and records[3]["code"] == NOT_IMPLEMENTED, records[3]
        assert "earlier CUDA failure" in records[3]["error"], records[3]
        return
    assert records[3]["status"] == 1
    copied, source = payload(arrays, "s3_out0", 4102), payload(arrays, "s3_in0", 4100)
    assert bytes(copied[5:]) == bytes(source[3:])


# ---- communicators across processes (aethercl_comm_create_rank) -----------------------------
# Children without MPI: the fake NCCL's rendezvous is a file named in the id, so two plain
# processes given the same id form one communicator (tests/multi/test_mpi_nccl.py runs the
# collectives under mpirun).
RANK_CHILD = r"""
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
from aethercl import Library
lib = Library()
mode = sys.argv[2]
def report(what, result):
    print(what, int(bool(result)), lib.last_error_code(), lib.last_error(), flush=True)
uid = ctypes.create_string_buffer(128)
if mode == "id":
    report("unique_id", lib.aethercl_comm_unique_id(uid, 128))
    print("ID", uid.raw.hex(), flush=True)
    sys.exit(0)
rank = int(sys.argv[3]) if mode == "rank" else 0
lib.check("initialize_gpu", rank)
buf = lib.check_handle("allocate_gpu_memory", rank, 64)
def one(comm, op=0):
    return lib.aethercl_all_reduce(comm, (ctypes.c_void_p * 1)(buf), 16, 0, op)
if mode == "rank":   # FAKE_NCCL_FAIL=ncclAllReduce on both ranks: nothing reaches the barrier
    comm = lib.aethercl_comm_create_rank(2, rank, bytes.fromhex(sys.argv[4]), 128, rank)
    report("create", comm)
    report("failing", one(comm))
    os.environ.pop("FAKE_NCCL_FAIL")
    report("after", one(comm))
    report("destroy", lib.aethercl_comm_destroy(comm))
    sys.exit(0)
report("unique_id", lib.aethercl_comm_unique_id(uid, 128))
comm = lib.aethercl_comm_create_rank(1, 0, uid, 128, 0)
report("create", comm)
report("sum", one(comm))
report("max", one(comm, 2))
alloc = lib.aethercl_comm_alloc(comm, 0, 64)
report("alloc", alloc)
lib.free_gpu_memory(0, alloc)
report("destroy", lib.aethercl_comm_destroy(comm))
report("zeros", lib.aethercl_comm_create_rank(1, 0, bytes(128), 128, 0))
os.environ["FAKE_NCCL_FAIL"] = "ncclCommInitRank"
report("init_fails", lib.aethercl_comm_create_rank(1, 0, uid, 128, 0))
os.environ["FAKE_NCCL_FAIL"] = "ncclGetUniqueId"
report("id_fails", lib.aethercl_comm_unique_id(uid, 128))
"""


def rank_children(args_per_child, env):
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AETHERCL_LIB", "AETHERCL_VENDOR", "FAKE_"))}
    child_env.update({"AETHERCL_LIBRARY": os.environ.get("AETHERCL_LIBRARY",
                                                         str(BUILD / "driver.so")),
                      "POCL_DEVICES": "pthread pthread", **env})
    children = [subprocess.Popen([sys.executable, "-c", RANK_CHILD,
                                  str(ROOT / "python_harness"), *args],
                                 env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for args in args_per_child]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, f"child failed:\n{out}\n{err}"
        outputs.append({line.split(" ", 1)[0]: line.split(" ", 3)[1:] for line in
                        out.splitlines()})
    return outputs


def test_a_rank_communicator_of_one_process(tmp_path):
    (seen,) = rank_children([["single"]], engine_env())
    assert seen["unique_id"][0] == "1" and seen["create"][0] == "1", seen
    assert seen["sum"][0] == "1" and seen["alloc"][0] == "1" and seen["destroy"][0] == "1", seen
    assert seen["max"][:2] == ["0", str(NOT_IMPLEMENTED)] and "MAX" in seen["max"][2], seen
    for what, function in (("zeros", "ncclCommInitRank"), ("init_fails", "ncclCommInitRank"),
                           ("id_fails", "ncclGetUniqueId")):
        assert seen[what][:2] == ["0", str(DEVICE_ERROR)], (what, seen[what])
        assert f"{function} failed" in seen[what][2], (what, seen[what])


def test_a_failing_nccl_call_fails_every_later_collective_across_processes(tmp_path):
    (made,) = rank_children([["id"]], engine_env())
    uid = made["ID"][0]
    seen = rank_children([["rank", "0", uid], ["rank", "1", uid]],
                         {**engine_env(), "FAKE_NCCL_FAIL": "ncclAllReduce"})
    for rank, record in enumerate(seen):
        assert record["create"][0] == "1", (rank, record)
        assert record["failing"][:2] == ["0", str(DEVICE_ERROR)], (rank, record)
        assert "ncclAllReduce" in record["failing"][2], (rank, record)
        assert record["after"][:2] == ["0", str(DEVICE_ERROR)], (rank, record)
        assert "lost its NCCL communicator" in record["after"][2], (rank, record)
        assert record["destroy"][0] == "1", (rank, record)


def test_without_the_engines_rank_communicators_are_not_implemented(tmp_path):
    (seen,) = rank_children([["single"]], {"AETHERCL_VENDOR_ENGINES": "0"})
    for what in ("unique_id", "create"):
        assert seen[what][:2] == ["0", str(NOT_IMPLEMENTED)], (what, seen[what])
        assert "the vendor engines are not loaded" in seen[what][2], (what, seen[what])
