"""The main job of `tools/aethercl demo`: trains the OCL-LLM character transformer (ocl_framework.py)
on the bundled public-domain corpus on the default device, with a progress bar, then saves a
checkpoint and a loss-curve PNG and prints a generated sample.

Same options as ocl_framework.py (--gpu_id, --load_checkpoint, --save_dir, model size, --steps,
--lr, ...) with defaults sized to finish in a few minutes on a 2-core CPU under PoCL."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import ocl_framework as F  # noqa: E402

DEMO_CONFIG = dict(
    F.DEFAULT_CONFIG,
    data_file=str(F.BUNDLED_CORPUS),
    embed_dim=64, num_heads=4, d_ff=256, num_layers=3, max_len=64, batch_size=16,
    lr=3e-3, wd=0.0, num_epochs=100, max_steps=500, eval_every=50, eval_batches=6,
    sample_length=240, temperature=0.7, checkpoint_filename="demo_model.npz",
    time_limit_s=210.0,
)
TARGET_DROP = 0.30


def default_save_dir() -> str:
    build = os.environ.get("AETHERCL_BUILD_DIR")
    return str(Path(build) / "demo") if build else "demo_output"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = F.build_arg_parser(DEMO_CONFIG, description=__doc__.splitlines()[0],
                                save_dir=default_save_dir())
    parser.add_argument("--time_limit", type=float, default=DEMO_CONFIG["time_limit_s"],
                        help="stop training after this many seconds (0: no limit)")
    parser.add_argument("--prompt", default="alice was ", help="start of the generated sample")
    args = parser.parse_args(argv)
    config = F.config_from_args(args, DEMO_CONFIG)
    config["time_limit_s"] = args.time_limit or None
    plot = args.plot or str(Path(args.save_dir) / "loss_curve.png")
    F.start_inspector(args)
    # The progress bar goes to stderr: line-buffered stdout keeps the two in order when both are
    # piped or written to a file.
    sys.stdout.reconfigure(line_buffering=True)
    print("AetherCL demo: a character-level transformer (OCL-LLM frontend) learns English from "
          "public-domain texts; every tensor operation runs through the driver.")
    try:
        summary = F.train(config, gpu_id=args.gpu_id, load_checkpoint_path=args.load_checkpoint,
                          save_dir=args.save_dir, plot_path=plot, sample_prompt=args.prompt)
    except (F.AetherCLError, MemoryError, FileNotFoundError, ValueError) as error:
        print(f"[demo] error: {error}", file=sys.stderr)
        return 1
    F.print_summary(summary)
    first, last = summary["first_val_loss"], summary["last_val_loss"]
    drop = (first - last) / first if first else 0.0
    verdict = "reached" if drop >= TARGET_DROP else "NOT reached"
    print(f"[demo] target: validation loss {TARGET_DROP:.0%} below its first value -> {verdict} "
          f"({drop:.1%}{', stopped by the time limit' if summary.get('time_limited') else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
