"""Our side of `bench train`: the ocl_llm frontend's GPT (SimpleModel, AdamW, train_step) and the
digits CNN's layers, timed in each matmul precision on one AetherCL device."""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np

import step_profile
from train_common import CNN_OPTIM, GPT_OPTIM, VOCAB, measure


def gpt_config(sizes: Dict[str, int]) -> dict:
    """The frontend's configuration of a GPT of these sizes (DEFAULT_CONFIG otherwise)."""
    from ocl_llm.config import DEFAULT_CONFIG
    return dict(DEFAULT_CONFIG, num_layers=sizes["layers"], embed_dim=sizes["width"],
                num_heads=sizes["heads"], d_ff=sizes["d_ff"], max_len=sizes["context"],
                batch_size=sizes["batch"], vocab_size=VOCAB, optimizer="adamw",
                lr=GPT_OPTIM["lr"], betas=list(GPT_OPTIM["betas"]), eps=GPT_OPTIM["eps"],
                wd=GPT_OPTIM["weight_decay"])


def build_cnn(sizes: Dict[str, int], seed: int = 0):
    """digits_cnn.build_model's layers for sizes['channels'] x size x size inputs."""
    from ocl_llm.layers import (BatchNorm2d, Conv2d, Dropout, Flatten, Linear, MaxPool2d, ReLU,
                                Sequential)
    rng = np.random.default_rng(seed)
    flat = 64 * (sizes["size"] // 4) ** 2
    return Sequential(
        Conv2d(sizes["channels"], 32, 3, padding=1, rng=rng, name="conv1"),
        BatchNorm2d(32, name="bn1"), ReLU(),
        Conv2d(32, 32, 3, padding=1, rng=rng, name="conv2"), BatchNorm2d(32, name="bn2"), ReLU(),
        MaxPool2d(2),
        Conv2d(32, 64, 3, padding=1, rng=rng, name="conv3"), ReLU(),
        MaxPool2d(2),
        Flatten(), Dropout(sizes["dropout"]), Linear(flat, sizes["classes"], rng=rng, name="fc"))


class _Run:
    """One model and optimiser on the current runtime, with the step the benchmark times."""

    def __init__(self, model_kind: str, sizes: Dict[str, int], graph: bool = False):
        self.kind, self.sizes, self.graph = model_kind, sizes, graph
        self.captured = None   # ocl_llm.graph_step.CapturedStep, made by the first step
        if model_kind == "gpt":
            from ocl_llm.model import SimpleModel
            from ocl_llm.train import make_optimizer
            config = gpt_config(sizes)
            self.model = SimpleModel(config)
            self.optimizer = make_optimizer(self.model, config)
        else:
            from ocl_llm.optimizers import AdamW
            self.model = build_cnn(sizes)
            self.optimizer = AdamW(self.model.parameters(), **CNN_OPTIM)
        self.parameters = self.model.parameters()

    def weights(self) -> Dict[str, np.ndarray]:
        """The initial parameters by name (the PyTorch replicas start from the same values)."""
        return {p.name: p.to_host() for p in self.parameters}

    def step(self, batch) -> float:
        if self.kind == "gpt" and self.graph:
            from ocl_llm.graph_step import CapturedStep
            if self.captured is None:
                self.captured = CapturedStep(self.model, self.optimizer, *batch)
                return self.captured.first_loss
            return self.captured(*batch)
        if self.kind == "gpt":
            from ocl_llm.train import train_step
            return train_step(self.model, self.optimizer, *batch)
        from ocl_llm import functional as F
        from ocl_llm.optimizers import clip_grad_norm
        from ocl_llm.tensor import OclTensor
        images, labels = batch
        self.optimizer.zero_grad()
        logits = self.model(OclTensor(images))
        loss = F.cross_entropy(logits, labels, label_smoothing=self.sizes["label_smoothing"])
        loss.backward()
        clip_grad_norm(self.parameters, self.sizes["clip"])
        self.optimizer.step()
        return float(loss.to_host()[0])   # the digits example reads its loss every step too

    def free(self) -> None:
        if self.captured is not None:
            self.captured.close()
        self.optimizer.free_memory()
        for p in self.parameters:
            p.free_memory()
        if self.kind == "gpt":
            self.model.pos_encoding.free_memory()


def run(model_kind: str, sizes: Dict[str, int], precisions: List[str], gpu_id: int,
        check_batch, batches, check_steps: int, warmup: int, steps: int, log,
        trace_dir: Optional[str] = None, graph_modes=(False,)) -> dict:
    """Times every precision; returns {"device": info, "weights": initial parameters,
    "rows": [result per precision]}. A precision that fails gives a row with "skipped".
    With trace_dir, a few more steps of each precision are traced after the timed ones (the
    row's "profile"; the Chrome trace goes to trace_dir). graph_modes: False (train_step), True
    (the step captured once and replayed, ocl_llm.graph_step; gpt only), or both."""
    from aethercl import AetherCLError
    from ocl_llm.runtime import (ocl_initialize, release_all, set_activation_precision,
                                 set_matmul_precision)
    device = ocl_initialize(gpu_id, verbose=False)
    info = device.info()
    rows, weights = [], None
    runs = [(p, g) for g in graph_modes if model_kind == "gpt" or not g for p in precisions]
    for precision, graph in runs:
        row = {"side": "ours", "variant": "aethercl_graph" if graph else "aethercl",
               "precision": precision}
        try:
            products = precision.partition("-mixed")[0]
            activations = products if precision.endswith("-mixed") else "fp32"
            if activations != "fp32" and model_kind != "gpt":
                raise ValueError("16-bit activations are built for the transformer only")
            set_matmul_precision(products)
            set_activation_precision(activations)
            release_all()
            device.empty_cache()
            device.reset_peak_memory_stats()
            current = _Run(model_kind, sizes, graph)
            if weights is None:
                weights = current.weights()
            log(f"  ours {precision}{' graph' if graph else ''}: {len(current.parameters)} tensors, "
                f"{sum(p.numel for p in current.parameters):,} parameters; training")
            row.update(measure(current.step, device.synchronize, check_batch, batches,
                               check_steps, warmup, steps))
            row["peak_bytes"] = _peak_bytes(device)
            if trace_dir:
                row["profile"] = step_profile.trace_steps(
                    current.step, device.synchronize, batches,
                    f"{trace_dir}/ours-{model_kind}-{precision}{'-graph' if graph else ''}.json")
                log(step_profile.describe(row["profile"]))
            current.free()
            if not all(math.isfinite(x) for x in row["check_losses"]):
                row["note"] = "non-finite loss"
        except (AetherCLError, RuntimeError, ValueError) as error:
            row["skipped"] = f"{type(error).__name__}: {error}"
        rows.append(row)
    set_matmul_precision("fp32")
    set_activation_precision("fp32")
    release_all()
    device.empty_cache()   # the PyTorch side may run on this device next
    return {"device": info, "weights": weights, "rows": rows}


def _peak_bytes(device) -> Optional[int]:
    stats = device.memory_stats()
    value = stats.get("peak_bytes_reserved", stats.get("peak_bytes"))
    return int(value) if value is not None else None


def shutdown() -> None:
    from ocl_llm.runtime import ocl_shutdown
    ocl_shutdown()
