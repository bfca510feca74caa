"""`tools/aethercl bench train`: training throughput of a real model through the ocl_llm frontend
in every matmul precision, next to PyTorch (plain eager, SDPA + fused AdamW, bf16 autocast +
torch.compile) in the same run where torch is installed, with a check that every variant trains.

    tools/aethercl bench train [--model gpt cnn] [--preset tiny|small|medium] [--steps 20]
                               [--json FILE] [--plot FILE] [--gpu_id N]

Models: gpt (ocl_llm's SimpleModel: --layers --width --heads --d_ff --context --batch, presets
tiny = llm.py's default, small = 6 x 512 (19M parameters), medium = 12 x 768, context 512) and
cnn (the digits CNN's layers on 3x32x32 images, batch 256, 10 classes). Both sides start from the
same initial weights and train on the same random batches with the same AdamW settings; a step is
timed from before the batch goes up to after the device is synchronised (median after warm-up).
torch need not be in this Python: the PyTorch side runs in a child process of the first of
--torch_python, this interpreter, `python3` that imports torch and numpy."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT / "python_harness"))

import numpy as np  # noqa: E402

import train_ours  # noqa: E402
import train_report  # noqa: E402
from train_common import (BATCH_POOL, CNN_DEFAULTS, GPT_PRESETS, cnn_batches,  # noqa: E402
                          gpt_batches, items_per_step)

# bf16-mixed: bf16 products and 16-bit activations (ocl_llm's --precision bf16; ours only, the
# GPT only): what PyTorch's bf16 autocast keeps in 16 bits.
PRECISIONS = ("fp32", "tf32", "bf16", "bf16-mixed")
TORCH_VARIANTS = [("eager", "fp32"), ("eager", "tf32"), ("eager", "bf16"),
                  ("sdpa_fused", "fp32"), ("sdpa_fused", "bf16"), ("compile", "bf16")]
PROBE = ("import json, torch, numpy; print(json.dumps({'torch': torch.__version__, "
         "'cuda': torch.cuda.is_available()}))")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--model", nargs="+", choices=("gpt", "cnn"), default=["gpt", "cnn"])
    p.add_argument("--preset", choices=sorted(GPT_PRESETS), default="small",
                   help="the GPT's sizes (default small); the options below override them")
    for name in ("layers", "width", "heads", "d_ff", "context", "batch"):
        p.add_argument(f"--{name}", type=int, default=None)
    p.add_argument("--cnn_batch", type=int, default=CNN_DEFAULTS["batch"])
    p.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    p.add_argument("--steps", type=int, default=20, help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps before timing (>= 3)")
    p.add_argument("--compile_warmup", type=int, default=10,
                   help="warm-up steps of the torch.compile variant")
    p.add_argument("--check_steps", type=int, default=20,
                   help="steps on one fixed batch first: the loss must fall alike everywhere")
    p.add_argument("--gpu_id", type=int, default=0, help="the AetherCL device index")
    p.add_argument("--torch", choices=("auto", "off"), default="auto")
    p.add_argument("--torch_python", default=None, help="a Python with torch and numpy")
    p.add_argument("--torch_device", default="auto",
                   help="auto: cuda for a GPU, cpu (with --threads) for a CPU device")
    p.add_argument("--torch_variants", nargs="+", default=None,
                   choices=("eager", "sdpa_fused", "compile"), help="default: all three")
    p.add_argument("--threads", type=int, default=None,
                   help="PyTorch CPU threads (default: the OpenCL device's compute units)")
    p.add_argument("--json", default=None, help="write every figure here")
    p.add_argument("--plot", default=None, help="write a bar chart (PNG) here")
    p.add_argument("--graph", choices=("off", "on", "both"), default="both",
                   help="our GPT step as train_step (off), captured once and replayed "
                        "(ocl_llm.graph_step; on), or both rows (default)")
    p.add_argument("--trace", default=None, metavar="DIR",
                   help="after timing, trace a few steps of each of our precisions: kernels per "
                        "step, device-busy share, costliest kernels (Chrome traces in DIR)")
    args = p.parse_args(argv)
    args.warmup = max(args.warmup, 3)
    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
    return args


def model_sizes(args, model: str) -> dict:
    if model == "cnn":
        return dict(CNN_DEFAULTS, batch=args.cnn_batch)
    sizes = dict(GPT_PRESETS[args.preset])
    for name in sizes:
        if getattr(args, name) is not None:
            sizes[name] = getattr(args, name)
    return sizes


def short_title(model: str, sizes: dict, parameters: int, preset: str) -> str:
    if model == "cnn":
        return f"cnn: {sizes['channels']}x{sizes['size']}x{sizes['size']}, batch {sizes['batch']}"
    return (f"gpt {preset}: {sizes['layers']} x {sizes['width']}, context {sizes['context']}, "
            f"batch {sizes['batch']}, {parameters / 1e6:.1f}M parameters")


def title(model: str, sizes: dict, parameters: int, preset: str) -> str:
    if model == "cnn":
        return (f"cnn: digits CNN layers on {sizes['channels']}x{sizes['size']}x{sizes['size']}, "
                f"batch {sizes['batch']}, {sizes['classes']} classes, {parameters:,} parameters")
    return (f"gpt ({preset}): {sizes['layers']} layers, width {sizes['width']}, {sizes['heads']} "
            f"heads, d_ff {sizes['d_ff']}, context {sizes['context']}, batch {sizes['batch']}, "
            f"vocabulary 53, {parameters / 1e6:.2f}M parameters")


def find_torch(args):
    """(python, probe dict) of the interpreter that runs the PyTorch side, or (None, reason)."""
    if args.torch == "off":
        return None, "--torch off"
    candidates = [args.torch_python] if args.torch_python else \
        [sys.executable] + [w for w in (shutil.which("python3"),) if w]
    tried = []
    for python in dict.fromkeys(candidates):
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
        if out.returncode == 0:
            return python, json.loads(out.stdout.strip().splitlines()[-1])
        tried.append(python)
    return None, f"no torch (with numpy) in {', '.join(tried)}; --torch_python names one"


def torch_device(args, info: dict, probe: dict):
    """(device, threads) for PyTorch, or (None, reason)."""
    if args.torch_device != "auto":
        return args.torch_device, args.threads
    if info.get("type") == "gpu":
        if not probe.get("cuda"):
            return None, (f"the AetherCL device is a GPU and torch {probe.get('torch')} has no "
                          f"CUDA here (--torch_device cpu compares anyway)")
        return "cuda", None
    return "cpu", args.threads or info.get("compute_units")


def run_torch(python, device, threads, model, sizes, weights, check, batches, args, log):
    """The PyTorch rows of one model from the child process (train_torch.py)."""
    variants = [v for v in TORCH_VARIANTS
                if args.torch_variants is None or v[0] in args.torch_variants]
    spec = dict(model=model, sizes=sizes, variants=variants, device=device, threads=threads,
                check_steps=args.check_steps, warmup=args.warmup,
                compile_warmup=max(args.compile_warmup, args.warmup), steps=args.steps,
                pool=len(batches))
    arrays = {f"w:{k}": v for k, v in weights.items()}
    arrays.update(check_x=check[0], check_y=check[1])
    for i, (x, y) in enumerate(batches):
        arrays[f"x{i}"], arrays[f"y{i}"] = x, y
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        np.savez(Path(tmp) / "data.npz", **arrays)
        child = subprocess.Popen([python, str(HERE / "train_torch.py"), str(Path(tmp) / "spec.json"),
                                  str(Path(tmp) / "data.npz")], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        header, rows = None, []
        for line in child.stdout:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if header is None:
                header = row
                log(f"  PyTorch {row['torch']} on {row['device']} ({row['threads']} threads)")
                continue
            rows.append(row)
            what = row.get("skipped") or f"{row['median_ms']:.2f} ms/step"
            log(f"  torch {row['variant']} {row['precision']}: {what}")
        stderr = child.stderr.read()
        if child.wait() != 0:
            log(f"  PyTorch child failed (exit {child.returncode}): {stderr[-800:]}")
    return header, rows


def main(argv=None) -> int:
    args = parse_args(argv)
    log = lambda text: print(text, flush=True)  # noqa: E731
    python, probe = find_torch(args)
    torch_reason = None if python else probe
    results, device_info, torch_header = [], {}, None
    try:
        for model in args.model:
            sizes = model_sizes(args, model)
            make = gpt_batches if model == "gpt" else cnn_batches
            check = make(sizes, 1, seed=1)[0]
            batches = make(sizes, BATCH_POOL, seed=2)
            log(f"[{model}] ours: precisions {' '.join(args.precisions)} "
                f"({args.check_steps} check + {args.warmup} warm-up + {args.steps} timed steps; "
                f"the first steps compile the kernels)")
            ours = train_ours.run(model, sizes, args.precisions, args.gpu_id, check, batches,
                                  args.check_steps, args.warmup, args.steps, log,
                                  trace_dir=args.trace,
                                  graph_modes={"off": (False,), "on": (True,),
                                               "both": (False, True)}[args.graph])
            device_info = ours["device"]
            rows = ours["rows"]
            parameters = sum(int(w.size) for w in (ours["weights"] or {}).values())
            if python and ours["weights"] is None:
                torch_reason = "our side trained no model here: no initial weights to share"
            elif python:
                device, threads = torch_device(args, device_info, probe)
                if device is None:
                    torch_reason = threads
                else:
                    log(f"[{model}] PyTorch on {device} ({python})")
                    torch_header, torch_rows = run_torch(python, device, threads, model, sizes,
                                                         ours["weights"], check, batches, args,
                                                         log)
                    rows += torch_rows
            if torch_reason:
                rows.append({"side": "torch", "variant": "eager", "precision": "-",
                             "skipped": torch_reason})
            unit = "tokens" if model == "gpt" else "images"
            best = train_report.add_rates(rows, items_per_step(model, sizes))
            if best:
                best["best"] = True
            results.append({"model": model, "sizes": sizes, "parameters": parameters,
                            "title": title(model, sizes, parameters, args.preset),
                            "short_title": short_title(model, sizes, parameters, args.preset),
                            "unit": unit,
                            "items_per_step": items_per_step(model, sizes), "rows": rows,
                            "best_torch": best and {k: best[k] for k in ("variant", "precision")},
                            "check": train_report.loss_check(model, rows)})
    finally:
        train_ours.shutdown()
    device_name = f"{device_info.get('name', '?')} ({device_info.get('platform', '?')})"
    for res in results:
        print(f"\ndoes it train? {res['title']}")
        print(res["check"]["text"])
    for res in results:
        print(f"\n{res['title']}\n  on {device_name}; median of {args.steps} steps after "
              f"{args.warmup} warm-up")
        best = next((r for r in res["rows"] if r.get("best")), None)
        print(train_report.throughput_table(res["model"], res["rows"], res["unit"], best))
    if args.json:
        write_json(args, results, device_info, torch_header or probe)
        print(f"\nwrote {args.json}")
    if args.plot:
        train_report.plot(results, args.plot, device_name)
        print(f"wrote {args.plot}")
    return 0


def write_json(args, results, device_info, torch_info) -> None:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    document = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [sys.executable] + sys.argv, "cwd": os.getcwd(), "device": device_info,
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "aethercl_commit": commit, "torch": torch_info},
        "host": platform.node(), "settings": {k: v for k, v in vars(args).items()},
        "models": results}
    Path(args.json).write_text(json.dumps(document, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
