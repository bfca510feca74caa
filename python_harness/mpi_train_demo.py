"""Data-parallel training of the demo model across MPI processes (one device per rank):

    mpirun -n 2 python python_harness/mpi_train_demo.py --steps 20

Every rank draws the same global batches (same seed), trains on its share of the rows,
all-reduces the gradients (MEAN over all devices of the job, aethercl.distributed: through NCCL
where every rank has the vendor engines, else through host memory with MPI_IN_PLACE; the first
line names the path) and steps Adam. Rank 0's initial parameters are broadcast
first. At the end the ranks compare a hash of their parameters; the script exits 1 if they differ.
On one machine the local rank picks the device (several ranks may share PoCL's CPU device).

--die-rank R --die-step S make rank R exit abruptly at step S (to test that the job ends with a
clear message instead of hanging)."""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aethercl import distributed  # noqa: E402
import ocl_llm  # noqa: E402
from ocl_llm.data_parallel import process_step  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--embed_dim", type=int, default=32)
    p.add_argument("--num_layers", type=int, default=2)
    p.add_argument("--num_heads", type=int, default=4)
    p.add_argument("--d_ff", type=int, default=64)
    p.add_argument("--max_len", type=int, default=32)
    p.add_argument("--batch_size", type=int, default=8, help="global batch (all ranks)")
    p.add_argument("--timeout", type=float, default=distributed.DEFAULT_TIMEOUT_S,
                   help="seconds a collective may take before the rank gives up")
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--die-step", type=int, default=-1)
    args = p.parse_args()

    ctx = distributed.init(timeout=args.timeout)
    ocl_llm.ocl_initialize(ctx.device.index, verbose=False)
    tokenizer = ocl_llm.TinyTokenizer()
    config = dict(ocl_llm.DEFAULT_CONFIG, vocab_size=tokenizer.vocab_size,
                  **{k: getattr(args, k) for k in ("embed_dim", "num_layers", "num_heads",
                                                   "d_ff", "max_len", "batch_size")})
    model = ocl_llm.SimpleModel(config)
    optimizer = ocl_llm.AdamOptimizer(model.parameters(), lr=config["lr"],
                                      betas=config["betas"], eps=config["eps"],
                                      weight_decay=config["wd"])
    params = model.parameters()
    ctx.broadcast([p.data for p in params])
    text, _ = ocl_llm.read_corpus(config["data_file"])
    data = ocl_llm.TextData(np.asarray(tokenizer.encode(text), np.int32), config["max_len"],
                            config["batch_size"], config["val_split"], config["seed"])
    if ctx.rank == 0:
        print(f"[mpi] {ctx.size} ranks x {len(ctx.devices)} device(s), {ctx.path} path: "
              f"{ctx.device.name}; "
              f"model {model.num_parameters():,} parameters; global batch {args.batch_size}",
              flush=True)
    start = time.perf_counter()
    tokens = 0
    for step in range(args.steps):
        if ctx.rank == args.die_rank and step == args.die_step:
            sys.stderr.write(f"[mpi] rank {ctx.rank} exits abruptly at step {step} (test)\n")
            os._exit(7)
        inputs, targets = data.train_batch(0, step % data.steps_per_epoch)
        loss = process_step(ctx, model, optimizer, inputs, targets)
        tokens += inputs.size
        if ctx.rank == 0:
            print(f"[mpi] step {step + 1}: loss {loss:.4f}", flush=True)
    elapsed = time.perf_counter() - start
    digest = hashlib.sha256(b"".join(p.to_host().tobytes() for p in params)).hexdigest()
    digests = ctx.comm.gather(digest, root=0)
    ok = True
    if ctx.rank == 0:
        ok = len(set(digests)) == 1
        print(f"[mpi] {tokens / elapsed:.0f} tokens/s over {ctx.size} ranks; parameters "
              f"{'identical on every rank' if ok else 'DIFFER between ranks'} ({digest[:16]})",
              flush=True)
    ok = ctx.comm.bcast(ok, root=0)
    ctx.close()
    ocl_llm.ocl_shutdown(model, optimizer)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
