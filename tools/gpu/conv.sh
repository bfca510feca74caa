#!/bin/bash
# conv2d on the lent NVIDIA machine: tools/bench/conv.py (ours, the GEMM alone, CLBlast's GEMM) on
# ResNet-like layers, and PyTorch's cuDNN conv2d (FP32, TF32 off) on the same layers in the same call.
# Setup as tools/gpu/tests.sh.
. "$(dirname "$0")/env.sh"
CASES="32,64,56,56,64,3,1,1,1 32,128,28,28,128,3,1,1,1 32,256,14,14,256,3,1,1,1 32,64,56,56,256,1,1,0,1 32,64,56,56,64,3,1,1,64"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
timeout 300 python3 tools/bench/conv.py --build $B --reps 10 --cases $CASES 2>&1 | tail -8
timeout 120 python3 - $CASES <<'PY'
import sys, time, torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
print(f"{'case (PyTorch cuDNN, FP32)':<30} {'fwd GF/s':>9} {'bwd GF/s':>9}")
for case in sys.argv[1:]:
    n, cin, h, w, cout, k, s, p, g = map(int, case.split(","))
    x = torch.randn(n, cin, h, w, device="cuda", requires_grad=True)
    wt = torch.randn(cout, cin // g, k, k, device="cuda", requires_grad=True)
    y = torch.nn.functional.conv2d(x, wt, stride=s, padding=p, groups=g)
    flops = 2 * y.numel() * (cin // g) * k * k
    def timed(fn, reps=20):
        fn(); torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(reps): fn()
        torch.cuda.synchronize(); return (time.perf_counter() - t) / reps
    fwd = timed(lambda: torch.nn.functional.conv2d(x, wt, stride=s, padding=p, groups=g))
    dy = torch.randn_like(y)
    bwd = timed(lambda: torch.autograd.grad(torch.nn.functional.conv2d(x, wt, stride=s, padding=p, groups=g), (x, wt), dy)) - fwd
    print(f"{case:<30} {flops / fwd / 1e9:>9.1f} {2 * flops / bwd / 1e9:>9.1f}")
PY
