"""Where the host spends a replayed training step (ocl_llm.graph_step.CapturedStep, GPT small,
bf16-mixed by default): median milliseconds per step of writing the batch, the replay call, the
loss read (which waits for the device to finish the replay), the eager optimizer step and the
final drain, over timed steps run back to back as bench train runs them.

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
    from ocl_llm.train import apply_step
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

    phases = {name: [] for name in ("write", "replay", "read", "optimizer", "step")}
    for i in range(args.steps):
        inputs, targets = batches[i % 4]
        t0 = time.perf_counter()
        valid = step._write_batch(inputs, targets)
        t1 = time.perf_counter()
        step.graph.replay()
        t2 = time.perf_counter()
        losses = step.loss_rows.read((valid.size,))
        loss = float(losses[valid].astype(np.float64).sum() / valid.sum())
        t3 = time.perf_counter()
        if math.isfinite(loss):
            for p, grad in zip(step.parameters, step.grads):
                p.grad = grad
            apply_step(step.parameters, step.optimizer, step.scaler)
        t4 = time.perf_counter()
        for name, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            phases[name].append(value * 1e3)
    device.synchronize()
    info = step.info()
    print(f"{args.preset} {args.precision}: {info.get('kernels', '?')} kernels per replay; "
          f"median ms per step over {args.steps} steps")
    for name, values in phases.items():
        print(f"  {name:10s} {statistics.median(values):7.3f}   (min {min(values):.3f})")
    step.close()


if __name__ == "__main__":
    main()
