"""Checkpoints of the format before ocl_llm.save (ocl-llm-aethercl/1: the transformer's metadata
as JSON inside the .npz, weights as param_<i>, adam_m_<i>, adam_v_<i>), read as the metadata and
arrays of the current format."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

LEGACY_FORMAT = "ocl-llm-aethercl/1"


def read_legacy(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """An ocl-llm-aethercl/1 checkpoint as the metadata and arrays of the current format."""
    weights_path = Path(path).with_suffix(".npz")
    with np.load(weights_path, allow_pickle=False) as archive:
        if "metadata_json" not in archive.files:
            raise ValueError(f"{weights_path}: no metadata (neither a .json beside it nor an "
                             f"{LEGACY_FORMAT} checkpoint)")
        arrays = {key: archive[key] for key in archive.files}
    old = json.loads(str(arrays.pop("metadata_json")))
    if old.get("format") != LEGACY_FORMAT:
        raise ValueError(f"{weights_path}: format {old.get('format')!r} is not {LEGACY_FORMAT}")
    n = len(old["parameters"])
    o = old["optimizer"]
    converted = {f"model/param_{i}": arrays[f"param_{i}"] for i in range(n)}
    for slot in ("m", "v"):
        converted.update({f"optimizer/{slot}.{i}": arrays[f"adam_{slot}_{i}"] for i in range(n)})
    objects = {
        "model": {"kind": "transformer", "config": old["config"], "training": True},
        "optimizer": {"kind": "optimizer",
                      "type": "AdamW" if o.get("kind") == "adamw" else "AdamOptimizer",
                      "hyper": {"lr": o["lr"], "betas": o["betas"], "eps": o["eps"],
                                "weight_decay": o["weight_decay"]},
                      "steps": [int(o["t"])] * n,
                      "params": [["model", f"param_{i}"] for i in range(n)]},
        "tokenizer": {"kind": "tokenizer", **old["tokenizer"]},
        "config": {"kind": "value", "value": old["config"]},
        "progress": {"kind": "value", "value": old["progress"]},
    }
    return {"format": LEGACY_FORMAT, "root": "dict", "objects": objects}, converted
