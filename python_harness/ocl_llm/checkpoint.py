"""The training job's checkpoints: the transformer, its optimizer, the tokenizer, the configuration
and the progress, through ocl_llm.save (JSON metadata beside .npz weights, SHA-256 per tensor);
checkpoints of the earlier format (ocl-llm-aethercl/1: metadata inside the .npz) still load."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

from .model import SimpleModel
from .optimizers import AdamOptimizer
from .serialize import FORMAT, load, read_any, save
from .text import TinyTokenizer

CHECKPOINT_FORMAT = FORMAT


def save_checkpoint(path, model: SimpleModel, optimizer: AdamOptimizer, tokenizer: TinyTokenizer,
                    config: Dict[str, Any], progress: Dict[str, Any]) -> Path:
    """Writes path's .npz (weights) and .json (metadata); returns the .npz path."""
    return save({"model": model, "optimizer": optimizer, "tokenizer": tokenizer,
                 "config": config, "progress": progress}, path)


def read_checkpoint(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(metadata, arrays) of a checkpoint of either format, checked, without touching the
    device."""
    return read_any(path)


def load_checkpoint(path) -> Tuple[SimpleModel, AdamOptimizer, TinyTokenizer, Dict[str, Any],
                                   Dict[str, Any]]:
    """Rebuilds model, optimizer (steps and moments) and tokenizer on the current runtime;
    returns them with config and progress. Needs an initialised driver."""
    loaded = load(path)
    return (loaded["model"], loaded["optimizer"], loaded["tokenizer"], loaded["config"],
            loaded["progress"])
