"""Checkpoints: arrays in .npz (no pickle), metadata as JSON (inside the .npz and beside it)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

from .model import SimpleModel
from .optim import AdamOptimizer
from .text import TinyTokenizer

CHECKPOINT_FORMAT = "ocl-llm-aethercl/1"


def _json_sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def save_checkpoint(path, model: SimpleModel, optimizer: AdamOptimizer, tokenizer: TinyTokenizer,
                    config: Dict[str, Any], progress: Dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    params = model.parameters()
    arrays: Dict[str, np.ndarray] = {}
    for key, value in model.state_dict().items():
        arrays[key] = value
    opt = optimizer.state_dict()
    for i in range(len(params)):
        arrays[f"adam_m_{i}"] = opt["m"][f"state_{i}"]
        arrays[f"adam_v_{i}"] = opt["v"][f"state_{i}"]
    metadata = {
        "format": CHECKPOINT_FORMAT,
        "config": config,
        "optimizer": {"t": opt["t"], "lr": optimizer.lr, "betas": list(optimizer.betas),
                      "eps": optimizer.eps, "weight_decay": optimizer.weight_decay},
        "tokenizer": {"vocab": tokenizer.get_vocab(),
                      "inv_vocab": {str(k): v for k, v in tokenizer.get_inv_vocab().items()}},
        "progress": progress,
        "parameters": [{"name": p.name, "shape": list(p.shape)} for p in params],
    }
    text = json.dumps(metadata, indent=1)
    arrays["metadata_json"] = np.array(text)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    _json_sidecar(path).write_text(text)
    return path


def read_checkpoint(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(metadata, arrays) of a checkpoint, without touching the device."""
    with np.load(Path(path), allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    metadata = json.loads(str(arrays.pop("metadata_json")))
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    return metadata, arrays


def load_checkpoint(path) -> Tuple[SimpleModel, AdamOptimizer, TinyTokenizer, Dict[str, Any],
                                   Dict[str, Any]]:
    """Rebuilds model, optimizer (t, m, v) and tokenizer; returns them with config and progress.
    Needs an initialised driver."""
    metadata, arrays = read_checkpoint(path)
    config = metadata["config"]
    tok = metadata["tokenizer"]
    tokenizer = TinyTokenizer(tok["vocab"], {int(k): v for k, v in tok["inv_vocab"].items()})
    model = SimpleModel(config)
    n = len(model.parameters())
    model.load_state_dict({f"param_{i}": arrays[f"param_{i}"] for i in range(n)})
    o = metadata["optimizer"]
    optimizer = AdamOptimizer(model.parameters(), lr=o["lr"], betas=o["betas"], eps=o["eps"],
                              weight_decay=o["weight_decay"])
    optimizer.load_state_dict({"t": o["t"],
                               "m": {f"state_{i}": arrays[f"adam_m_{i}"] for i in range(n)},
                               "v": {f"state_{i}": arrays[f"adam_v_{i}"] for i in range(n)}})
    return model, optimizer, tokenizer, config, metadata["progress"]
