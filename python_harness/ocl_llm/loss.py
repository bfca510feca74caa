"""The training loss: mean cross entropy over non-padding targets, computed and differentiated on
the device (log_softmax + cross_entropy_loss_grad)."""
from __future__ import annotations

import numpy as np

from aethercl import ops

from .autograd import is_grad_enabled
from .buffer import GPUBuffer, constant_buffer
from .config import FP_TYPE, IDX_TYPE
from .tensor import OclTensor


def cross_entropy_loss_and_backward(logits: OclTensor, target_ids: np.ndarray,
                                    pad_id: int = 0) -> float:
    """Mean cross entropy over the targets that are not padding, computed on the device with
    log_softmax + cross_entropy. If logits require grad, the gradient (probabilities minus one-hot)
    is zeroed on padding rows, divided by the number of valid targets and back-propagated; the
    per-row weights are broadcast on the device by a K=1 matmul against a ones row."""
    B, S, V = logits.shape
    rows = B * S
    targets = np.ascontiguousarray(target_ids, dtype=IDX_TYPE).reshape(rows)
    valid = targets != pad_id
    num_valid = int(valid.sum())
    dev, runtime = logits.device, logits.runtime
    log_probs = GPUBuffer(rows * V * 4, tag="log_probs", runtime=runtime)
    target_buffer = GPUBuffer(rows * 4, tag="targets", dtype=IDX_TYPE, runtime=runtime)
    target_buffer.write(targets)
    grad = logits.new_empty((B, S, V))
    loss_rows = GPUBuffer(rows * 4, tag="loss_per_row", runtime=runtime)
    ops.log_softmax(dev, logits.data.ptr, log_probs.ptr, B, S, V)
    ops.cross_entropy_loss_grad(dev, log_probs.ptr, target_buffer.ptr, grad.data.ptr,
                                loss_rows.ptr, B, S, V)
    losses = loss_rows.read((rows,))
    mean = float(losses[valid].astype(np.float64).sum() / num_valid) if num_valid else 0.0
    if logits.requires_grad and is_grad_enabled() and num_valid:
        weights = logits.new_tensor((valid / num_valid).astype(FP_TYPE).reshape(1, rows, 1))
        ones = constant_buffer(runtime, V, 1.0)
        row_scale = logits.new_empty((rows, V))
        ops.matmul(dev, weights.data.ptr, ones.ptr, row_scale.data.ptr, 1, rows, V, 1)
        scaled = logits.new_empty((B, S, V))
        ops.mul(dev, grad.data.ptr, row_scale.data.ptr, scaled.data.ptr, rows * V)
        logits.backward(scaled)
    for buffer in (log_probs, target_buffer, loss_rows):
        buffer.free()
    return mean
