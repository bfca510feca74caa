#!/usr/bin/env python3
"""Soak test: the default llm.py model's training-step call sequence (docs/ABI.md §7.2 and §7.8)
for N steps, sampling device memory statistics and the process's resident memory.

    tools/aethercl python tools/soak.py --steps 10000 --csv soak.csv --png soak.png

Every driver call of a step is made with the sizes of the default configuration (B=16, S=64,
E=16, 4 heads, d_ff=256, 6 layers, V=53): about 700 calls of allocate / write / compute / read /
free. Samples of aethercl_memory_stats (bytes_in_use, bytes_reserved, live_buffers, programs,
kernels) and /proc/self/statm go to a CSV (and a PNG when matplotlib is present). The run fails
(exit 1) when a call fails for any reason other than 'not implemented', when buffers, programs or
reserved bytes at the end differ from the baseline taken after warm-up, or when resident memory
keeps growing. Entry points still answering 'not implemented' are counted and reported."""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402

B, S, E, H, DK, FF, LAYERS, V = 16, 64, 16, 4, 4, 256, 6, 53
F = 4  # bytes per float32
PAGE = os.sysconf("SC_PAGE_SIZE")


class Driver:
    """Thin wrappers that count calls and tolerate only 'not implemented' failures."""

    def __init__(self, lib: Library, index: int):
        self.lib, self.index = lib, index
        self.calls = Counter()
        self.not_implemented = Counter()
        self.live = set()
        self.host = {}

    def _status(self, name, result):
        self.calls[name] += 1
        if result == 1:
            return
        if self.lib.last_error_code() == 9:
            self.not_implemented[name] += 1
            return
        raise RuntimeError(f"{name} failed: {self.lib.last_error()}")

    def alloc(self, nbytes):
        handle = self.lib.allocate_gpu_memory(self.index, nbytes)
        self.calls["allocate"] += 1
        if not handle:
            raise RuntimeError(f"allocate({nbytes}) failed: {self.lib.last_error()}")
        self.live.add(handle)
        return handle

    def free(self, *handles):
        for handle in handles:
            self.lib.free_gpu_memory(self.index, handle)
            self.calls["free"] += 1
            self.live.discard(handle)

    def _host(self, nbytes, fill=0.0):
        key = (nbytes, fill)
        if key not in self.host:
            self.host[key] = np.full(nbytes // F, fill, np.float32)
        return self.host[key]

    def write(self, handle, nbytes, fill=0.0):
        data = self._host(nbytes, fill)
        self._status("write", self.lib.write_host_to_gpu_blocking(
            self.index, handle, 0, nbytes, data.ctypes.data))

    def upload(self, nbytes, fill=0.0):
        handle = self.alloc(nbytes)
        self.write(handle, nbytes, fill)
        return handle

    def read(self, handle, nbytes):
        out = np.empty(nbytes // F, np.float32)
        self._status("read", self.lib.read_gpu_to_host_blocking(
            self.index, handle, 0, nbytes, out.ctypes.data))
        return out

    def call(self, name, *args):
        self._status(name, getattr(self.lib, name)(self.index, *args))

    def new(self, name, nbytes, inputs, dims):
        """Allocates an output of nbytes and runs name(*inputs, out, *dims) into it."""
        out = self.alloc(nbytes)
        self.call(name, *inputs, out, *dims)
        return out


def grad_scaffolding(d: Driver, x, nbytes):
    """llm.py's LayerNorm/softmax bookkeeping: a clone of x, a zeroed grad buffer and its clone,
    all of which die at once (docs/ABI.md §7.2 step 1)."""
    keep = d.alloc(nbytes)
    d.call("execute_clone_on_gpu", x, keep, nbytes)
    grad = d.upload(nbytes)
    grad_clone = d.alloc(nbytes)
    d.call("execute_clone_on_gpu", grad, grad_clone, nbytes)
    d.free(keep, grad, grad_clone)


def host_bias_add(d: Driver, x, nbytes, bias, bias_bytes):
    d.read(x, nbytes)
    d.read(bias, bias_bytes)
    return d.upload(nbytes, 0.25)


def layernorm(d: Driver, x):
    y = d.alloc(B * S * E * F)
    d._status("execute_layernorm_on_gpu", d.lib.execute_layernorm_on_gpu(
        d.index, x, y, B * S, E, 1e-5))
    grad_scaffolding(d, x, B * S * E * F)
    return y


def block(d: Driver, x, w):
    act = B * S * E * F
    temps = []
    h1 = layernorm(d, x)
    q, k, v = (d.new("execute_matmul_on_gpu", act, (h1, w[name]), (B, S, E, E))
               for name in ("wq", "wk", "wv"))
    qh, kh, vh = (d.new("execute_transpose_12_batched_gpu", act, (t,), (B, S, H, DK))
                  for t in (q, k, v))
    kt = d.new("execute_transpose_batched_gpu", act, (kh,), (B * H, S, DK))
    scores = d.new("execute_matmul_batched_on_gpu", B * H * S * S * F, (qh, kt),
                   (B * H, S, S, DK))
    scale = d.upload(B * H * S * S * F, 0.5)
    scaled = d.new("execute_mul_on_gpu", B * H * S * S * F, (scores, scale), (B * H * S * S,))
    d.free(scale)
    probs = d.alloc(B * H * S * S * F)
    d.call("execute_softmax_on_gpu", scaled, probs, B * H * S, S)
    grad_scaffolding(d, probs, B * H * S * S * F)
    o = d.new("execute_matmul_batched_on_gpu", act, (probs, vh), (B * H, S, DK, S))
    merged = d.new("execute_transpose_12_batched_gpu", act, (o,), (B, H, S, DK))
    proj = d.new("execute_matmul_on_gpu", act, (merged, w["wo"]), (B, S, E, E))
    proj_b = host_bias_add(d, proj, act, w["bo"], E * F)
    res1 = d.new("execute_add_on_gpu", act, (x, proj_b), (B * S * E,))
    h2 = layernorm(d, res1)
    ff1 = d.new("execute_matmul_on_gpu", B * S * FF * F, (h2, w["w1"]), (B, S, FF, E))
    ff1_b = host_bias_add(d, ff1, B * S * FF * F, w["b1"], FF * F)
    act1 = d.new("execute_gelu_on_gpu", B * S * FF * F, (ff1_b,), (B * S * FF,))
    ff2 = d.new("execute_matmul_on_gpu", act, (act1, w["w2"]), (B, S, E, FF))
    ff2_b = host_bias_add(d, ff2, act, w["b2"], E * F)
    out = d.new("execute_add_on_gpu", act, (res1, ff2_b), (B * S * E,))
    temps += [h1, q, k, v, qh, kh, vh, kt, scores, scaled, probs, o, merged, proj, proj_b, res1,
              h2, ff1, ff1_b, act1, ff2, ff2_b]
    d.free(*temps)
    return out


class Model:
    def __init__(self, d: Driver):
        self.d = d
        shapes = {"wq": E * E, "wk": E * E, "wv": E * E, "wo": E * E, "bo": E, "w1": E * FF,
                  "b1": FF, "w2": FF * E, "b2": E}
        self.layers = [{name: d.upload(n * F, 0.01) for name, n in shapes.items()}
                       for _ in range(LAYERS)]
        self.embedding = d.upload(V * E * F, 0.01)
        self.w_out, self.b_out = d.upload(E * V * F, 0.01), d.upload(V * F)
        self.pe = d.upload(S * E * F, 0.1)
        params = 1 + LAYERS * len(shapes) + 2
        self.moments = [d.upload(V * F) for _ in range(2 * params)]
        self.b_out_m, self.b_out_v = self.moments[0], self.moments[1]
        self.b_out_grad = None
        self.t = 0

    def step(self):
        d = self.d
        if self.b_out_grad is not None:                                   # zero_grad
            d.free(self.b_out_grad)
        self.b_out_grad = d.upload(V * F)
        d.read(self.embedding, V * E * F)                                 # host embedding
        x = d.upload(B * S * E * F, 0.1)
        pe_slice = d.alloc(S * E * F)
        d.call("execute_clone_on_gpu", self.pe, pe_slice, S * E * F)
        y = d.alloc(B * S * E * F)
        d.call("execute_add_broadcast_pe_gpu", x, pe_slice, y, B, S, E)
        d.free(pe_slice, x)
        for weights in self.layers:
            out = block(d, y, weights)
            d.free(y)
            y = out
        final = layernorm(d, y)
        logits = d.new("execute_matmul_on_gpu", B * S * V * F, (final, self.w_out), (B, S, V, E))
        logits_b = host_bias_add(d, logits, B * S * V * F, self.b_out, V * F)
        d.free(y, final, logits)
        lp, grad = d.alloc(B * S * V * F), d.alloc(B * S * V * F)         # loss
        targets, loss = d.alloc(B * S * 4), d.alloc(B * S * F)
        d.write(targets, B * S * 4, 0.0)   # int32 zeros share float zeros' bytes
        d.call("execute_log_softmax_stable_gpu", logits_b, lp, B, S, V)
        d.call("execute_cross_entropy_loss_grad_gpu", lp, targets, grad, loss, B, S, V)
        d.read(loss, B * S * F)
        scale = d.upload(B * S * V * F, 1.0 / 1024)
        scaled = d.new("execute_mul_on_gpu", B * S * V * F, (grad, scale), (B * S * V,))
        d.free(scale)
        logits_grad = d.upload(B * S * V * F)          # a fresh, zeroed grad buffer
        for nbytes, target in ((B * S * V * F, logits_grad), (V * F, self.b_out_grad)):
            increment = d.upload(nbytes, 0.001)        # grad accumulation: add, clone, free
            tmp = d.new("execute_add_on_gpu", nbytes, (target, increment), (nbytes // F,))
            d.call("execute_clone_on_gpu", tmp, target, nbytes)
            d.free(tmp, increment)
        self.t += 1
        d.call("execute_adam_update_on_gpu", self.b_out, self.b_out_grad, self.b_out_m,
               self.b_out_v, V, self.t, 3e-4, 0.9, 0.999, 1e-8, 0.02)
        d.free(lp, targets, loss, grad, scaled, logits_grad, logits_b)

    def release(self):
        d = self.d
        for weights in self.layers:
            d.free(*weights.values())
        d.free(self.embedding, self.w_out, self.b_out, self.pe, *self.moments)
        if self.b_out_grad is not None:
            d.free(self.b_out_grad)


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def sample(d: Driver, step: int, started: float) -> dict:
    stats = json.loads(d.lib.json_call("aethercl_memory_stats", d.index))
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
    d = Driver(lib, gpu_index)
    sample_every = sample_every or max(1, steps // 200)
    warmup = warmup if warmup is not None else max(sample_every, steps // 10)
    started = time.perf_counter()
    baseline_buffers = json.loads(lib.json_call("aethercl_memory_stats", gpu_index))["live_buffers"]
    model = Model(d)
    samples = [sample(d, 0, started)]
    for step in range(1, steps + 1):
        model.step()
        if step % sample_every == 0 or step == steps:
            samples.append(sample(d, step, started))
            if not quiet and step % (sample_every * 20) == 0:
                s = samples[-1]
                print(f"step {step}: {s['live_buffers']} buffers, "
                      f"{s['bytes_reserved'] / 2**20:.1f} MiB reserved, "
                      f"RSS {s['resident_bytes'] / 2**20:.1f} MiB, {s['seconds']:.1f} s",
                      flush=True)
    calls_per_step = sum(d.calls.values()) / steps
    problems = analyse(samples, warmup, rss_tolerance)
    model.release()
    end = json.loads(lib.json_call("aethercl_memory_stats", gpu_index))
    if end["live_buffers"] != baseline_buffers:
        problems.append(f"{end['live_buffers'] - baseline_buffers} buffers leaked by the run")
    if d.live:
        problems.append(f"{len(d.live)} handles the soak itself did not free")
    png_written = write_outputs(samples, csv_path, png_path)
    return {"steps": steps, "seconds": round(time.perf_counter() - started, 1),
            "calls_per_step": round(calls_per_step, 1),
            "not_implemented": dict(d.not_implemented), "problems": problems,
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
    if report["not_implemented"]:
        print("entry points still 'not implemented' (their calls were counted, not run): "
              + ", ".join(sorted(report["not_implemented"])))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
