"""Where a replayed data-parallel step's time goes (tools/gpu/dp_phases.py [--preset medium]):
the replicas' graph replays (enqueue, then until both devices finished and the buckets are
all-reduced: after the pass, or overlapped with it), the loss read, the copies back and the
optimizer steps, each ended by a synchronisation of every device, beside
one device replaying the same per-replica batch. ms per step, medians of --steps steps."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

import ocl_llm  # noqa: E402
from scaling import PRESETS, batches  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="medium", choices=sorted(PRESETS))
    parser.add_argument("--precision", default="bf16-mixed")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--devices", default="0,1",
                        help="the replicas' devices (one device: what splitting a pass costs "
                             "without a second GPU)")
    parser.add_argument("--modes", default="after,overlap",
                        help="after, overlap, overlap-no-reduce (the overlapped form with the "
                             "all-reduces left out: what splitting the pass and the events cost), "
                             "split (the overlap's graphs, no events, reduced after the pass)")
    args = parser.parse_args()
    from ocl_llm.graph_step import ReplayedDataParallel, ReplayedTraining
    from ocl_llm.runtime import set_activation_precision, set_matmul_precision
    from ocl_llm.train import make_optimizer
    config = dict(ocl_llm.DEFAULT_CONFIG, vocab_size=ocl_llm.TinyTokenizer().vocab_size,
                  **PRESETS[args.preset])
    products = args.precision.partition("-mixed")[0]
    activations = products if args.precision.endswith("-mixed") else "fp32"
    per_replica = config["batch_size"]
    ocl_llm.ocl_initialize(0, verbose=False)
    set_matmul_precision(products)
    set_activation_precision(activations)

    model = ocl_llm.SimpleModel(config)
    optimizer = make_optimizer(model, config)
    single = ReplayedTraining(model, optimizer)
    data = batches(config, args.steps + 2)
    times = []
    for i, (x, y) in enumerate(data):
        start = time.perf_counter()
        single(x, y)
        if i >= 2:
            times.append(time.perf_counter() - start)
    print(f"one device, {per_replica} rows, replayed step: {1e3 * statistics.median(times):.2f} ms")
    single.close()
    optimizer.free_memory()
    model.free_memory()

    gpus = [int(i) for i in args.devices.split(",")]
    config["batch_size"] = len(gpus) * per_replica
    data = batches(config, args.steps + 2, seed=1)
    for mode in args.modes.split(","):
        overlap = mode.startswith("overlap") or mode == "split"
        parallel = ocl_llm.DataParallel(config, gpus, make_optimizer=make_optimizer)
        step = ReplayedDataParallel(parallel, overlap=overlap)
        for x, y in data[:2]:
            step(x, y)
        if mode == "overlap-no-reduce":
            parallel.reduce_bucket = lambda bucket, layout: None
        if mode == "split":
            step.overlap = overlap = False

        def sync():
            for runtime in parallel.runtimes:
                runtime.device.synchronize()
        phases = {name: [] for name in ("write+enqueue", "passes+all-reduce", "loss read",
                                        "update (host)", "unpack+optimizers", "whole step")}
        for x, y in data[2:]:
            sync()
            t0 = time.perf_counter()
            shards = parallel.shards(x.shape[0])
            total_valid = int((y != 0).sum())
            denominator = total_valid / parallel.size
            valid, events = step.replay(x, y, shards, denominator)
            t1 = time.perf_counter()
            if overlap:
                step._reduce_overlapped(events)
            else:
                sync()
                parallel.reduce_buckets(step.layout)
            sync()
            t2 = time.perf_counter()
            sum(float(c.losses()[rows].astype(np.float64).sum())
                for c, rows in zip(step.passes, valid))
            t3 = time.perf_counter()
            parallel.on_each_replica(step._update)
            t3b = time.perf_counter()
            sync()
            t4 = time.perf_counter()
            for name, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t3b - t3, t4 - t3,
                                            t4 - t0)):
                phases[name].append(value)
        graphs = len(step.passes[0].graphs)
        when = {"after": "after the pass", "overlap": "overlapped"}.get(mode, mode)
        print(f"{len(gpus)} device(s), {per_replica} rows each, all-reduce {when}, {graphs} "
              f"graph(s) per pass, {parallel.bucket_count(step.layout)} buckets (ms):")
        for name, values in phases.items():
            print(f"  {name:>18}: {1e3 * statistics.median(values):8.2f}")
        step.close()
        parallel.close()
    ocl_llm.ocl_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
