"""A GPT step's BF16 products in the layouts training stores them (forward X W^T, dX = dY W,
dW = dY^T X), timed on aethercl_gemm under this process's AETHERCL_MMA_PARAMS and, where PyTorch
is installed, beside torch.matmul on the same views: which kernel form each layout takes, and what
the operand copies cost it.

Usage (on the GPU machine, after tools/gpu/env.sh):
    python3 tools/gpu/gemm_layouts.py [--tokens 4096] [--width 768] [--ff 3072] [--torch]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python_harness"), str(ROOT / "tools" / "bench")]

from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402
from gemm import Ours, decode, encode, timed  # noqa: E402


def products(tokens: int, width: int, ff: int):
    """(name, m, n, k, trans_a, trans_b, C format) of one layer's products."""
    out = []
    for name, out_f, in_f in (("qkv", 3 * width, width), ("proj", width, width),
                              ("fc1", ff, width), ("fc2", width, ff)):
        out.append((f"{name} fwd", tokens, out_f, in_f, 0, 1, g.BF16))
        out.append((f"{name} dX", tokens, in_f, out_f, 0, 0, g.BF16))
        out.append((f"{name} dW", out_f, in_f, tokens, 1, 0, g.F32))
    return out


def relative_error(lib, hc, a, b, ta, tb, c_fmt) -> float:
    """max |C - C64| / max |C64|, C64 the float64 product of the bf16-rounded operands."""
    a64, b64 = decode(encode(a, g.BF16), g.BF16), decode(encode(b, g.BF16), g.BF16)
    ref = (a64.T if ta else a64) @ (b64.T if tb else b64)
    raw = np.empty(ref.size, np.float32 if c_fmt == g.F32 else np.uint16)
    lib.check("read_gpu_to_host_blocking", 0, hc, 0, raw.nbytes, raw.ctypes.data)
    got = decode(raw, c_fmt).reshape(ref.shape)
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--ff", type=int, default=3072)
    parser.add_argument("--torch", action="store_true")
    parser.add_argument("--check", action="store_true",
                        help="also compare each result with float64 NumPy on the rounded inputs")
    parser.add_argument("--only", default="", help="products whose name holds this (\"dW\")")
    args = parser.parse_args()
    lib = Library()
    ours = Ours(lib, 0)
    rng = np.random.default_rng(0)
    torch = None
    if args.torch:
        import torch
    for name, m, n, k, ta, tb, c_fmt in products(args.tokens, args.width, args.ff):
        if args.only not in name:
            continue
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        ha, hb = ours.upload(encode(a, g.BF16)), ours.upload(encode(b, g.BF16))
        c_bytes = m * n * g.DTYPE_BYTES[c_fmt]
        hc = lib.check_handle("allocate_gpu_memory", 0, c_bytes)
        desc = g.gemm_desc(ha, hb, hc, m, n, k, trans_a=ta, trans_b=tb, dtype_a=g.BF16,
                           dtype_c=c_fmt, compute=g.COMPUTE_MODES["bf16"])
        try:
            seconds = timed(lambda: g.gemm(lib, 0, desc),
                            lambda: lib.check("aethercl_synchronize", 0))
            deviation = relative_error(lib, hc, a, b, ta, tb, c_fmt) if args.check else None
        except Exception as error:   # an AETHERCL_MMA_PARAMS this product cannot take
            print(f"{name:10s} {m:5d}x{n:5d}x{k:5d} t{ta}{tb}  refused: {error}", flush=True)
            continue
        finally:
            for h in (ha, hb, hc):
                lib.free_gpu_memory(0, h)
        line = (f"{name:10s} {m:5d}x{n:5d}x{k:5d} t{ta}{tb}  ours {seconds * 1e6:8.1f} us "
                f"{2 * m * n * k / seconds / 1e12:6.1f} TF/s")
        if deviation is not None:
            line += f"  max error {deviation:.2e} of max |C|"
        if torch is not None:
            ta_ = torch.from_numpy(a).to("cuda", torch.bfloat16)
            tb_ = torch.from_numpy(b).to("cuda", torch.bfloat16)
            opa, opb = (ta_.T if ta else ta_), (tb_.T if tb else tb_)
            out_dtype = torch.float32 if c_fmt == g.F32 else torch.bfloat16

            def run():
                torch.matmul(opa, opb).to(out_dtype)
            ref = timed(run, torch.cuda.synchronize)
            line += f"   torch {ref * 1e6:8.1f} us  ratio {ref / seconds:5.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
