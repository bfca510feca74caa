"""Constants the frontend's modules share: element types, the default training configuration, the
bundled corpus."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Sequence

import numpy as np

FP_TYPE = np.float32   # every activation, weight and gradient
IDX_TYPE = np.int32    # token ids and targets
BUNDLED_CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus.txt"

DEFAULT_CONFIG: Dict[str, Any] = {
    # model: the documented default (docs/ABI.md §7.6)
    "max_len": 64, "batch_size": 16, "embed_dim": 16, "num_heads": 4, "d_ff": 256,
    "num_layers": 6, "causal": True,
    # optimisation
    "lr": 3e-4, "betas": [0.9, 0.999], "eps": 1e-8, "wd": 0.02, "num_epochs": 20,
    "optimizer": "adam",   # "adam": coupled L2 decay (the original); "adamw": decoupled
    "dropout": 0.0,        # residual dropout after attention and feed-forward (training only)
    "max_steps": None, "val_split": 0.1, "seed": 1234, "init_seed": 42,
    # evaluation and output
    "eval_every": 500, "eval_batches": 8, "sample_length": 200, "temperature": 0.8,
    "data_file": "input.txt", "checkpoint_filename": "test_model.npz",
    "time_limit_s": None,
    # numerics: the compute mode of the matrix products (ocl_llm.runtime.set_matmul_precision)
    "matmul_precision": "fp32",
    # storage of activations and their gradients (ocl_llm.runtime.set_activation_precision)
    "activations": "fp32",
    # the training step replayed from graphs (ocl_llm.graph_step): "auto" and "on" wherever the
    # run allows it (no dropout; faster on an H200, no slower on PoCL: docs/PERFORMANCE.md),
    # "on" also saying why not, "off" never
    "graph": "auto",
}


def numel(shape: Sequence[int]) -> int:
    """Element count of a shape (1 for a scalar's empty shape)."""
    return math.prod(int(s) for s in shape)
