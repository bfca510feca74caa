"""Device time per call of the row kernels a GPT step runs (layer norm forward and backward) at
rows x cols (default 4096 x 512, the GPT small's activations), from the library's trace: a
diagnosis helper for the lent GPU machine (tools/gpu/); run it under different AETHERCL_ROW_*
settings to compare work-group shapes."""
import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
from aethercl import Library  # noqa: E402

rows, cols = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4096x512").split("x"))
reps = int(os.environ.get("REPS", "100"))
lib = Library()
lib.check("initialize_gpu", 0)
n = rows * cols
x, dy, y, dx, gamma_grad = (lib.allocate_gpu_memory(0, n * 4) for _ in range(5))
host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
for handle in (x, dy):
    lib.check("write_host_to_gpu_blocking", 0, handle, 0, n * 4, host.ctypes.data)
eps = ctypes.c_float(1e-5)
calls = {
    "forward": lambda: lib.check("execute_layernorm_on_gpu", 0, x, y, rows, cols, eps),
    "backward": lambda: lib.check("execute_layernorm_backward_on_gpu", 0, dy, x, dx, rows, cols,
                                  eps),
}
for name, call in calls.items():
    call()
    lib.check("aethercl_synchronize", 0, None)
    with tempfile.TemporaryDirectory() as d:
        lib.check("aethercl_trace_start", str(Path(d) / "t.json").encode())
        for _ in range(reps):
            call()
        lib.check("aethercl_synchronize", 0, None)
        summary = json.loads(lib.json_call("aethercl_trace_summary"))
        lib.check("aethercl_trace_stop")
    kernels = {k["name"]: round(k["total_ns"] / 1e3 / reps, 1) for k in summary["kernels"]
               if k["calls"]}
    moved = (2 if name == "forward" else 3) * n * 4
    total = sum(kernels.values())
    print(f"{rows}x{cols} {name}: {total:.1f} us per call, {moved / total / 1e3:.0f} GB/s; "
          f"{kernels}", flush=True)
