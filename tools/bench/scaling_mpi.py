"""Data-parallel training tokens/s across processes: one process per device under mpirun
(aethercl.distributed, its NCCL path where every rank has the vendor engines, else MPI over host
memory), on tools/bench/scaling.py's presets and batches, for comparison with that script's
one-process ocl_llm.DataParallel over the same devices and global batch.

Usage: mpirun -n 2 python tools/bench/scaling_mpi.py [--preset gemm|medium|tiny] [--steps 8]
        [--precision fp32|tf32|bf16|bf16-mixed|...] [--path auto|nccl|mpi] [--json out.json]

Every rank draws the same global batches (scaling.batches, seed 0), trains on its share of the
rows, all-reduces the gradients (MEAN) and steps Adam; tokens/s = global batch x context x steps /
seconds after two warm-up steps, each step ending when the loss has crossed MPI (every rank
finished). medium's batch is 8 rows per rank, as scaling.py's is per device. Rank 0 prints and
writes the JSON."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python_harness"))
sys.path.insert(0, str(HERE))
from aethercl import distributed  # noqa: E402
import ocl_llm  # noqa: E402
from ocl_llm.data_parallel import process_step  # noqa: E402
from scaling import PRESETS, batches  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="gemm")
    for name in PRESETS["gemm"]:
        parser.add_argument(f"--{name}", type=int, default=None)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--path", choices=("auto", "nccl", "mpi"), default="auto")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    ctx = distributed.init(path=args.path)
    from ocl_llm.runtime import set_activation_precision, set_matmul_precision
    config = dict(ocl_llm.DEFAULT_CONFIG, vocab_size=ocl_llm.TinyTokenizer().vocab_size,
                  **PRESETS[args.preset])
    if args.preset == "medium":
        config["batch_size"] *= ctx.world_devices
    for name in PRESETS["gemm"]:
        if getattr(args, name) is not None:
            config[name] = getattr(args, name)
    products = args.precision.partition("-mixed")[0]
    ocl_llm.ocl_initialize(ctx.device.index, verbose=False)
    set_matmul_precision(products)
    set_activation_precision(products if args.precision.endswith("-mixed") else "fp32")
    model = ocl_llm.SimpleModel(config)
    optimizer = ocl_llm.AdamOptimizer(model.parameters(), lr=config["lr"], betas=config["betas"],
                                      eps=config["eps"], weight_decay=config["wd"])
    params = model.parameters()
    ctx.broadcast([p.data for p in params])

    def step(inputs, targets):
        return process_step(ctx, model, optimizer, inputs, targets)

    data = batches(config, args.steps + 2)
    for x, y in data[:2]:
        step(x, y)
    ctx.barrier()
    start = time.perf_counter()
    losses = [step(x, y) for x, y in data[2:]]
    seconds = time.perf_counter() - start
    tokens = sum(x.size for x, _ in data[2:])
    if ctx.rank == 0:
        result = {"device": ctx.device.name, "ranks": ctx.size, "path": ctx.path,
                  "why_mpi": ctx.why_mpi, "precision": args.precision,
                  "config": {k: config[k] for k in PRESETS["gemm"]},
                  "parameters": model.num_parameters(), "tokens_per_s": tokens / seconds,
                  "losses": losses}
        print(f"{ctx.device.name}: {ctx.size} processes x 1 device, {ctx.path} path; "
              f"{model.num_parameters():,} parameters, batch {config['batch_size']} x "
              f"{config['max_len']}, {args.precision}")
        print(f"{ctx.size} processes (MPI{'+NCCL' if ctx.path == 'nccl' else ''}): "
              f"{tokens / seconds:10.0f} tokens/s; last loss {losses[-1]:.5f}")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
    ctx.close()
    ocl_llm.ocl_shutdown(model, optimizer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
