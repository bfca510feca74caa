"""Loss curves of the demo's transformer trained in several precisions, in one plot.

Usage: python3 tools/bench/precision_curves.py [--precisions fp32 tf32 bf16 bf16-mixed]
           [--steps 500] [--gpu 0] [--out DIR]
Each run starts from the same seeds and data order (the demo's configuration, train_demo.py);
only the compute mode of the matrix products differs (aethercl_set_matmul_precision), and for
bf16-mixed / fp16-mixed also the activations' storage (the training job's --precision: 16-bit
activations and gradients, fp16 with dynamic loss scaling). Each run's last validation loss is
printed against the first run's (the issue's test: within 2 %). Writes
precision_curves.json (per run: the training and validation losses per step, seconds) and
precision_curves.png (smoothed training loss and validation loss per precision).
"""
from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

import train_demo  # noqa: E402
import ocl_llm  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "tf32", "bf16"],
                        choices=list(ocl_llm.MATMUL_PRECISIONS) + ["bf16-mixed", "fp16-mixed"])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--out", default="precision_curves")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for precision in args.precisions:
        products = precision.partition("-mixed")[0]
        config = dict(train_demo.DEMO_CONFIG, max_steps=args.steps, time_limit_s=None,
                      matmul_precision=products, sample_length=0,
                      activations=products if precision.endswith("-mixed") else "fp32")
        summary = ocl_llm.train(config, gpu_id=args.gpu, save_dir=str(out / precision),
                                sample_prompt=None, stream=io.StringIO())
        runs[precision] = {"seconds": summary["seconds"], "history": summary["history"],
                           "last_val_loss": summary["last_val_loss"],
                           "skipped_steps": summary.get("skipped_steps", 0)}
        first = runs[args.precisions[0]]["last_val_loss"]
        print(f"{precision:>10}: {summary['steps']} steps in {summary['seconds']:.1f} s, "
              f"validation loss {summary['first_val_loss']:.4f} -> "
              f"{summary['last_val_loss']:.4f} ({summary['last_val_loss'] / first - 1:+.2%} "
              f"against {args.precisions[0]}; {runs[precision]['skipped_steps']} steps "
              f"skipped)", flush=True)
    (out / "precision_curves.json").write_text(json.dumps(runs, indent=1))
    plot(runs, out / "precision_curves.png")
    return 0


def plot(runs, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for precision, run in runs.items():
        train = np.asarray(run["history"]["train"], np.float64).reshape(-1, 2)
        val = np.asarray(run["history"]["val"], np.float64).reshape(-1, 2)
        k = max(1, len(train) // 40)
        smooth = np.convolve(train[:, 1], np.ones(k) / k, mode="valid")
        line, = ax.plot(train[k - 1:, 0], smooth, linewidth=1.4,
                        label=f"{precision} training ({k}-step mean)")
        ax.plot(val[:, 0], val[:, 1], "o--", color=line.get_color(), markersize=3,
                label=f"{precision} validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross entropy (nats per character)")
    ax.set_title("Demo transformer: loss per precision")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
