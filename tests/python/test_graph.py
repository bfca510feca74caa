"""Graphs against their contract (driver.h, "Graphs"): a replay gives bit for bit
what the same calls give eagerly (random sequences of seed ops, a user kernel, aethercl_gemm, a
training op with scratch memory, pinned asynchronous transfers), replays read the buffers' current
contents, every refusal during a capture names it and leaves it valid, memory a graph names stays
allocated (and is not handed to new allocations) until the graph is destroyed, launches of one
graph are ordered across streams, captures on many threads are independent, shutdown_driver
destroys graphs, and aethercl_graph_info counts what was recorded.

Tolerances: none. Every comparison is bitwise (uint32 views), since a replay runs the very kernels
with the very arguments the eager calls enqueue; the only float reference (the first test) checks
that the eager sequence computes something, against NumPy float64 with rtol 1e-5 (float32 adds
and products of a few terms err by a few ulps)."""
import ctypes
import json
import threading

import numpy as np
import pytest

from aethercl import Stream
from aethercl.abi import AetherclArg
from aethercl import gemm as G
from aethercl import train_types as T
from support.helpers import run_child

C_INVALID_ARGUMENT, C_INVALID_HANDLE = 1, 2
R, C = 7, 13          # odd shapes: rows x cols of every row-wise op
N = R * C             # elements of every buffer of the op sequences
BUFFERS = 6

KERNEL_SOURCE = b"""
__kernel void scale_add(__global const float* x, __global float* y, float s, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = y[i] * s + x[i];
}
"""


# ---- helpers ---------------------------------------------------------------------------------
def _error(lib):
    return lib.last_error_code(), lib.last_error()


def _bits(array):
    return np.ascontiguousarray(array, np.float32).view(np.uint32)


def _upload(lib, index, handle, array):
    data = np.ascontiguousarray(array, np.float32)
    lib.check("write_host_to_gpu_blocking", index, handle, 0, data.nbytes, data.ctypes.data)


def _download(lib, index, handle, count=N):
    out = np.empty(count, np.float32)
    lib.check("read_gpu_to_host_blocking", index, handle, 0, out.nbytes, out.ctypes.data)
    return out


def _info(lib, graph):
    size = lib.aethercl_graph_info(graph, None, 0)
    assert size > 0, lib.last_error()
    raw = ctypes.create_string_buffer(size + 1)
    assert lib.aethercl_graph_info(graph, raw, size + 1) == size
    return json.loads(raw.value.decode())


class Buffers:
    """BUFFERS float32 buffers of N elements plus the optimizer's moments (kept non-negative)."""

    def __init__(self, lib, index):
        self.lib, self.index = lib, index
        self.handles = [lib.check_handle("allocate_gpu_memory", index, N * 4)
                        for _ in range(BUFFERS)]
        self.m = lib.check_handle("allocate_gpu_memory", index, N * 4)
        self.v = lib.check_handle("allocate_gpu_memory", index, N * 4)

    def all(self):
        return self.handles + [self.m, self.v]

    def fill(self, rng):
        """Random contents (the same for every call with an equal generator state)."""
        for handle in self.handles:
            _upload(self.lib, self.index, handle, rng.standard_normal(N).astype(np.float32))
        _upload(self.lib, self.index, self.m, rng.standard_normal(N).astype(np.float32) * 0.1)
        _upload(self.lib, self.index, self.v, np.abs(rng.standard_normal(N)).astype(np.float32))
        self.lib.check("aethercl_synchronize", self.index)

    def read(self):
        self.lib.check("aethercl_synchronize", self.index)
        return [_download(self.lib, self.index, handle) for handle in self.all()]

    def free(self):
        for handle in self.all():
            self.lib.free_gpu_memory(self.index, handle)


@pytest.fixture(scope="module")
def user_kernel(lib, device):
    program = lib.aethercl_program_create(device.index, KERNEL_SOURCE, b"")
    assert program, lib.last_error()
    kernel = lib.aethercl_kernel_create(program, b"scale_add")
    assert kernel, lib.last_error()
    yield kernel
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(program)


def _launch_user(lib, index, kernel, x, y, scale, stream):
    """scale_add(x, y, scale, N) through aethercl_launch on stream."""
    s = ctypes.c_float(scale)
    n = ctypes.c_uint32(N)
    args = (AetherclArg * 4)()
    args[0] = AetherclArg(0, 8, x)
    args[1] = AetherclArg(0, 8, y)
    args[2] = AetherclArg(1, 4, ctypes.addressof(s))
    args[3] = AetherclArg(1, 4, ctypes.addressof(n))
    return lib.aethercl_launch(index, kernel, stream, 1, (ctypes.c_size_t * 1)(N), None, 4, args)


SEED_OPS = ("add", "mul", "gelu", "layernorm", "softmax", "matmul", "transpose", "adam")
EXTRA_OPS = ("user_kernel", "gemm", "norm_backward", "unary")


def make_sequence(lib, index, bufs, rng, length, stream, kernel=None, names=SEED_OPS):
    """length random ops over bufs as (name, thunk) pairs; each thunk returns the C result. Seed
    ops run on the calling thread's current stream, the others are given stream."""
    ops = []
    keep = []  # descriptors must outlive the thunks

    def pick(k):
        return [bufs.handles[i] for i in rng.choice(BUFFERS, k, replace=False)]

    for _ in range(length):
        name = str(rng.choice(names))
        if name == "add":
            a, b, c = pick(3)
            ops.append((name, lambda a=a, b=b, c=c: lib.execute_add_on_gpu(index, a, b, c, N)))
        elif name == "mul":
            a, b, c = pick(3)
            ops.append((name, lambda a=a, b=b, c=c: lib.execute_mul_on_gpu(index, a, b, c, N)))
        elif name == "gelu":
            a, c = pick(2)
            ops.append((name, lambda a=a, c=c: lib.execute_gelu_on_gpu(index, a, c, N)))
        elif name == "layernorm":
            a, c = pick(2)
            ops.append((name, lambda a=a, c=c: lib.execute_layernorm_on_gpu(index, a, c, R, C,
                                                                            ctypes.c_float(1e-5))))
        elif name == "softmax":
            a, c = pick(2)
            ops.append((name, lambda a=a, c=c: lib.execute_softmax_on_gpu(index, a, c, R, C)))
        elif name == "matmul":
            a, b, c = pick(3)  # (R x C) @ (C x R) -> R x R in the first R*R elements of c
            ops.append((name, lambda a=a, b=b, c=c: lib.execute_matmul_on_gpu(index, a, b, c, 1,
                                                                              R, R, C)))
        elif name == "transpose":
            a, c = pick(2)
            ops.append((name, lambda a=a, c=c: lib.execute_transpose_on_gpu(index, a, c, R, C)))
        elif name == "adam":
            p, g = pick(2)
            t = int(rng.integers(1, 5))
            ops.append((name, lambda p=p, g=g, t=t: lib.execute_adam_update_on_gpu(
                index, p, g, bufs.m, bufs.v, N, t, ctypes.c_float(1e-2), ctypes.c_float(0.9),
                ctypes.c_float(0.999), ctypes.c_float(1e-8), ctypes.c_float(0.01))))
        elif name == "user_kernel":
            x, y = pick(2)
            scale = float(rng.uniform(0.5, 1.5))
            ops.append((name, lambda x=x, y=y, s=scale: _launch_user(lib, index, kernel, x, y, s,
                                                                     stream)))
        elif name == "gemm":
            a, b, c = pick(3)
            desc = G.gemm_desc(a, b, c, R, R, C, alpha=0.75, beta=0.5, compute=G.COMPUTE_FP32)
            keep.append(desc)
            ops.append((name, lambda d=desc: lib.aethercl_gemm(index, ctypes.byref(d), stream)))
        elif name == "norm_backward":  # a training op with scratch memory (its statistics)
            x, dy, dx = pick(3)
            desc = T.NormDesc(kind=T.NORM_LAYER, rows=R, cols=C, eps=1e-5, x=x, dy=dy, dx=dx)
            keep.append(desc)
            ops.append((name, lambda d=desc: lib.aethercl_norm_backward(index, ctypes.byref(d),
                                                                        stream)))
        elif name == "unary":
            x, y = pick(2)
            ops.append((name, lambda x=x, y=y: lib.aethercl_unary(
                index, T.UNARY["tanh"], x, y, N, ctypes.c_float(0.0), stream)))
    return _Sequence(ops, keep)


class _Sequence(list):
    def __init__(self, ops, keep):
        super().__init__(ops)
        self.keep = keep

    def run(self, lib):
        for name, thunk in self:
            assert thunk() == 1, f"{name}: {lib.last_error()}"


def _eager_and_replay(lib, device, rng, length, names, kernel=None, replays=3):
    """Runs one random sequence eagerly and as a graph on a stream, from equal inputs, and
    returns (eager results, replay results) per round of fresh inputs."""
    index = device.index
    bufs = Buffers(lib, index)
    stream = Stream(device)
    sequence = make_sequence(lib, index, bufs, rng, length, stream.handle, kernel, names)
    seed = int(rng.integers(1 << 30))
    try:
        with stream:
            assert lib.aethercl_graph_capture_begin(index, stream.handle) == 1, lib.last_error()
            sequence.run(lib)
            graph = lib.aethercl_graph_capture_end(index, stream.handle)
        assert graph, lib.last_error()
        rounds = []
        for round_ in range(replays):
            bufs.fill(np.random.default_rng(seed + round_))
            with stream:
                sequence.run(lib)
            eager = bufs.read()
            bufs.fill(np.random.default_rng(seed + round_))
            assert lib.aethercl_graph_launch(graph, stream.handle) == 1, lib.last_error()
            replayed = bufs.read()
            rounds.append((eager, replayed))
        info = _info(lib, graph)
        assert lib.aethercl_graph_destroy(graph) == 1, lib.last_error()
        return rounds, sequence, info
    finally:
        stream.destroy()
        bufs.free()


def _assert_bitwise(rounds, sequence):
    names = [name for name, _ in sequence]
    for eager, replayed in rounds:
        for i, (e, r) in enumerate(zip(eager, replayed)):
            assert np.array_equal(_bits(e), _bits(r)), f"buffer {i} differs after {names}"


@pytest.fixture(params=["command-buffer", "batch"])
def replay_path(request, monkeypatch):
    """Runs a test with each replay path: the device's command buffers (cl_khr_command_buffer,
    where it has it; graphs with host transfers use batches anyway) and the batch path that
    AETHERCL_GRAPH_COMMAND_BUFFER=0 forces (read when a graph is first launched)."""
    if request.param == "batch":
        monkeypatch.setenv("AETHERCL_GRAPH_COMMAND_BUFFER", "0")
    return request.param


# ---- replay equals eager ---------------------------------------------------------------------
def test_a_captured_sequence_is_recorded_not_run(lib, device, rng):
    index = device.index
    a = lib.check_handle("allocate_gpu_memory", index, N * 4)
    b = lib.check_handle("allocate_gpu_memory", index, N * 4)
    c = lib.check_handle("allocate_gpu_memory", index, N * 4)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    _upload(lib, index, a, x)
    _upload(lib, index, b, y)
    _upload(lib, index, c, np.full(N, np.nan, np.float32))
    assert lib.aethercl_graph_capture_begin(index, None) == 1, lib.last_error()
    assert lib.execute_add_on_gpu(index, a, b, c, N) == 1
    assert lib.execute_mul_on_gpu(index, c, b, a, N) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    assert graph, lib.last_error()
    assert np.isnan(_download(lib, index, c)).all()  # nothing ran
    assert np.array_equal(_download(lib, index, a), x)
    assert lib.aethercl_graph_launch(graph, None) == 1, lib.last_error()
    expected_c = (x.astype(np.float64) + y).astype(np.float32)
    np.testing.assert_allclose(_download(lib, index, c), expected_c, rtol=1e-6)
    np.testing.assert_allclose(_download(lib, index, a), expected_c.astype(np.float64) * y,
                               rtol=1e-5)
    assert _info(lib, graph) == {"device": index, "nodes": 2, "kernels": 2, "bytes_held": 0}
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b, c):
        lib.free_gpu_memory(index, handle)


@pytest.mark.parametrize("seed", range(6))
def test_random_seed_op_sequences_replay_bit_for_bit(lib, device, replay_path, seed):
    rng = np.random.default_rng(1000 + seed)
    rounds, sequence, info = _eager_and_replay(lib, device, rng, 10, SEED_OPS)
    _assert_bitwise(rounds, sequence)
    assert info["nodes"] >= len(sequence) and info["kernels"] >= len(sequence)


@pytest.mark.parametrize("seed", range(4))
def test_sequences_with_user_kernels_gemm_and_training_ops_replay_bit_for_bit(
        lib, device, user_kernel, fp32_precision, replay_path, seed):
    rng = np.random.default_rng(2000 + seed)
    names = SEED_OPS + EXTRA_OPS + EXTRA_OPS  # the extras twice as likely
    rounds, sequence, info = _eager_and_replay(lib, device, rng, 12, names, user_kernel)
    _assert_bitwise(rounds, sequence)
    assert info["kernels"] >= len(sequence)


def test_every_extra_op_alone_replays_bit_for_bit(lib, device, user_kernel, fp32_precision,
                                                  replay_path):
    for name in EXTRA_OPS:
        rng = np.random.default_rng(abs(hash(name)) % (1 << 30))
        rounds, sequence, _ = _eager_and_replay(lib, device, rng, 3, (name,), user_kernel, 2)
        _assert_bitwise(rounds, sequence)


def test_scratch_of_captured_ops_is_held_by_the_graph(lib, device, rng, replay_path):
    """norm_backward's statistics live in scratch memory: the graph owns its own block (so
    bytes_held > 0) and replays on two streams, interleaved with eager calls of the same op that
    take scratch from the pool, still equal eager."""
    index = device.index
    bufs = Buffers(lib, index)
    x, dy, dx, dx2 = bufs.handles[:4]
    desc = T.NormDesc(kind=T.NORM_LAYER, rows=R, cols=C, eps=1e-5, x=x, dy=dy, dx=dx)
    eager_desc = T.NormDesc(kind=T.NORM_LAYER, rows=R, cols=C, eps=1e-5, x=x, dy=dy, dx=dx2)
    bufs.fill(rng)
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.aethercl_norm_backward(index, ctypes.byref(desc), None) == 1, lib.last_error()
    graph = lib.aethercl_graph_capture_end(index, None)
    info = _info(lib, graph)
    assert info["nodes"] == info["kernels"] >= 1 and info["bytes_held"] >= R * 2 * 4
    other = Stream(device)
    for round_ in range(4):
        target = other.handle if round_ % 2 else None
        assert lib.aethercl_graph_launch(graph, target) == 1, lib.last_error()
        assert lib.aethercl_norm_backward(index, ctypes.byref(eager_desc), None) == 1
        lib.check("aethercl_synchronize", index)
        assert np.array_equal(_bits(_download(lib, index, dx)), _bits(_download(lib, index, dx2)))
        _upload(lib, index, dx, np.zeros(N, np.float32))
    assert lib.aethercl_graph_destroy(graph) == 1
    other.destroy()
    bufs.free()


@pytest.mark.parametrize("narrowing", ["registers", "copies"])
def test_narrowed_products_replay_bit_for_bit(lib, device, rng, monkeypatch, replay_path,
                                              narrowing):
    """A BF16 product of float32 operands captured, on the emulated tensor-core kernels: rounded
    in the kernel's registers (the default; the graph holds no copy), or with
    AETHERCL_GEMM_NARROWING=copies narrowed into pool blocks first (gemm/narrow_operands.h; the
    graph holds the 16-bit copies). Replays on new A equal eager products."""
    monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    monkeypatch.setenv("AETHERCL_TENSOR_CORES", "emulate")
    monkeypatch.setenv("AETHERCL_GEMM_NARROWING", narrowing)
    index, m, n, k = device.index, 40, 24, 36
    a, b, c, c2 = (lib.check_handle("allocate_gpu_memory", index, 64 * 64 * 4) for _ in range(4))
    _upload(lib, index, b, rng.standard_normal(k * n).astype(np.float32))
    desc = G.gemm_desc(a, b, c, m, n, k, trans_b=0, compute=G.COMPUTE_MODES["bf16"])
    eager = G.gemm_desc(a, b, c2, m, n, k, trans_b=0, compute=G.COMPUTE_MODES["bf16"])
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.aethercl_gemm(index, ctypes.byref(desc), None) == 1, lib.last_error()
    graph = lib.aethercl_graph_capture_end(index, None)
    held = _info(lib, graph)["bytes_held"]
    assert held >= (m * k + k * n) * 2 if narrowing == "copies" else held == 0, held
    for _ in range(3):
        _upload(lib, index, a, rng.standard_normal(m * k).astype(np.float32))
        assert lib.aethercl_graph_launch(graph, None) == 1
        assert lib.aethercl_gemm(index, ctypes.byref(eager), None) == 1
        assert np.array_equal(_bits(_download(lib, index, c, m * n)),
                              _bits(_download(lib, index, c2, m * n)))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b, c, c2):
        lib.free_gpu_memory(index, handle)


# ---- replays read current contents -------------------------------------------------------------
def test_replays_read_the_current_contents_of_their_buffers(lib, device, rng, replay_path):
    index = device.index
    a, b, c = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(3))
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    assert lib.execute_softmax_on_gpu(index, b, c, R, C) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    for _ in range(3):
        x = rng.standard_normal(N).astype(np.float32)
        _upload(lib, index, a, x)
        assert lib.aethercl_graph_launch(graph, None) == 1
        replayed = _download(lib, index, c)
        assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
        assert lib.execute_softmax_on_gpu(index, b, c, R, C) == 1
        assert np.array_equal(_bits(replayed), _bits(_download(lib, index, c)))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b, c):
        lib.free_gpu_memory(index, handle)


def test_pinned_async_transfers_are_recorded_by_address(lib, device, rng):
    """write_async from and read_async into aethercl_host_alloc memory: each replay reads the
    pinned source as it is then and writes the pinned destination."""
    index = device.index
    stream = Stream(device)
    nbytes = N * 4
    src = lib.check_handle("aethercl_host_alloc", index, nbytes)
    dst = lib.check_handle("aethercl_host_alloc", index, nbytes)
    src_view = np.frombuffer((ctypes.c_float * N).from_address(src), np.float32)
    dst_view = np.frombuffer((ctypes.c_float * N).from_address(dst), np.float32)
    a, b = (lib.check_handle("allocate_gpu_memory", index, nbytes) for _ in range(2))
    s = stream.handle
    assert lib.aethercl_graph_capture_begin(index, s) == 1
    assert lib.aethercl_write_async(index, a, 0, nbytes, src, s) == 1, lib.last_error()
    with stream:
        assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    assert lib.aethercl_read_async(index, b, 0, nbytes, dst, s) == 1, lib.last_error()
    graph = lib.aethercl_graph_capture_end(index, s)
    assert _info(lib, graph)["nodes"] == 3 and _info(lib, graph)["kernels"] == 1
    for _ in range(3):
        x = rng.standard_normal(N).astype(np.float32)
        src_view[:] = x
        dst_view[:] = np.nan
        assert lib.aethercl_graph_launch(graph, s) == 1
        assert lib.aethercl_stream_synchronize(index, s) == 1
        replayed = dst_view.copy()
        _upload(lib, index, a, x)
        assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
        assert np.array_equal(_bits(replayed), _bits(_download(lib, index, b)))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b):
        lib.free_gpu_memory(index, handle)
    lib.check("aethercl_host_free", src)
    lib.check("aethercl_host_free", dst)
    stream.destroy()


def test_pinned_memory_a_graph_names_lives_with_the_graph(lib, device, rng):
    """aethercl_host_free of pinned memory a graph's transfers name: the pointer is invalid at once
    (a second free and a new transfer from it are refused), the memory stays for the replays
    (which read what it held: ASan builds would report a read of freed memory) and goes with the
    graph."""
    index = device.index
    stream = Stream(device)
    nbytes = N * 4
    src = lib.check_handle("aethercl_host_alloc", index, nbytes)
    x = rng.standard_normal(N).astype(np.float32)
    np.frombuffer((ctypes.c_float * N).from_address(src), np.float32)[:] = x
    a, b = (lib.check_handle("allocate_gpu_memory", index, nbytes) for _ in range(2))
    s = stream.handle
    assert lib.aethercl_graph_capture_begin(index, s) == 1
    assert lib.aethercl_write_async(index, a, 0, nbytes, src, s) == 1, lib.last_error()
    with stream:
        assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    graph = lib.aethercl_graph_capture_end(index, s)
    lib.check("aethercl_host_free", src)
    assert lib.aethercl_host_free(src) == 0 and "aethercl_host_alloc" in lib.last_error()
    _upload(lib, index, a, x)
    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    expected = _download(lib, index, b)
    for _ in range(2):
        _upload(lib, index, b, np.full(N, np.nan, np.float32))
        assert lib.aethercl_synchronize(index) == 1   # the poison lands before the replay
        assert lib.aethercl_graph_launch(graph, s) == 1
        assert lib.aethercl_stream_synchronize(index, s) == 1
        assert np.array_equal(_bits(_download(lib, index, b)), _bits(expected))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b):
        lib.free_gpu_memory(index, handle)
    stream.destroy()


def test_copies_fills_and_clones_are_recorded(lib, device, rng, replay_path):
    index = device.index
    a, b = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(2))
    x = rng.standard_normal(N).astype(np.float32)
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.aethercl_memset(index, b, 0, N * 4, 0, None) == 1
    assert lib.aethercl_copy(index, b, 0, a, 4, 40, None) == 1
    assert lib.execute_clone_on_gpu(index, b, a, 8) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    assert _info(lib, graph) == {"device": index, "nodes": 3, "kernels": 0, "bytes_held": 0}
    _upload(lib, index, a, x)
    _upload(lib, index, b, np.full(N, np.nan, np.float32))
    assert lib.aethercl_graph_launch(graph, None) == 1
    expected_b = np.zeros(N, np.float32)
    expected_b[:10] = x[1:11]
    expected_a = x.copy()
    expected_a[:2] = expected_b[:2]
    assert np.array_equal(_download(lib, index, b), expected_b)
    assert np.array_equal(_download(lib, index, a), expected_a)
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b):
        lib.free_gpu_memory(index, handle)


# ---- refusals --------------------------------------------------------------------------------
def test_refusals_during_capture_name_it_and_keep_it_valid(lib, device, rng):
    index = device.index
    stream = Stream(device)
    s = stream.handle
    a, b = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(2))
    host = np.zeros(N, np.float32)
    x = rng.standard_normal(N).astype(np.float32)
    _upload(lib, index, a, x)
    lib.check("aethercl_synchronize", index)
    other = Stream(device)
    event = lib.check_handle("aethercl_event_record", index, other.handle)
    assert lib.aethercl_graph_capture_begin(index, s) == 1
    with stream:
        assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    refused = {
        "read_gpu_to_host_blocking": lambda: lib.read_gpu_to_host_blocking(
            index, b, 0, 16, host.ctypes.data),
        "write_host_to_gpu_blocking": lambda: lib.write_host_to_gpu_blocking(
            index, b, 0, 16, host.ctypes.data),
        "aethercl_synchronize": lambda: lib.aethercl_synchronize(index),
        "aethercl_stream_synchronize": lambda: lib.aethercl_stream_synchronize(index, s),
        "aethercl_event_record": lambda: lib.aethercl_event_record(index, s),
        "aethercl_stream_wait_event": lambda: lib.aethercl_stream_wait_event(index, s, event),
        "aethercl_stream_destroy": lambda: lib.aethercl_stream_destroy(index, s),
        "aethercl_write_async": lambda: lib.aethercl_write_async(index, b, 0, 16,
                                                                 host.ctypes.data, s),
        "aethercl_read_async": lambda: lib.aethercl_read_async(index, b, 0, 16,
                                                               host.ctypes.data, s),
        "aethercl_graph_capture_begin": lambda: lib.aethercl_graph_capture_begin(index, s),
    }
    for name, call in refused.items():
        seed_read_or_write = name.endswith("_blocking")
        with stream if seed_read_or_write else _nothing():
            result = call()
            code, message = _error(lib)  # leaving the block clears the last error
        assert not result, name
        assert code == C_INVALID_ARGUMENT, (name, code, message)
        assert "captur" in message, (name, message)
        assert message.startswith(name + ": "), (name, message)
    # Refused by its own validation first: a refusal stays the eager refusal and records nothing.
    with stream:
        assert lib.execute_add_on_gpu(index, a, None, b, N) == 0
        assert lib.last_error_code() != 0 and "captur" not in lib.last_error()
        assert lib.execute_add_on_gpu(index, a, a, b, N) == 1  # b = 2x after gelu: still valid
    graph = lib.aethercl_graph_capture_end(index, s)
    assert graph, lib.last_error()
    assert _info(lib, graph)["nodes"] == 2
    # Other streams and the synchronising calls work again once the capture has ended.
    assert lib.aethercl_graph_launch(graph, s) == 1
    assert lib.aethercl_stream_synchronize(index, s) == 1
    assert np.array_equal(_download(lib, index, b), (x.astype(np.float32) * 2).astype(np.float32))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b):
        lib.free_gpu_memory(index, handle)
    lib.check("aethercl_event_destroy", event)
    other.destroy()
    stream.destroy()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_work_on_other_streams_runs_during_a_capture(lib, device, rng):
    index = device.index
    stream = Stream(device)
    a, b = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(2))
    x = rng.standard_normal(N).astype(np.float32)
    assert lib.aethercl_graph_capture_begin(index, stream.handle) == 1
    _upload(lib, index, a, x)  # the default stream is not capturing
    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    eager = _download(lib, index, b)
    graph = lib.aethercl_graph_capture_end(index, stream.handle)
    assert _info(lib, graph)["nodes"] == 0
    assert lib.aethercl_graph_launch(graph, None) == 1  # an empty graph
    assert np.isfinite(eager).all()
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (a, b):
        lib.free_gpu_memory(index, handle)
    stream.destroy()


def test_nested_begin_and_end_without_begin_are_refused(lib, device):
    index = device.index
    assert lib.aethercl_graph_capture_end(index, None) is None
    code, message = _error(lib)
    assert code == C_INVALID_ARGUMENT and "not capturing" in message
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.aethercl_graph_capture_begin(index, None) == 0
    code, message = _error(lib)
    assert code == C_INVALID_ARGUMENT and "already capturing" in message
    graph = lib.aethercl_graph_capture_end(index, None)
    assert graph, lib.last_error()
    assert lib.aethercl_graph_capture_end(index, None) is None
    assert "not capturing" in lib.last_error()
    assert lib.aethercl_graph_destroy(graph) == 1


def test_graph_tokens_are_validated(lib, device):
    index = device.index
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    assert lib.aethercl_graph_destroy(graph) == 1
    for call in (lambda g: lib.aethercl_graph_launch(g, None), lib.aethercl_graph_destroy,
                 lambda g: lib.aethercl_graph_info(g, None, 0)):
        assert not call(graph)
        code, message = _error(lib)
        assert code == C_INVALID_HANDLE and "destroyed" in message and "graph" in message
        assert not call(None)
        assert lib.last_error_code() == C_INVALID_ARGUMENT and "NULL" in lib.last_error()
        assert not call(0x1234)
        assert lib.last_error_code() == C_INVALID_HANDLE
        stream = Stream(device)
        assert not call(stream.handle)
        assert "a stream, not a graph" in lib.last_error()
        stream.destroy()
    bogus = Stream(device)
    assert lib.aethercl_graph_capture_begin(index, 0x77) == 0
    assert lib.last_error_code() == C_INVALID_HANDLE
    bogus.destroy()
    assert lib.aethercl_graph_capture_begin(index, bogus.handle) == 0
    assert "destroyed" in lib.last_error()


def test_launching_into_a_capturing_stream_is_refused(lib, device):
    index = device.index
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    stream = Stream(device)
    assert lib.aethercl_graph_capture_begin(index, stream.handle) == 1
    assert lib.aethercl_graph_launch(graph, stream.handle) == 0
    code, message = _error(lib)
    assert code == C_INVALID_ARGUMENT and "capturing" in message
    inner = lib.aethercl_graph_capture_end(index, stream.handle)
    assert _info(lib, inner)["nodes"] == 0
    for g in (graph, inner):
        assert lib.aethercl_graph_destroy(g) == 1
    stream.destroy()


def test_a_call_that_fails_part_way_records_nothing(lib, device, rng):
    """A refusal after validation (here: the seed read refused by the capture) leaves no node."""
    index = device.index
    a = lib.check_handle("allocate_gpu_memory", index, N * 4)
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    host = np.zeros(4, np.float32)
    assert lib.read_gpu_to_host_blocking(index, a, 0, 16, host.ctypes.data) == 0
    assert lib.execute_gelu_on_gpu(index, a, a, 0) == 1  # zero work: nothing recorded either
    graph = lib.aethercl_graph_capture_end(index, None)
    assert _info(lib, graph)["nodes"] == 0
    assert lib.aethercl_graph_destroy(graph) == 1
    lib.free_gpu_memory(index, a)


# ---- memory ----------------------------------------------------------------------------------
def test_buffers_freed_during_and_after_capture_stay_valid_for_replays(lib, device, rng):
    index = device.index
    stats = lambda: json.loads(lib.json_call("aethercl_memory_stats", index))  # noqa: E731
    a, b, out = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(3))
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    _upload(lib, index, b, y)
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    temp = lib.check_handle("allocate_gpu_memory", index, N * 4)  # allocated during the capture
    assert lib.execute_gelu_on_gpu(index, a, temp, N) == 1
    assert lib.execute_add_on_gpu(index, temp, b, out, N) == 1
    lib.free_gpu_memory(index, temp)  # freed during the capture: the handle is dead at once
    assert lib.last_error_code() == 0, lib.last_error()
    assert lib.execute_gelu_on_gpu(index, temp, b, N) == 0
    assert lib.last_error_code() == C_INVALID_HANDLE
    graph = lib.aethercl_graph_capture_end(index, None)
    held = _info(lib, graph)["bytes_held"]
    assert held >= N * 4
    lib.free_gpu_memory(index, b)  # freed after the capture, before any replay
    assert _info(lib, graph)["bytes_held"] >= held + N * 4
    assert lib.execute_gelu_on_gpu(index, b, a, N) == 0
    assert lib.last_error_code() == C_INVALID_HANDLE

    # New allocations of the same size never get the kept memory: NaN written to them must not
    # reach the replays, which equal the eager calls on fresh buffers.
    fresh = [lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(4)]
    for handle in fresh:
        _upload(lib, index, handle, np.full(N, np.nan, np.float32))
    _upload(lib, index, a, x)
    for _ in range(3):
        assert lib.aethercl_graph_launch(graph, None) == 1
        replayed = _download(lib, index, out)
        for handle in fresh:
            _upload(lib, index, handle, np.full(N, np.nan, np.float32))
    t2, b2, out2 = fresh[:3]
    _upload(lib, index, b2, y)
    assert lib.execute_gelu_on_gpu(index, a, t2, N) == 1
    assert lib.execute_add_on_gpu(index, t2, b2, out2, N) == 1
    assert np.isfinite(replayed).all()
    assert np.array_equal(_bits(replayed), _bits(_download(lib, index, out2)))
    reserved = stats()["bytes_reserved"]
    assert lib.aethercl_graph_destroy(graph) == 1
    assert stats()["bytes_reserved"] <= reserved - 2 * N * 4  # the kept blocks are back
    for handle in fresh + [a, out]:
        lib.free_gpu_memory(index, handle)


def test_memory_the_capture_allocated_and_freed_serves_its_later_allocations(lib, device, rng,
                                                                              replay_path):
    """A buffer allocated and freed during the capture hands its block to the capture's next
    allocation of the same size (as a training step's intermediates and the ops' scratch do), so
    a captured step holds one block where it would hold one per intermediate; a buffer allocated
    before the capture and freed during it is not reused (the next replay reads it again). The
    replays equal the eager calls."""
    index = device.index
    size = 5 * 4096 + 12  # a size class no other test uses
    count = size // 4
    x = rng.standard_normal(count).astype(np.float32)
    before = lib.check_handle("allocate_gpu_memory", index, size)  # the input, written once
    outs = [lib.check_handle("allocate_gpu_memory", index, size) for _ in range(3)]
    _upload(lib, index, before, x)
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    mems = []
    source = before
    for out in outs:
        temp = lib.check_handle("allocate_gpu_memory", index, size)
        mems.append(lib.aethercl_cl_mem(index, temp))
        assert lib.execute_gelu_on_gpu(index, source, temp, count) == 1
        assert lib.execute_add_on_gpu(index, temp, source, out, count) == 1
        lib.free_gpu_memory(index, temp)
        source = out
    lib.free_gpu_memory(index, before)  # read by the first op of every replay: never reused
    late = lib.check_handle("allocate_gpu_memory", index, size)
    assert lib.execute_gelu_on_gpu(index, outs[-1], late, count) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    assert mems[0] == mems[1] == mems[2], mems  # one block served the three intermediates
    assert lib.aethercl_cl_mem(index, late) == mems[0]  # and then a buffer that outlives it
    assert lib.aethercl_cl_mem(index, late) != 0
    # Held for the graph alone: the input (freed during the capture); the intermediates' block
    # belongs to `late` now.
    assert size <= _info(lib, graph)["bytes_held"] < 2 * size, _info(lib, graph)
    for _ in range(2):
        assert lib.aethercl_graph_launch(graph, None) == 1
        replayed = [_download(lib, index, h, count) for h in outs + [late]]
    # Eager, on fresh buffers.
    a = lib.check_handle("allocate_gpu_memory", index, size)
    _upload(lib, index, a, x)
    source, eager = a, []
    for _ in outs:
        t = lib.check_handle("allocate_gpu_memory", index, size)
        o = lib.check_handle("allocate_gpu_memory", index, size)
        assert lib.execute_gelu_on_gpu(index, source, t, count) == 1
        assert lib.execute_add_on_gpu(index, t, source, o, count) == 1
        eager.append(o)
        source = o
    last = lib.check_handle("allocate_gpu_memory", index, size)
    assert lib.execute_gelu_on_gpu(index, source, last, count) == 1
    for got, handle in zip(replayed, eager + [last]):
        assert np.array_equal(_bits(got), _bits(_download(lib, index, handle, count)))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in outs + [late, a, last] + eager:
        lib.free_gpu_memory(index, handle)


def test_a_freed_buffer_is_not_reused_while_a_graph_names_it(lib, device, rng):
    """The pool hands a freed block of the same size class to the next allocation on the same
    stream at once; while a graph names the block that must not happen."""
    index = device.index
    size = 3 * 4096 + 4  # a size class no other test uses
    a = lib.check_handle("allocate_gpu_memory", index, size)
    b = lib.check_handle("allocate_gpu_memory", index, size)
    mem_b = lib.aethercl_cl_mem(index, b)
    lib.check("aethercl_empty_cache", index)  # so b's block would be the only cached one
    assert lib.aethercl_graph_capture_begin(index, None) == 1
    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
    graph = lib.aethercl_graph_capture_end(index, None)
    lib.free_gpu_memory(index, b)
    again = lib.check_handle("allocate_gpu_memory", index, size)
    assert lib.aethercl_cl_mem(index, again) != mem_b
    lib.free_gpu_memory(index, again)
    lib.check("aethercl_empty_cache", index)  # drops `again`'s block; b's is not in the cache
    assert lib.aethercl_graph_destroy(graph) == 1
    # Without the graph the block goes back to the pool and serves the stream again (the control
    # that shows the check above could fail).
    reused = lib.check_handle("allocate_gpu_memory", index, size)
    assert lib.aethercl_cl_mem(index, reused) == mem_b
    for handle in (reused, a):
        lib.free_gpu_memory(index, handle)


def test_destroy_with_a_launch_pending_is_safe(lib, device, rng, replay_path):
    index = device.index
    stream = Stream(device)
    big = 1 << 20
    a, b = (lib.check_handle("allocate_gpu_memory", index, big * 4) for _ in range(2))
    _upload_big = np.ones(big, np.float32)
    lib.check("write_host_to_gpu_blocking", index, a, 0, big * 4, _upload_big.ctypes.data)
    lib.check("aethercl_synchronize", index)
    with stream:
        assert lib.aethercl_graph_capture_begin(index, stream.handle) == 1
        for _ in range(8):
            assert lib.execute_gelu_on_gpu(index, a, b, big) == 1
            assert lib.execute_add_on_gpu(index, b, a, a, big) == 1
        graph = lib.aethercl_graph_capture_end(index, stream.handle)
    lib.free_gpu_memory(index, a)  # the graph alone keeps a now
    for _ in range(3):
        assert lib.aethercl_graph_launch(graph, stream.handle) == 1
    assert lib.aethercl_graph_destroy(graph) == 1  # launches still queued
    assert lib.aethercl_stream_synchronize(index, stream.handle) == 1, lib.last_error()
    out = np.empty(16, np.float32)
    lib.check("read_gpu_to_host_blocking", index, b, 0, 64, out.ctypes.data)
    assert np.isfinite(out).all()
    lib.free_gpu_memory(index, b)
    stream.destroy()


# ---- ordering, streams, threads ----------------------------------------------------------------
def test_launches_of_one_graph_are_ordered_across_streams(lib, device, rng, replay_path):
    """acc += x (in place) replayed on alternating streams without host waits: every replay sees
    the previous one's result, so the sum is exact."""
    index = device.index
    streams = [Stream(device) for _ in range(3)]
    acc, one = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(2))
    _upload(lib, index, acc, np.zeros(N, np.float32))
    _upload(lib, index, one, np.ones(N, np.float32))
    lib.check("aethercl_synchronize", index)
    with streams[0]:
        assert lib.aethercl_graph_capture_begin(index, streams[0].handle) == 1
        for _ in range(4):
            assert lib.execute_add_on_gpu(index, acc, one, acc, N) == 1
        graph = lib.aethercl_graph_capture_end(index, streams[0].handle)
    replays = 12
    for i in range(replays):
        assert lib.aethercl_graph_launch(graph, streams[i % 3].handle) == 1
    last = streams[(replays - 1) % 3]
    assert lib.aethercl_stream_synchronize(index, last.handle) == 1
    assert np.array_equal(_download(lib, index, acc), np.full(N, 4 * replays, np.float32))
    assert lib.aethercl_graph_destroy(graph) == 1
    for handle in (acc, one):
        lib.free_gpu_memory(index, handle)
    for stream in streams:
        stream.destroy()


def test_two_graphs_on_two_streams(lib, device, rng, replay_path):
    index = device.index
    s1, s2 = Stream(device), Stream(device)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    a1, b1, a2, b2 = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(4))
    _upload(lib, index, a1, x)
    _upload(lib, index, a2, y)
    lib.check("aethercl_synchronize", index)
    assert lib.aethercl_graph_capture_begin(index, s1.handle) == 1
    assert lib.aethercl_graph_capture_begin(index, s2.handle) == 1  # independent captures
    with s1:
        assert lib.execute_gelu_on_gpu(index, a1, b1, N) == 1
    with s2:
        assert lib.execute_softmax_on_gpu(index, a2, b2, R, C) == 1
        assert lib.execute_transpose_on_gpu(index, b2, a2, R, C) == 1
    g1 = lib.aethercl_graph_capture_end(index, s1.handle)
    g2 = lib.aethercl_graph_capture_end(index, s2.handle)
    assert _info(lib, g1)["nodes"] == 1 and _info(lib, g2)["nodes"] == 2
    assert lib.aethercl_graph_launch(g1, s1.handle) == 1
    assert lib.aethercl_graph_launch(g2, s2.handle) == 1
    lib.check("aethercl_synchronize", index)
    r1, r2 = _download(lib, index, b1), _download(lib, index, a2)
    _upload(lib, index, a2, y)
    assert lib.execute_gelu_on_gpu(index, a1, b1, N) == 1
    assert lib.execute_softmax_on_gpu(index, a2, b2, R, C) == 1
    assert lib.execute_transpose_on_gpu(index, b2, a2, R, C) == 1
    assert np.array_equal(_bits(r1), _bits(_download(lib, index, b1)))
    assert np.array_equal(_bits(r2), _bits(_download(lib, index, a2)))
    for g in (g1, g2):
        assert lib.aethercl_graph_destroy(g) == 1
    for handle in (a1, b1, a2, b2):
        lib.free_gpu_memory(index, handle)
    s1.destroy()
    s2.destroy()


def test_eight_threads_capture_on_their_own_streams(lib, device):
    index = device.index
    results, errors = {}, []
    barrier = threading.Barrier(8)

    def worker(t):
        try:
            rng = np.random.default_rng(500 + t)
            stream = Stream(device)
            a, b, c = (lib.check_handle("allocate_gpu_memory", index, N * 4) for _ in range(3))
            x = rng.standard_normal(N).astype(np.float32)
            with stream:
                _upload(lib, index, a, x)
                barrier.wait()
                assert lib.aethercl_graph_capture_begin(index, stream.handle) == 1, lib.last_error()
                for _ in range(3):
                    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1, lib.last_error()
                    assert lib.execute_layernorm_on_gpu(index, b, c, R, C,
                                                        ctypes.c_float(1e-5)) == 1
                    assert lib.execute_add_on_gpu(index, c, a, a, N) == 1
                graph = lib.aethercl_graph_capture_end(index, stream.handle)
                assert graph, lib.last_error()
                barrier.wait()  # every capture has ended: reads are allowed again
                assert _info(lib, graph)["nodes"] == 9
                assert lib.aethercl_graph_launch(graph, stream.handle) == 1
                replayed = _download(lib, index, a)
                _upload(lib, index, a, x)
                for _ in range(3):
                    assert lib.execute_gelu_on_gpu(index, a, b, N) == 1
                    assert lib.execute_layernorm_on_gpu(index, b, c, R, C,
                                                        ctypes.c_float(1e-5)) == 1
                    assert lib.execute_add_on_gpu(index, c, a, a, N) == 1
                eager = _download(lib, index, a)
            results[t] = np.array_equal(_bits(replayed), _bits(eager))
            assert lib.aethercl_graph_destroy(graph) == 1
            for handle in (a, b, c):
                lib.free_gpu_memory(index, handle)
            stream.destroy()
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append((t, repr(error)))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert results == {t: True for t in range(8)}


def test_the_command_buffer_path_is_taken_where_the_device_has_it(lib, device):
    """With cl_khr_command_buffer 0.9.0 (PoCL 3.1) a graph of kernels replays through a command
    buffer (the debug log says which path a device takes); AETHERCL_GRAPH_COMMAND_BUFFER=0 and a
    graph with a host transfer take the batch path. Results are checked by the suites above,
    which run with both paths."""
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    pocl_3 = "PoCL 3." in info.get("platform_version", "")  # has the extension at 0.9.0
    code = """
        import os
        lib.check("initialize_gpu", 0)
        n = 64
        a = lib.check_handle("allocate_gpu_memory", 0, n * 4)
        b = lib.check_handle("allocate_gpu_memory", 0, n * 4)
        assert lib.aethercl_graph_capture_begin(0, None) == 1
        assert lib.execute_gelu_on_gpu(0, a, b, n) == 1
        g = lib.aethercl_graph_capture_end(0, None)
        assert lib.aethercl_graph_launch(g, None) == 1
        assert lib.aethercl_graph_launch(g, None) == 1
        lib.check("aethercl_synchronize", 0)
        lib.shutdown_driver()
        print("ok")
    """
    import os
    for setting, expected in ((None, "through cl_khr_command_buffer"), ("0", None)):
        env = dict(os.environ, AETHERCL_LOG_LEVEL="debug")
        if setting is not None:
            env["AETHERCL_GRAPH_COMMAND_BUFFER"] = setting
        result = _run_with_env(code, env)
        assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
        if expected and not pocl_3 and "graph replays in batches" in result.stderr:
            pytest.skip("the device has no usable cl_khr_command_buffer: batches only")
        if expected:
            assert expected in result.stderr, result.stderr[-3000:]
        else:
            assert "through cl_khr_command_buffer" not in result.stderr


def _run_with_env(code, env):
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    prelude = textwrap.dedent(f"""
        import sys, ctypes
        sys.path.insert(0, {str(root / 'python_harness')!r})
        from aethercl import Library
        lib = Library()
    """)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_graphs_and_shutdown_driver():
    """shutdown_driver destroys live graphs and drops an unfinished capture; their tokens are
    dead afterwards, and the device works again after initialize_gpu."""
    result = run_child("""
        import json
        lib.check("initialize_gpu", 0)
        n = 1000
        a = lib.check_handle("allocate_gpu_memory", 0, n * 4)
        b = lib.check_handle("allocate_gpu_memory", 0, n * 4)
        s = lib.check_handle("aethercl_stream_create", 0, 0)
        assert lib.aethercl_graph_capture_begin(0, None) == 1
        assert lib.execute_gelu_on_gpu(0, a, b, n) == 1
        g = lib.aethercl_graph_capture_end(0, None)
        lib.free_gpu_memory(0, a)
        assert lib.aethercl_graph_launch(g, None) == 1
        assert lib.aethercl_graph_capture_begin(0, s) == 1   # never ended
        assert lib.aethercl_graph_capture_begin(0, None) == 1  # never ended either
        lib.shutdown_driver()
        assert lib.aethercl_graph_launch(g, None) == 0
        assert lib.aethercl_graph_destroy(g) == 0
        lib.check("initialize_gpu", 0)
        assert lib.aethercl_graph_destroy(g) == 0 and "destroyed" in lib.last_error()
        assert lib.aethercl_graph_capture_end(0, None) is None  # the capture went with shutdown
        stats = json.loads(lib.json_call("aethercl_memory_stats", 0))
        assert stats["live_buffers"] == 0 and stats["bytes_reserved"] == 0, stats
        c = lib.check_handle("allocate_gpu_memory", 0, 64)
        assert lib.aethercl_graph_capture_begin(0, None) == 1
        assert lib.aethercl_memset(0, c, 0, 64, 7, None) == 1
        g2 = lib.aethercl_graph_capture_end(0, None)
        assert lib.aethercl_graph_launch(g2, None) == 1
        out = (ctypes.c_ubyte * 64)()
        lib.check("read_gpu_to_host_blocking", 0, c, 0, 64, out)
        assert bytes(out) == bytes([7]) * 64
        lib.shutdown_driver()
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_launch_on_another_devices_stream_is_refused():
    """Two PoCL devices (POCL_DEVICES="pthread pthread", as tests/multi runs them)."""
    import os
    env_devices = os.environ.get("POCL_DEVICES")
    code = """
        import os
        count = lib.aethercl_device_count()
        if count < 2:
            print("skip: one device")
            raise SystemExit(0)
        lib.check("initialize_gpu", 0)
        lib.check("initialize_gpu", 1)
        s1 = lib.check_handle("aethercl_stream_create", 1, 0)
        assert lib.aethercl_graph_capture_begin(0, None) == 1
        g = lib.aethercl_graph_capture_end(0, None)
        assert lib.aethercl_graph_launch(g, s1) == 0
        message = lib.last_error()
        assert "belongs to device 1" in message and "device 0" in message, message
        assert lib.aethercl_graph_launch(g, None) == 1
        # A stream of device 1 cannot be captured through device 0 either.
        assert lib.aethercl_graph_capture_begin(0, s1) == 0
        assert lib.aethercl_graph_destroy(g) == 1
        lib.shutdown_driver()
        print("ok")
    """
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    env = dict(os.environ)
    if env_devices is None:
        env["POCL_DEVICES"] = "pthread pthread"
    root = Path(__file__).resolve().parents[2]
    prelude = textwrap.dedent(f"""
        import sys, ctypes
        sys.path.insert(0, {str(root / 'python_harness')!r})
        from aethercl import Library
        lib = Library()
    """)
    result = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    if result.stdout.strip().startswith("skip"):
        pytest.skip("only one device is visible (POCL_DEVICES gives one)")
    assert result.stdout.strip().endswith("ok"), result.stdout + result.stderr


# ---- the Python layer ------------------------------------------------------------------------
def test_python_graph_context_manager(lib, device, rng):
    import aethercl
    dev = aethercl.Device(device.index, lib)
    x = rng.standard_normal((R, C)).astype(np.float32)
    a = dev.from_numpy(x)
    b = dev.empty((R, C))
    with dev.stream() as stream, aethercl.graph(dev) as g:
        assert lib.execute_gelu_on_gpu(dev.index, a.handle, b.handle, N) == 1
    assert g.info() == {"device": dev.index, "nodes": 1, "kernels": 1, "bytes_held": 0}
    g.replay(stream)
    stream.synchronize()
    replayed = b.to_numpy().copy()
    assert lib.execute_gelu_on_gpu(dev.index, a.handle, b.handle, N) == 1
    assert np.array_equal(_bits(replayed), _bits(b.to_numpy()))
    g.close()
    g.close()  # idempotent
    with pytest.raises(ValueError):
        g.replay()
    # A block that raises leaves no capture behind and no graph.
    with pytest.raises(RuntimeError):
        with dev.graph() as failed:
            raise RuntimeError("inside")
    assert failed.handle is None
    assert lib.aethercl_graph_capture_end(dev.index, None) is None
    # Refusals surface as InvalidArgumentError naming the capture.
    with dev.graph() as g2:
        with pytest.raises(aethercl.InvalidArgumentError, match="captur"):
            dev.synchronize()
    g2.close()
    stream.destroy()
