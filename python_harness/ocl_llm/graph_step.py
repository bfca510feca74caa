"""A training step replayed from a graph: the forward pass, the loss and the backward pass are
captured once (aethercl graphs, ABI version 4) and replayed per batch with one call, so Python's
per-op cost is paid once instead of every step.

    step = CapturedStep(model, optimizer, inputs, targets)   # one eager step, then the capture
    loss = step(inputs, targets)                             # write the batch, replay, optimise

Each call writes the batch's token ids, targets and per-row loss weights into buffers the graph
reads and replays it (gradients land in the same buffers every time). The graph ends with the
largest row loss in a one-float buffer: SGD and AdamW are then enqueued at once behind the replay
with that buffer as their finite gate (aethercl_optimizer_desc.finite_gate), so the device runs
the optimizer straight after the backward pass while the host reads the loss, and a non-finite
loss leaves the parameters as they were without a host decision in between. The gate counts every
row, padding included: a step whose only non-finite losses are padding rows is skipped here and
taken by train_step (which looks at the counted rows); otherwise the two agree. The documented
Adam (no gate) and steps with a LossScaler (fp16 activations: the scale goes into the batch's loss
weights, the gradients are unscaled and checked first) run the optimizer after the loss is read,
as train_step does. Batches keep the shape of the first one; models with dropout are refused (the
graph would replay one mask). Replay computes what the eager step computes, bit for bit.

CapturedPass is the recorded forward, loss and backward that CapturedStep builds on;
ReplayedTraining and ReplayedDataParallel run a training loop's steps through them, on one device
or one graph per replica (the training job's --graph)."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from typing import List, Optional

import numpy as np

from aethercl import train as train_ops
from aethercl import train_types as T
from aethercl.graphs import Graph
from aethercl.streams import Event, Stream

from .autograd import observe_final_gradients
from .buffer import GPUBuffer
from .config import IDX_TYPE
from .loss import loss_and_backward_on_device, row_weights
from .model import SimpleModel, TokenIds
from .tensor import OclTensor, Parameter
from .loss_scale import LossScaler
from .train import apply_step, train_step


class CapturedPass:
    """The forward pass, the loss and the backward pass of a model on batches of one shape,
    recorded as a graph on the model's device: write() a batch, replay(), then losses(). The
    graph leaves each row's loss in loss_rows, the largest in largest_loss, and the gradients in
    grads (the same buffers every replay); after(), when given, is recorded at its end. With
    on_final, the pass is recorded as several graphs (graphs; replay() runs them all in order):
    on_final(parameter) is called during the capture as each parameter's gradient completes
    (ocl_llm.autograd.observe_final_gradients), may record work for it, and returns True to end
    the current graph there. Capture with the model's runtime current, after one
    eager step (kernels, constants and optimizer state are made outside the capture: their
    uploads could not be recorded)."""

    def __init__(self, model: SimpleModel, shape: tuple, after=None, on_final=None):
        self.shape = tuple(shape)
        runtime = model.embedding.weight_param.runtime
        self.device = runtime.device
        rows = self.shape[0] * self.shape[1]
        self.ids = TokenIds(self.shape, runtime)
        self.targets = GPUBuffer(rows * 4, tag="targets", dtype=IDX_TYPE, runtime=runtime)
        self.weights = OclTensor.empty((1, rows, 1), runtime=runtime)
        self.loss_rows = GPUBuffer(rows * 4, tag="loss_per_row", runtime=runtime)
        self.largest_loss = GPUBuffer(4, tag="largest_row_loss", runtime=runtime)
        self.parameters: List[Parameter] = model.parameters()
        for p in self.parameters:
            p.zero_grad()
        self.graphs: List[Graph] = [Graph(self.device).begin()]
        try:
            with observe_final_gradients(lambda leaf: self._final(leaf, on_final)) \
                    if on_final is not None else nullcontext():
                logits = model(self.ids)
                loss_and_backward_on_device(logits, self.targets, self.weights, self.loss_rows)
                del logits
            # NaN propagates through MAX, and cross-entropy rows are >= 0: the largest row is
            # finite exactly when every row is.
            train_ops.reduce(runtime.device, T.MAX, self.loss_rows.ptr, self.largest_loss.ptr,
                             (rows,), 0)
            if after is not None:
                after()   # more work for the graph once the gradients exist (e.g. packing them)
            self.graphs[-1].end()
        except BaseException:
            if self.graphs[-1].capturing:
                self.graphs[-1].end()
            for graph in self.graphs:
                graph.close()
            raise
        self.graph = self.graphs[0]
        # The gradients the backward pass made: the replay writes them, the optimizer reads them.
        self.grads: List[Optional[OclTensor]] = [p.grad for p in self.parameters]

    def _final(self, leaf, on_final) -> None:
        # on_final records work for a completed gradient; True ends the graph there.
        if on_final(leaf):
            self.graphs[-1].end()
            self.graphs.append(Graph(self.device).begin())

    def write(self, inputs: np.ndarray, targets: np.ndarray, pad_id: int,
              denominator: float) -> np.ndarray:
        """Writes the batch, its targets and the rows' loss weights (1 / denominator on the rows
        whose target counts, 0 on padding); returns which rows count."""
        if tuple(np.shape(inputs)) != self.shape or tuple(np.shape(targets)) != self.shape:
            raise ValueError(f"batches of {np.shape(inputs)} and {np.shape(targets)} for a step "
                             f"captured with {self.shape}")
        flat = np.ascontiguousarray(targets, dtype=IDX_TYPE).reshape(-1)
        valid = flat != pad_id
        self.ids.write(inputs)
        self.targets.write(flat)
        # No valid target: zero weights, so the replayed backward adds nothing.
        weights = row_weights(valid, denominator) if valid.any() else \
            np.zeros((1, valid.size, 1), np.float32)
        self.weights.data.write(weights)
        return valid

    def replay(self) -> None:
        for graph in self.graphs:
            graph.replay()

    def losses(self) -> np.ndarray:
        """Every row's loss (waits for the replay)."""
        return self.loss_rows.read((self.shape[0] * self.shape[1],))

    def attach_grads(self) -> None:
        """Hands the replay's gradients to the parameters, for the optimizer."""
        for p, grad in zip(self.parameters, self.grads):
            p.grad = grad

    def close(self) -> None:
        for graph in self.graphs:
            graph.close()
        for buffer in (self.ids, self.targets, self.loss_rows, self.largest_loss):
            buffer.free()
        self.weights.data.free()


class CapturedStep:
    """train_step(model, optimizer, inputs, targets) as a graph replay; see the module text."""

    def __init__(self, model: SimpleModel, optimizer, inputs: np.ndarray, targets: np.ndarray,
                 pad_id: int = 0, scaler: Optional[LossScaler] = None):
        if model.config.get("dropout", 0.0):
            raise ValueError("a captured step would replay one dropout mask: use dropout 0 "
                             "or train_step")
        self.model, self.optimizer, self.pad_id, self.scaler = model, optimizer, pad_id, scaler
        self.shape = tuple(np.shape(inputs))
        self.first_loss = train_step(model, optimizer, inputs, targets, scaler)
        self.gated = scaler is None and hasattr(optimizer, "gate_closed")   # SGD, AdamW
        self.captured = CapturedPass(model, self.shape)
        self.parameters = self.captured.parameters
        self.graph, self.loss_rows = self.captured.graph, self.captured.loss_rows
        self.largest_loss = self.captured.largest_loss

    def __call__(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        valid = self._write_batch(inputs, targets)
        count = int(valid.sum())
        self.captured.replay()
        # No optimizer step without a gradient (a batch of padding only), as train_step.
        if count and self.gated:
            self._attach_grads()
            self.optimizer.step(finite_gate=self.largest_loss)
        losses = self.captured.losses()
        loss = float(losses[valid].astype(np.float64).sum() / count) if count else 0.0
        if count and self.gated:
            if not np.isfinite(losses.max()):   # the device's test: the gate stayed shut
                self.optimizer.gate_closed()
        elif count and math.isfinite(loss):     # as train_step: none for a non-finite loss
            self._attach_grads()
            apply_step(self.parameters, self.optimizer, self.scaler)
        return loss

    def _attach_grads(self) -> None:
        self.captured.attach_grads()

    def _write_batch(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        # With a LossScaler, for fp16 activations, the scale goes into the loss weights.
        scale = self.scaler.scale if self.scaler is not None else 1.0
        valid_count = int((np.asarray(targets) != self.pad_id).sum())
        return self.captured.write(inputs, targets, self.pad_id, valid_count / scale)

    def info(self) -> dict:
        """The graph's aethercl_graph_info: nodes, kernels per replay, bytes held."""
        return self.captured.graph.info()

    def close(self) -> None:
        """Releases the graph and the step's buffers (the model and optimizer stay)."""
        self.captured.close()


class ReplayedTraining:
    """A training loop's train_step through graphs: the first batch is stepped eagerly and the
    step captured (CapturedStep); later batches of its shape replay the graph, any other shape
    steps eagerly. Same results as train_step on every batch (see the module text for the one
    difference: a step whose only non-finite losses are padding rows)."""

    def __init__(self, model: SimpleModel, optimizer, scaler: Optional[LossScaler] = None):
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.captured: Optional[CapturedStep] = None

    def __call__(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        if self.captured is None:
            self.captured = CapturedStep(self.model, self.optimizer, inputs, targets,
                                         scaler=self.scaler)
            return self.captured.first_loss
        if tuple(np.shape(inputs)) == self.captured.shape and \
                tuple(np.shape(targets)) == self.captured.shape:
            return self.captured(inputs, targets)
        return train_step(self.model, self.optimizer, inputs, targets, self.scaler)

    def close(self) -> None:
        if self.captured is not None:
            self.captured.close()
            self.captured = None


# Buckets a replayed data-parallel step aims for when it overlaps the all-reduce with the
# backward pass: the last one's all-reduce is exposed, the others run while the backward goes on.
OVERLAP_BUCKETS = 4


class ReplayedDataParallel:
    """DataParallel.step through graphs: the first batch is stepped eagerly, then each replica's
    forward, loss and backward are captured on its own device (a CapturedPass per replica, with
    its share of the batch) together with the copies of its gradients into its all-reduce
    buckets; the copies back out are a second graph per replica. Later batches of that shape
    write each replica's rows and replay all the replicas' passes before any is waited for (the
    devices compute at the same time), all-reduce the buckets, read the loss, and (every replica
    skips the update for a non-finite loss) replay the copies back and step the optimizers.

    With overlap, the gradients go into OVERLAP_BUCKETS buckets in the order the backward pass
    completes them, and each pass is recorded as several graphs, one ending where a bucket fills
    up: after each graph's replay an event is recorded, and bucket k's all-reduce runs on a
    stream of its own per device that waits for the graph completing it, so it runs while the
    rest of the backward pass does (as PyTorch's DDP). It is off by default: on two H200s it
    measured slower (GPT medium, bf16: 23.0 ms per step against 20.1 ms with the buckets
    reduced after the pass, docs/PERFORMANCE.md), because recording an event waits until the
    device's submission thread has issued everything before it, which put the passes' kernel
    launches (about 13 ms for two devices) on the host's path, one device at a time; on one H200
    the split pass and its events cost nothing (16.3 ms either way). Each replica's graphs are
    now replayed from a thread of its own, which has not been measured on two GPUs yet. Other
    shapes, and batches of padding only, step eagerly.

    Results are those of DataParallel.step: the same copies, reductions and updates in the same
    order. Bit for bit on the OpenCL paths; on the vendor engines with more than two devices,
    NCCL's order of summation depends on where an element sits in a bucket, and the overlapped
    layout differs from the eager one, so the last bits may differ (every replica still holds
    the same bits)."""

    def __init__(self, parallel, pad_id: int = 0, overlap: bool = False):
        self.parallel, self.pad_id, self.overlap = parallel, pad_id, overlap
        self.passes: Optional[List[CapturedPass]] = None
        self.unpacks: List[Graph] = []
        self.streams: List[Stream] = []   # per replica: where its buckets are all-reduced
        self.segment_of: List[int] = []   # bucket -> the pass's graph that completes it
        self.layout = None
        self.shape: Optional[tuple] = None
        self._replayers: Optional[ThreadPoolExecutor] = None   # with overlap: one per replica

    def __call__(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        dp = self.parallel
        if self.passes is None:
            loss = dp.step(inputs, targets, self.pad_id)
            self._capture(tuple(np.shape(inputs)))
            return loss
        total_valid = int((np.asarray(targets) != self.pad_id).sum())
        if tuple(np.shape(inputs)) != self.shape or tuple(np.shape(targets)) != self.shape or \
                total_valid == 0:
            return dp.step(inputs, targets, self.pad_id)
        denominator = total_valid / dp.size
        shards = dp.shards(inputs.shape[0])
        valid, events = self.replay(inputs, targets, shards, denominator)
        if self.overlap:
            self._reduce_overlapped(events)
        else:
            dp.reduce_buckets(self.layout)
        loss = sum(float(captured.losses()[rows].astype(np.float64).sum())
                   for captured, rows in zip(self.passes, valid)) / total_valid
        if math.isfinite(loss):
            dp.on_each_replica(self._update)
        return loss

    def _capture(self, shape: tuple) -> None:
        dp = self.parallel
        self.shape = shape
        layout = dp.bucket_layout()
        if layout is None:   # no gradient at all: nothing to reduce, nothing to overlap
            self.overlap = False
        if self.overlap:
            dp.set_bucket_bytes(-(-layout[1] * 4 // OVERLAP_BUCKETS))
            layout = dp.bucket_layout()
            packers = dp.on_each_replica(lambda r: dp.gradient_packer(r, layout))
            self.passes = dp.capture_passes(shape, after=lambda r: packers[r].finish(),
                                            on_final=lambda r: packers[r].final)
            spans = packers[0].spans
            if any(p.spans != spans or p.position != layout[1] * 4 for p in packers):
                raise RuntimeError("the replicas' backward passes completed their gradients in "
                                   "different orders (or not every gradient): no overlap layout")
            self.layout = (layout[0], layout[1], spans)
            self.segment_of = packers[0].segment_of
            self.streams = [Stream(runtime.device) for runtime in dp.runtimes]
        else:
            self.layout = layout
            self.passes = dp.capture_passes(shape, after=lambda r: dp.pack_gradients(r, layout))

        def unpack(r: int) -> Graph:
            self.passes[r].attach_grads()
            graph = Graph(dp.runtimes[r].device)
            with graph:
                dp.unpack_gradients(r, self.layout)
            return graph
        self.unpacks = dp.on_each_replica(unpack)

    def replay(self, inputs, targets, shards, denominator):
        """Writes every replica's rows and replays the passes. Returns per replica the rows that
        count and (with overlap) an event after each of its graphs. Recording an event waits until
        the device's submission thread has issued the work before it, so with overlap each
        replica's graphs are replayed from a thread of its own: from one thread the devices'
        launches would be issued one device at a time (on two H200s the second GPU then ran
        short of work)."""
        dp = self.parallel
        valid = dp.on_each_replica(lambda r: self.passes[r].write(
            inputs[shards[r]], targets[shards[r]], self.pad_id, denominator))
        if not self.overlap:
            for captured in self.passes:
                captured.replay()
            return valid, [[] for _ in self.passes]

        def replay_with_events(captured: CapturedPass) -> List[Event]:
            events = []
            for graph in captured.graphs:
                graph.replay()
                events.append(Event.record(device=captured.device))
            return events
        if self._replayers is None:
            self._replayers = ThreadPoolExecutor(max_workers=len(self.passes),
                                                 thread_name_prefix="replica-replay")
        events = list(self._replayers.map(replay_with_events, self.passes))
        return valid, events

    def _reduce_overlapped(self, events: List[List[Event]]) -> None:
        """Bucket k's all-reduce on the replicas' side streams once the graph completing it has
        run; then every replica's own stream waits for its side stream."""
        dp = self.parallel
        for bucket, segment in enumerate(self.segment_of):
            for stream, replica_events in zip(self.streams, events):
                stream.wait_event(replica_events[segment])
            with ExitStack() as current:
                for stream in self.streams:
                    current.enter_context(stream)
                dp.reduce_bucket(bucket, self.layout)
        for stream, runtime in zip(self.streams, dp.runtimes):
            Stream.current(runtime.device).wait_event(stream.record_event())

    def _update(self, r: int) -> None:
        self.unpacks[r].replay()
        self.passes[r].attach_grads()
        self.parallel.optimizers[r].step()

    def close(self) -> None:
        if self.passes is not None:
            self.parallel.on_each_replica(lambda r: (self.passes[r].close(),
                                                     self.unpacks[r].close()))
            self.passes, self.unpacks = None, []
        for stream in self.streams:
            stream.synchronize()
            stream.destroy()
        self.streams = []
        if self._replayers is not None:
            self._replayers.shutdown()
            self._replayers = None


def graph_refusal(config: dict) -> Optional[str]:
    """Why a training run cannot replay its steps from graphs, or None when it can."""
    if config.get("dropout", 0.0):
        return "dropout would replay one mask"
    return None
