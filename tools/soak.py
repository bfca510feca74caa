#!/usr/bin/env python3
"""Soak test: the unmodified llm.py's training step with the default model (the replay of
tools/bench/llm_replay.py, the one the replay test checks call for call) repeated for N steps,
sampling device memory statistics and the process's resident memory.

    tools/aethercl python tools/soak.py --steps 10000 --csv soak.csv --png soak.png

Each step makes 695-696 driver calls of allocate / write / compute / read / free with the default
configuration's sizes (B=16, S=64, E=16, 4 heads, d_ff=256, 6 layers, V=53), every return value
checked. Samples of aethercl_memory_stats (bytes_in_use, bytes_reserved, live_buffers, programs,
kernels) and /proc/self/statm go to a CSV (and a PNG when matplotlib is present). The run fails
when any call fails (exit 1 with the failing call), when buffers, programs or reserved bytes at
step boundaries after warm-up differ from the baseline, when resident memory keeps growing, or
when a buffer outlives the run."""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

from aethercl import Library  # noqa: E402
from llm_replay import B, S, V, LlmStep, Recorder, make_weights  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def sample(lib: Library, index: int, step: int, started: float) -> dict:
    stats = json.loads(lib.json_call("aethercl_memory_stats", index))
    return {"step": step, "seconds": round(time.perf_counter() - started, 3),
            "bytes_in_use": stats["bytes_in_use"], "bytes_reserved": stats["bytes_reserved"],
            "bytes_cached": stats["bytes_cached"], "live_buffers": stats["live_buffers"],
            "programs": stats["programs"], "kernels": stats["kernels"],
            "staging_cached_bytes": stats["staging_cached_bytes"],
            "resident_bytes": resident_bytes()}


def analyse(samples, warmup_steps, rss_tolerance):
    """Problems found in the samples taken at step boundaries after warm-up."""
    after = [s for s in samples if s["step"] >= warmup_steps]
    if len(after) < 2:
        return ["too few samples after warm-up"]
    base, last = after[0], after[-1]
    problems = []
    for key in ("live_buffers", "bytes_in_use", "bytes_reserved", "programs", "kernels"):
        values = {s[key] for s in after}
        if len(values) != 1:
            problems.append(f"{key} is not constant after warm-up: {base[key]} -> {last[key]} "
                            f"(range {min(values)}..{max(values)})")
    quarter = max(1, len(after) // 4)
    early = float(np.median([s["resident_bytes"] for s in after[:quarter]]))
    late = float(np.median([s["resident_bytes"] for s in after[-quarter:]]))
    steps = np.array([s["step"] for s in after], float)
    rss = np.array([s["resident_bytes"] for s in after], float)
    slope = float(np.polyfit(steps, rss, 1)[0]) if len(after) >= 3 else 0.0
    growth = late - early
    if growth > rss_tolerance:
        problems.append(f"resident memory grew by {growth / 2**20:.1f} MiB after warm-up "
                        f"(slope {slope:.0f} B/step)")
    return problems


def write_outputs(samples, csv_path, png_path):
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(samples[0]))
            writer.writeheader()
            writer.writerows(samples)
    if png_path:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no PNG written", file=sys.stderr)
            return False
        steps = [s["step"] for s in samples]
        fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        axes[0].plot(steps, [s["bytes_reserved"] / 2**20 for s in samples], label="pool reserved")
        axes[0].plot(steps, [s["bytes_in_use"] / 2**20 for s in samples], label="in use (live)")
        axes[0].plot(steps, [s["bytes_cached"] / 2**20 for s in samples], label="pool cache")
        axes[0].set_ylabel("device MiB")
        axes[0].legend()
        axes[1].plot(steps, [s["resident_bytes"] / 2**20 for s in samples], color="black")
        axes[1].set_ylabel("process RSS MiB")
        axes[1].set_xlabel("training step")
        fig.suptitle("AetherCL soak: default llm.py training step")
        fig.savefig(png_path, dpi=100)
        plt.close(fig)
    return True


def run(steps=10_000, sample_every=None, warmup=None, csv_path=None, png_path=None,
        gpu_index=0, rss_tolerance=8 << 20, quiet=False) -> dict:
    lib = Library()
    if lib.initialize_gpu(gpu_index) != 1:
        raise RuntimeError(f"initialize_gpu failed: {lib.last_error()}")
    sample_every = sample_every or max(1, steps // 200)
    warmup = warmup if warmup is not None else max(sample_every, steps // 10)
    started = time.perf_counter()
    rng = np.random.default_rng(2024)
    recorder = Recorder(lib, gpu_index)
    baseline_buffers = recorder.live_buffers()
    model = LlmStep(recorder, *make_weights(rng))
    setup_calls = sum(recorder.calls.values())
    samples = [sample(lib, gpu_index, 0, started)]
    for step in range(1, steps + 1):
        ids = rng.integers(1, V - 1, size=(B, S)).astype(np.int32)
        targets = np.roll(ids, -1, axis=1)
        targets[:, -1] = 0                                   # padding targets, as llm.py pads
        model.step(ids, targets)
        if step % sample_every == 0 or step == steps:
            samples.append(sample(lib, gpu_index, step, started))
            if not quiet and step % (sample_every * 20) == 0:
                s = samples[-1]
                print(f"step {step}: {s['live_buffers']} buffers, "
                      f"{s['bytes_reserved'] / 2**20:.1f} MiB reserved, "
                      f"RSS {s['resident_bytes'] / 2**20:.1f} MiB, {s['seconds']:.1f} s",
                      flush=True)
    calls_per_step = (sum(recorder.calls.values()) - setup_calls) / steps
    problems = analyse(samples, warmup, rss_tolerance)
    model.teardown()
    end_buffers = recorder.live_buffers()
    if end_buffers != baseline_buffers:
        problems.append(f"{end_buffers - baseline_buffers} buffers leaked by the run")
    if recorder.live:
        problems.append(f"{len(recorder.live)} handles the soak itself did not free")
    png_written = write_outputs(samples, csv_path, png_path)
    return {"steps": steps, "seconds": round(time.perf_counter() - started, 1),
            "calls_per_step": round(calls_per_step, 1), "problems": problems,
            "samples": len(samples), "png": bool(png_path) and png_written,
            "final": samples[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--sample-every", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None, help="steps before the baseline")
    parser.add_argument("--csv", default="soak.csv")
    parser.add_argument("--png", default="soak.png")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--rss-tolerance-mib", type=float, default=8.0)
    args = parser.parse_args()
    report = run(args.steps, args.sample_every, args.warmup, args.csv, args.png, args.gpu,
                 int(args.rss_tolerance_mib * 2**20))
    print(json.dumps({k: v for k, v in report.items() if k != "final"}, indent=1))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
