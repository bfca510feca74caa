"""SimpleModel: embedding, positional encoding, transformer blocks, final LayerNorm and the
projection to the vocabulary, with the documented parameter order and state dicts."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from .config import FP_TYPE
from .nn import Embedding, LayerNorm, Linear, Parameter, PositionalEncoding, TransformerBlock
from .state import load_into, state_of
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
                                        config.get("causal", True), rng, f"block{i}",
                                        config.get("dropout", 0.0))
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
        for block in self.blocks:
            block.training = True

    def eval(self) -> None:
        self.training = False
        for block in self.blocks:
            block.training = False

    def named_tensors(self):
        """The parameters as param_<i>, in the documented order."""
        return ((f"param_{i}", p) for i, p in enumerate(self.parameters()))

    def state_dict(self) -> Dict[str, np.ndarray]:
        return state_of(self.named_tensors())

    def load_state_dict(self, state_dict: Dict[str, np.ndarray], strict: bool = True) -> None:
        """Refuses (ValueError naming every difference, nothing written) unknown names, other
        shapes and, when strict, missing names."""
        load_into(self.named_tensors(), state_dict, "SimpleModel", strict)

    def free_memory(self) -> None:
        for p in self.parameters():
            p.free_memory()
        self.pos_encoding.free_memory()
