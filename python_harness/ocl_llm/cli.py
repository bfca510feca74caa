"""The command line of the training job (`python ocl_framework.py --help`): options, the
configuration they make, and main()."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Optional, Sequence

from aethercl import AetherCLError

from .config import DEFAULT_CONFIG
from .report import print_summary
from .train import train


def build_arg_parser(defaults: Dict[str, Any] = DEFAULT_CONFIG,
                     description: str = "Train the OCL-LLM model on the AetherCL driver.",
                     save_dir: str = "checkpoints") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--gpu_id", type=int, default=0, help="device index (gpu_index of every call)")
    p.add_argument("--load_checkpoint", default=None, help="resume from this .npz checkpoint")
    p.add_argument("--save_dir", default=save_dir, help="directory for the best checkpoint")
    p.add_argument("--data_file", default=defaults["data_file"], help="UTF-8 training text")
    p.add_argument("--epochs", type=int, default=defaults["num_epochs"])
    p.add_argument("--steps", type=int, default=defaults["max_steps"],
                   help="stop after this many steps in total (default: all epochs)")
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        p.add_argument(f"--{name}", type=int, default=defaults[name])
    p.add_argument("--lr", type=float, default=defaults["lr"])
    p.add_argument("--wd", type=float, default=defaults["wd"], help="coupled L2 weight decay")
    p.add_argument("--eval_every", type=int, default=defaults["eval_every"])
    p.add_argument("--eval_batches", type=int, default=defaults["eval_batches"])
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--no_causal", action="store_true",
                   help="no attention mask (as the original model; the model can then peek at "
                        "the next character and its samples are meaningless)")
    p.add_argument("--sample_length", type=int, default=defaults["sample_length"])
    p.add_argument("--checkpoint_filename", default=defaults["checkpoint_filename"])
    p.add_argument("--plot", default=None, help="write the loss curve PNG here")
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
                  lr=args.lr, wd=args.wd, eval_every=args.eval_every,
                  eval_batches=args.eval_batches, seed=args.seed, causal=not args.no_causal,
                  sample_length=args.sample_length,
                  checkpoint_filename=args.checkpoint_filename)
    for name in ("embed_dim", "num_layers", "num_heads", "d_ff", "max_len", "batch_size"):
        config[name] = getattr(args, name)
    return config


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_arg_parser().parse_args(argv)
    config = config_from_args(args)
    start_inspector(args)
    try:
        summary = train(config, gpu_id=args.gpu_id, load_checkpoint_path=args.load_checkpoint,
                        save_dir=args.save_dir, plot_path=args.plot)
    except (AetherCLError, MemoryError, FileNotFoundError, ValueError) as error:
        print(f"[ocl] error: {error}", file=sys.stderr)
        return 1
    print_summary(summary)
    return 0

