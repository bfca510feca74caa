"""The training loss: mean cross entropy over non-padding targets, computed and differentiated on
the device (log_softmax + cross_entropy_loss_grad)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from aethercl import ops

from .autograd import is_grad_enabled
from .buffer import GPUBuffer, constant_buffer
from .config import FP_TYPE, IDX_TYPE
from .mixed import cross_entropy_rows
from .tensor import OclTensor, is_16bit


def cross_entropy_loss_and_backward(logits: OclTensor, target_ids: np.ndarray,
                                    pad_id: int = 0, denominator: Optional[float] = None,
                                    deferred: bool = False, grad_scale: float = 1.0):
    """Mean cross entropy over the targets that are not padding, computed on the device with
    log_softmax + cross_entropy. If logits require grad, the gradient (probabilities minus one-hot)
    is zeroed on padding rows, divided by the number of valid targets and back-propagated; the
    per-row weights are broadcast on the device by a K=1 matmul against a ones row.

    Data parallelism: `denominator` replaces the number of valid targets the gradient is divided
    by (a replica's shard divides by its share of the whole batch's count), and `deferred=True`
    enqueues everything without waiting and returns a PendingLoss whose sum() reads the summed
    loss of the valid rows later (so the devices of all replicas run at once). `grad_scale`
    multiplies the gradient, not the loss: dynamic loss scaling (ocl_llm.loss_scale)."""
    B, S, V = logits.shape
    rows = B * S
    targets = np.ascontiguousarray(target_ids, dtype=IDX_TYPE).reshape(rows)
    valid = targets != pad_id
    num_valid = int(valid.sum())
    runtime = logits.runtime
    target_buffer = GPUBuffer(rows * 4, tag="targets", dtype=IDX_TYPE, runtime=runtime)
    target_buffer.write(targets)
    loss_rows = GPUBuffer(rows * 4, tag="loss_per_row", runtime=runtime)
    scale = denominator if denominator is not None else num_valid
    weights = None
    if logits.requires_grad and is_grad_enabled() and num_valid:
        weights = logits.new_tensor(row_weights(valid, scale / grad_scale))
    loss_and_backward_on_device(logits, target_buffer, weights, loss_rows)
    target_buffer.free()
    pending = PendingLoss(loss_rows, valid)
    if deferred:
        return pending
    losses_sum = pending.sum()
    return float(losses_sum / num_valid) if num_valid else 0.0


def row_weights(valid: np.ndarray, scale: float) -> np.ndarray:
    """(1, rows, 1) float32: 1/scale on the rows whose target counts, 0 on padding rows."""
    return (valid / scale).astype(FP_TYPE).reshape(1, valid.size, 1)


def loss_and_backward_on_device(logits: OclTensor, target_buffer: GPUBuffer,
                                weights: Optional[OclTensor], loss_rows: GPUBuffer) -> None:
    """The device part of cross_entropy_loss_and_backward: log_softmax, each row's loss into
    loss_rows and, with weights (row_weights on the device), the gradient (probabilities minus
    one-hot) scaled per row by a K=1 matmul against a ones row and back-propagated. Nothing moves
    between host and device, so a graph can record it (ocl_llm.graph_step)."""
    if is_16bit(logits.dtype):
        scaled = cross_entropy_rows(logits, target_buffer, loss_rows, weights)
        if scaled is not None:
            logits.backward(scaled)
        return
    B, S, V = logits.shape
    rows = B * S
    dev, runtime = logits.device, logits.runtime
    log_probs = GPUBuffer(rows * V * 4, tag="log_probs", runtime=runtime)
    grad = logits.new_empty((B, S, V))
    ops.log_softmax(dev, logits.data.ptr, log_probs.ptr, B, S, V)
    ops.cross_entropy_loss_grad(dev, log_probs.ptr, target_buffer.ptr, grad.data.ptr,
                                loss_rows.ptr, B, S, V)
    if weights is not None:
        ones = constant_buffer(runtime, V, 1.0)
        row_scale = logits.new_empty((rows, V))
        ops.matmul(dev, weights.data.ptr, ones.ptr, row_scale.data.ptr, 1, rows, V, 1)
        scaled = logits.new_empty((B, S, V))
        ops.mul(dev, grad.data.ptr, row_scale.data.ptr, scaled.data.ptr, rows * V)
        logits.backward(scaled)
    log_probs.free()


class PendingLoss:
    """The per-row losses of one cross_entropy_loss_and_backward call, read on demand."""

    def __init__(self, loss_rows, valid: np.ndarray):
        self.loss_rows, self.valid = loss_rows, valid
        self.count = int(valid.sum())
        self._sum: Optional[float] = None

    def sum(self) -> float:
        """The float64 sum of the valid rows' losses (reads once, then frees the buffer)."""
        if self._sum is None:
            losses = self.loss_rows.read((self.valid.size,))
            self._sum = float(losses[self.valid].astype(np.float64).sum())
            self.loss_rows.free()
        return self._sum
