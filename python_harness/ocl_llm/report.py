"""What a training run shows a person: the progress line, the loss-curve PNG and the summary."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np


# The progress bar (tqdm on a terminal where installed, plain lines otherwise) lives in the
# aethercl package; re-exported here for the frontend's interface.
from aethercl.progress import ProgressBar, format_seconds  # noqa: E402,F401


def plot_losses(history: Dict[str, List[List[float]]], path) -> Optional[Path]:
    """Writes the loss curves (training per step, smoothed; validation per evaluation) as a PNG
    with matplotlib's Agg backend. Returns None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[ocl] matplotlib is not installed: no loss curve", file=sys.stderr)
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    train = np.asarray(history.get("train", []), np.float64).reshape(-1, 2)
    val = np.asarray(history.get("val", []), np.float64).reshape(-1, 2)
    if len(train):
        ax.plot(train[:, 0], train[:, 1], color="#9ecae1", linewidth=0.8, label="training (step)")
        k = max(1, len(train) // 40)
        if k > 1:
            smooth = np.convolve(train[:, 1], np.ones(k) / k, mode="valid")
            ax.plot(train[k - 1:, 0], smooth, color="#3182bd", linewidth=1.6,
                    label=f"training ({k}-step mean)")
    if len(val):
        ax.plot(val[:, 0], val[:, 1], "o-", color="#e6550d", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross entropy (nats per character)")
    ax.set_title("OCL-LLM on AetherCL: loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def print_summary(summary: Dict[str, Any], stream=None) -> None:
    out = stream if stream is not None else sys.stdout
    first, last = summary["first_val_loss"], summary["last_val_loss"]
    drop = (first - last) / first * 100 if first else 0.0
    print(f"[ocl] {summary['steps']} steps in {summary['seconds']:.1f} s "
          f"({summary['tokens_per_second']:.0f} tokens/s); validation loss {first:.4f} -> "
          f"{last:.4f} ({drop:.1f} % lower), best {summary['best_val_loss']:.4f}", file=out)
    if summary.get("skipped_steps"):
        print(f"[ocl] {summary['skipped_steps']} steps skipped: fp16 gradients overflowed "
              f"(the loss scale was halved each time)", file=out)
    if summary.get("checkpoint"):
        print(f"[ocl] checkpoint: {summary['checkpoint']} (+ .json metadata)", file=out)
    if summary.get("plot"):
        print(f"[ocl] loss curve: {summary['plot']}", file=out)
    if summary.get("sample") is not None:
        print("[ocl] sample:\n" + summary["sample"], file=out)
