"""Data-parallel scaling: training tokens/s of the demo model on one device and data-parallel on
several (ocl_llm.DataParallel), same global batch, measured in the same run.

Usage: tools/aethercl bench scaling [--devices 0,1] [--steps 8] [--preset gemm|medium|tiny]
        [--precision fp32|tf32|bf16|bf16-mixed|...] [--graph] [--embed_dim ...] [--json out.json]

The gemm preset is a wide configuration (embed 1024, d_ff 4096, 4 layers, context 128, batch 256)
whose step is dominated by device GEMMs, so a step is device-bound on one GPU and on two (at
batch 128 a two-GPU step was bound by the one host thread issuing both replicas' calls:
docs/PERFORMANCE.md); tiny is for CPUs. tokens/s =
batch x context x steps / seconds, after two warm-up steps, each step ending when its loss has
been read (every device finished). medium is `bench train`'s GPT medium (85M parameters, context
512, AdamW as bench train's) at 8 rows per device (bench train's batch on each device: the global batch grows with the
devices, as data parallelism is used; the single device runs the same global batch). --precision
sets the products' mode, and "-mixed" the 16-bit activations as bench train does; --graph replays
each step from graphs (ReplayedTraining on one device, ReplayedDataParallel on several)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
import ocl_llm  # noqa: E402

PRESETS = {
    "gemm": {"embed_dim": 1024, "num_heads": 16, "d_ff": 4096, "num_layers": 4, "max_len": 128,
             "batch_size": 256},
    "medium": {"embed_dim": 768, "num_heads": 12, "d_ff": 3072, "num_layers": 12, "max_len": 512,
               "batch_size": 8, "optimizer": "adamw"},
    "tiny": {"embed_dim": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2, "max_len": 32,
             "batch_size": 8},
}


SIZES = ("embed_dim", "num_heads", "d_ff", "num_layers", "max_len", "batch_size")


def batches(config, count, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = rng.integers(1, config["vocab_size"], (config["batch_size"], config["max_len"] + 1))
        out.append((ids[:, :-1].astype(np.int32), ids[:, 1:].astype(np.int32)))
    return out


def run(step, data, warmup=2):
    for x, y in data[:warmup]:
        step(x, y)
    start = time.perf_counter()
    losses = [step(x, y) for x, y in data[warmup:]]
    seconds = time.perf_counter() - start
    tokens = sum(x.size for x, _ in data[warmup:])
    return tokens / seconds, losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="0,1")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="gemm")
    for name in SIZES:
        parser.add_argument(f"--{name}", type=int, default=None)
    parser.add_argument("--precision", default="fp32",
                        help="fp32, tf32, bf16, fp16, or bf16-mixed / fp16-mixed")
    parser.add_argument("--graph", action="store_true", help="replay every step from graphs")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    gpus = [int(i) for i in args.devices.split(",")]
    config = dict(ocl_llm.DEFAULT_CONFIG, vocab_size=ocl_llm.TinyTokenizer().vocab_size,
                  **PRESETS[args.preset])
    if args.preset == "medium":
        config["batch_size"] *= len(gpus)
    for name in SIZES:
        if getattr(args, name) is not None:
            config[name] = getattr(args, name)
    data = batches(config, args.steps + 2)

    from ocl_llm.graph_step import ReplayedDataParallel, ReplayedTraining
    from ocl_llm.runtime import set_activation_precision, set_matmul_precision
    from ocl_llm.train import make_optimizer
    products = args.precision.partition("-mixed")[0]
    activations = products if args.precision.endswith("-mixed") else "fp32"
    ocl_llm.ocl_initialize(gpus[0], verbose=False)
    set_matmul_precision(products)
    set_activation_precision(activations)
    model = ocl_llm.SimpleModel(config)
    optimizer = make_optimizer(model, config)
    if args.graph:
        replayed = ReplayedTraining(model, optimizer)
        single, single_losses = run(replayed, data)
        replayed.close()
    else:
        single, single_losses = run(lambda x, y: ocl_llm.train_step(model, optimizer, x, y),
                                    data)
    params = model.num_parameters()
    optimizer.free_memory()
    model.free_memory()

    parallel = ocl_llm.DataParallel(config, gpus, make_optimizer=make_optimizer)
    if args.graph:
        replayed = ReplayedDataParallel(parallel)
        multi, multi_losses = run(replayed, data)
        replayed.close()
    else:
        multi, multi_losses = run(parallel.step, data)
    identical = parallel.parameters_identical()
    device = ocl_llm.current_device().name
    parallel.close()
    ocl_llm.ocl_shutdown()
    result = {"device": device, "devices": gpus, "precision": args.precision,
              "graph": args.graph, "optimizer": config.get("optimizer", "adam"),
              "config": {k: config[k] for k in SIZES},
              "parameters": params, "single_tokens_per_s": single,
              "parallel_tokens_per_s": multi, "speedup": multi / single,
              "replicas_identical": identical,
              "loss_single": single_losses, "loss_parallel": multi_losses}
    print(f"{device}: {params:,} parameters, batch {config['batch_size']} x {config['max_len']}, "
          f"{args.precision}{', replayed' if args.graph else ''}")
    print(f"one device:        {single:10.0f} tokens/s")
    print(f"{len(gpus)} devices (DP):  {multi:10.0f} tokens/s  ({multi / single:.2f}x); replicas "
          f"{'identical' if identical else 'DIFFER'}")
    print(f"last loss: single {single_losses[-1]:.5f}, data parallel {multi_losses[-1]:.5f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
