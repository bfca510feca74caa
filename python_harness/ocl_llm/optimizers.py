"""Optimizers: SGD (momentum, dampening, Nesterov, weight decay) and AdamW through
aethercl_optimizer_step; AdamOptimizer, the documented transformer's Adam with coupled L2 weight
decay through execute_adam_update_on_gpu; all with state dicts (hyper-parameters, step counts,
moments). Global gradient-norm clipping through aethercl_clip_grad_norm (computed and applied on
the device; the norm comes back as a one-element tensor, read only if the caller asks), and
zero_grad."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from aethercl import ops
from aethercl import train as train_ops  # stream=None there: the thread's current stream
from aethercl import train_types as T

from .buffer import GPUBuffer
from .config import FP_TYPE
from .state import differences
from .tensor import OclTensor, Parameter


def zero_grad(parameters: Sequence[Parameter]) -> None:
    for p in parameters:
        p.zero_grad()


class _Optimizer:
    kind = -1
    slots: Tuple[str, ...] = ()   # the names of state1 and state2 in state dicts

    def __init__(self, parameters: Sequence[Parameter]):
        self.parameters: List[Parameter] = list(parameters)
        self.steps = [0] * len(self.parameters)
        self.state1: List[Optional[GPUBuffer]] = [None] * len(self.parameters)
        self.state2: List[Optional[GPUBuffer]] = [None] * len(self.parameters)
        # The last step's descriptor array and what it was made from: a step over the same
        # buffers and hyper-parameters (every step of a training loop) only renews the step
        # counts (building 57 descriptors took 0.6 ms of Python per step).
        self._descs: Optional[Tuple[tuple, Any]] = None
        self._last_active: List[int] = []   # the parameters the last step() updated

    def zero_grad(self) -> None:
        zero_grad(self.parameters)

    def _state(self, states, i, p) -> GPUBuffer:
        if states[i] is None:
            states[i] = GPUBuffer(p.nbytes, tag=f"{p.name}.state", _init_zeros=True,
                                  runtime=p.runtime)
        return states[i]

    def _fields(self, i: int, p: Parameter) -> dict:
        raise NotImplementedError

    def hyper(self) -> Dict[str, Any]:
        """The constructor's hyper-parameters (JSON values)."""
        raise NotImplementedError

    def step(self, finite_gate: Optional[GPUBuffer] = None) -> int:
        """One update of every parameter with a gradient; returns how many were updated. With
        finite_gate (a buffer whose first float32 is written on the device, such as a loss or a
        gradient norm), the device makes the updates only if that value is finite when they run;
        once the caller knows it was not, gate_closed() takes the step counts back."""
        active = [(i, p, p.grad) for i, p in enumerate(self.parameters) if p.grad is not None]
        self._last_active = [i for i, _, _ in active]
        if not active:
            return 0
        for i, _, _ in active:
            self.steps[i] += 1
        gate = finite_gate.ptr if finite_gate is not None else None
        key = (tuple((i, p.data.ptr, g.data.ptr) for i, p, g in active),
               tuple(self.hyper().values()), gate)
        if self._descs is not None and self._descs[0] == key:
            array = self._descs[1]
            for slot, (i, _, _) in zip(array, active):
                slot.step = self.steps[i]
        else:
            array = train_ops.optimizer_desc_array([
                T.OptimizerDesc(kind=self.kind, count=p.numel, param=p.data.ptr,
                                grad=g.data.ptr, step=self.steps[i], finite_gate=gate,
                                **self._fields(i, p))
                for i, p, g in active])
            self._descs = (key, array)
        device = self.parameters[0].device
        if len(active) > 1 and device.lib.has("aethercl_optimizer_step_multi"):
            train_ops.optimizer_step_multi(device, array)   # up to 8 tensors per launch
        else:
            for desc in array:
                train_ops.optimizer_step(device, desc)
        return len(active)

    def gate_closed(self) -> None:
        """The last step(finite_gate=...) found its gate not finite: the device changed no
        parameter and no state, so the step counts that step advanced go back."""
        for i in self._last_active:
            self.steps[i] -= 1
        self._last_active = []

    def _named_states(self):
        for slot, states in zip(self.slots, (self.state1, self.state2)):
            for i, buffer in enumerate(states):
                if buffer is not None:
                    yield f"{slot}.{i}", buffer

    def state_dict(self) -> Dict[str, Any]:
        """{"type", "hyper" (the hyper-parameters), "steps" (updates per parameter), "state"
        (host copies of the moments made so far, "<slot>.<parameter index>")}."""
        return {"type": type(self).__name__, "hyper": self.hyper(), "steps": list(self.steps),
                "state": {name: buffer.read(self.parameters[int(name.split(".")[1])].shape)
                          for name, buffer in self._named_states()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores a state_dict() of the same optimizer type over parameters of the same shapes
        (hyper-parameters included); refuses a mismatch with what differs, changing nothing."""
        expected = {f"{slot}.{i}": p.shape for slot in self.slots
                    for i, p in enumerate(self.parameters)}
        problems = differences(expected, state.get("state", {}), strict=False)
        if state.get("type", type(self).__name__) != type(self).__name__:
            problems.insert(0, f"it is {state['type']}'s")
        if len(state.get("steps", ())) != len(self.parameters):
            problems.append(f"{len(state.get('steps', ()))} step counts for "
                            f"{len(self.parameters)} parameters")
        if problems:
            raise ValueError(f"the state does not fit {type(self).__name__}: "
                             + "; ".join(problems))
        for key, value in state.get("hyper", {}).items():
            setattr(self, key, tuple(value) if isinstance(value, list) else value)
        self.steps = [int(s) for s in state["steps"]]
        self._descs = None   # the states below may be new buffers
        for slot, states in zip(self.slots, (self.state1, self.state2)):
            for i, p in enumerate(self.parameters):
                value = state.get("state", {}).get(f"{slot}.{i}")
                if value is not None:
                    self._state(states, i, p).write(np.ascontiguousarray(value, np.float32))
                elif states[i] is not None:     # not made yet in the saved run: starts at zero
                    states[i].free()
                    states[i] = None

    def free_memory(self) -> None:
        self._descs = None
        for buffer in self.state1 + self.state2:
            if buffer is not None:
                buffer.free()


class SGD(_Optimizer):
    kind = T.OPTIMIZER_SGD
    slots = ("momentum",)

    def __init__(self, parameters, lr: float = 0.01, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(parameters)
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov

    def hyper(self) -> Dict[str, Any]:
        return dict(lr=self.lr, momentum=self.momentum, dampening=self.dampening,
                    weight_decay=self.weight_decay, nesterov=bool(self.nesterov))

    def _fields(self, i, p):
        buf = self._state(self.state1, i, p).ptr if self.momentum > 0 else None
        return dict(state1=buf, lr=self.lr, weight_decay=self.weight_decay,
                    momentum=self.momentum, dampening=self.dampening,
                    nesterov=int(self.nesterov))


class AdamW(_Optimizer):
    kind = T.OPTIMIZER_ADAMW
    kind_name = "adamw"   # the legacy checkpoint's name (ocl_llm.checkpoint)
    slots = ("m", "v")

    def __init__(self, parameters, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(parameters)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay

    @property
    def t(self) -> int:
        return max(self.steps, default=0)

    def hyper(self) -> Dict[str, Any]:
        return dict(lr=self.lr, betas=list(self.betas), eps=self.eps,
                    weight_decay=self.weight_decay)

    def _fields(self, i, p):
        return dict(state1=self._state(self.state1, i, p).ptr,
                    state2=self._state(self.state2, i, p).ptr, lr=self.lr,
                    weight_decay=self.weight_decay, beta1=self.betas[0], beta2=self.betas[1],
                    eps=self.eps)


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
        """The optimizers' common form (as SGD and AdamW): {"type", "hyper", "steps" (t for
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


def clip_grad_norm(parameters: Sequence[Parameter], max_norm: float) -> Optional[OclTensor]:
    """Scales every gradient so that their global L2 norm is at most max_norm, on the device.
    Returns the norm before clipping as a one-element device tensor (None without gradients)."""
    with_grad = [p for p in parameters if p.grad is not None]
    if not with_grad:
        return None
    # Autograd may hand one gradient buffer to two parameters (x + y): scaling it in place must
    # happen once per parameter, so a shared buffer is copied first.
    seen = set()
    for p in with_grad:
        if p.grad.data.ptr in seen:
            p.grad = p.grad.clone()
        seen.add(p.grad.data.ptr)
    total = OclTensor.empty((1,), runtime=with_grad[0].runtime)
    train_ops.clip_grad_norm(with_grad[0].device, [p.grad.data.ptr for p in with_grad],
                       [p.numel for p in with_grad], float(max_norm), total.data.ptr)
    return total
