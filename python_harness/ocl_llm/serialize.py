"""ocl_llm.save / ocl_llm.load: layers (ocl_llm.layers), the transformer (SimpleModel),
optimizers, tokenizers, NumPy arrays and JSON values, as JSON metadata (format version, object
types, constructor arguments, hyper-parameters, each tensor's shape, dtype and SHA-256) beside
.npz weights (no pickle). Loading checks every tensor against the metadata and refuses a corrupt
or mismatched pair of files with what differs, then rebuilds the objects on a device."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import layers as _layers
from .legacy import LEGACY_FORMAT, read_legacy
from .model import SimpleModel
from .optimizers import SGD, AdamOptimizer, AdamW
from .runtime import Runtime, current_runtime, ocl_initialize, set_current_runtime
from .text import TinyTokenizer

FORMAT = "ocl-llm-aethercl/2"
LAYER_TYPES = {cls.__name__: cls for cls in (
    _layers.Sequential, _layers.Linear, _layers.Conv2d, _layers.ReLU, _layers.Tanh,
    _layers.Sigmoid, _layers.GELU, _layers.Dropout, _layers.MaxPool2d, _layers.AvgPool2d,
    _layers.Flatten, _layers.BatchNorm2d, _layers.LayerNorm)}
OPTIMIZER_TYPES = {cls.__name__: cls for cls in (SGD, AdamW, AdamOptimizer)}
_OPTIMIZERS = (SGD, AdamW, AdamOptimizer)


def paths(path) -> Tuple[Path, Path]:
    """(metadata .json, weights .npz) of a saved object named by either file (or their stem)."""
    path = Path(path)
    return path.with_suffix(".json"), path.with_suffix(".npz")


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


# ---- saving -------------------------------------------------------------------------------------
def _layer_spec(module) -> Dict[str, Any]:
    spec = {"type": type(module).__name__, "config": module.config(),
            "training": bool(module.training)}
    if isinstance(module, _layers.Sequential):
        spec["layers"] = [_layer_spec(layer) for layer in module.layers]
    elif type(module).__name__ not in LAYER_TYPES:
        raise TypeError(f"{type(module).__name__} is not an ocl_llm layer; save its "
                        f"state_dict() and load_state_dict() into a model you build")
    return spec


def _describe(name: str, obj, tensors: Dict[str, np.ndarray], owners: Dict[int, list]):
    """The metadata of one saved object; its tensors go into `tensors` under name/key."""
    prefix = f"{name}/" if name else ""
    if isinstance(obj, (_layers.Module, SimpleModel)):
        for key, value in obj.state_dict().items():
            tensors[prefix + key] = value
        for key, target in obj.named_tensors():
            owners.setdefault(id(target), [name, key])
        if isinstance(obj, SimpleModel):
            return {"kind": "transformer", "config": obj.config, "training": obj.training}
        return {"kind": "layer", "layer": _layer_spec(obj)}
    if isinstance(obj, _OPTIMIZERS):
        state = obj.state_dict()
        for key, value in state["state"].items():
            tensors[prefix + key] = value
        missing = [p.name for p in obj.parameters if id(p) not in owners]
        if missing:
            raise ValueError(f"optimizer '{name}': its parameters {missing} belong to no model "
                             f"saved before it; save them together, e.g. "
                             f"save({{'model': model, 'optimizer': optimizer}}, path)")
        return {"kind": "optimizer", "type": state["type"], "hyper": state["hyper"],
                "steps": state["steps"], "params": [owners[id(p)] for p in obj.parameters],
                "state": sorted(state["state"])}
    if isinstance(obj, TinyTokenizer):
        return {"kind": "tokenizer", "vocab": obj.vocab,
                "inv_vocab": {str(k): v for k, v in obj.inv_vocab.items()}}
    if isinstance(obj, np.ndarray):
        tensors[name] = obj
        return {"kind": "tensor"}
    try:
        return {"kind": "value", "value": json.loads(json.dumps(obj, allow_nan=False))}
    except (TypeError, ValueError) as error:
        raise TypeError(f"cannot save '{name}' ({type(obj).__name__}): not a layer, model, "
                        f"optimizer, tokenizer, array or JSON value ({error})") from None


def save(obj, path) -> Path:
    """Saves a layer or container, a SimpleModel, a TinyTokenizer, an array, a JSON value, or a
    dict of them by name ({"model": ..., "optimizer": ..., "step": 10}; an optimizer only beside
    the model that holds its parameters) as path's .json (metadata) and .npz (weights). Both are
    written under temporary names and renamed, the weights first. Returns the .npz path."""
    meta_path, weights_path = paths(path)
    named = obj if isinstance(obj, dict) else {"": obj}
    tensors: Dict[str, np.ndarray] = {}
    owners: Dict[int, list] = {}
    order = sorted(named, key=lambda k: isinstance(named[k], _OPTIMIZERS))  # models first
    objects = {name: _describe(name, named[name], tensors, owners) for name in order}
    metadata = {"format": FORMAT, "root": "dict" if isinstance(obj, dict) else "object",
                "objects": {name: objects[name] for name in named},
                "weights": weights_path.name,
                "tensors": {key: {"shape": list(value.shape), "dtype": str(value.dtype),
                                  "sha256": sha256(value)} for key, value in tensors.items()}}
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = weights_path.with_name(weights_path.name + ".tmp.npz")
    np.savez(tmp, **{key: np.ascontiguousarray(value) for key, value in tensors.items()})
    os.replace(tmp, weights_path)
    tmp_meta = meta_path.with_name(meta_path.name + ".tmp")
    tmp_meta.write_text(json.dumps(metadata, indent=1))
    os.replace(tmp_meta, meta_path)
    return weights_path


# ---- loading ------------------------------------------------------------------------------------
def read(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(metadata, arrays) of a saved object, checked and without touching the device: raises
    ValueError naming every difference between the weights and the metadata (a missing or extra
    tensor, another shape or dtype, a SHA-256 that differs: a corrupt or mismatched file)."""
    meta_path, weights_path = paths(path)
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: no metadata beside {weights_path.name}")
    metadata = json.loads(meta_path.read_text())
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: format {metadata.get('format')!r}; this version reads "
                         f"{FORMAT} (and the {LEGACY_FORMAT} checkpoints of load_checkpoint)")
    with np.load(weights_path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    problems: List[str] = []
    expected = metadata.get("tensors", {})
    for key in expected.keys() - arrays.keys():
        problems.append(f"{key} is missing from the weights")
    for key in arrays.keys() - expected.keys():
        problems.append(f"{key} is in the weights but not in the metadata")
    for key in sorted(expected.keys() & arrays.keys()):
        want, got = expected[key], arrays[key]
        if list(got.shape) != want["shape"] or str(got.dtype) != want["dtype"]:
            problems.append(f"{key} is {got.dtype}{list(got.shape)} in the weights, "
                            f"{want['dtype']}{want['shape']} in the metadata")
        elif sha256(got) != want["sha256"]:
            problems.append(f"{key}'s SHA-256 differs from the metadata's (corrupt or from "
                            f"another save)")
    if problems:
        raise ValueError(f"{weights_path} does not match {meta_path.name}: "
                         + "; ".join(sorted(problems)))
    return metadata, arrays


def read_any(path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """read(path), or a LEGACY_FORMAT checkpoint (no .json beside it, or one of that format)
    converted to the current metadata and tensor names."""
    meta_path, _ = paths(path)
    if not meta_path.is_file() or json.loads(meta_path.read_text()).get("format") == \
            LEGACY_FORMAT:
        return read_legacy(path)
    return read(path)


def _tensors_of(prefix: str, arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {key[len(prefix):]: value for key, value in arrays.items() if key.startswith(prefix)}


def build_layer(spec: Dict[str, Any]):
    """A layer (and its sub-layers) from its metadata, freshly initialised."""
    if spec["type"] not in LAYER_TYPES:
        raise ValueError(f"unknown layer type {spec['type']!r} (known: "
                         f"{', '.join(sorted(LAYER_TYPES))})")
    cls = LAYER_TYPES[spec["type"]]
    if cls is _layers.Sequential:   # each child keeps its own mode
        layer = cls(*[build_layer(child) for child in spec["layers"]])
        layer.training = spec.get("training", True)
    else:
        layer = cls(**spec["config"]).train(spec.get("training", True))
    return layer


def _build(name: str, spec: Dict[str, Any], arrays, built: Dict[str, Any]):
    prefix = f"{name}/" if name else ""
    kind = spec["kind"]
    if kind in ("layer", "transformer"):
        if kind == "layer":
            obj = build_layer(spec["layer"])
        else:
            obj = SimpleModel(spec["config"])
            obj.train() if spec.get("training", True) else obj.eval()
        obj.load_state_dict(_tensors_of(prefix, arrays))
        return obj
    if kind == "optimizer":
        if spec["type"] not in OPTIMIZER_TYPES:
            raise ValueError(f"unknown optimizer type {spec['type']!r}")
        params = [dict(built[owner].named_tensors())[key] for owner, key in spec["params"]]
        optimizer = OPTIMIZER_TYPES[spec["type"]](params, **spec["hyper"])
        optimizer.load_state_dict({"type": spec["type"], "hyper": spec["hyper"],
                                   "steps": spec["steps"],
                                   "state": _tensors_of(prefix, arrays)})
        return optimizer
    if kind == "tokenizer":
        return TinyTokenizer(spec["vocab"], {int(k): v for k, v in spec["inv_vocab"].items()})
    if kind == "tensor":
        return arrays[name]
    if kind == "value":
        return spec["value"]
    raise ValueError(f"'{name}': unknown object kind {kind!r}")


def _runtime_for(device) -> Tuple[Runtime, Optional[Runtime]]:
    """(the runtime of `device`, the current runtime to restore afterwards or None)."""
    index = device if isinstance(device, int) or device is None else device.index
    try:
        current = current_runtime()
    except RuntimeError:
        current = None
    if current is not None and (index is None or current.index == index):
        return current, None
    ocl_initialize(0 if index is None else index, verbose=False)
    return current_runtime(), current


def load(path, device=None):
    """What save() wrote, rebuilt on `device` (an index or aethercl.Device; default: the current
    runtime's, initialising device 0 when there is none): the object itself, or the dict of
    them. A LEGACY_FORMAT transformer checkpoint gives the dict save_checkpoint writes now."""
    metadata, arrays = read_any(path)
    _, previous = _runtime_for(device)
    try:
        built: Dict[str, Any] = {}
        specs = metadata["objects"]
        for name in sorted(specs, key=lambda n: specs[n]["kind"] == "optimizer"):
            built[name] = _build(name, specs[name], arrays, built)
    finally:
        if previous is not None and previous.open:
            set_current_runtime(previous)
    objects = {name: built[name] for name in specs}
    return objects if metadata.get("root") == "dict" else objects[""]


__all__ = ["FORMAT", "LAYER_TYPES", "LEGACY_FORMAT", "OPTIMIZER_TYPES", "build_layer", "load",
           "paths", "read", "read_any", "save", "sha256"]
