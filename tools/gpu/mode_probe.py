"""Per-product time of float32-operand products in each compute mode (aethercl_gemm, 200 launches
between synchronisations), untraced and traced, with the kernels the trace saw: a diagnosis
helper for the lent GPU machine (tools/gpu/)."""
import ctypes
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402

lib = Library()
lib.check("initialize_gpu", 0)
# m x n x k, trans_a, trans_b: arguments "4096,512,512,0,0 ..." or these.
shapes = [tuple(int(v) for v in arg.split(",")) for arg in sys.argv[1:]] or [
    (4096, 512, 512, 0, 0), (4096, 2048, 512, 0, 0), (512, 512, 4096, 1, 0),
    (4096, 512, 2048, 0, 1)]
for m, n, k, ta, tb in shapes:
    a = lib.allocate_gpu_memory(0, m * k * 4)
    b = lib.allocate_gpu_memory(0, k * n * 4)
    c = lib.allocate_gpu_memory(0, m * n * 4)
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal(m * k).astype(np.float32)   # alive across the blocking writes
    host_b = rng.standard_normal(k * n).astype(np.float32)
    lib.check("write_host_to_gpu_blocking", 0, a, 0, m * k * 4, host_a.ctypes.data)
    lib.check("write_host_to_gpu_blocking", 0, b, 0, k * n * 4, host_b.ctypes.data)
    # "bf16s": the same buffers' first halves read as bf16 patterns (the bf16 storage path).
    for mode in os.environ.get("MODES", "tf32 bf16 bf16s").split():
        storage = g.BF16 if mode == "bf16s" else g.F32
        desc = g.gemm_desc(a, b, c, m, n, k, trans_a=ta, trans_b=tb, dtype_a=storage, dtype_c=g.F32,
                           compute=g.COMPUTE_MODES[mode.rstrip("s")])
        for _ in range(5):
            lib.check("aethercl_gemm", 0, ctypes.byref(desc), None)
        lib.check("aethercl_synchronize", 0, None)
        reps = int(os.environ.get("REPS", "200"))
        t = time.perf_counter()
        for _ in range(reps):
            lib.check("aethercl_gemm", 0, ctypes.byref(desc), None)
        host = (time.perf_counter() - t) / reps * 1e6
        lib.check("aethercl_synchronize", 0, None)
        wall = (time.perf_counter() - t) / reps * 1e6
        # Host nanoseconds from the previous launch's enqueue to each launch's, by kernel.
        log = json.loads(lib.json_call("aethercl_kernel_log", 0))[-50:]
        spans = {}
        for before, entry in zip(log, log[1:]):
            spans.setdefault(entry["kernel"], []).append(entry["queued_ns"] - before["queued_ns"])
        enqueue = {name: round(sorted(v)[len(v) // 2] / 1e3, 1) for name, v in spans.items()}
        with tempfile.TemporaryDirectory() as d:
            lib.check("aethercl_trace_start", str(Path(d) / "t.json").encode())
            t = time.perf_counter()
            for _ in range(reps):
                lib.check("aethercl_gemm", 0, ctypes.byref(desc), None)
            lib.check("aethercl_synchronize", 0, None)
            traced = (time.perf_counter() - t) / reps * 1e6
            summary = json.loads(lib.json_call("aethercl_trace_summary"))
            lib.check("aethercl_trace_stop")
        kernels = {x["name"]: round(x["total_ns"] / reps / 1e3, 1) for x in summary["kernels"]
                   if x["calls"]}
        print(f"{m}x{n}x{k} t{ta}{tb} {mode}: host {host:.1f} us, wall {wall:.1f} us, traced "
              f"{traced:.1f} us; kernels {kernels}; host us since the previous enqueue {enqueue}",
              flush=True)
    for h in (a, b, c):
        lib.free_gpu_memory(0, h)
