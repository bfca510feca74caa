"""The frontend's connection to the driver: a Runtime per initialised device (its aethercl.Device,
the frontend buffers living on it, caches of constant buffers) and the process's current runtime,
which ocl_initialize opens and ocl_shutdown closes.

The current runtime is the one piece of module state: the documented frontend creates tensors and
layers without naming a device, so something must say which device that is. Everything else hangs
off a Runtime object, and tensors remember the runtime of their buffer, so several runtimes (one per
device) can live side by side."""
from __future__ import annotations

import functools
import weakref
from typing import Any, Dict, Optional, Tuple

import numpy as np

from aethercl import Device, Library, dtypes

NOT_INITIALIZED = "the driver is not initialised; call ocl_initialize() first"


class Runtime:
    """One initialised device as the frontend sees it. `open` turns False at ocl_shutdown;
    buffers of a closed runtime skip the driver when freed (its handles died with the driver's
    shutdown)."""

    def __init__(self, device: Device):
        self.device = device
        self.open = True
        self.buffers: "weakref.WeakSet[Any]" = weakref.WeakSet()   # live GPUBuffers
        self.constants: Dict[Tuple[int, float], Any] = {}            # (numel, value) -> GPUBuffer
        self.masks: Dict[int, Any] = {}                              # seq_len -> GPUBuffer
        self.matmul_precision = "fp32"                               # set_matmul_precision's
        self.activation_dtype: Any = None     # set_activation_precision's; None is float32
        self.programs: Dict[Any, Any] = {}    # the frontend's own kernels, built once
        self.weight_copies: Dict[Any, Any] = {}   # ocl_llm.weight_copies.prepared's, in a forward

    @property
    def index(self) -> int:
        return self.device.index

    @functools.cached_property
    def is_gpu(self) -> bool:
        """Whether the device is a GPU (asked once: the fused paths ask at every layer)."""
        return self.device.info().get("type") == "gpu"

    def release_all(self) -> int:
        """Frees every live frontend buffer of this runtime (constants included); returns how many
        were freed. The runtime stays open."""
        freed = 0
        for buffer in list(self.buffers):
            if buffer.alive:
                buffer.free()
                freed += 1
        self.constants.clear()
        self.masks.clear()
        return freed

    def __repr__(self) -> str:
        return f"Runtime(device={self.index}, {'open' if self.open else 'closed'})"


_current: Optional[Runtime] = None


def current_runtime() -> Runtime:
    """The runtime new tensors, layers and optimizers use; RuntimeError before ocl_initialize."""
    if _current is None or not _current.open:
        raise RuntimeError(NOT_INITIALIZED)
    return _current


def set_current_runtime(runtime: Runtime) -> Runtime:
    """Makes an open runtime the current one (data parallelism builds a replica per device this
    way); returns the runtime that was current before (or None)."""
    global _current
    if not runtime.open:
        raise RuntimeError(f"{runtime!r} is closed")
    previous, _current = _current, runtime
    return previous


def current_device() -> Device:
    """The aethercl.Device of the current runtime."""
    return current_runtime().device


def ocl_initialize(device_index: int = 0, library: Optional[Library] = None,
                   verbose: bool = True) -> Device:
    """initialize_gpu(device_index) and a runtime for it, which becomes the current one;
    idempotent for the current device."""
    global _current
    if _current is not None and _current.open and _current.index == device_index:
        return _current.device
    _current = Runtime(Device(device_index, library=library))
    if verbose:
        info = _current.device.info()
        print(f"[ocl] device {device_index}: {info.get('name')} ({info.get('platform')}, "
              f"{info.get('type')}, {info.get('compute_units')} compute units)")
    return _current.device


MATMUL_PRECISIONS = ("fp32", "tf32", "3xtf32", "bf16", "fp16")


def set_matmul_precision(precision: str) -> None:
    """The compute mode of every matrix product of the current device (aethercl_set_matmul_
    precision): fp32 (exact, the default), tf32, 3xtf32, bf16 or fp16; tensors stay float32, the
    products round their inputs as the mode says (tensor cores where the device has them)."""
    from aethercl.gemm import COMPUTE_MODES
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul precision {precision!r} is not one of "
                         f"{', '.join(MATMUL_PRECISIONS)}")
    runtime = current_runtime()
    runtime.device.lib.check("aethercl_set_matmul_precision", runtime.index,
                             COMPUTE_MODES[precision])
    runtime.matmul_precision = precision


ACTIVATION_PRECISIONS = ("fp32", "bf16", "fp16")
# What the 16-bit activations call (ocl_llm.mixed): typed operands need the version-3 training ops
# and the version-4 fused GEMM.
_ACTIVATION_FUNCTIONS = ("aethercl_gemm", "aethercl_gemm_fused", "aethercl_convert",
                         "aethercl_buffer_set_dtype", "aethercl_binary", "aethercl_binary_backward",
                         "aethercl_unary_backward", "aethercl_norm_forward",
                         "aethercl_norm_backward", "aethercl_cross_entropy")


def set_activation_precision(precision: str) -> None:
    """The storage of the transformer's activations and their gradients on the current device,
    as PyTorch's autocast keeps them: "fp32" (the default), "bf16" or "fp16". In 16 bits the
    matrix products, attention, GELU and the loss read and write 16-bit tensors, LayerNorm
    normalises the float32 residual stream into 16 bits, and each Linear multiplies by a 16-bit
    copy of its float32 weight made in the forward pass; weights, their gradients, optimizer
    state, the residual stream, norm statistics and the loss stay float32 (ocl_llm.mixed).
    Set the matching matmul precision too (set_matmul_precision) for tensor cores to run the
    16-bit products in their own format. fp16 gradients need dynamic loss scaling
    (ocl_llm.loss_scale.LossScaler). Refused (RuntimeError) on a library without the functions
    it needs."""
    if precision not in ACTIVATION_PRECISIONS:
        raise ValueError(f"activation precision {precision!r} is not one of "
                         f"{', '.join(ACTIVATION_PRECISIONS)}")
    runtime = current_runtime()
    if precision == "fp32":
        runtime.activation_dtype = None
        return
    missing = [name for name in _ACTIVATION_FUNCTIONS if not runtime.device.lib.has(name)]
    if missing:
        raise RuntimeError(f"16-bit activations need {', '.join(missing)}, which this library "
                           f"does not have")
    runtime.activation_dtype = dtypes.bfloat16 if precision == "bf16" else np.dtype(np.float16)


def release_all() -> int:
    """Frees every live buffer of the current runtime without shutting the driver down; returns
    how many were freed (0 when the frontend is not initialised)."""
    if _current is None or not _current.open:
        return 0
    return _current.release_all()


def ocl_shutdown(model=None, optimizer=None, shutdown_driver: bool = True) -> None:
    """Frees the optimizer states, the model and every buffer of the current runtime and closes
    it (later GPUBuffer.__del__ calls are no-ops). With shutdown_driver (the default) the driver is
    shut down too; without, it stays initialised for other users of the library in the process.
    Harmless when the frontend is not initialised."""
    global _current
    runtime = _current
    if runtime is None or not runtime.open:
        return
    if optimizer is not None:
        optimizer.free_memory()
    if model is not None:
        model.free_memory()
    runtime.release_all()
    runtime.open = False
    _current = None
    if shutdown_driver:
        runtime.device.shutdown()
