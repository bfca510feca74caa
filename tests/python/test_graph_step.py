"""ocl_llm.graph_step.CapturedStep against train_step: the same model, optimizer and batches give
the same losses and parameters, bit for bit (a replay runs the eager step's kernels with the same
arguments on the same values: driver.h's graph rule), with the fused and op-by-op forms, AdamW
and the documented Adam; batches with padding (per-row loss weights rewritten each step) and a
batch of padding only (no optimizer step, as train_step); a non-finite loss (a NaN weight) skips
the update on the device through the optimizer's finite gate and takes its step counts back, so
training continues as train_step's does; wrong shapes and dropout refused. The training job
(ocl_llm.train) replays its steps by default and trains exactly as with --graph off; --graph on
with dropout says why it steps eagerly."""
import io
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from ocl_llm import ocl_initialize, ocl_shutdown  # noqa: E402
from ocl_llm.config import BUNDLED_CORPUS, DEFAULT_CONFIG  # noqa: E402
from ocl_llm.graph_step import CapturedStep, ReplayedTraining  # noqa: E402
from ocl_llm.model import SimpleModel  # noqa: E402
from ocl_llm.text import TinyTokenizer  # noqa: E402
from ocl_llm.train import make_optimizer, train, train_step  # noqa: E402

CONFIG = dict(DEFAULT_CONFIG, vocab_size=37, max_len=20, batch_size=3, embed_dim=32, num_heads=4,
              d_ff=48, num_layers=2)
STEPS = 4


def batches(seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(STEPS):
        inputs = rng.integers(1, 37, (3, 20)).astype(np.int32)
        targets = rng.integers(1, 37, (3, 20)).astype(np.int32)
        targets[0, -(i + 3):] = 0  # padding, more each step
        out.append((inputs, targets))
    out.append((out[0][0], np.zeros((3, 20), np.int32)))  # padding only
    return out


def run_steps(device, monkeypatch, fused: str, optimizer_name: str, captured: bool):
    monkeypatch.setenv("OCL_LLM_FUSED", fused)
    config = dict(CONFIG, optimizer=optimizer_name)
    ocl_initialize(device.index, verbose=False)
    try:
        model = SimpleModel(config)
        optimizer = make_optimizer(model, config)
        data = batches(1)
        if captured:
            step = CapturedStep(model, optimizer, *data[0])
            losses = [step.first_loss] + [step(*batch) for batch in data[1:]]
            info = step.info()
            assert info["kernels"] > 0 and info["bytes_held"] > 0, info
            step.close()
        else:
            losses = [train_step(model, optimizer, *batch) for batch in data]
        return losses, {name: value.copy() for name, value in model.state_dict().items()}
    finally:
        ocl_shutdown(shutdown_driver=False)


@pytest.mark.parametrize("fused", ["0", "1"])
@pytest.mark.parametrize("optimizer_name", ["adamw", "adam"])
def test_replayed_step_matches_train_step(device, monkeypatch, fused, optimizer_name):
    eager_losses, eager_state = run_steps(device, monkeypatch, fused, optimizer_name, False)
    losses, state = run_steps(device, monkeypatch, fused, optimizer_name, True)
    assert losses[-1] == 0.0 and eager_losses[-1] == 0.0  # the padding-only batch
    assert np.array_equal(np.array(losses), np.array(eager_losses)), (losses, eager_losses)
    assert state.keys() == eager_state.keys()
    for name in state:
        assert np.array_equal(state[name].view(np.uint32), eager_state[name].view(np.uint32)), name


def test_refusals(device, monkeypatch):
    monkeypatch.setenv("OCL_LLM_FUSED", "0")
    ocl_initialize(device.index, verbose=False)
    try:
        data = batches(2)
        with pytest.raises(ValueError, match="dropout"):
            model = SimpleModel(dict(CONFIG, dropout=0.1))
            CapturedStep(model, make_optimizer(model, CONFIG), *data[0])
        model = SimpleModel(CONFIG)
        step = CapturedStep(model, make_optimizer(model, CONFIG), *data[0])
        before = model.state_dict()
        with pytest.raises(ValueError, match="captured with"):
            step(data[1][0][:, :10], data[1][1][:, :10])
        after = model.state_dict()
        assert all(np.array_equal(before[k], after[k]) for k in before)  # nothing ran
        step.close()
    finally:
        ocl_shutdown(shutdown_driver=False)


def bits_of(state):
    return {name: value.view(np.uint32).copy() for name, value in state.items()}


def nan_step_then_recover(device, monkeypatch, captured: bool):
    """Step 0, then a step with NaN weights (its loss NaN: no update), then the weights restored
    and two more steps; returns the losses' bits, the state after the NaN step and at the end,
    and the optimizer's step counts at both points."""
    monkeypatch.setenv("OCL_LLM_FUSED", "1")
    config = dict(CONFIG, optimizer="adamw")
    ocl_initialize(device.index, verbose=False)
    try:
        model = SimpleModel(config)
        optimizer = make_optimizer(model, config)
        data = batches(3)
        step = ReplayedTraining(model, optimizer) if captured else \
            (lambda inputs, targets: train_step(model, optimizer, inputs, targets))
        losses = [step(*data[0])]   # replayed: the eager step the capture follows
        weight = model.parameters()[0]
        good = weight.data.read(weight.shape)
        weight.data.write(np.full_like(good, np.nan))
        before = bits_of(model.state_dict())
        counts_before = list(optimizer.steps)
        losses.append(step(*data[1]))
        skipped = bits_of(model.state_dict()), list(optimizer.steps)
        assert all(np.array_equal(before[k], skipped[0][k]) for k in before)
        assert skipped[1] == counts_before
        weight.data.write(good)
        losses += [step(*batch) for batch in data[2:4]]
        if captured:
            assert step.captured is not None and step.captured.shape == data[1][0].shape
            step.close()
        return (np.array(losses, np.float64).view(np.uint64), skipped,
                bits_of(model.state_dict()), list(optimizer.steps))
    finally:
        ocl_shutdown(shutdown_driver=False)


def test_non_finite_loss_skips_the_update_on_the_device(device, monkeypatch):
    eager = nan_step_then_recover(device, monkeypatch, False)
    replayed = nan_step_then_recover(device, monkeypatch, True)
    assert np.isnan(eager[0].view(np.float64)[1])
    assert np.array_equal(eager[0], replayed[0])
    assert eager[3] == replayed[3] == [3] * len(eager[3])   # steps 0, 2 and 3 counted
    for state in (1, 2):
        e, r = (eager[state][0], replayed[state][0]) if state == 1 else (eager[2], replayed[2])
        assert e.keys() == r.keys()
        assert all(np.array_equal(e[k], r[k]) for k in e), state


def training_job(device, tmp_path, graph: str, **changes):
    """ocl_llm's training job on a tiny model: its summary and what it printed."""
    config = dict(DEFAULT_CONFIG, embed_dim=16, num_heads=2, d_ff=32, num_layers=2, max_len=12,
                  batch_size=3, max_steps=7, eval_every=4, eval_batches=1, sample_length=0,
                  optimizer="adamw", data_file=str(BUNDLED_CORPUS),
                  vocab_size=TinyTokenizer().vocab_size, graph=graph, **changes)
    out = io.StringIO()
    summary = train(config, gpu_id=device.index, save_dir=str(tmp_path / graph),
                    sample_prompt=None, stream=out, shutdown=False)
    ocl_shutdown(shutdown_driver=False)
    return summary, out.getvalue()


def test_training_job_replays_its_steps_as_it_trains_eagerly(device, tmp_path, monkeypatch):
    replays = []
    real_call = CapturedStep.__call__
    monkeypatch.setattr(CapturedStep, "__call__",
                        lambda self, *batch: replays.append(1) or real_call(self, *batch))
    replayed, _ = training_job(device, tmp_path, "auto")
    assert len(replays) == 6   # the first step is captured, the six after it replayed
    eager, _ = training_job(device, tmp_path, "off")
    assert replayed["steps"] == eager["steps"] == 7
    train_bits = [np.float64(loss).view(np.uint64) for _, loss in replayed["history"]["train"]]
    assert train_bits == [np.float64(loss).view(np.uint64)
                          for _, loss in eager["history"]["train"]]
    assert replayed["history"]["val"] == eager["history"]["val"]


def test_graph_on_with_dropout_steps_eagerly_and_says_why(device, tmp_path):
    summary, printed = training_job(device, tmp_path, "on", dropout=0.1)
    assert summary["steps"] == 7
    assert "--graph on: each step runs eagerly (dropout" in printed
