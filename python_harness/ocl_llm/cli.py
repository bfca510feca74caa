"""The command line of the training job (`python ocl_framework.py --help`): options, the
configuration they make, and main()."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional, Sequence

from aethercl import AetherCLError

from .config import DEFAULT_CONFIG
from .report import print_summary
from .train import train


def build_arg_parser(defaults: Dict[str, Any] = DEFAULT_CONFIG,
                     description: str = "Train the OCL-LLM model on the AetherCL driver.",
                     save_dir: str = "checkpoints") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--gpu_id", type=int, default=0, help="device index (gpu_index of every call)")
    p.add_argument("--gpus", default=None,
                   help="comma-separated device indices for data-parallel training, e.g. 0,1 "
                        "(overrides --gpu_id)")
    p.add_argument("--load_checkpoint", default=None, help="resume from this .npz checkpoint")
    p.add_argument("--save_dir", default=save_dir, help="directory for the best checkpoint")
    p.add_argument("--data_file", default=defaults["data_file"], help="UTF-8 training text")
    p.add_argument("--epochs", type=int, default=defaults["num_epochs"])
    p.add_argument("--steps", type=int, default=defaults["max_steps"],
                   help="stop after this many steps in total (default: all epochs)")
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        p.add_argument(f"--{name}", type=int, default=defaults[name])
    p.add_argument("--lr", type=float, default=defaults["lr"])
    p.add_argument("--wd", type=float, default=defaults["wd"],
                   help="weight decay (coupled L2 for adam, decoupled for adamw)")
    p.add_argument("--optimizer", choices=("adam", "adamw"), default=defaults["optimizer"],
                   help="adam: the original Adam with L2 decay; adamw: decoupled weight decay")
    p.add_argument("--dropout", type=float, default=defaults["dropout"],
                   help="residual dropout probability in every block while training")
    p.add_argument("--eval_every", type=int, default=defaults["eval_every"])
    p.add_argument("--eval_batches", type=int, default=defaults["eval_batches"])
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--no_causal", action="store_true",
                   help="no attention mask (as the original model; the model can then peek at "
                        "the next character and its samples are meaningless)")
    p.add_argument("--sample_length", type=int, default=defaults["sample_length"])
    p.add_argument("--checkpoint_filename", default=defaults["checkpoint_filename"])
    p.add_argument("--plot", default=None, help="write the loss curve PNG here")
    p.add_argument("--matmul_precision", default=defaults.get("matmul_precision", "fp32"),
                   choices=("fp32", "tf32", "3xtf32", "bf16", "fp16"),
                   help="compute mode of the matrix products: fp32 exact, or inputs rounded to "
                        "TF32 / split into 3 TF32 products / rounded to bf16 / fp16 (tensor cores "
                        "where the device has them); weights and activations stay float32")
    p.add_argument("--precision", default=None, choices=("fp32", "bf16", "fp16"),
                   help="mixed precision in one switch: the matrix products and the activations "
                        "and their gradients in this format, float32 master weights, optimizer "
                        "state, residual stream and loss (overrides --matmul_precision)")
    p.add_argument("--graph", choices=("auto", "on", "off"),
                   default=defaults.get("graph", "auto"),
                   help="replay the training step from graphs captured at the first batch "
                        "(no Python per op; one graph per device with --gpus; not with "
                        "dropout, which steps eagerly: 'on' says so, 'auto' quietly)")
    p.add_argument("--inspect", type=int, default=None, metavar="PORT",
                   help="serve the inspector page on PORT (0: any free port) while training; "
                        "its URL with the access token is printed at start")
    p.add_argument("--inspect_host", default="127.0.0.1",
                   help="address the inspector binds (default loopback only)")
    return p


def start_inspector(args: argparse.Namespace):
    """Starts aethercl.inspect when --inspect was given; returns it (or None)."""
    if args.inspect is None:
        return None
    from aethercl import inspect
    return inspect.serve(port=args.inspect, host=args.inspect_host)


def config_from_args(args: argparse.Namespace, defaults: Dict[str, Any] = DEFAULT_CONFIG
                     ) -> Dict[str, Any]:
    config = dict(defaults)
    config.update(data_file=args.data_file, num_epochs=args.epochs, max_steps=args.steps,
                  lr=args.lr, wd=args.wd, optimizer=args.optimizer, dropout=args.dropout,
                  eval_every=args.eval_every,
                  eval_batches=args.eval_batches, seed=args.seed, causal=not args.no_causal,
                  sample_length=args.sample_length,
                  checkpoint_filename=args.checkpoint_filename,
                  matmul_precision=args.matmul_precision, graph=args.graph)
    if args.precision is not None:
        config.update(matmul_precision=args.precision, activations=args.precision)
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        config[name] = getattr(args, name)
    return config


def parse_gpus(text: Optional[str]) -> Optional[List[int]]:
    """'0,1' -> [0, 1]; None or '' -> None. Refuses anything else with a ValueError naming it."""
    if not text:
        return None
    try:
        gpus = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--gpus {text!r}: expected comma-separated device indices like 0,1")
    if len(set(gpus)) != len(gpus) or min(gpus) < 0:
        raise ValueError(f"--gpus {text!r}: indices must be distinct and non-negative")
    return gpus


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_arg_parser().parse_args(argv)
    config = config_from_args(args)
    start_inspector(args)
    try:
        gpus = parse_gpus(args.gpus)
        summary = train(config, gpu_id=args.gpu_id, load_checkpoint_path=args.load_checkpoint,
                        save_dir=args.save_dir, plot_path=args.plot, gpus=gpus)
    except (AetherCLError, MemoryError, FileNotFoundError, ValueError) as error:
        print(f"[ocl] error: {error}", file=sys.stderr)
        return 1
    print_summary(summary)
    return 0

