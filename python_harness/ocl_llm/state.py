"""State dicts: host copies of named device tensors (parameters, running statistics, optimizer
moments), and writing them back after checking names and shapes, with every difference named."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Tuple, Union

import numpy as np

from .buffer import GPUBuffer
from .tensor import OclTensor

Target = Union[OclTensor, GPUBuffer]


def shape_of(target: Target) -> Tuple[int, ...]:
    """A tensor's shape; a bare buffer's element count (its contents are one-dimensional)."""
    if isinstance(target, OclTensor):
        return tuple(target.shape)
    return (target.size // target.dtype.itemsize,)


def host_copy(target: Target) -> np.ndarray:
    if isinstance(target, OclTensor):
        return target.to_host()
    return target.read(shape_of(target), target.dtype)


def state_of(named: Iterable[Tuple[str, Target]]) -> Dict[str, np.ndarray]:
    return {name: host_copy(target) for name, target in named}


def differences(expected: Mapping[str, Tuple[int, ...]], state: Mapping[str, Any],
                strict: bool = True) -> list:
    """What keeps `state` from fitting tensors of the `expected` shapes, one phrase each."""
    problems = []
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing and strict:
        problems.append("missing " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected " + ", ".join(unexpected))
    for key, shape in expected.items():
        if key in state:
            got = tuple(np.shape(state[key]))
            if got != tuple(shape):
                problems.append(f"{key} has shape {got}, expected {tuple(shape)}")
            elif np.asarray(state[key]).dtype.kind not in "biuf":
                problems.append(f"{key} holds {np.asarray(state[key]).dtype}, not numbers")
    return problems


def load_into(named: Iterable[Tuple[str, Target]], state: Mapping[str, Any], what: str,
              strict: bool = True) -> None:
    """Writes state[name] into each named target; refuses (ValueError naming every difference,
    nothing written) a state with unknown names, other shapes, or, when strict, missing names."""
    targets = dict(named)
    problems = differences({k: shape_of(t) for k, t in targets.items()}, state, strict)
    if problems:
        raise ValueError(f"the state does not fit {what}: " + "; ".join(problems))
    for key, target in targets.items():
        if key in state:
            dtype = target.dtype
            value = np.ascontiguousarray(state[key], dtype=dtype)
            (target.data if isinstance(target, OclTensor) else target).write(value)


__all__ = ["differences", "host_copy", "load_into", "shape_of", "state_of"]
