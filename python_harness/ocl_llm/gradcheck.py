"""gradcheck: a function's device gradients against central finite differences (as
torch.autograd.gradcheck), for checking a new op, layer or model piece."""
from __future__ import annotations

from typing import Callable, List

import numpy as np

from .config import FP_TYPE
from .tensor import OclTensor


def gradcheck(fn: Callable[..., OclTensor], *inputs, eps: float = 1e-2, atol: float = 1e-3,
              rtol: float = 1e-2, seed: int = 0, raise_exception: bool = True) -> bool:
    """Checks the gradient backward() gives for every float input of `fn` (which maps OclTensors
    to an OclTensor and is deterministic): the output is reduced to the scalar sum(w * fn(x))
    with fixed random weights w, and each input element's gradient is compared with
    (s(x + eps) - s(x - eps)) / (2 eps), accumulated in float64.

    Inputs are NumPy arrays or OclTensors (copied; float ones become leaves with requires_grad,
    integer ones such as targets reach fn as NumPy arrays). Tensors are float32: eps = 1e-2
    balances the difference's truncation error (~eps^2 f''') against float32 rounding
    (~1e-7 |s| / eps), hence the default rtol 1e-2, atol 1e-3. Each element costs two forward
    passes: keep inputs small. Returns True; a mismatch raises AssertionError naming the input,
    the element and both values (returns False with raise_exception=False)."""
    hosts: List[np.ndarray] = [np.array(x.to_host() if isinstance(x, OclTensor) else x)
                               for x in inputs]
    floats = [h.dtype.kind == "f" for h in hosts]
    hosts = [h.astype(FP_TYPE) if f else h for h, f in zip(hosts, floats)]

    def arguments(requires_grad: bool):
        return [OclTensor(h, requires_grad=requires_grad) if f else h
                for h, f in zip(hosts, floats)]

    leaves = arguments(True)
    out = fn(*leaves)
    weights = np.random.default_rng(seed).standard_normal(out.shape).astype(FP_TYPE)
    out.backward(weights)

    def scalar() -> float:
        with OclTensor.no_grad():
            value = fn(*arguments(False)).to_host().astype(np.float64)
        return float((value * weights).sum())

    for k, (host, leaf) in enumerate(zip(hosts, leaves)):
        if not floats[k]:
            continue
        analytic = leaf.grad.to_host() if leaf.grad is not None else np.zeros(host.shape)
        numeric = np.zeros(host.shape)
        for index in np.ndindex(host.shape):
            original = host[index]
            host[index] = original + eps
            plus = scalar()
            host[index] = original - eps
            minus = scalar()
            host[index] = original
            numeric[index] = (plus - minus) / (2 * eps)
        error = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if np.any(error > 0):
            worst = np.unravel_index(int(np.argmax(error)), host.shape)
            message = (f"gradcheck: input {k} element {tuple(int(i) for i in worst)}: backward "
                       f"gives {float(analytic[worst]):.6g}, finite differences "
                       f"{float(numeric[worst]):.6g} ({int(np.sum(error > 0))} of {host.size} "
                       f"elements outside atol {atol:g} + rtol {rtol:g})")
            if raise_exception:
                raise AssertionError(message)
            return False
    return True


__all__ = ["gradcheck"]
