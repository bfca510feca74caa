"""The training loop: one step, evaluation, sampling, and train() (data, model, epochs with
periodic validation, best-checkpoint saving, a loss curve and a sample)."""
from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from aethercl import inspect

from .checkpoint import load_checkpoint, save_checkpoint
from .data_parallel import DataParallel
from .config import IDX_TYPE
from .loss import cross_entropy_loss_and_backward
from .loss_scale import LossScaler
from .model import SimpleModel
from .optimizers import AdamOptimizer, AdamW
from .report import ProgressBar, plot_losses
from .runtime import (current_device, ocl_initialize, ocl_shutdown, set_activation_precision,
                      set_matmul_precision)
from .tensor import OclTensor
from .text import TextData, TinyTokenizer, read_corpus


def make_optimizer(model: SimpleModel, config: Dict[str, Any]):
    """Adam with coupled L2 decay (the original) or AdamW (--optimizer adamw)."""
    if config.get("optimizer", "adam") == "adamw":
        return AdamW(model.parameters(), lr=config["lr"], betas=config["betas"],
                     eps=config["eps"], weight_decay=config["wd"])
    return AdamOptimizer(model.parameters(), lr=config["lr"], betas=config["betas"],
                         eps=config["eps"], weight_decay=config["wd"])


def train_step(model: SimpleModel, optimizer: AdamOptimizer, inputs: np.ndarray,
               targets: np.ndarray, scaler: Optional[LossScaler] = None) -> float:
    """zero_grad, forward, GPU loss + backward, Adam step (skipped for a non-finite loss). With a
    scaler (fp16 activations), the gradient is scaled and unscaled, and a step whose gradients
    overflowed is skipped (scaler.skipped counts them)."""
    optimizer.zero_grad()
    logits = model(inputs)
    grad_scale = scaler.scale if scaler is not None else 1.0
    loss = cross_entropy_loss_and_backward(logits, targets, grad_scale=grad_scale)
    del logits
    if math.isfinite(loss):
        apply_step(model.parameters(), optimizer, scaler)
    return loss


def apply_step(parameters, optimizer, scaler: Optional[LossScaler]) -> None:
    """optimizer.step(), after unscaling the gradients when a scaler is given (and only when
    they are finite; the scaler then adapts)."""
    if scaler is None:
        optimizer.step()
        return
    finite = scaler.unscale(parameters)
    if finite:
        optimizer.step()
    scaler.update(finite)


def evaluate(model: SimpleModel, batches: Sequence[Tuple[np.ndarray, np.ndarray]]) -> float:
    model.eval()
    total, count = 0.0, 0
    with OclTensor.no_grad():
        for inputs, targets in batches:
            logits = model(inputs)
            n = int((targets != 0).sum())
            total += cross_entropy_loss_and_backward(logits, targets) * n
            count += n
            del logits
    model.train()
    return total / max(count, 1)


def generate(model: SimpleModel, tokenizer: TinyTokenizer, prompt: str, length: int,
             temperature: float = 0.8, seed: int = 0) -> str:
    """Samples `length` characters after `prompt` (context cut to max_len, batch of one)."""
    rng = np.random.default_rng(seed)
    max_len = model.config["max_len"]
    ids = [i for i in tokenizer.encode(prompt) if i != tokenizer.pad_id] or [tokenizer.vocab[" "]]
    V = model.config["vocab_size"]
    model.eval()
    with OclTensor.no_grad():
        for _ in range(length):
            context = np.asarray(ids[-max_len:], IDX_TYPE)[None, :]
            logits = model(context)
            last = logits.to_host()[0, -1].astype(np.float64)   # (in any activation format)
            del logits
            last[tokenizer.pad_id] = -np.inf
            if temperature <= 0:
                nxt = int(np.argmax(last))
            else:
                z = (last - last.max()) / temperature
                p = np.exp(z)
                nxt = int(rng.choice(V, p=p / p.sum()))
            ids.append(nxt)
    model.train()
    return tokenizer.decode(ids)


def _step_function(config, model, optimizer, scaler, parallel, out,
                   closes: contextlib.ExitStack):
    """What runs one training step: a ReplayedTraining (or ReplayedDataParallel) where config
    "graph" is not "off" and the run allows it (closed with `closes`), else the data-parallel
    step or train_step; "on" says why when it cannot."""
    from .graph_step import ReplayedDataParallel, ReplayedTraining, graph_refusal
    mode = config.get("graph", "auto")
    if mode != "off":
        refusal = graph_refusal(config)
        if refusal is None:
            replayed = ReplayedDataParallel(parallel) if parallel is not None else \
                ReplayedTraining(model, optimizer, scaler)
            return closes.enter_context(contextlib.closing(replayed))
        if mode == "on":
            print(f"[ocl] --graph on: each step runs eagerly ({refusal})", file=out)
    if parallel is not None:
        return parallel.step
    return lambda inputs, targets: train_step(model, optimizer, inputs, targets, scaler)


def train(config: Dict[str, Any], gpu_id: int = 0, load_checkpoint_path: Optional[str] = None,
          save_dir: str = "checkpoints", plot_path: Optional[str] = None,
          sample_prompt: Optional[str] = "the ", stream=None,
          shutdown: bool = True, gpus: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """The training job: data, model, epochs of steps with periodic validation, best-checkpoint
    saving, a loss curve and a generated sample. Returns a summary dict. With gpus (two or more
    device indices) every step is data-parallel over those devices (gpu_id is then gpus[0]);
    evaluation, checkpoints and samples use the first replica."""
    out = stream if stream is not None else sys.stdout
    if gpus is not None and len(gpus) > 1:
        gpu_id = gpus[0]
    else:
        gpus = None
    ocl_initialize(gpu_id)
    model = optimizer = parallel = None
    scope = contextlib.ExitStack()   # the timing stream and the step graphs, closed at the end
    try:
        set_matmul_precision(config.get("matmul_precision", "fp32"))
        set_activation_precision(config.get("activations", "fp32"))
        # fp16 gradients need dynamic loss scaling; bf16 has float32's range.
        scaler = LossScaler() if config.get("activations") == "fp16" else None
        if scaler is not None and gpus:
            raise ValueError("fp16 activations with several devices: loss scaling across "
                             "replicas is not built; use --precision bf16")
        progress: Dict[str, Any] = {"epoch": 0, "step_in_epoch": 0, "global_step": 0,
                                    "best_val_loss": None, "history": {"train": [], "val": []}}
        if load_checkpoint_path and Path(load_checkpoint_path).is_file():
            model, optimizer, tokenizer, saved_config, progress = load_checkpoint(
                load_checkpoint_path)
            keep = ("max_steps", "num_epochs", "eval_every", "eval_batches", "sample_length",
                    "temperature", "data_file", "checkpoint_filename", "time_limit_s",
                    "matmul_precision", "activations", "graph")
            config = dict(saved_config, **{k: config[k] for k in keep if k in config})
            print(f"[ocl] resumed {load_checkpoint_path} at step {progress['global_step']} "
                  f"(epoch {progress['epoch']}, Adam t={optimizer.t})", file=out)
        else:
            if load_checkpoint_path:
                print(f"[ocl] checkpoint {load_checkpoint_path} not found; starting fresh",
                      file=out)
            tokenizer = TinyTokenizer()
            config = dict(config, vocab_size=tokenizer.vocab_size)
            model = SimpleModel(config)
            optimizer = make_optimizer(model, config)
        if gpus:
            parallel = DataParallel(config, gpus, model, optimizer, make_optimizer)
            print(f"[ocl] data parallel over devices {list(gpus)} (batch rows split between "
                  f"them, gradients all-reduced)", file=out)
        if inspect.active() is not None:   # name the long-lived buffers on the inspector page
            for i, parameter in enumerate(model.parameters()):
                parameter.data.label = f"param_{i}_" + "x".join(map(str, parameter.shape))
        text, data_path = read_corpus(config["data_file"])
        data = TextData(np.asarray(tokenizer.encode(text), IDX_TYPE), config["max_len"],
                        config["batch_size"], config["val_split"], config["seed"])
        val_batches = data.val_batches(config["eval_batches"])
        total_steps = config["num_epochs"] * data.steps_per_epoch
        if config.get("max_steps"):
            total_steps = min(total_steps, int(config["max_steps"]))
        print(f"[ocl] corpus {data_path}: {len(text):,} characters, "
              f"{len(data.train_ids):,} training / {len(data.val_ids):,} validation tokens; "
              f"{data.steps_per_epoch} steps per epoch", file=out)
        print(f"[ocl] model: {config['num_layers']} layers, embed {config['embed_dim']}, "
              f"{config['num_heads']} heads, d_ff {config['d_ff']}, context {config['max_len']}, "
              f"vocabulary {config['vocab_size']}, {model.num_parameters():,} parameters in "
              f"{len(model.parameters())} tensors; batch {config['batch_size']}, "
              f"lr {config['lr']}, {total_steps} steps", file=out)
        history = progress["history"]
        checkpoint_path = Path(save_dir) / config["checkpoint_filename"]
        best = progress.get("best_val_loss")
        if total_steps <= progress["global_step"]:
            # A resumed checkpoint already at --steps: train that many more instead of none.
            extra = int(config.get("max_steps") or data.steps_per_epoch)
            print(f"[ocl] the checkpoint is at step {progress['global_step']}, not below the "
                  f"step limit {total_steps}: training {extra} more steps (pass a larger "
                  f"--steps to set the total)", file=out)
            total_steps = progress["global_step"] + extra
        print("[ocl] the first steps compile the kernels for this device (on PoCL about 30 s; "
              "cached: on GPUs in ~/.cache/aethercl, on PoCL in its own ~/.cache/pocl; later runs "
              "start at once)", file=out)
        if not history["val"]:
            v0 = evaluate(model, val_batches)
            history["val"].append([progress["global_step"], v0])
            print(f"[ocl] validation loss before training: {v0:.4f}", file=out)
            inspect.report_loss(progress["global_step"], v0, "validation")
        inspect.report_event("training", f"training {total_steps - progress['global_step']} "
                             f"steps of a {model.num_parameters():,}-parameter model")
        first_step = progress["global_step"]
        if inspect.active() is not None and parallel is None:
            # Kernel times for the page without AETHERCL_TRACE: the steps run on a timing stream
            # (per-launch profiling; no slower within noise on PoCL: 141 vs 145 ms a step).
            scope.enter_context(current_device().stream(timing=True))
        step_fn = _step_function(config, model, optimizer, scaler, parallel, out, scope)
        bar = ProgressBar(total_steps - first_step, stream=sys.stderr)
        tokens = 0
        time_limited = False
        loss = float("nan")
        val = history["val"][-1][1]
        epoch, in_epoch = progress["epoch"], progress["step_in_epoch"]
        while progress["global_step"] < total_steps:
            if in_epoch >= data.steps_per_epoch:
                epoch, in_epoch = epoch + 1, 0
            inputs, targets = data.train_batch(epoch, in_epoch)
            loss = step_fn(inputs, targets)
            in_epoch += 1
            progress["global_step"] += 1
            progress["epoch"], progress["step_in_epoch"] = epoch, in_epoch
            step = progress["global_step"]
            tokens += inputs.size
            history["train"].append([step, loss])
            inspect.report_loss(step, loss)
            limit = config.get("time_limit_s")
            time_limited = bool(limit) and time.perf_counter() - bar.start > limit
            done = step == total_steps or time_limited
            if step % config["eval_every"] == 0 or done:
                val = evaluate(model, val_batches)
                history["val"].append([step, val])
                inspect.report_loss(step, val, "validation")
                if best is None or val < best:
                    best = progress["best_val_loss"] = val
                    save_checkpoint(checkpoint_path, model, optimizer, tokenizer, config,
                                    progress)
                    inspect.report_event("training", f"step {step}: best validation loss "
                                         f"{val:.4f}, checkpoint saved")
                bar.update(step - first_step, loss, tokens, val, force=True)
            else:
                bar.update(step - first_step, loss, tokens, val)
            if time_limited:
                bar.message(f"[ocl] time limit of {limit:.0f} s reached after {step} steps")
                break
        bar.close()
        elapsed = time.perf_counter() - bar.start
        summary: Dict[str, Any] = {
            "steps": progress["global_step"] - first_step, "seconds": elapsed,
            "tokens_per_second": tokens / elapsed if elapsed > 0 else 0.0,
            "first_val_loss": history["val"][0][1], "last_val_loss": history["val"][-1][1],
            "best_val_loss": best, "last_train_loss": loss,
            "checkpoint": str(checkpoint_path) if checkpoint_path.is_file() else None,
            "config": config, "time_limited": time_limited, "history": history,
            "devices": list(gpus) if gpus else [gpu_id],
            "skipped_steps": scaler.skipped if scaler is not None else 0,
        }
        if plot_path:
            summary["plot"] = str(plot_losses(history, plot_path) or "")
        if sample_prompt is not None and config.get("sample_length", 0) > 0:
            summary["sample"] = generate(model, tokenizer, sample_prompt,
                                         config["sample_length"], config["temperature"],
                                         seed=config["seed"])
        return summary
    finally:
        scope.close()
        if parallel is not None:
            parallel.close()
        if shutdown:
            ocl_shutdown(model, optimizer)
