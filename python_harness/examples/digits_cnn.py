#!/usr/bin/env python3
"""A small CNN that learns scikit-learn's bundled handwritten digits (1,797 8x8 images; the data
ships inside the scikit-learn package, nothing is downloaded) on the AetherCL driver, with the
version-3 training ops end to end: conv2d, BatchNorm2d, ReLU, MaxPool2d, Dropout, Linear,
cross-entropy with label smoothing, AdamW and on-device gradient clipping.

    tools/aethercl python python_harness/examples/digits_cnn.py [--epochs 15] [--plot digits.png]

Prints a progress bar (images per second after the first step, which compiles the kernels on a
cold cache), the held-out accuracy and a confusion matrix; --plot writes the loss curve and the
confusion matrix as a PNG."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ocl_llm import ocl_initialize, ocl_shutdown  # noqa: E402
from ocl_llm import functional as F  # noqa: E402
from ocl_llm.layers import (BatchNorm2d, Conv2d, Dropout, Flatten, Linear, MaxPool2d,  # noqa: E402
                            ReLU, Sequential)
from ocl_llm.optimizers import AdamW, clip_grad_norm  # noqa: E402
from ocl_llm.report import ProgressBar  # noqa: E402
from ocl_llm.tensor import OclTensor  # noqa: E402


def load_digits_split(test_fraction: float = 0.2, seed: int = 0):
    """Images scaled to [0, 1] as (N, 1, 8, 8) float32, int32 labels; a stratified split."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), bool)
    for label in range(10):
        members = np.flatnonzero(y == label)
        test[rng.choice(members, int(round(len(members) * test_fraction)), replace=False)] = True
    return x[~test], y[~test], x[test], y[test]


def build_model(rng: np.random.Generator, dropout: float) -> Sequential:
    return Sequential(
        Conv2d(1, 32, 3, padding=1, rng=rng, name="conv1"), BatchNorm2d(32, name="bn1"), ReLU(),
        Conv2d(32, 32, 3, padding=1, rng=rng, name="conv2"), BatchNorm2d(32, name="bn2"), ReLU(),
        MaxPool2d(2),                                     # 32 x 4 x 4
        Conv2d(32, 64, 3, padding=1, rng=rng, name="conv3"), ReLU(),
        MaxPool2d(2),                                     # 64 x 2 x 2
        Flatten(), Dropout(dropout), Linear(256, 10, rng=rng, name="fc"))


def predict(model: Sequential, x: np.ndarray, batch: int = 256) -> np.ndarray:
    model.eval()
    out = []
    with OclTensor.no_grad():
        for start in range(0, len(x), batch):
            logits = model(OclTensor(x[start:start + batch]))
            out.append(logits.to_host().argmax(axis=1))
    model.train()
    return np.concatenate(out)


def confusion(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    matrix = np.zeros((10, 10), np.int64)
    np.add.at(matrix, (y_true, y_pred), 1)
    return matrix


def train(epochs: int = 15, batch_size: int = 32, lr: float = 3e-3, seed: int = 0,
          dropout: float = 0.2, clip: float = 5.0, gpu: int = 0, progress: bool = True,
          shutdown_driver: bool = True):
    """Trains and returns a dict with the test accuracy, the confusion matrix and the losses.
    shutdown_driver=False leaves the driver initialised (for callers that keep using it)."""
    ocl_initialize(gpu, verbose=progress)
    try:
        x_train, y_train, x_test, y_test = load_digits_split(seed=seed)
        rng = np.random.default_rng(seed)
        model = build_model(rng, dropout)
        optimizer = AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
        losses, start = [], time.perf_counter()
        steps_per_epoch = (len(x_train) + batch_size - 1) // batch_size
        bar = ProgressBar(epochs * steps_per_epoch, unit="img") if progress else None
        images = 0
        for epoch in range(epochs):
            order = rng.permutation(len(x_train))
            for step in range(steps_per_epoch):
                idx = order[step * batch_size:(step + 1) * batch_size]
                optimizer.zero_grad()
                logits = model(OclTensor(x_train[idx]))
                loss = F.cross_entropy(logits, y_train[idx], label_smoothing=0.05)
                loss.backward()
                clip_grad_norm(model.parameters(), clip)
                optimizer.step()
                # One host read per step, for the curve and the bar (training itself needs none).
                losses.append(float(loss.to_host()[0]))
                images += len(idx)
                if bar:
                    bar.update(epoch * steps_per_epoch + step + 1, losses[-1], images)
        if bar:
            bar.close()
        predictions = predict(model, x_test)
        accuracy = float((predictions == y_test).mean())
        return {"accuracy": accuracy, "confusion": confusion(y_test, predictions),
                "losses": losses, "seconds": time.perf_counter() - start,
                "train_size": len(x_train), "test_size": len(x_test)}
    finally:
        ocl_shutdown(shutdown_driver=shutdown_driver)


def plot(result, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    left.plot(result["losses"], lw=0.8)
    left.set_xlabel("step")
    left.set_ylabel("training loss")
    left.set_title("cross-entropy (label smoothing 0.05)")
    matrix = result["confusion"]
    right.imshow(matrix, cmap="Blues")
    for (i, j), count in np.ndenumerate(matrix):
        if count:
            right.text(j, i, str(count), ha="center", va="center", fontsize=8,
                       color="white" if count > matrix.max() / 2 else "black")
    right.set_xlabel("predicted")
    right.set_ylabel("true")
    right.set_title(f"test accuracy {result['accuracy']:.1%}")
    right.set_xticks(range(10))
    right.set_yticks(range(10))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--plot", default=None, help="write the loss curve and confusion matrix here")
    args = p.parse_args(argv)
    result = train(args.epochs, args.batch_size, args.lr, args.seed, gpu=args.gpu)
    print(f"test accuracy {result['accuracy']:.2%} on {result['test_size']} held-out images "
          f"({result['train_size']} for training), {result['seconds']:.1f} s")
    print("confusion matrix (rows: true digit, columns: predicted):")
    for row in result["confusion"]:
        print(" ".join(f"{v:3d}" for v in row))
    if args.plot:
        plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
