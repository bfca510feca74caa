#!/usr/bin/env python3
"""Training soak: ocl_llm trains a GPT (bench train's presets) for --minutes with the inspector
attached while a poller thread, at random moments, calls aethercl_memory_stats and
aethercl_kernel_log and fetches every inspector endpoint with its token.

    tools/aethercl python tools/soak_train.py --minutes 30 --preset tiny --csv soak.csv --png soak.png

Every step is timed; every --sample-steps steps a row goes to the CSV: elapsed seconds, step,
loss, tokens/s over the last window, bytes in use and reserved, live buffers, programs, kernels,
resident memory, polls so far. The run fails (exit 1, the reason printed) when a step or a poll
fails, the loss is not finite, bytes in use, live buffers or programs at step boundaries after
warm-up differ from their first value, bytes reserved grow after warm-up, resident memory grows
more than --rss-slack-mib over the run, or the median tokens/s of the last tenth of the run is
below --flat (default 0.9) of the second tenth's."""
from __future__ import annotations

import argparse
import collections
import csv
import json
import random
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

from train_common import GPT_PRESETS, gpt_batches  # noqa: E402

ENDPOINTS = ("/gpus", "/gpus/{gpu}/state", "/gpus/{gpu}/allocations",
             "/gpus/{gpu}/kernel_log?limit={limit}", "/events?since={since}", "/training")


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


class Poller(threading.Thread):
    """Random reads of the driver's statistics and the inspector's pages until stopped; the first
    failure is kept and ends the polling."""

    def __init__(self, device, inspector, seed: int):
        super().__init__(name="soak-poller", daemon=True)
        self.device, self.inspector = device, inspector
        self.random = random.Random(seed)
        self.stop = threading.Event()
        self.polls = 0
        self.error = None

    def fetch(self, path: str) -> None:
        url = f"http://127.0.0.1:{self.inspector.port}{path}"
        url += ("&" if "?" in url else "?") + f"token={self.inspector.token}"
        with urllib.request.urlopen(url, timeout=30) as reply:
            if reply.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {reply.status}")
            body = reply.read()
        if not path.startswith("/?"):
            json.loads(body)

    def poll_once(self) -> None:
        choice = self.random.randrange(3)
        if choice == 0:
            stats = self.device.memory_stats()
            if stats["bytes_in_use"] < 0:
                raise RuntimeError(f"memory stats: {stats}")
        elif choice == 1:
            self.device.kernel_log()
        else:
            template = self.random.choice(ENDPOINTS)
            self.fetch(template.format(gpu=self.device.index, limit=self.random.randint(1, 500),
                                       since=self.random.randint(0, 1000)))
        self.polls += 1

    def run(self) -> None:
        while not self.stop.wait(self.random.uniform(0.0, 0.2)):
            try:
                self.poll_once()
            except Exception as error:   # kept for the main thread, which fails the run
                self.error = f"{type(error).__name__}: {error}"
                return


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--preset", choices=sorted(GPT_PRESETS), default="tiny")
    parser.add_argument("--precision", default="tf32", help="matmul precision (fp32, tf32, bf16, ...)")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--sample-steps", type=int, default=10)
    parser.add_argument("--flat", type=float, default=0.9)
    parser.add_argument("--rss-slack-mib", type=float, default=64.0)
    parser.add_argument("--csv", default="soak_train.csv")
    parser.add_argument("--png", default=None)
    parser.add_argument("--batches", type=int, default=256,
                        help="distinct random batches cycled through (few: the model memorises them)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from aethercl import inspect
    from ocl_llm.runtime import ocl_initialize, set_matmul_precision
    from ocl_llm.model import SimpleModel
    from ocl_llm.train import make_optimizer, train_step
    from train_ours import gpt_config

    sizes = GPT_PRESETS[args.preset]
    device = ocl_initialize(args.gpu, verbose=False)
    set_matmul_precision(args.precision)
    inspector = inspect.serve(port=0, announce=False)
    config = gpt_config(sizes)
    model = SimpleModel(config)
    optimizer = make_optimizer(model, config)
    batches = gpt_batches(sizes, args.batches, args.seed)
    tokens_per_step = sizes["batch"] * sizes["context"]
    poller = Poller(device, inspector, args.seed)
    poller.start()

    # Rows go to the CSV as they are made; in memory only what the checks need (the soak must
    # not grow the process it measures).
    csv_file = open(args.csv, "w", newline="")
    writer = None
    rates, failures = [], []
    step_times = collections.deque(maxlen=args.sample_steps)
    baseline = None
    start = time.perf_counter()
    deadline = start + args.minutes * 60
    rss_start = None
    step = 0
    while time.perf_counter() < deadline and not failures:
        t0 = time.perf_counter()
        loss = train_step(model, optimizer, *batches[step % len(batches)])
        step_times.append(time.perf_counter() - t0)
        inspect.report_loss(step, loss)
        step += 1
        if not loss == loss or abs(loss) == float("inf"):
            failures.append(f"step {step}: loss {loss}")
        if poller.error:
            failures.append(f"poll after {poller.polls} polls: {poller.error}")
        if step % args.sample_steps and step != args.warmup_steps:
            continue
        stats = device.memory_stats()
        window = list(step_times)
        row = dict(seconds=round(time.perf_counter() - start, 3), step=step, loss=loss,
                   tokens_per_s=tokens_per_step * len(window) / sum(window),
                   bytes_in_use=stats["bytes_in_use"], bytes_reserved=stats["bytes_reserved"],
                   live_buffers=stats["live_buffers"], programs=stats.get("programs", 0),
                   kernels=stats.get("kernels", 0), rss=resident_bytes(), polls=poller.polls)
        if writer is None:
            writer = csv.DictWriter(csv_file, fieldnames=list(row))
            writer.writeheader()
        writer.writerow(row)
        if step < args.warmup_steps:
            continue
        rates.append(row["tokens_per_s"])
        last = row
        if baseline is None:
            baseline, rss_start = row, row["rss"]
            continue
        for key in ("bytes_in_use", "live_buffers", "programs"):
            if row[key] != baseline[key]:
                failures.append(f"step {step}: {key} {row[key]} (after warm-up {baseline[key]})")
        if row["bytes_reserved"] > baseline["bytes_reserved"]:
            failures.append(f"step {step}: bytes_reserved grew to {row['bytes_reserved']} "
                            f"(after warm-up {baseline['bytes_reserved']})")
    poller.stop.set()
    poller.join(timeout=30)
    if poller.error and not failures:
        failures.append(f"poll: {poller.error}")
    inspector.close()

    csv_file.close()
    if rates:
        tenth = max(1, len(rates) // 10)
        early = median(rates[tenth:2 * tenth] or rates[:1])
        late = median(rates[-tenth:])
        if late < args.flat * early:
            failures.append(f"tokens/s fell from {early:,.0f} to {late:,.0f}")
        growth = (last["rss"] - rss_start) / 2**20
        if growth > args.rss_slack_mib:
            failures.append(f"resident memory grew {growth:.1f} MiB")
        print(f"soak: {step} steps in {time.perf_counter() - start:.0f} s, {poller.polls} polls, "
              f"tokens/s {early:,.0f} (early) -> {late:,.0f} (late), bytes in use "
              f"{last['bytes_in_use']:,}, reserved {last['bytes_reserved']:,}, "
              f"live buffers {last['live_buffers']}, resident growth {growth:+.1f} MiB")
    else:
        failures.append(f"only {step} steps: nothing after the {args.warmup_steps} warm-up steps")
    if args.png and writer is not None:
        with open(args.csv, newline="") as f:
            rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
        plot(rows, args.png, f"{args.preset} GPT, {args.precision}, {device.info().get('name', '')}")
    for failure in failures:
        print(f"soak FAILED: {failure}")
    return 1 if failures else 0


def plot(rows, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    minutes = [r["seconds"] / 60 for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    axes[0].plot(minutes, [r["tokens_per_s"] for r in rows])
    axes[0].set_ylabel("tokens/s")
    axes[1].plot(minutes, [r["bytes_in_use"] / 2**20 for r in rows], label="in use")
    axes[1].plot(minutes, [r["bytes_reserved"] / 2**20 for r in rows], label="reserved")
    axes[1].plot(minutes, [r["rss"] / 2**20 for r in rows], label="process resident")
    axes[1].set_ylabel("MiB")
    axes[1].legend()
    axes[2].plot(minutes, [r["loss"] for r in rows])
    axes[2].set_ylabel("training loss")
    axes[2].set_xlabel("minutes")
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
