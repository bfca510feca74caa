"""What both sides of `bench train` share (NumPy only): model presets, the optimiser's
hyper-parameters, the random batches and the measuring loop (check steps, warm-up, timed steps)."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List

import numpy as np

VOCAB = 53   # ocl_llm's TinyTokenizer (the alphabet, <pad> and <unk>)
PAD_ID = 0   # targets equal to it are ignored by the loss (ours and PyTorch's ignore_index)

# GPT sizes: layers, width, heads, d_ff, context, batch. tiny = llm.py's default
# (ocl_llm.config.DEFAULT_CONFIG); small = the 19M-parameter model of issue 31.
GPT_PRESETS: Dict[str, Dict[str, int]] = {
    "tiny": dict(layers=6, width=16, heads=4, d_ff=256, context=64, batch=16),
    "small": dict(layers=6, width=512, heads=8, d_ff=2048, context=256, batch=16),
    "medium": dict(layers=12, width=768, heads=12, d_ff=3072, context=512, batch=8),
}
# AdamW as ocl_llm's --optimizer adamw with DEFAULT_CONFIG's values.
GPT_OPTIM = dict(lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.02)

# The digits CNN (python_harness/examples/digits_cnn.py) on 3x32x32 images: its layers, dropout,
# label smoothing, clipping and AdamW settings.
CNN_DEFAULTS = dict(channels=3, size=32, batch=256, classes=10, dropout=0.2,
                    label_smoothing=0.05, clip=5.0)
CNN_OPTIM = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)

BATCH_POOL = 4   # timed steps cycle through this many random batches


def gpt_batches(sizes: Dict[str, int], count: int, seed: int) -> List[tuple]:
    """Random token batches: ids in 1..V-1, the target of each position is the next id."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = rng.integers(1, VOCAB, size=(sizes["batch"], sizes["context"] + 1)).astype(np.int32)
        out.append((np.ascontiguousarray(ids[:, :-1]), np.ascontiguousarray(ids[:, 1:])))
    return out


def cnn_batches(sizes: Dict[str, int], count: int, seed: int) -> List[tuple]:
    """Random images N(0, 1) with random labels."""
    rng = np.random.default_rng(seed)
    shape = (sizes["batch"], sizes["channels"], sizes["size"], sizes["size"])
    return [(rng.standard_normal(shape).astype(np.float32),
             rng.integers(0, sizes["classes"], size=sizes["batch"]).astype(np.int32))
            for _ in range(count)]


def items_per_step(model: str, sizes: Dict[str, int]) -> int:
    """Tokens (gpt) or images (cnn) one step trains on."""
    return sizes["batch"] * (sizes["context"] if model == "gpt" else 1)


def measure(step: Callable[[tuple], float], sync: Callable[[], None], check_batch: tuple,
            batches: List[tuple], check_steps: int, warmup: int, steps: int) -> dict:
    """check_steps steps on one fixed batch (their losses: does it train?), then warmup and steps
    steps on the random batches; each timed step ends with sync() before the clock is read.
    step(batch) runs one training step and returns its loss as a float."""
    losses = [step(check_batch) for _ in range(check_steps)]
    for i in range(warmup):
        step(batches[i % len(batches)])
    sync()
    times = []
    for i in range(steps):
        batch = batches[i % len(batches)]
        start = time.perf_counter()
        step(batch)
        sync()
        times.append(time.perf_counter() - start)
    return {"check_losses": losses, "step_ms": [1e3 * t for t in times],
            "median_ms": 1e3 * statistics.median(times)}
