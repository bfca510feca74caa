"""A PyTorch replica of llm.py's default model (B=16, S=64, E=16, H=4, d_ff=256, L=6, V=53; the
sizes of python_harness/llm_replay.py) and its training step in eager mode, as the reference
`tools/aethercl bench step` compares against where torch is installed.

The replica is the model as documented, trained properly: embedding + sinusoidal positions, six
pre-LayerNorm blocks (4-head attention with scale 0.5, exact-erf GELU feed-forward of 256), final
LayerNorm, output projection, cross-entropy over targets != 0, the full backward pass and AdamW on
every parameter (lr 3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.02). That is more device work
than llm.py's own step, whose graph reaches only the output bias: the comparison is conservative.

Run alone: python3 tools/bench/torch_step.py [--steps 20] [--warmup 5] [--device cuda]
Prints one JSON line: {"device", "median_ms", "mean_ms", "steps"}.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

B, S, E, H, DK, DFF, L, V = 16, 64, 16, 4, 4, 256, 6, 53


def build(torch, device):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(E, E, bias=False)
            self.wk = nn.Linear(E, E, bias=False)
            self.wv = nn.Linear(E, E, bias=False)
            self.wo = nn.Linear(E, E)
            self.w1 = nn.Linear(E, DFF)
            self.w2 = nn.Linear(DFF, E)

        def forward(self, x):
            h = F.layer_norm(x, (E,), eps=1e-5)
            q, k, v = (m(h).view(B, S, H, DK).transpose(1, 2) for m in (self.wq, self.wk, self.wv))
            att = torch.softmax(q @ k.transpose(-1, -2) * 0.5, dim=-1)
            x = x + self.wo((att @ v).transpose(1, 2).reshape(B, S, E))
            f = self.w1(F.layer_norm(x, (E,), eps=1e-5))
            return x + self.w2(F.gelu(f))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, E)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.out = nn.Linear(E, V)
            pos = torch.arange(S, dtype=torch.float32)[:, None]
            div = torch.exp(torch.arange(0, E, 2, dtype=torch.float32) * (-math.log(10000.0) / E))
            pe = torch.zeros(S, E)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            self.register_buffer("pe", pe)

        def forward(self, ids):
            x = self.embed(ids) + self.pe
            for block in self.blocks:
                x = block(x)
            return self.out(F.layer_norm(x, (E,), eps=1e-5))

    model = Model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.02)
    return model, optimizer


def measure(steps: int, warmup: int, device_name: str) -> dict:
    import torch
    device = torch.device(device_name)
    torch.manual_seed(1)
    model, optimizer = build(torch, device)
    generator = torch.Generator().manual_seed(1)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step():
        ids = torch.randint(1, V - 1, (B, S), generator=generator)
        targets = torch.roll(ids, -1, dims=1)
        ids, targets = ids.to(device), targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1),
                                                 ignore_index=0)
        loss.backward()
        optimizer.step()
        return loss.item()  # the frontend reads its loss every step, as llm.py does

    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "median_ms": 1e3 * statistics.median(times),
            "mean_ms": 1e3 * statistics.mean(times), "steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default=None, help="cuda when available, else cpu")
    args = parser.parse_args()
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(json.dumps(measure(args.steps, args.warmup, device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
