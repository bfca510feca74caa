"""What the inspector costs the training step: the OCL-LLM frontend's train_step timed without an
inspector, with one serving but nobody watching, and with one watched (a separate process polls
every endpoint the page polls, once a second, like an open page). The three modes alternate in
rounds within one process so that machine load drifts affect them alike; the result is each
mode's median step time and its ratio to the no-inspector median of the same run.

Usage: tools/aethercl bench inspect [--rounds 8] [--steps 15] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

POLLER = r"""
import sys, time, urllib.request
base, token = sys.argv[1], sys.argv[2]
paths = ["/gpus", "/gpus/0/state", "/gpus/0/allocations", "/gpus/0/kernel_log?limit=100",
         "/events", "/training"]
while True:
    for path in paths:
        request = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
        urllib.request.urlopen(request, timeout=10).read()
    time.sleep(1.0)
"""

MODEL = dict(embed_dim=64, num_heads=4, d_ff=256, num_layers=2, max_len=64, batch_size=8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=15, help="timed steps per mode and round")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    import numpy as np
    from aethercl import inspect
    from ocl_llm import (DEFAULT_CONFIG, AdamOptimizer, SimpleModel, TinyTokenizer,
                         ocl_initialize, ocl_shutdown, train_step)

    device = ocl_initialize(args.gpu, verbose=False)
    tokenizer = TinyTokenizer()
    config = dict(DEFAULT_CONFIG, **MODEL, vocab_size=tokenizer.vocab_size)
    model = SimpleModel(config)
    optimizer = AdamOptimizer(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    B, S = config["batch_size"], config["max_len"]

    def steps(count: int) -> list:
        times = []
        for _ in range(count):
            ids = rng.integers(1, config["vocab_size"], size=(B, S)).astype(np.int32)
            start = time.perf_counter()
            train_step(model, optimizer, ids, np.roll(ids, -1, axis=1))
            times.append(time.perf_counter() - start)
        return times

    steps(3)   # warm-up: kernel builds, pool
    results = {"off": [], "serving": [], "watched": []}
    per_round = {"serving": [], "watched": []}   # each round's median over that round's "off"
    for _ in range(args.rounds):
        off = steps(args.steps)
        results["off"] += off
        server = inspect.serve(port=0, announce=False)
        try:
            serving = steps(args.steps)
            results["serving"] += serving
            poller = subprocess.Popen([sys.executable, "-c", POLLER,
                                       f"http://127.0.0.1:{server.port}", server.token])
            try:
                time.sleep(0.5)   # the first poll lands before timing starts
                watched = steps(args.steps)
                results["watched"] += watched
            finally:
                poller.kill()
                poller.wait()
        finally:
            server.close()
        for mode, times in (("serving", serving), ("watched", watched)):
            per_round[mode].append(statistics.median(times) / statistics.median(off))
    # The idle inspector's work, timed directly: one sampler pass (memory statistics read and
    # parsed) and one label call, and how many buffers a step allocates (pool hits + misses).
    server = inspect.serve(port=0, announce=False, sample_period_s=3600)
    try:
        sample_times = []
        for _ in range(200):
            start = time.perf_counter()
            server._sample(1)
            sample_times.append(time.perf_counter() - start)
        stats = device.memory_stats()
        before = stats["pool_hits"] + stats["pool_misses"]
        labels = []
        real_check = device.lib.check
        device.lib.check = lambda name, *a: (labels.append(name) if name ==
                                             "aethercl_set_buffer_label" else None,
                                             real_check(name, *a))[1]
        try:
            steps(1)
        finally:
            del device.lib.check   # the class's method again
        stats = device.memory_stats()
        allocations_per_step = stats["pool_hits"] + stats["pool_misses"] - before
        labels_per_step = len(labels)
        buffer = device.alloc(64)
        label_times = []
        for i in range(500):
            start = time.perf_counter()
            buffer.label = f"label_{i}"
            label_times.append(time.perf_counter() - start)
        buffer.free()
    finally:
        server.close()
    ocl_shutdown(model, optimizer)

    reference = statistics.median(results["off"])
    print(f"# inspector overhead: {args.rounds} rounds x {args.steps} steps per mode, model "
          f"{MODEL}")
    print(f"{'mode':<10} {'median step ms':>15} {'ratio to off':>13} {'steps':>6}  "
          f"per-round ratios: median [min, max]")
    summary = {}
    for mode, times in results.items():
        median = statistics.median(times)
        rounds = per_round.get(mode, [1.0])
        summary[mode] = {"median_s": median, "ratio": median / reference, "steps": len(times),
                         "round_ratios": rounds}
        print(f"{mode:<10} {median * 1e3:>15.2f} {median / reference:>13.3f} {len(times):>6}  "
              f"{statistics.median(rounds):.3f} [{min(rounds):.3f}, {max(rounds):.3f}]")
    sample_s, label_s = statistics.median(sample_times), statistics.median(label_times)
    bound = (sample_s / 0.5 + labels_per_step * label_s / reference)
    print(f"idle work: sampler pass {sample_s * 1e6:.0f} us per 0.5 s period, label call "
          f"{label_s * 1e6:.1f} us x {labels_per_step} labelled of {allocations_per_step} "
          f"allocations per step -> at most {bound * 100:.3f} % of a {reference * 1e3:.1f} ms "
          "step")
    summary["idle_work"] = {"sample_s": sample_s, "label_s": label_s,
                            "labels_per_step": labels_per_step,
                            "allocations_per_step": allocations_per_step, "bound": bound}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
