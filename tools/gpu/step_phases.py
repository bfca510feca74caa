"""Where the host spends a replayed training step (ocl_llm.graph_step.CapturedStep, GPT small,
bf16-mixed by default): median milliseconds per step of writing the batch, the replay call, the
optimizer's enqueue and the loss read, over timed steps run back to back as bench train runs them,
in two orders measured in the same run: "gated" (CapturedStep's: the optimizer enqueued behind the
replay with the largest row loss as its finite gate, then the loss read) and "after-read" (the
loss read first, which waits for the device, then the optimizer: the device idles while the host
builds the optimizer's launches).

Usage (on the GPU machine, after tools/gpu/env.sh): python3 tools/gpu/step_phases.py [--steps 30]
    [--precision bf16-mixed] [--preset small]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python_harness"), str(ROOT / "tools" / "bench")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precision", default="bf16-mixed")
    parser.add_argument("--preset", default="small")
    args = parser.parse_args()

    from ocl_llm.graph_step import CapturedStep
    from ocl_llm.runtime import ocl_initialize, set_activation_precision, set_matmul_precision
    from train_common import GPT_PRESETS, VOCAB
    from train_ours import _Run

    device = ocl_initialize(0, verbose=False)
    products = args.precision.partition("-mixed")[0]
    set_matmul_precision(products)
    set_activation_precision(products if args.precision.endswith("-mixed") else "fp32")
    sizes = GPT_PRESETS[args.preset]
    run = _Run("gpt", sizes, graph=True)
    rng = np.random.default_rng(0)
    shape = (sizes["batch"], sizes["context"])
    batches = [(rng.integers(1, VOCAB, shape).astype(np.int32),
                rng.integers(1, VOCAB, shape).astype(np.int32)) for _ in range(4)]
    step = CapturedStep(run.model, run.optimizer, *batches[0])
    for i in range(5):
        step(*batches[i % 4])
    device.synchronize()

    results = {}
    for _ in range(2):   # the two orders alternate twice; each keeps its better median step
        for order in ("after-read", "gated"):
            phases = timed_steps(step, batches, args.steps, order == "gated")
            if order not in results or statistics.median(phases["step"]) < \
                    statistics.median(results[order]["step"]):
                results[order] = phases
    device.synchronize()
    info = step.info()
    print(f"{args.preset} {args.precision}: {info.get('kernels', '?')} kernels per replay; "
          f"median ms per step over {args.steps} steps")
    for order, phases in results.items():
        print(f" {order}:")
        for name, values in phases.items():
            print(f"  {name:10s} {statistics.median(values):7.3f}   (min {min(values):.3f})")
    step.close()


def timed_steps(step, batches, steps: int, gated: bool) -> dict:
    """Milliseconds per phase of each step, in the order given."""
    from ocl_llm.train import apply_step
    phases = {name: [] for name in ("write", "replay", "optimizer", "read", "step")}
    for i in range(steps):
        inputs, targets = batches[i % 4]
        marks = {}
        t0 = time.perf_counter()
        valid = step._write_batch(inputs, targets)
        marks["write"] = time.perf_counter()
        step.graph.replay()
        marks["replay"] = time.perf_counter()
        if gated:
            step._attach_grads()
            step.optimizer.step(finite_gate=step.largest_loss)
            marks["optimizer"] = time.perf_counter()
        losses = step.loss_rows.read((valid.size,))
        loss = float(losses[valid].astype(np.float64).sum() / valid.sum())
        marks["read"] = time.perf_counter()
        if gated and not np.isfinite(losses.max()):
            step.optimizer.gate_closed()
        if not gated and math.isfinite(loss):
            step._attach_grads()
            apply_step(step.parameters, step.optimizer, step.scaler)
            marks["optimizer"] = time.perf_counter()
        end = time.perf_counter()
        last = t0
        for name, at in sorted(marks.items(), key=lambda item: item[1]):
            phases[name].append((at - last) * 1e3)
            last = at
        phases["step"].append((end - t0) * 1e3)
    return phases


if __name__ == "__main__":
    main()
