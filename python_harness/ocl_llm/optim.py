"""AdamOptimizer: Adam with coupled L2 weight decay through execute_adam_update_on_gpu, its m and
v moments kept on each parameter's device, with a state dict of the optimizers' common form."""
from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np

from aethercl import ops

from .buffer import GPUBuffer
from .config import FP_TYPE
from .nn import Parameter
from .state import differences


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

    def hyper(self) -> Dict[str, Any]:
        """The constructor's hyper-parameters (JSON values)."""
        return dict(lr=self.lr, betas=list(self.betas), eps=self.eps,
                    weight_decay=self.weight_decay)

    def state_dict(self) -> Dict[str, Any]:
        """The optimizers' common form (ocl_llm.optimizers): {"type", "hyper", "steps" (t for
        every parameter: Adam counts steps globally), "state": {"m.<i>", "v.<i>"}}."""
        state = {}
        for slot, buffers in (("m", self.m), ("v", self.v)):
            for i, (p, buffer) in enumerate(zip(self.parameters, buffers)):
                state[f"{slot}.{i}"] = buffer.read(p.shape)
        return {"type": type(self).__name__, "hyper": self.hyper(),
                "steps": [self.t] * len(self.parameters), "state": state}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores a state_dict() over parameters of the same shapes; refuses a mismatch with
        what differs, changing nothing."""
        expected = {f"{slot}.{i}": p.shape for slot in ("m", "v")
                    for i, p in enumerate(self.parameters)}
        problems = differences(expected, state.get("state", {}))
        if state.get("type", type(self).__name__) != type(self).__name__:
            problems.insert(0, f"it is {state['type']}'s")
        if problems:
            raise ValueError(f"the state does not fit {type(self).__name__}: "
                             + "; ".join(problems))
        for key, value in state.get("hyper", {}).items():
            setattr(self, key, tuple(value) if isinstance(value, list) else value)
        self.t = max((int(s) for s in state.get("steps", ())), default=0)
        for slot, buffers in (("m", self.m), ("v", self.v)):
            for i, (p, buffer) in enumerate(zip(self.parameters, buffers)):
                buffer.write(np.ascontiguousarray(state["state"][f"{slot}.{i}"], FP_TYPE))

    def free_memory(self) -> None:
        for buffer in self.m + self.v:
            buffer.free()
