"""Dynamic loss scaling for fp16 activations (as PyTorch's GradScaler): the loss's gradient is
multiplied by `scale` so that small gradients survive fp16's range (below 2^-24 they flush to
zero), the float32 parameter gradients are divided by it again before the optimizer, and a step
whose gradients overflowed (an inf or NaN anywhere) is skipped and the scale halved; after
`growth_interval` good steps in a row it doubles. Scales are powers of two, so scaling and
unscaling are exact."""
from __future__ import annotations

import math
from typing import Sequence

from aethercl import train as train_ops

from .optimizers import clip_grad_norm
from .tensor import Parameter

# clip_grad_norm with this bound never clips a finite norm: it only measures it.
_MEASURE_ONLY = 3.0e38


class LossScaler:
    """State: `scale`, `skipped` (steps skipped for overflow so far), `good_steps` (since the last
    change of scale)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        for name, value in (("init_scale", init_scale), ("growth_factor", growth_factor),
                            ("backoff_factor", backoff_factor)):
            exponent = math.frexp(value)[1] - 1
            if not (value > 0 and math.isfinite(value) and value == 2.0 ** exponent):
                raise ValueError(f"{name} = {value!r} must be a positive power of two")
        if growth_factor <= 1 or backoff_factor >= 1 or int(growth_interval) < 1:
            raise ValueError("growth_factor must exceed 1, backoff_factor be below 1 and "
                             "growth_interval be at least 1")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.skipped = 0
        self.good_steps = 0

    def unscale(self, parameters: Sequence[Parameter]) -> bool:
        """Divides every gradient by the scale, in place; returns whether they are all finite
        (their global norm is read: one synchronisation)."""
        with_grad = [p for p in parameters if p.grad is not None]
        if not with_grad:
            return True
        device = with_grad[0].device
        done = set()
        for p in with_grad:   # autograd may hand one buffer to two parameters: scale it once
            if p.grad.data.ptr not in done:
                done.add(p.grad.data.ptr)
                train_ops.unary(device, "mul_scalar", p.grad.data.ptr, p.grad.data.ptr,
                                p.grad.numel, 1.0 / self.scale)
        norm = clip_grad_norm(with_grad, _MEASURE_ONLY)
        return bool(math.isfinite(float(norm.to_host()[0])))

    def update(self, finite: bool) -> None:
        """After a step: back off and count it skipped if it overflowed, else grow when due."""
        if not finite:
            self.scale *= self.backoff_factor
            self.skipped += 1
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.good_steps = 0
