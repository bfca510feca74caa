"""Errors of float32-operand products in the 16-bit compute modes (aethercl_gemm) on given shapes
against float64 products of the inputs rounded as the mode rounds: a correctness check of the
tile configurations the device's own shapes take, for the lent GPU machine (tools/gpu/).
Arguments "m,n,k,trans_a,trans_b ..."; MODES (default "bf16 fp16"). Rounding and bound are the
GEMM suites' (tests/python/support/gemm_checks.py): exit status 1 when an error exceeds
RTOL * sqrt(k) relative to sum |a||b|."""
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python_harness"), str(ROOT / "tests" / "python")]
from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402
from support.gemm_checks import RTOL, as_multiplied  # noqa: E402


lib = Library()
lib.check("initialize_gpu", 0)
failed = False
for arg in sys.argv[1:]:
    m, n, k, ta, tb = (int(v) for v in arg.split(","))
    rng = np.random.default_rng(m + n + k)
    host_a = rng.standard_normal(m * k).astype(np.float32)
    host_b = rng.standard_normal(k * n).astype(np.float32)
    a, b, c = (lib.allocate_gpu_memory(0, size * 4) for size in (m * k, k * n, m * n))
    lib.check("write_host_to_gpu_blocking", 0, a, 0, m * k * 4, host_a.ctypes.data)
    lib.check("write_host_to_gpu_blocking", 0, b, 0, k * n * 4, host_b.ctypes.data)
    for mode in os.environ.get("MODES", "bf16 fp16").split():
        desc = g.gemm_desc(a, b, c, m, n, k, trans_a=ta, trans_b=tb, compute=g.COMPUTE_MODES[mode])
        lib.check("aethercl_gemm", 0, ctypes.byref(desc), None)
        out = np.empty(m * n, np.float32)
        lib.check("read_gpu_to_host_blocking", 0, c, 0, m * n * 4, out.ctypes.data)
        ra = as_multiplied(host_a, mode).astype(np.float64).reshape((k, m) if ta else (m, k))
        rb = as_multiplied(host_b, mode).astype(np.float64).reshape((n, k) if tb else (k, n))
        ra, rb = (ra.T if ta else ra), (rb.T if tb else rb)
        exact = ra @ rb
        scale = np.abs(ra) @ np.abs(rb)
        worst = float(np.max(np.abs(out.reshape(m, n) - exact) / scale))
        ok = worst <= RTOL * k ** 0.5
        failed |= not ok
        print(f"{m}x{n}x{k} t{ta}{tb} {mode}: max error / sum|a||b| = {worst:.2e} "
              f"({'ok' if ok else 'TOO LARGE'})", flush=True)
    for handle in (a, b, c):
        lib.free_gpu_memory(0, handle)
sys.exit(1 if failed else 0)
