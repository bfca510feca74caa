"""Every Python call that issues work runs on the calling thread's current stream (issue 29,
part 1): one workload touching every op family of aethercl (your own kernels, dispatch, gemm,
conversions, the training ops) and of ocl_llm (layers, losses, optimizers, the transformer) gives
the same bits inside `with Stream(dev):` while the default stream is busy as it gives plainly,
and the kernel log shows every launch of the block on the block's stream. An explicit stream=
still wins; the generated aethercl.ops keep C's contract (None is the default stream).

Before the fix the training ops and kernel launches passed NULL (the default stream) and raced
the seed ops, which followed the current stream: the log check fails deterministically then, the
bit comparison whenever the busy default stream holds the training ops back (nearly always)."""
import numpy as np
import pytest

import aethercl
from aethercl import Stream, gemm, ops
from aethercl import train as T
import ocl_llm as L
from ocl_llm import functional as F
from ocl_llm import ocl_initialize, ocl_shutdown
from ocl_llm.layers import (AvgPool2d, BatchNorm2d, Conv2d, Dropout, Flatten, GELU, LayerNorm,
                            Linear, MaxPool2d, ReLU, Sequential, Tanh)
from ocl_llm.optimizers import SGD, AdamW, clip_grad_norm
from ocl_llm.tensor import OclTensor

KERNELS = """
__kernel void spin(__global float* out, uint iters) {
    float a = (float)get_global_id(0);
    for (uint i = 0; i < iters; ++i) a = a * 0.9999999f + 1.0f;
    out[get_global_id(0)] = a;
}
__kernel void scale(__global const float* src, __global float* dst, float k) {
    size_t i = get_global_id(0);
    dst[i] = k * src[i];
}
__kernel void marker(__global float* out) { out[0] = 0.0f; }
"""
SPIN_ITEMS, SPIN_ITERS = 8, 4_000_000  # a few hundred milliseconds of PoCL on a shared core


@pytest.fixture
def dev(device):
    ocl_initialize(device.index, verbose=False)
    yield L.current_device()
    ocl_shutdown(shutdown_driver=False)


@pytest.fixture
def kernels(dev):
    program = dev.compile(KERNELS)
    yield {name: program.kernel(name) for name in ("spin", "scale", "marker")}


def _aethercl_families(dev, kernels, out):
    rng = np.random.default_rng(11)
    a = dev.from_numpy(rng.standard_normal((16, 24)).astype(np.float32))
    b = dev.from_numpy(rng.standard_normal((24, 8)).astype(np.float32))
    c = dev.empty((16, 8))
    gemm.gemm(dev.lib, dev.index, gemm.gemm_desc(a.handle, b.handle, c.handle, 16, 8, 24))
    scaled = dev.empty((16, 8))
    kernels["scale"](128, None, c, scaled, np.float32(3.0))           # reads the product
    again = dev.empty((16, 8))
    dev.dispatch(kernels["scale"], scaled, again, np.float32(0.5), groups=8, local=16)
    half = again.astype(np.float16).astype(np.float32)                 # aethercl_convert, twice
    relu = dev.empty((16, 8))
    T.unary(dev, "relu", half, relu, 128)
    noise = dev.empty((16, 8))
    T.rng_fill(dev, noise, 128, 2, 0.0, 1.0, seed=5)
    prod = dev.empty((16, 8))
    T.binary(dev, "mul", T.broadcast_desc((16, 8), (16, 8), relu, noise, prod))
    total = dev.empty((8,))
    T.reduce(dev, 0, prod, total, (16, 8), 0)
    for name, buffer in (("gemm", c), ("kernel", scaled), ("dispatch", again), ("convert", half),
                         ("unary", relu), ("rng", noise), ("binary", prod), ("reduce", total)):
        out["aethercl." + name] = buffer


def _ocl_llm_families(out):
    rng = np.random.default_rng(12)
    model = Sequential(Conv2d(2, 4, 3, padding=1, rng=rng), BatchNorm2d(4), ReLU(),
                       MaxPool2d(2), AvgPool2d(1), Flatten(), Linear(64, 16, rng=rng),
                       LayerNorm(16), GELU(), Dropout(0.25, F.Generator(3)), Tanh(),
                       Linear(16, 5, rng=rng))
    params = model.parameters()
    sgd = SGD(params[: len(params) // 2], lr=0.1, momentum=0.9)
    adamw = AdamW(params[len(params) // 2:], lr=0.01)
    x = OclTensor(rng.standard_normal((6, 2, 8, 8)).astype(np.float32))
    targets = np.array([0, 1, 2, 3, 4, 0], np.int32)
    for step in range(2):
        logits = model(x)
        picked = F.gather(logits, 1, np.arange(6, dtype=np.int32).reshape(6, 1) % 5)
        loss = F.add(F.cross_entropy(logits, targets, label_smoothing=0.1),
                     F.mul(F.mse_loss(F.sum(picked, axis=1), np.zeros(6, np.float32)), 0.1))
        loss.backward()
        out[f"ocl_llm.loss{step}"] = loss.data
        out[f"ocl_llm.norm{step}"] = clip_grad_norm(params, 1.0).data
        sgd.step()
        adamw.step()
        model.zero_grad()
    for i, p in enumerate(params):
        out[f"ocl_llm.param{i}"] = p.data
    out["ocl_llm.running_mean"] = model[1].running_mean

    tokenizer = L.TinyTokenizer()
    config = dict(L.DEFAULT_CONFIG, embed_dim=8, num_heads=2, d_ff=16, num_layers=1, max_len=8,
                  vocab_size=tokenizer.vocab_size, dropout=0.0, init_seed=4)
    lm = L.SimpleModel(config)
    adam = L.AdamOptimizer(lm.parameters(), lr=1e-2)
    ids = np.random.default_rng(13).integers(1, tokenizer.vocab_size, (2, 9)).astype(np.int32)
    L.train_step(lm, adam, ids[:, :-1], ids[:, 1:])
    for i, p in enumerate(lm.parameters()):
        out[f"transformer.param{i}"] = p.data


def _workload(dev, kernels):
    """Issues every family and returns the device buffers of the results (not yet read)."""
    out = {}
    _aethercl_families(dev, kernels, out)
    _ocl_llm_families(out)
    return out


def _read(buffers):
    return {name: np.asarray(buffer.to_numpy()).copy() for name, buffer in buffers.items()}


def _spin_default(dev, kernels):
    busy = dev.empty((SPIN_ITEMS,))
    kernels["spin"](SPIN_ITEMS, None, busy, SPIN_ITERS, stream=Stream.default(dev))
    return busy


def _launches_between_markers(dev):
    log = dev.kernel_log()
    marks = [i for i, entry in enumerate(log) if entry["kernel"] == "marker"]
    assert len(marks) >= 2, "the kernel log lost the markers (more than 4096 launches?)"
    return log[marks[-2] + 1:marks[-1]]


def test_every_family_follows_the_current_stream_bit_for_bit(dev, kernels):
    plain = _read(_workload(dev, kernels))
    stream = Stream(dev)
    marker = dev.empty((1,))
    kernels["marker"](1, None, marker, stream=Stream.default(dev))
    busy = _spin_default(dev, kernels)
    with stream:
        buffers = _workload(dev, kernels)
        kernels["marker"](1, None, marker, stream=Stream.default(dev))
    inside = _read(buffers)
    busy.free()
    token = f"0x{stream.handle:x}"
    launches = [e for e in _launches_between_markers(dev) if e["kernel"] != "spin"]
    strays = sorted({e["entry_point"] for e in launches if e["stream"] != token})
    assert launches and not strays, f"ran outside the current stream: {strays}"
    assert plain.keys() == inside.keys()
    different = [name for name in plain if not np.array_equal(plain[name], inside[name],
                                                               equal_nan=True)]
    assert not different, f"differ inside `with Stream`: {different}"
    stream.synchronize()
    stream.destroy()


def test_explicit_stream_wins_and_raw_ops_keep_the_c_contract(dev, kernels):
    stream, other = Stream(dev), Stream(dev)
    marker = dev.empty((1,))
    x, y = dev.from_numpy(np.ones(4, np.float32)), dev.empty((4,))
    kernels["marker"](1, None, marker, stream=Stream.default(dev))
    with stream:
        kernels["scale"](4, None, x, y, np.float32(2.0), stream=other)
        T.unary(dev, "relu", x, y, 4, stream=Stream.default(dev))
        ops.unary(dev, 0, x, y, 4, 0.0, None)          # C's NULL: the default stream
        kernels["scale"](4, None, x, y, np.float32(2.0))
        event = aethercl.Event.record(device=dev)
        assert dev.cl_queue() == dev.cl_queue(stream) != dev.cl_queue(Stream.default(dev))
    kernels["marker"](1, None, marker, stream=Stream.default(dev))
    streams = [e["stream"] for e in _launches_between_markers(dev)]
    assert streams == [f"0x{other.handle:x}", None, None, f"0x{stream.handle:x}"]
    event.synchronize()
    dev.synchronize()
    for s in (stream, other):
        s.destroy()
