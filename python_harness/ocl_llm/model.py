"""SimpleModel: embedding, positional encoding, transformer blocks, final LayerNorm and the
projection to the vocabulary, with the documented parameter order and state dicts."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from .config import FP_TYPE
from .nn import Embedding, LayerNorm, Linear, Parameter, PositionalEncoding, TransformerBlock
from .tensor import OclTensor


class SimpleModel:
    """Embedding -> positional encoding -> transformer blocks -> LayerNorm -> Linear to vocab."""

    def __init__(self, config: Dict[str, Any]):
        self.config = dict(config)
        rng = np.random.default_rng(config.get("init_seed", 42))
        E, V = config["embed_dim"], config["vocab_size"]
        self.embedding = Embedding(V, E, rng=rng)
        self.pos_encoding = PositionalEncoding(config["max_len"], E)
        self.blocks = [TransformerBlock(E, config["num_heads"], config["d_ff"],
                                        config.get("causal", True), rng, f"block{i}")
                       for i in range(config["num_layers"])]
        self.final_norm = LayerNorm()
        self.output_layer = Linear(E, V, rng=rng, name="output")
        # Small output weights: the initial prediction is nearly uniform (loss close to ln V).
        self.output_layer.W.data.write((rng.standard_normal((E, V)) * 0.02).astype(FP_TYPE))
        self.training = True

    def __call__(self, input_ids: np.ndarray, mask=None) -> OclTensor:
        x = self.pos_encoding(self.embedding(input_ids))
        for block in self.blocks:
            x = block(x)
        return self.output_layer(self.final_norm(x))

    def parameters(self) -> List[Parameter]:
        params = self.embedding.parameters()
        for block in self.blocks:
            params += block.parameters()
        return params + self.output_layer.parameters()

    def num_parameters(self) -> int:
        return sum(p.numel for p in self.parameters())

    def train(self) -> None:
        self.training = True

    def eval(self) -> None:
        self.training = False

    def state_dict(self) -> Dict[str, np.ndarray]:
        return {f"param_{i}": p.to_host() for i, p in enumerate(self.parameters())}

    def load_state_dict(self, state_dict: Dict[str, np.ndarray]) -> None:
        params = self.parameters()
        if len(state_dict) != len(params):
            raise ValueError(f"state has {len(state_dict)} tensors, the model {len(params)}")
        for i, p in enumerate(params):
            value = np.asarray(state_dict[f"param_{i}"], FP_TYPE)
            if value.shape != p.shape:
                raise ValueError(f"param_{i} ({p.name}): {value.shape} vs {p.shape}")
            p.data.write(value)

    def free_memory(self) -> None:
        for p in self.parameters():
            p.free_memory()
        self.pos_encoding.free_memory()
