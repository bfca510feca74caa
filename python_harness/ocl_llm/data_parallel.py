"""Data parallelism in one process: a replica of the model and its Adam state on every device,
the batch split between them, gradients all-reduced (MEAN) by an aethercl communicator before
every optimizer step.

Every replica starts from replica 0's parameters (broadcast), gets the same averaged gradients
(the driver's all-reduce leaves the same bits on every device) and runs the same Adam update, so
the parameters stay bitwise identical across replicas after every step. Each replica divides its
loss gradient by the whole batch's valid-target count over the device count, so the averaged
gradient is the single-device gradient of the whole batch; the reported loss is the whole batch's
mean. A step enqueues the forward and backward passes of all replicas before it waits for any, so
the devices compute at the same time."""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from aethercl import Buffer, Communicator
from aethercl.collectives import ENGINE_BUCKET_BYTES, bucket_spans, copy_spans

from .loss import cross_entropy_loss_and_backward
from .model import SimpleModel
from .optimizers import AdamOptimizer
from .runtime import (Runtime, current_runtime, ocl_initialize, set_current_runtime,
                      set_matmul_precision)

T = TypeVar("T")

# The largest gradient bucket: one import of engine memory.
BUCKET_BYTES = ENGINE_BUCKET_BYTES


class DataParallel:
    """Replicas over gpu_ids (the first is the current runtime's device, which holds `model` and
    `optimizer` when given, e.g. from a checkpoint)."""

    def __init__(self, config, gpu_ids: Sequence[int], model: Optional[SimpleModel] = None,
                 optimizer=None, make_optimizer=None):
        if len(gpu_ids) < 1 or len(set(gpu_ids)) != len(gpu_ids):
            raise ValueError(f"--gpus needs distinct device indices, got {list(gpu_ids)}")
        self.config = dict(config)
        self._make_optimizer = make_optimizer or self._adam
        primary = current_runtime()
        if primary.index != gpu_ids[0]:
            raise ValueError(f"the current device is {primary.index}, not gpus[0] = {gpu_ids[0]}")
        self.runtimes: List[Runtime] = [primary]
        self.models: List[SimpleModel] = [model or SimpleModel(self.config)]
        self.optimizers = [optimizer or self._make_optimizer(self.models[0], self.config)]
        for index in gpu_ids[1:]:
            ocl_initialize(index, verbose=False)
            # Each replica computes as the primary does: its products' mode, its activations.
            set_matmul_precision(primary.matmul_precision)
            current_runtime().activation_dtype = primary.activation_dtype
            self.runtimes.append(current_runtime())
            replica = SimpleModel(self.config)
            self.models.append(replica)
            self.optimizers.append(self._make_optimizer(replica, self.config))
        set_current_runtime(primary)
        self.comm = Communicator([r.device for r in self.runtimes])
        self.bucket_bytes = BUCKET_BYTES
        self._buckets: List[List[Buffer]] = []  # per replica, per bucket
        self._bucket_elements = 0
        self._broadcast_state()

    @staticmethod
    def _adam(model: SimpleModel, c) -> AdamOptimizer:
        return AdamOptimizer(model.parameters(), lr=c["lr"], betas=c["betas"], eps=c["eps"],
                             weight_decay=c["wd"])

    @property
    def size(self) -> int:
        return len(self.models)

    def _groups(self, per_replica) -> List[Tuple]:
        return list(zip(*per_replica))

    def _broadcast_state(self) -> None:
        """Replica 0's parameters (broadcast by the devices) and optimizer state (moments and
        step count, through its state dict) on every replica."""
        for params in self._groups([m.parameters() for m in self.models]):
            self.comm.broadcast([p.data for p in params], params[0].numel, root=0)
        if len(self.optimizers) > 1:
            state = self.optimizers[0].state_dict()
            for optimizer in self.optimizers[1:]:
                optimizer.load_state_dict(state)

    def shards(self, rows: int) -> List[np.ndarray]:
        """Each replica's rows of a batch of `rows` (split as evenly as possible, every replica at
        least one row)."""
        if rows < self.size:
            raise ValueError(f"a batch of {rows} rows cannot feed {self.size} devices")
        return np.array_split(np.arange(rows), self.size)

    def on_each_replica(self, work: Callable[[int], T]) -> List[T]:
        """work(r) for every replica r with that replica's runtime current (ops and graphs made
        there go to its device); the first replica's runtime is current again afterwards."""
        try:
            results = []
            for r, runtime in enumerate(self.runtimes):
                set_current_runtime(runtime)
                results.append(work(r))
            return results
        finally:
            set_current_runtime(self.runtimes[0])

    def capture_passes(self, shape: Tuple[int, int],
                       after: Optional[Callable[[int], None]] = None,
                       on_final: Optional[Callable[[int], Callable]] = None) -> list:
        """A graph of every replica's forward, loss and backward on its share of batches of
        `shape` (ocl_llm.graph_step.CapturedPass), after a step has run eagerly; after(r), when
        given, is recorded at the end of replica r's graph, and on_final(r) is replica r's
        CapturedPass on_final (several graphs)."""
        from .graph_step import CapturedPass
        shards = self.shards(shape[0])
        return self.on_each_replica(
            lambda r: CapturedPass(self.models[r], (len(shards[r]), shape[1]),
                                   after=None if after is None else lambda: after(r),
                                   on_final=None if on_final is None else on_final(r)))

    def gradient_packer(self, r: int, layout) -> "GradientPacker":
        """Replica r's packer for a capture whose graphs end where buckets fill up."""
        groups = layout[0]
        index = {id(params[r]): g for g, params in enumerate(groups)}
        return GradientPacker(self._buckets[r], index, self._bucket_elements * 4,
                              self.bucket_count(layout))

    def step(self, inputs: np.ndarray, targets: np.ndarray, pad_id: int = 0) -> float:
        """One data-parallel training step on a batch (rows split by shards()); returns the
        batch's mean loss. A non-finite loss skips the update on every replica, as train_step
        does."""
        shards = self.shards(inputs.shape[0])
        total_valid = int((np.asarray(targets) != pad_id).sum())
        denominator = total_valid / self.size if total_valid else None
        pending = []
        for model, optimizer, rows in zip(self.models, self.optimizers, shards):
            optimizer.zero_grad()
            logits = model(inputs[rows])
            pending.append(cross_entropy_loss_and_backward(
                logits, targets[rows], pad_id, denominator=denominator, deferred=True))
            del logits
        self.all_reduce_gradients()
        loss = sum(p.sum() for p in pending) / total_valid if total_valid else 0.0
        if math.isfinite(loss):
            for optimizer in self.optimizers:
                optimizer.step()
        return loss

    def all_reduce_gradients(self) -> None:
        """MEAN of every parameter's gradient over the replicas, on every replica (in place),
        through flat buckets per replica (aethercl_comm_alloc: on the vendor engines NCCL reduces
        them in place): pack_gradients, reduce_buckets, unpack_gradients. Parameters without a
        gradient are left alone."""
        layout = self.bucket_layout()
        if layout is None:
            return
        for r in range(self.size):
            self.pack_gradients(r, layout)
        self.reduce_buckets(layout)
        for r in range(self.size):
            self.unpack_gradients(r, layout)

    def bucket_layout(self):
        """(parameter groups with a gradient on every replica, total elements, spans of
        bucket_spans), with the buckets allocated for them; None when no gradient exists."""
        groups = [params for params in self._groups([m.parameters() for m in self.models])
                  if all(p.grad is not None for p in params)]
        total = sum(params[0].numel for params in groups)
        if total == 0:
            return None
        if self._bucket_elements < total:
            self._free_buckets()
            count = -(-total * 4 // self.bucket_bytes)
            self._bucket_elements = -(-total // count)
            self._buckets = [[self.comm.alloc(r, self._bucket_elements * 4,
                                              label="dp_gradient_bucket")
                              for _ in range(count)] for r in range(self.size)]
        spans = list(bucket_spans([params[0].numel * 4 for params in groups],
                                   self._bucket_elements * 4))
        return groups, total, spans

    def pack_gradients(self, r: int, layout) -> None:
        """Replica r's gradients into its buckets (device copies on its default stream, which a
        graph captures)."""
        self._copy_gradients(r, layout, into_buckets=True)

    def set_bucket_bytes(self, nbytes: int) -> None:
        """Buckets of at most nbytes (at most BUCKET_BYTES, one engine import) from the next
        layout on."""
        nbytes = max(256, min(int(nbytes), BUCKET_BYTES))
        if nbytes != self.bucket_bytes:
            self._free_buckets()
            self.bucket_bytes = nbytes

    def bucket_count(self, layout) -> int:
        return -(-layout[1] // self._bucket_elements)

    def reduce_buckets(self, layout) -> None:
        """One all-reduce (MEAN) per bucket over the replicas."""
        for bucket in range(self.bucket_count(layout)):
            self.reduce_bucket(bucket, layout)

    def reduce_bucket(self, bucket: int, layout) -> None:
        """The all-reduce (MEAN) of one bucket over the replicas, on each device's current
        stream."""
        elements = min(self._bucket_elements, layout[1] - bucket * self._bucket_elements)
        self.comm.all_reduce([per_replica[bucket] for per_replica in self._buckets], elements,
                             op="mean")

    def unpack_gradients(self, r: int, layout) -> None:
        """Replica r's buckets back into its gradients."""
        self._copy_gradients(r, layout, into_buckets=False)

    def _copy_gradients(self, r: int, layout, into_buckets: bool) -> None:
        groups, _, spans = layout
        copy_spans(spans, [params[r].grad.data for params in groups], self._buckets[r],
                   into_buckets)

    def _free_buckets(self) -> None:
        for per_replica in self._buckets:
            for bucket in per_replica:
                bucket.free()
        self._buckets, self._bucket_elements = [], 0

    def parameters_identical(self) -> bool:
        """Whether every replica holds the same parameter bits as replica 0 (reads them all)."""
        reference = [p.to_host().tobytes() for p in self.models[0].parameters()]
        return all([p.to_host().tobytes() for p in model.parameters()] == reference
                   for model in self.models[1:])

    def close(self) -> None:
        """Frees the other replicas and closes their runtimes; replica 0 stays (ocl_shutdown
        frees it with the current runtime)."""
        self._free_buckets()
        self.comm.close()
        for runtime, model, optimizer in zip(self.runtimes[1:], self.models[1:],
                                             self.optimizers[1:]):
            optimizer.free_memory()
            model.free_memory()
            runtime.release_all()
            runtime.open = False
        del self.models[1:], self.optimizers[1:], self.runtimes[1:]


def process_step(ctx, model: SimpleModel, optimizer, inputs: np.ndarray, targets: np.ndarray,
                 pad_id: int = 0) -> float:
    """One training step of this process under aethercl.distributed (one process per device, ctx
    from distributed.init()): its share of the batch's rows, the gradients all-reduced (MEAN)
    across the processes, the optimizer step; returns the whole batch's mean loss (every rank
    gets it, through MPI)."""
    rows = np.array_split(np.arange(inputs.shape[0]), ctx.world_devices)[ctx.rank]
    total_valid = int((targets != pad_id).sum())
    optimizer.zero_grad()
    logits = model(inputs[rows])
    pending = cross_entropy_loss_and_backward(logits, targets[rows], pad_id,
                                              denominator=total_valid / ctx.world_devices,
                                              deferred=True)
    del logits
    ctx.all_reduce([p.grad.data for p in model.parameters() if p.grad is not None], op="mean")
    loss_sum = np.array([pending.sum()], np.float64)
    with ctx.watchdog("MPI_Allreduce (loss)"):
        ctx.comm.Allreduce(ctx.mpi.IN_PLACE, loss_sum, op=ctx.mpi.SUM)
    optimizer.step()
    return float(loss_sum[0]) / total_valid


class GradientPacker:
    """One replica's gradients into its buckets in the order the backward pass completes them:
    final(parameter), called during a capture (CapturedPass on_final), records the copies of its
    gradient at the next free bytes of the buckets and answers True when a bucket has filled up,
    so that the capture ends a graph there. spans lists (group, offset in the gradient, bucket,
    offset in the bucket, bytes) in the order recorded (DataParallel's layout form, the same on
    every replica); segment_of[k] is the graph after which bucket k is complete."""

    def __init__(self, buckets: Sequence[Buffer], index: dict, bucket_bytes: int,
                 bucket_count: int):
        self.buckets, self.index = buckets, index
        self.bucket_bytes, self.bucket_count = bucket_bytes, bucket_count
        self.position, self.segment = 0, 0
        self.spans: list = []
        self.segment_of: List[int] = []

    def final(self, parameter) -> bool:
        group = self.index.get(id(parameter))
        if group is None or parameter.grad is None:
            return False
        size = parameter.numel * 4
        spans = list(bucket_spans([size], self.bucket_bytes, self.position))
        copy_spans(spans, [parameter.grad.data], self.buckets, into_buckets=True)
        self.spans += [(group, *span[1:]) for span in spans]
        self.position += size
        filled = min(self.position // self.bucket_bytes, self.bucket_count)
        if filled <= len(self.segment_of):
            return False
        self.segment_of += [self.segment] * (filled - len(self.segment_of))
        self.segment += 1
        return True

    def finish(self) -> None:
        """The last graph completes the buckets still open."""
        self.segment_of += [self.segment] * (self.bucket_count - len(self.segment_of))
