"""Module-style layers on the version-3 training ops (seed 002's sketch): Module, Sequential,
Linear, Conv2d, ReLU / GELU / Tanh / Sigmoid, Dropout, MaxPool2d, AvgPool2d, BatchNorm2d,
LayerNorm with affine parameters, Flatten. A Module finds its parameters, state buffers and
sub-modules in its attributes; train() / eval() switch dropout and batch normalisation for it and
every sub-module; state_dict() / load_state_dict() copy its tensors by attribute path ("0.weight",
"3.running_mean"), and config() gives the constructor arguments ocl_llm.save records."""
from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from . import functional as F
from .buffer import GPUBuffer
from .config import FP_TYPE
from .state import load_into, state_of
from .tensor import OclTensor, Parameter


class Module:
    training = True

    def forward(self, *args):
        raise NotImplementedError

    def __call__(self, *args):
        return self.forward(*args)

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                yield from ((f"{name}.{i}", v) for i, v in enumerate(value)
                            if isinstance(v, Module))

    def children(self) -> Iterator["Module"]:
        return (child for _, child in self.named_children())

    def named_tensors(self, prefix: str = "") -> Iterator[Tuple[str, Any]]:
        """Parameters and state buffers (BatchNorm's running statistics), own ones first, then
        each sub-module's under its attribute path."""
        for name, value in vars(self).items():
            if isinstance(value, (Parameter, GPUBuffer)):
                yield prefix + name, value
        for name, child in self.named_children():
            yield from child.named_tensors(f"{prefix}{name}.")

    def named_parameters(self) -> Iterator[Tuple[str, Parameter]]:
        return ((n, t) for n, t in self.named_tensors() if isinstance(t, Parameter))

    def parameters(self) -> List[Parameter]:
        return [p for _, p in self.named_parameters()]

    def state_dict(self) -> Dict[str, np.ndarray]:
        """Host copies of every parameter and state buffer, by attribute path."""
        return state_of(self.named_tensors())

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Writes a state_dict() back; refuses (ValueError naming every difference, nothing
        written) unknown names, other shapes and, when strict, missing names."""
        load_into(self.named_tensors(), state, type(self).__name__, strict)

    def config(self) -> Dict[str, Any]:
        """The constructor arguments (JSON values) that rebuild this layer's structure; ocl_llm.save
        records them. A Module subclass of your own defines it to be saved whole; otherwise save
        its state_dict() and load that into a model you build."""
        raise NotImplementedError(f"{type(self).__name__} does not define config(); save its "
                                  f"state_dict() instead and load_state_dict() into a model "
                                  f"you build")

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


def _prefix(parameter: Parameter) -> str:
    return parameter.name.rsplit(".", 1)[0]


class Sequential(Module):
    def __init__(self, *layers: Module):
        self.layers = list(layers)

    def named_children(self) -> Iterator[Tuple[str, Module]]:
        return ((str(i), layer) for i, layer in enumerate(self.layers))

    def config(self) -> Dict[str, Any]:
        return {}

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

    def config(self) -> Dict[str, Any]:
        return dict(in_features=self.weight.shape[0], out_features=self.weight.shape[1],
                    bias=self.bias is not None, name=_prefix(self.weight))


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

    def config(self) -> Dict[str, Any]:
        c_out, c_in, kh, kw = self.weight.shape
        return dict(in_channels=c_in * self.groups, out_channels=c_out, kernel_size=[kh, kw],
                    stride=_json(self.stride), padding=_json(self.padding),
                    dilation=_json(self.dilation), groups=self.groups,
                    bias=self.bias is not None, name=_prefix(self.weight))


class _Activation(Module):
    op = ""

    def forward(self, x):
        return F.unary(x, self.op)

    def config(self) -> Dict[str, Any]:
        return {}


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

    def config(self) -> Dict[str, Any]:
        return dict(approximate=self.approximate)


class Dropout(Module):
    def __init__(self, p: float = 0.5, generator: Optional[F.Generator] = None):
        self.p, self.generator = float(p), generator

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.generator)

    def config(self) -> Dict[str, Any]:
        return dict(p=self.p)   # the generator is not saved: a loaded Dropout draws afresh


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def config(self) -> Dict[str, Any]:
        return dict(kernel_size=_json(self.kernel_size), stride=_json(self.stride),
                    padding=_json(self.padding))


class AvgPool2d(MaxPool2d):
    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class Flatten(Module):
    def forward(self, x):
        return F.flatten(x, 1)

    def config(self) -> Dict[str, Any]:
        return {}


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

    def config(self) -> Dict[str, Any]:
        return dict(channels=self.weight.shape[0], eps=self.eps, momentum=self.momentum,
                    name=_prefix(self.weight))


class LayerNorm(Module):
    """LayerNorm over the last axis with learnable gamma (1) and beta (0); rms=True: RMSNorm."""

    def __init__(self, features: int, eps: float = 1e-5, affine: bool = True, rms: bool = False,
                 name: str = "ln"):
        self.weight = Parameter(np.ones(features, FP_TYPE), name=name + ".weight") if affine \
            else None
        self.bias = Parameter(np.zeros(features, FP_TYPE), name=name + ".bias") \
            if affine and not rms else None
        self.eps, self.rms = eps, rms
        self.features, self.name = features, name

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps, self.rms)

    def config(self) -> Dict[str, Any]:
        return dict(features=self.features, eps=self.eps, affine=self.weight is not None,
                    rms=self.rms, name=self.name)


def _json(value):
    """A size argument (an int or a pair) as a JSON value."""
    return list(value) if isinstance(value, (tuple, list)) else value
