"""PyTorch replicas of `bench train`'s models, layer for layer as ours: the frontend's GPT
(ocl_llm.model.SimpleModel) and the digits CNN, loaded with our initial weights by name."""
from __future__ import annotations

import math


def build_gpt(torch, sizes, weights, sdpa: bool):
    """Embedding + sinusoidal positions, pre-LN blocks (LayerNorm without affine parameters,
    bias-free Q/K/V, output projection with bias, exact-erf GELU feed-forward), final LayerNorm,
    untied output projection. sdpa=False: scores, additive causal mask of -1e9 and softmax written
    out as ours; sdpa=True: scaled_dot_product_attention(is_causal=True)."""
    nn, F = torch.nn, torch.nn.functional
    E, H, S = sizes["width"], sizes["heads"], sizes["context"]
    dk = E // H

    def linear(name, bias=True):
        w = weights[name + ".W"]              # ours: (in, out); nn.Linear: (out, in)
        layer = nn.Linear(w.shape[0], w.shape[1], bias=bias)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w.T.copy()))
            if bias:
                layer.bias.copy_(torch.from_numpy(weights[name + ".b"].reshape(-1)))
        return layer

    class Block(nn.Module):
        def __init__(self, prefix):
            super().__init__()
            self.q, self.k, self.v = (linear(f"{prefix}.attn.{n}", bias=False) for n in "qkv")
            self.o = linear(prefix + ".attn.o")
            self.ff1, self.ff2 = linear(prefix + ".ff1"), linear(prefix + ".ff2")

        def attention(self, h):
            B = h.shape[0]
            q, k, v = (m(h).view(B, S, H, dk).transpose(1, 2) for m in (self.q, self.k, self.v))
            if sdpa:
                context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dk)) + self.mask
                context = torch.softmax(scores, dim=-1) @ v
            return self.o(context.transpose(1, 2).reshape(B, S, E))

        def forward(self, x):
            x = x + self.attention(F.layer_norm(x, (E,), eps=1e-5))
            return x + self.ff2(F.gelu(self.ff1(F.layer_norm(x, (E,), eps=1e-5))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(*weights["embedding.weight"].shape)
            with torch.no_grad():
                self.embedding.weight.copy_(torch.from_numpy(weights["embedding.weight"]))
            self.blocks = nn.ModuleList(Block(f"block{i}") for i in range(sizes["layers"]))
            self.output = linear("output")
            pos = torch.arange(S, dtype=torch.float64)[:, None]
            div = torch.exp(torch.arange(0, E, 2, dtype=torch.float64) * (-math.log(10000.0) / E))
            pe = torch.zeros(S, E, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)[:, : E // 2]
            self.register_buffer("pe", pe.float())
            mask = torch.triu(torch.full((S, S), -1e9), diagonal=1)
            for block in self.blocks:
                block.register_buffer("mask", mask)

        def forward(self, ids):
            x = self.embedding(ids) + self.pe
            for block in self.blocks:
                x = block(x)
            return self.output(F.layer_norm(x, (E,), eps=1e-5))

    return GPT()


def build_cnn(torch, sizes, weights):
    """digits_cnn's layers: conv-BN-ReLU x2, max-pool, conv-ReLU, max-pool, dropout, linear."""
    nn = torch.nn
    flat = 64 * (sizes["size"] // 4) ** 2
    model = nn.Sequential(
        nn.Conv2d(sizes["channels"], 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(sizes["dropout"]), nn.Linear(flat, sizes["classes"]))
    ours = {0: "conv1", 1: "bn1", 3: "conv2", 4: "bn2", 7: "conv3", 12: "fc"}
    with torch.no_grad():
        for index, name in ours.items():
            layer = model[index]
            w = weights[name + ".weight"]
            layer.weight.copy_(torch.from_numpy(w.T.copy() if name == "fc" else w))
            layer.bias.copy_(torch.from_numpy(weights[name + ".bias"].reshape(-1)))
    return model
