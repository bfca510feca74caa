"""AdamOptimizer: Adam with coupled L2 weight decay through execute_adam_update_on_gpu, its m and
v moments kept on each parameter's device."""
from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np

from aethercl import ops

from .buffer import GPUBuffer
from .config import FP_TYPE
from .nn import Parameter


class AdamOptimizer:
    """Adam with coupled L2 weight decay through execute_adam_update_on_gpu; m and v on the
    device."""

    def __init__(self, parameters: Sequence[Parameter], lr: float = 3e-4,
                 betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.parameters = list(parameters)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.t = 0
        self.m = [GPUBuffer(p.nbytes, tag=f"adam_m_{i}", _init_zeros=True, runtime=p.runtime)
                  for i, p in enumerate(self.parameters)]
        self.v = [GPUBuffer(p.nbytes, tag=f"adam_v_{i}", _init_zeros=True, runtime=p.runtime)
                  for i, p in enumerate(self.parameters)]

    def zero_grad(self) -> None:
        for p in self.parameters:
            p.zero_grad()

    def step(self) -> int:
        """One update of every parameter that has a gradient; returns how many were updated."""
        self.t += 1
        b1, b2 = self.betas
        updated = 0
        for p, m, v in zip(self.parameters, self.m, self.v):
            if p.grad is None:
                continue
            ops.adam_update(p.device, p.data.ptr, p.grad.data.ptr, m.ptr, v.ptr, p.numel, self.t,
                            self.lr, b1, b2, self.eps, self.weight_decay)
            updated += 1
        return updated

    def state_dict(self) -> Dict[str, Any]:
        return {"t": self.t,
                "m": {f"state_{i}": m.read(p.shape) for i, (p, m) in
                      enumerate(zip(self.parameters, self.m))},
                "v": {f"state_{i}": v.read(p.shape) for i, (p, v) in
                      enumerate(zip(self.parameters, self.v))}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.t = int(state["t"])
        for i, (p, m, v) in enumerate(zip(self.parameters, self.m, self.v)):
            m.write(np.asarray(state["m"][f"state_{i}"], FP_TYPE).reshape(p.shape))
            v.write(np.asarray(state["v"][f"state_{i}"], FP_TYPE).reshape(p.shape))

    def free_memory(self) -> None:
        for buffer in self.m + self.v:
            buffer.free()
