"""Data parallelism in one process (ocl_llm.DataParallel, `--gpus 0,1`): replicas stay bitwise
identical after every step, and the loss follows the single-device run of the same batches.

Replayed steps reduce the buckets after the pass, or (overlap=True) while the backward pass runs
(several graphs per pass, side streams per device); both forms are checked against the eager
steps.

Tolerance for the loss: rtol 1e-4 over 4 steps. Each replica computes the same per-row losses as
the single device up to the rounding of its GEMMs (its batch has fewer rows, so a different tile
shape may be chosen; per-row values agree to ~1e-6 relative), and the averaged gradient equals the
whole batch's gradient up to float32 reassociation of the sum over rows (one all-reduce MEAN);
Adam carries those ~1e-6 differences into the next steps' losses, far below 1e-4. Replayed from
graphs (ocl_llm.graph_step.ReplayedDataParallel, the training job's default) the steps give the
eager data-parallel steps' losses and parameters bit for bit."""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

CONFIG = {"max_len": 16, "batch_size": 6, "embed_dim": 16, "num_heads": 2, "d_ff": 32,
          "num_layers": 1, "causal": True, "lr": 3e-3, "betas": [0.9, 0.999], "eps": 1e-8,
          "wd": 0.02, "init_seed": 7, "vocab_size": 40}
STEPS = 4


def batches(rng):
    out = []
    for _ in range(STEPS):
        ids = rng.integers(1, CONFIG["vocab_size"], (CONFIG["batch_size"], CONFIG["max_len"] + 1))
        ids[1, -4:] = 0   # padding rows in one shard only: unequal valid counts per replica
        out.append((ids[:, :-1].astype(np.int32), ids[:, 1:].astype(np.int32)))
    return out


@pytest.fixture(scope="module")
def frontend(lib, devices):
    import ocl_llm
    yield ocl_llm
    ocl_llm.ocl_shutdown(shutdown_driver=False)


def test_replicas_identical_and_loss_matches(frontend, devices):
    ocl = frontend
    rng = np.random.default_rng(3)
    data = batches(rng)
    ocl.ocl_initialize(devices[-1], verbose=False)
    single = ocl.SimpleModel(CONFIG)
    optimizer = ocl.AdamOptimizer(single.parameters(), lr=CONFIG["lr"], betas=CONFIG["betas"],
                                  eps=CONFIG["eps"], weight_decay=CONFIG["wd"])
    single_losses = [ocl.train_step(single, optimizer, x, y) for x, y in data]
    single_params = [p.to_host() for p in single.parameters()]

    ocl.ocl_initialize(devices[0], verbose=False)
    parallel = ocl.DataParallel(CONFIG, devices[:2])
    try:
        assert parallel.parameters_identical(), "replicas differ before training"
        losses = []
        for x, y in data:
            losses.append(parallel.step(x, y))
            assert parallel.parameters_identical(), f"replicas differ after step {len(losses)}"
        np.testing.assert_allclose(losses, single_losses, rtol=1e-4)
        for got, want in zip(parallel.models[0].parameters(), single_params):
            np.testing.assert_allclose(got.to_host(), want, rtol=1e-3, atol=1e-4)
    finally:
        parallel.close()


def parallel_run(ocl, devices, data, replayed: bool, overlap: bool = False):
    from ocl_llm.graph_step import OVERLAP_BUCKETS, ReplayedDataParallel
    ocl.ocl_initialize(devices[0], verbose=False)
    parallel = ocl.DataParallel(CONFIG, devices[:2])
    step = ReplayedDataParallel(parallel, overlap=overlap) if replayed else parallel.step
    try:
        losses = []
        for x, y in data:
            losses.append(step(x, y))
            assert parallel.parameters_identical(), f"replicas differ after step {len(losses)}"
        params = [p.to_host() for p in parallel.models[0].parameters()]
        if replayed:
            assert step.passes is not None and len(step.passes) == 2
            graphs = [len(captured.graphs) for captured in step.passes]
            if overlap:   # one graph per bucket (the last may end with the pass)
                assert graphs[0] == graphs[1] and graphs[0] >= OVERLAP_BUCKETS - 1, graphs
                assert step.segment_of == sorted(step.segment_of)
                assert len(step.segment_of) == OVERLAP_BUCKETS
            else:
                assert graphs == [1, 1]
            step.close()
        return np.array(losses), params
    finally:
        parallel.close()


def test_replayed_steps_match_the_eager_ones(frontend, devices):
    rng = np.random.default_rng(5)
    data = batches(rng)
    data.append((data[0][0], np.zeros_like(data[0][1])))   # padding only: stepped eagerly
    eager_losses, eager_params = parallel_run(frontend, devices, data, False)
    for overlap in (True, False):
        losses, params = parallel_run(frontend, devices, data, True, overlap)
        assert np.array_equal(losses.view(np.uint64), eager_losses.view(np.uint64)), \
            (overlap, losses, eager_losses)
        for got, want in zip(params, eager_params):
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), overlap


def test_gradient_buckets_cut_tensors_and_keep_the_bits(frontend, devices, monkeypatch):
    """Buckets of 1,000 bytes (BUCKET_BYTES is one engine import, 256 MiB, in use): tensors are
    cut where a bucket ends, every bucket is reduced on its own, and the steps give the one-bucket
    run's losses and parameters bit for bit (element e's reduction does not depend on its
    bucket)."""
    from ocl_llm import data_parallel
    rng = np.random.default_rng(9)
    data = batches(rng)[:2]
    whole_losses, whole_params = parallel_run(frontend, devices, data, False)
    monkeypatch.setattr(data_parallel, "BUCKET_BYTES", 1000)
    losses, params = parallel_run(frontend, devices, data, False)
    assert np.array_equal(losses.view(np.uint64), whole_losses.view(np.uint64))
    for got, want in zip(params, whole_params):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bucket_spans_cover_every_byte_once(frontend):
    from aethercl.collectives import bucket_spans
    sizes = [12, 1000, 4, 2500, 8]
    spans = list(bucket_spans(sizes, 1000))
    covered = {}
    for tensor, offset, bucket, bucket_offset, nbytes in spans:
        assert 0 < nbytes and bucket_offset + nbytes <= 1000 and offset + nbytes <= sizes[tensor]
        for k in range(nbytes):
            covered[(tensor, offset + k)] = bucket * 1000 + bucket_offset + k
    assert sorted(covered.values()) == list(range(sum(sizes)))
    flat = [(t, k) for t, size in enumerate(sizes) for k in range(size)]
    assert [covered[key] for key in flat] == list(range(sum(sizes)))


def test_train_with_gpus_flag(frontend, devices, tmp_path):
    """The training job with --gpus 0,1 (two steps, no sample): it runs data-parallel and reports
    both devices."""
    ocl = frontend
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    args = ocl.build_arg_parser().parse_args(
        ["--gpus", f"{devices[0]},{devices[1]}", "--data_file", str(corpus), "--steps", "2",
         "--embed_dim", "16", "--num_layers", "1", "--num_heads", "2", "--d_ff", "32",
         "--max_len", "16", "--batch_size", "4", "--eval_batches", "1", "--sample_length", "0",
         "--save_dir", str(tmp_path)])
    config = ocl.config_from_args(args)
    summary = ocl.train(config, gpus=ocl.parse_gpus(args.gpus), save_dir=str(tmp_path),
                        sample_prompt=None, shutdown=False)
    assert summary["devices"] == devices[:2]
    assert summary["steps"] == 2 and np.isfinite(summary["last_train_loss"])


def test_parse_gpus(frontend):
    assert frontend.parse_gpus("0,1") == [0, 1]
    assert frontend.parse_gpus(None) is None
    for bad in ("0,0", "a,b", "-1,2"):
        with pytest.raises(ValueError):
            frontend.parse_gpus(bad)
