"""Fused attention timed on one device: aethercl_attention_forward, and forward + backward, in each
compute mode (FP32: the portable kernels; BF16/FP16: the tensor-core kernels where the device has
them), against PyTorch's scaled_dot_product_attention on the same GPU when torch with CUDA imports
in this interpreter (its flash kernel for bf16 / fp16; the same layout, [batch, seq, heads, dim]).

Usage: python3 tools/bench/attention.py [--gpu 0] [--modes fp32 bf16] [--shapes 16x8x256x64 ...]
          [--causal 1] [--float32-storage] [--json FILE]

Shapes are batch x heads x seq x head_dim (self-attention, seq_q = seq_k); storage is float32 for
FP32 rows and the mode's 16-bit format otherwise, as a mixed-precision step stores activations
(--float32-storage: float32 for ours in every mode, as ocl_llm's activations are).
Times: after a warm-up (kernel builds, probes), the median of 5 batches of back-to-back calls
between synchronisations; ratios are PyTorch's time over ours (above 1: ours is faster)."""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402
from aethercl import train_types as T  # noqa: E402
from aethercl.structs import BF16, F16, F32, COMPUTE_BF16, COMPUTE_FP16, COMPUTE_FP32  # noqa: E402

MODES = {"fp32": (COMPUTE_FP32, F32), "bf16": (COMPUTE_BF16, BF16), "fp16": (COMPUTE_FP16, F16)}
SHAPES = ["16x8x256x64", "4x8x1024x64", "1x8x4096x64", "4x12x1024x128"]


def median_time(run, sync, inner: int) -> float:
    times = []
    for _ in range(5):
        sync()
        start = time.perf_counter()
        for _ in range(inner):
            run()
        sync()
        times.append((time.perf_counter() - start) / inner)
    return float(np.median(times))


def ours(lib, gpu, shape, mode, causal, float32_storage=False):
    b, h, s, d = shape
    compute, dtype = MODES[mode]
    if float32_storage:
        dtype = F32
    elem = 4 if dtype == F32 else 2
    count = b * h * s * d
    rng = np.random.default_rng(0)
    handles = {}
    for name in ("q", "k", "v", "dout"):
        values = rng.standard_normal(count).astype(np.float32)
        raw = values if dtype == F32 else (values.astype(np.float16).view(np.uint16) if dtype == F16
                                           else (values.view(np.uint32) >> 16).astype(np.uint16))
        handles[name] = lib.allocate_gpu_memory(gpu, count * elem)
        lib.check("write_host_to_gpu_blocking", gpu, handles[name], 0, raw.nbytes, raw.ctypes.data)
    for name in ("o", "dq", "dk", "dv"):
        handles[name] = lib.allocate_gpu_memory(gpu, count * elem)
    handles["lse"] = lib.allocate_gpu_memory(gpu, b * h * s * 4)
    desc = T.AttentionDesc(batch=b, heads=h, seq_q=s, seq_k=s, head_dim=d, layout=1,
                           causal=causal, scale=0.0, dtype=dtype, compute=compute, **handles)
    sync = lambda: lib.check("aethercl_synchronize", gpu, None)  # noqa: E731
    forward = lambda: lib.check("aethercl_attention_forward", gpu, desc.address, None)  # noqa: E731
    both = lambda: (forward(), lib.check("aethercl_attention_backward", gpu, desc.address,  # noqa: E731
                                         None))
    both()
    sync()
    inner = max(1, min(200, int(2e9 // max(1, b * h * s * s * d))))
    result = {"forward_ms": median_time(forward, sync, inner) * 1e3,
              "forward_backward_ms": median_time(both, sync, inner) * 1e3}
    for handle in handles.values():
        lib.free_gpu_memory(gpu, handle)
    return result


def torch_reference(shape, mode, causal):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    b, h, s, d = shape
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[mode]
    # SDPA takes [batch, heads, seq, dim]; a transposed view of [batch, seq, heads, dim] is the
    # layout ours reads.
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype).transpose(1, 2)
               .requires_grad_() for _ in range(3))
    grad = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    forward = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # noqa: E731
    both = lambda: forward().backward(grad)  # noqa: E731
    both()
    torch.cuda.synchronize()
    inner = max(1, min(200, int(2e9 // max(1, b * h * s * s * d))))
    with torch.no_grad():
        fwd = median_time(forward, torch.cuda.synchronize, inner)
    return {"forward_ms": fwd * 1e3,
            "forward_backward_ms": median_time(both, torch.cuda.synchronize, inner) * 1e3}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--modes", nargs="+", default=["fp32", "bf16"], choices=sorted(MODES))
    p.add_argument("--shapes", nargs="+", default=SHAPES)
    p.add_argument("--causal", type=int, default=1, choices=(0, 1))
    p.add_argument("--float32-storage", action="store_true",
                   help="ours reads and writes float32 tensors in every mode (as ocl_llm's "
                        "activations are); PyTorch keeps the mode's dtype")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    lib = Library()
    lib.check("initialize_gpu", args.gpu)
    device = json.loads(lib.json_call("aethercl_device_info", args.gpu))["name"]
    print(f"device {device}, causal {args.causal}; ms per call, ratio = torch / ours")
    rows = []
    for text in args.shapes:
        shape = tuple(int(x) for x in text.split("x"))
        for mode in args.modes:
            mine = ours(lib, args.gpu, shape, mode, args.causal, args.float32_storage)
            ref = torch_reference(shape, mode, args.causal)
            row = {"shape": text, "mode": mode, "ours": mine, "torch": ref}
            rows.append(row)
            line = (f"{text:>16} {mode:>5}: ours fwd {mine['forward_ms']:8.3f} fwd+bwd "
                    f"{mine['forward_backward_ms']:8.3f}")
            if ref:
                line += (f" | torch fwd {ref['forward_ms']:8.3f} fwd+bwd "
                         f"{ref['forward_backward_ms']:8.3f} | ratio fwd "
                         f"{ref['forward_ms'] / mine['forward_ms']:.2f} fwd+bwd "
                         f"{ref['forward_backward_ms'] / mine['forward_backward_ms']:.2f}")
            print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
