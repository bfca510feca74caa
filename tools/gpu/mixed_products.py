"""The GPT's 16-bit products as ocl_llm's bf16 activations run them, one by one on one device:
A, B and C bf16 (dW: C float32), each with the epilogue the step uses and without, and with B
stored both ways (W as (in, out), and transposed), to show what each choice costs.

    python3 tools/gpu/mixed_products.py [--gpu 0] [--tokens 4096] [--width 512] [--ff 2048]
Times: tools/bench/gemm.py's timing (batches of back-to-back calls between synchronisations)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402
import gemm as gemm_bench  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--ff", type=int, default=2048)
    args = p.parse_args()
    lib, gpu = Library(), args.gpu
    lib.check("initialize_gpu", gpu)
    lib.check("aethercl_set_matmul_precision", gpu, g.COMPUTE_MODES["bf16"])
    rng = np.random.default_rng(0)
    handles = []

    def upload(array):
        handle = lib.check_handle("allocate_gpu_memory", gpu, array.nbytes)
        lib.check("write_host_to_gpu_blocking", gpu, handle, 0, array.nbytes, array.ctypes.data)
        handles.append(handle)
        return handle

    def bf16(shape):
        return upload(gemm_bench.encode(rng.standard_normal(shape) / 8, g.BF16))

    def sync():
        lib.check("aethercl_synchronize", gpu)

    T, E, F = args.tokens, args.width, args.ff
    bias = {n: upload(rng.standard_normal(n).astype(np.float32)) for n in (E, F)}
    rows = []
    # forward y = x W (+ epilogue): x (T, K), W (K, N) or W^T (N, K)
    for name, K, N, kinds in (("qkv/o", E, E, ("none", "bias")),
                              ("ff1", E, F, ("none", "bias", "bias_gelu")),
                              ("ff2", F, E, ("none", "bias"))):
        x, W, WT, c, pre = bf16((T, K)), bf16((K, N)), bf16((N, K)), bf16((T, N)), bf16((T, N))
        for layout, b, trans_b in (("W", W, 0), ("W^T", WT, 1)):
            desc = g.gemm_desc(x, b, c, T, N, K, trans_b=trans_b, dtype_a=g.BF16, dtype_c=g.BF16,
                               compute=g.COMPUTE_MODES["bf16"])
            for kind in kinds:
                if kind == "none":
                    run = lambda: g.gemm(lib, gpu, desc)  # noqa: E731
                else:
                    epi = g.gemm_epilogue(kind, bias=bias[N],
                                          pre=pre if kind == "bias_gelu" else None)
                    run = lambda epi=epi: g.gemm_fused(lib, gpu, desc, epi)  # noqa: E731
                us = gemm_bench.timed(run, sync, max_inner=200) * 1e6
                rows.append(dict(product=f"fwd {name}", m=T, n=N, k=K, b=layout, epilogue=kind,
                                 us=us, tflops=2 * T * N * K / us / 1e6))
    # backward: dx = dy W^T (B = W (K, N) read transposed), dW = x^T dy (C float32)
    for name, K, N in (("qkv/o", E, E), ("ff1", E, F), ("ff2", F, E)):
        dy, W, x = bf16((T, N)), bf16((K, N)), bf16((T, K))
        dx = bf16((T, K))
        dW = upload(np.zeros((K, N), np.float32))
        for label, desc in (
                ("dx", g.gemm_desc(dy, W, dx, T, K, N, trans_b=1, dtype_a=g.BF16, dtype_c=g.BF16,
                                   compute=g.COMPUTE_MODES["bf16"])),
                ("dW", g.gemm_desc(x, dy, dW, K, N, T, trans_a=1, dtype_a=g.BF16, dtype_c=g.F32,
                                   compute=g.COMPUTE_MODES["bf16"]))):
            us = gemm_bench.timed(lambda: g.gemm(lib, gpu, desc), sync, max_inner=200) * 1e6
            flops = 2 * T * N * K
            rows.append(dict(product=f"{label} {name}", m=desc.m, n=desc.n, k=desc.k, b="-",
                             epilogue="none", us=us, tflops=flops / us / 1e6))
    for r in rows:
        print(f"{r['product']:<10} {r['m']:>5}x{r['n']:>5}x{r['k']:>5} B={r['b']:<4} "
              f"{r['epilogue']:<10} {r['us']:8.1f} us {r['tflops']:7.1f} TFLOP/s")
    print(json.dumps(rows))
    for h in handles:
        lib.free_gpu_memory(gpu, h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
