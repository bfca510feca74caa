"""Module-style layers on the version-3 training ops (seed 002's sketch): Module, Sequential,
Linear, Conv2d, ReLU / GELU / Tanh / Sigmoid, Dropout, MaxPool2d, AvgPool2d, BatchNorm2d,
LayerNorm with affine parameters, Flatten. A Module finds its parameters in its attributes;
train() / eval() switch dropout and batch normalisation for it and every sub-module."""
from __future__ import annotations

import math
from typing import Iterator, List, Optional

import numpy as np

from . import functional as F
from .buffer import GPUBuffer
from .config import FP_TYPE
from .nn import Parameter
from .tensor import OclTensor


class Module:
    training = True

    def forward(self, *args):
        raise NotImplementedError

    def __call__(self, *args):
        return self.forward(*args)

    def children(self) -> Iterator["Module"]:
        for value in vars(self).values():
            if isinstance(value, Module):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, Module))

    def parameters(self) -> List[Parameter]:
        params = [v for v in vars(self).values() if isinstance(v, Parameter)]
        for child in self.children():
            params += child.parameters()
        return params

    def train(self, mode: bool = True) -> "Module":
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.zero_grad()


class Sequential(Module):
    def __init__(self, *layers: Module):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        return self.layers[index]


def _uniform(rng, bound, shape):
    return rng.uniform(-bound, bound, shape).astype(FP_TYPE)


class Linear(Module):
    """y = x @ W + b, W (in, out); PyTorch's default initialisation U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "linear"):
        rng = rng if rng is not None else np.random.default_rng()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_uniform(rng, bound, (in_features, out_features)),
                                name=name + ".weight")
        self.bias = Parameter(_uniform(rng, bound, (1, out_features)), name=name + ".bias") \
            if bias else None

    def forward(self, x: OclTensor) -> OclTensor:
        y = x.matmul(self.weight)
        return y.add(self.bias) if self.bias is not None else y


class Conv2d(Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True,
                 rng: Optional[np.random.Generator] = None, name: str = "conv"):
        rng = rng if rng is not None else np.random.default_rng()
        kh, kw = F._pair(kernel_size)
        fan_in = in_channels // groups * kh * kw
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = Parameter(_uniform(rng, bound, (out_channels, in_channels // groups, kh, kw)),
                                name=name + ".weight")
        self.bias = Parameter(_uniform(rng, bound, (out_channels,)), name=name + ".bias") \
            if bias else None
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class _Activation(Module):
    op = ""

    def forward(self, x):
        return F.unary(x, self.op)


class ReLU(_Activation):
    op = "relu"


class Tanh(_Activation):
    op = "tanh"


class Sigmoid(_Activation):
    op = "sigmoid"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Dropout(Module):
    def __init__(self, p: float = 0.5, generator: Optional[F.Generator] = None):
        self.p, self.generator = float(p), generator

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.generator)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(MaxPool2d):
    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class Flatten(Module):
    def forward(self, x):
        return F.flatten(x, 1)


class BatchNorm2d(Module):
    """Per-channel batch normalisation of (N, C, H, W) with running statistics (PyTorch's
    momentum convention, unbiased running variance)."""

    def __init__(self, channels: int, eps: float = 1e-5, momentum: float = 0.1,
                 name: str = "bn"):
        self.weight = Parameter(np.ones(channels, FP_TYPE), name=name + ".weight")
        self.bias = Parameter(np.zeros(channels, FP_TYPE), name=name + ".bias")
        self.running_mean = GPUBuffer(channels * 4, tag=name + ".running_mean", _init_zeros=True)
        self.running_var = GPUBuffer(channels * 4, tag=name + ".running_var")
        self.running_var.write(np.ones(channels, FP_TYPE))
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        return F.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                            self.training, self.momentum, self.eps)


class LayerNorm(Module):
    """LayerNorm over the last axis with learnable gamma (1) and beta (0); rms=True: RMSNorm."""

    def __init__(self, features: int, eps: float = 1e-5, affine: bool = True, rms: bool = False,
                 name: str = "ln"):
        self.weight = Parameter(np.ones(features, FP_TYPE), name=name + ".weight") if affine \
            else None
        self.bias = Parameter(np.zeros(features, FP_TYPE), name=name + ".bias") \
            if affine and not rms else None
        self.eps, self.rms = eps, rms

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps, self.rms)
