"""The simple-runtime conveniences and helpers of issue 29, part 5: Device.stream / event / fence
(a fence is an event on the calling thread's current stream), dispatch(groups=) choosing the
work-group size, ocl_llm.gradcheck, a progress rate that counts the caller's unit and leaves out
the compiling first step (the digits example counts images), and the frontend's buffers listed
with label and dtype while an inspector runs."""
import io
import sys
from pathlib import Path

import numpy as np
import pytest

import aethercl
from aethercl import AetherCLError, Stream, inspect
from aethercl.progress import ProgressBar
import ocl_llm as L
from ocl_llm import functional as F
from ocl_llm import ocl_initialize, ocl_shutdown
from ocl_llm.layers import Linear

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """
__kernel void shape(__global int* out) {
  size_t i = get_global_id(1) * get_global_size(0) + get_global_id(0);
  out[i] = (int)(get_local_size(0) * 1000 + get_local_size(1));
}
__kernel void scratch(__global int* out, __local int* tmp) { out[get_global_id(0)] = 1; }
"""


@pytest.fixture
def dev(device):
    ocl_initialize(device.index, verbose=False)
    yield L.current_device()
    ocl_shutdown(shutdown_driver=False)


def test_fences_and_events_are_recorded_on_the_current_stream(dev):
    timing = dev.stream(timing=True)
    assert isinstance(timing, Stream) and timing.timing
    x = dev.from_numpy(np.ones(1 << 12, np.float32))
    with timing:
        start = dev.fence()
        F.relu(L.OclTensor(np.ones(64, np.float32)))
        end = dev.event()
    end.wait()
    assert start.query() and end.query()
    assert start.elapsed_ms(end) >= 0.0          # both on the timing stream: it can time them
    plain = dev.fence()                          # outside: the default stream, which cannot
    with pytest.raises(AetherCLError, match="timing"):
        plain.elapsed_ms(dev.event(Stream.default(dev)))
    on_timing = dev.event(timing)
    on_timing.wait()
    assert start.elapsed_ms(on_timing) >= 0.0
    x.free()


def test_dispatch_with_groups_chooses_the_local_size(dev):
    kernels = dev.compile(SOURCE)
    shape = kernels.kernel("shape")
    one = shape.default_local_size(1)
    two = shape.default_local_size(2)
    assert np.prod(one) == np.prod(two) <= 256 and one[0] >= two[0] >= two[1]
    out = dev.empty((3 * one[0],), np.int32)
    dev.dispatch(shape, out, groups=3)
    np.testing.assert_array_equal(out.read(), np.full(3 * one[0], one[0] * 1000 + 1))
    grid = dev.empty((2 * two[0] * 3 * two[1],), np.int32)
    dev.dispatch(shape, grid, groups=(2, 3))
    np.testing.assert_array_equal(grid.read(), two[0] * 1000 + two[1])
    with pytest.raises(ValueError, match="Local arguments needs local"):
        dev.dispatch(kernels.kernel("scratch"), out, aethercl.Local(64), groups=3)


def test_gradcheck_passes_right_gradients_and_names_a_wrong_one(dev):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    targets = np.array([1, 0], np.int32)
    assert L.gradcheck(lambda a, b: F.tanh(F.layer_norm(a.matmul(b))), x, w)
    assert L.gradcheck(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1), x, targets)
    with pytest.raises(AssertionError, match=r"gradcheck: input 0 element"):
        L.gradcheck(lambda a: F.mul(a.detach(), a), x)   # the detached factor has no gradient
    assert L.gradcheck(lambda a: F.mul(a.detach(), a), x, raise_exception=False) is False


def test_progress_rate_counts_the_unit_and_leaves_out_the_first_step(monkeypatch):
    clock = iter([0.0, 100.0, 102.0])   # start; step 1 took 100 s (kernel builds); step 2 2 s
    monkeypatch.setattr("aethercl.progress.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    bar = ProgressBar(10, stream=stream, use_tqdm=False, unit="img")
    bar.update(1, 2.0, 32, force=True)
    bar.update(2, 2.0, 61, force=True)   # 29 images in 2 s
    first, second = stream.getvalue().splitlines()
    assert "-- img/s" in first and "ETA --" in first
    assert "14 img/s" in second         # 14.5, not (61 images / 102 s)


def test_digits_bar_counts_images(device, monkeypatch):
    sys.path.insert(0, str(ROOT / "python_harness" / "examples"))
    import digits_cnn
    updates = []

    class Recorder:
        def __init__(self, total, unit="tok", **kwargs):
            self.unit = unit

        def update(self, step, loss, count, val=None, force=False):
            updates.append((self.unit, count))

        def close(self):
            pass

    monkeypatch.setattr(digits_cnn, "ProgressBar", Recorder)
    monkeypatch.setattr(digits_cnn, "ocl_initialize", lambda gpu, verbose: ocl_initialize(
        gpu, verbose=False))
    result = digits_cnn.train(epochs=1, gpu=device.index, progress=True, shutdown_driver=False)
    assert updates[-1] == ("img", result["train_size"])   # the last batch is a partial one
    assert result["train_size"] % 32 != 0


def test_frontend_buffers_show_label_and_dtype_while_an_inspector_runs(dev, monkeypatch):
    monkeypatch.setattr(inspect, "active", lambda: object())
    layer = Linear(3, 2, name="probe")
    listed = {b["label"]: b for b in dev.memory_stats()["labelled_buffers"]}
    assert listed["probe.weight"]["dtype"] == "f32" and listed["probe.bias"]["dtype"] == "f32"
    assert layer.weight.data.alive


def test_training_under_an_inspector_logs_kernel_times_without_trace(device, monkeypatch,
                                                                       tmp_path):
    """The training job runs its steps on a timing stream while an inspector runs, so the kernel
    log (the page's kernel list) has device times although AETHERCL_TRACE is off."""
    monkeypatch.delenv("AETHERCL_TRACE", raising=False)
    monkeypatch.setattr(inspect, "active", lambda: object())
    config = dict(L.DEFAULT_CONFIG, embed_dim=8, num_heads=2, d_ff=16, num_layers=1, max_len=8,
                  batch_size=2, max_steps=2, eval_every=100, eval_batches=1, sample_length=0,
                  data_file=str(L.BUNDLED_CORPUS), vocab_size=L.TinyTokenizer().vocab_size)
    L.train(config, gpu_id=device.index, save_dir=str(tmp_path), sample_prompt=None,
            stream=io.StringIO(), shutdown=False)
    log = aethercl.Device(device.index).kernel_log()
    timed = [e for e in log if e["stream"] is not None and e["end_ns"] is not None]
    assert timed and all(e["end_ns"] >= e["start_ns"] for e in timed)
    ocl_shutdown(shutdown_driver=False)
