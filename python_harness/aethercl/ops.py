"""One Python function per exported entry point. Each takes the device first (a Device, or an int
gpu_index on the default library), accepts Buffers, raw handles or None for buffer arguments, and
raises AetherCLError (with aethercl_last_error()) where the C function reports failure.

Argument order and meaning follow docs/ABI.md §4 exactly; nothing is reordered here."""
from __future__ import annotations

import ctypes
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .device import Buffer, Device, Handle, default_library, handle_of
from .library import Library

DeviceLike = Union[Device, int]

# Python name -> C symbol, for every function of this module that wraps an entry point.
ENTRY_POINTS: Dict[str, str] = {}


def _wraps(c_name: str):
    def register(function):
        ENTRY_POINTS[function.__name__] = c_name
        function.c_name = c_name
        return function
    return register


def _target(dev: DeviceLike) -> Tuple[Library, int]:
    if isinstance(dev, Device):
        return dev.lib, dev.index
    return default_library(), int(dev)


def _status(dev: DeviceLike, c_name: str, *args) -> None:
    lib, index = _target(dev)
    lib.check(c_name, index, *args)


def _h(value: Handle) -> Optional[int]:
    return handle_of(value)


def _host_pointer(value) -> Optional[int]:
    """A NumPy array's data pointer, a ctypes object's address, an int as is, None as NULL."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value.ctypes.data
    if isinstance(value, (bytes, bytearray)):
        raise TypeError("pass a NumPy array or ctypes buffer, not bytes")
    if isinstance(value, ctypes._SimpleCData) or isinstance(value, ctypes.Array):
        return ctypes.addressof(value)
    return int(value)


def _void_call(dev: DeviceLike, c_name: str, *args):
    """Calls a void / address-returning entry point and raises if it recorded an error."""
    lib, index = _target(dev)
    result = getattr(lib.cdll, c_name)(index, *args)
    if lib.last_error_code() != 0:
        raise lib.error(c_name)
    return result


# --- lifecycle and introspection --------------------------------------------------------------

@_wraps("initialize_gpu")
def initialize(dev: DeviceLike) -> None:
    _status(dev, "initialize_gpu")


@_wraps("shutdown_driver")
def shutdown(dev: DeviceLike = 0) -> None:
    _target(dev)[0].shutdown_driver()


@_wraps("aethercl_version")
def version(dev: DeviceLike = 0) -> str:
    return _target(dev)[0].aethercl_version().decode()


@_wraps("aethercl_abi_version")
def abi_version(dev: DeviceLike = 0) -> int:
    return int(_target(dev)[0].aethercl_abi_version())


@_wraps("aethercl_last_error")
def last_error(dev: DeviceLike = 0) -> str:
    return _target(dev)[0].last_error()


@_wraps("aethercl_last_error_code")
def last_error_code(dev: DeviceLike = 0) -> int:
    return _target(dev)[0].last_error_code()


@_wraps("aethercl_status_name")
def status_name(dev: DeviceLike, status: int) -> str:
    return _target(dev)[0].aethercl_status_name(int(status)).decode()


@_wraps("aethercl_device_count")
def device_count(dev: DeviceLike = 0) -> int:
    return int(_target(dev)[0].aethercl_device_count())


@_wraps("aethercl_device_info")
def device_info(dev: DeviceLike) -> str:
    lib, index = _target(dev)
    return lib.json_call("aethercl_device_info", index)


@_wraps("aethercl_synchronize")
def synchronize(dev: DeviceLike) -> None:
    _status(dev, "aethercl_synchronize")


@_wraps("aethercl_memory_stats")
def memory_stats(dev: DeviceLike) -> str:
    lib, index = _target(dev)
    return lib.json_call("aethercl_memory_stats", index)


@_wraps("aethercl_set_buffer_label")
def set_buffer_label(dev: DeviceLike, buffer: Handle, label: Optional[str]) -> None:
    _status(dev, "aethercl_set_buffer_label", _h(buffer), (label or "").encode("utf-8"))


@_wraps("aethercl_trace_start")
def trace_start(path: str, dev: DeviceLike = 0) -> None:
    """Starts a Chrome-trace recording of every kernel and transfer (all devices)."""
    lib = _target(dev)[0]
    if lib.aethercl_trace_start(str(path).encode("utf-8")) != 1:
        raise lib.error("aethercl_trace_start")


@_wraps("aethercl_trace_stop")
def trace_stop(dev: DeviceLike = 0) -> None:
    lib = _target(dev)[0]
    if lib.aethercl_trace_stop() != 1:
        raise lib.error("aethercl_trace_stop")


@_wraps("aethercl_trace_summary")
def trace_summary(dev: DeviceLike = 0) -> str:
    return _target(dev)[0].json_call("aethercl_trace_summary")


# --- memory ------------------------------------------------------------------------------------

@_wraps("allocate_gpu_memory")
def allocate(dev: DeviceLike, size: int) -> int:
    lib, index = _target(dev)
    return lib.check_handle("allocate_gpu_memory", index, int(size))


@_wraps("free_gpu_memory")
def free(dev: DeviceLike, buffer: Handle) -> None:
    """Never fails (docs/ABI.md §3.3): NULL, unknown and freed handles are no-ops."""
    lib, index = _target(dev)
    lib.free_gpu_memory(index, _h(buffer))


@_wraps("write_host_to_gpu_blocking")
def write(dev: DeviceLike, buffer: Handle, offset: int, size: int, source) -> None:
    _status(dev, "write_host_to_gpu_blocking", _h(buffer), int(offset), int(size),
            _host_pointer(source))


@_wraps("read_gpu_to_host_blocking")
def read(dev: DeviceLike, buffer: Handle, offset: int, size: int, destination) -> None:
    _status(dev, "read_gpu_to_host_blocking", _h(buffer), int(offset), int(size),
            _host_pointer(destination))


@_wraps("execute_clone_on_gpu")
def clone(dev: DeviceLike, src: Handle, dst: Handle, size: int) -> None:
    _status(dev, "execute_clone_on_gpu", _h(src), _h(dst), int(size))


# --- matrix products ---------------------------------------------------------------------------

@_wraps("execute_matmul_on_gpu")
def matmul(dev, a, b, c, B, M, N, K) -> None:
    _status(dev, "execute_matmul_on_gpu", _h(a), _h(b), _h(c), B, M, N, K)


@_wraps("execute_matmul_backward_on_gpu")
def matmul_backward(dev, a, b, dc, da, db, B, M, N, K) -> None:
    _status(dev, "execute_matmul_backward_on_gpu", _h(a), _h(b), _h(dc), _h(da), _h(db),
            B, M, N, K)


@_wraps("execute_matmul_batched_on_gpu")
def matmul_batched(dev, a, b, c, B, M, N, K) -> None:
    _status(dev, "execute_matmul_batched_on_gpu", _h(a), _h(b), _h(c), B, M, N, K)


@_wraps("execute_matmul_batched_backward_on_gpu")
def matmul_batched_backward(dev, a, b, dc, da, db, B, M, N, K) -> None:
    _status(dev, "execute_matmul_batched_backward_on_gpu", _h(a), _h(b), _h(dc), _h(da), _h(db),
            B, M, N, K)


# --- elementwise -------------------------------------------------------------------------------

@_wraps("execute_add_on_gpu")
def add(dev, a, b, c, num_elements) -> None:
    _status(dev, "execute_add_on_gpu", _h(a), _h(b), _h(c), num_elements)


@_wraps("execute_mul_on_gpu")
def mul(dev, a, b, c, num_elements) -> None:
    _status(dev, "execute_mul_on_gpu", _h(a), _h(b), _h(c), num_elements)


@_wraps("execute_mul_backward_on_gpu")
def mul_backward(dev, dc, a, b, da, db, num_elements) -> None:
    _status(dev, "execute_mul_backward_on_gpu", _h(dc), _h(a), _h(b), _h(da), _h(db),
            num_elements)


@_wraps("execute_gelu_on_gpu")
def gelu(dev, x, y, num_elements) -> None:
    _status(dev, "execute_gelu_on_gpu", _h(x), _h(y), num_elements)


@_wraps("execute_gelu_backward_on_gpu")
def gelu_backward(dev, x, dy, dx, num_elements) -> None:
    _status(dev, "execute_gelu_backward_on_gpu", _h(x), _h(dy), _h(dx), num_elements)


# --- row-wise ----------------------------------------------------------------------------------

@_wraps("execute_layernorm_on_gpu")
def layernorm(dev, x, y, num_rows, row_size, eps) -> None:
    _status(dev, "execute_layernorm_on_gpu", _h(x), _h(y), num_rows, row_size, float(eps))


@_wraps("execute_layernorm_backward_on_gpu")
def layernorm_backward(dev, dy, x, dx, num_rows, row_size, eps) -> None:
    _status(dev, "execute_layernorm_backward_on_gpu", _h(dy), _h(x), _h(dx), num_rows, row_size,
            float(eps))


@_wraps("execute_softmax_on_gpu")
def softmax(dev, x, y, num_rows, row_size) -> None:
    _status(dev, "execute_softmax_on_gpu", _h(x), _h(y), num_rows, row_size)


@_wraps("execute_softmax_backward_on_gpu")
def softmax_backward(dev, dy, y, dx, num_rows, row_size) -> None:
    _status(dev, "execute_softmax_backward_on_gpu", _h(dy), _h(y), _h(dx), num_rows, row_size)


@_wraps("execute_log_softmax_stable_gpu")
def log_softmax(dev, logits, log_probs, B, S, V) -> None:
    _status(dev, "execute_log_softmax_stable_gpu", _h(logits), _h(log_probs), B, S, V)


@_wraps("execute_cross_entropy_loss_grad_gpu")
def cross_entropy_loss_grad(dev, log_probs, targets, grad, loss, B, S, V) -> None:
    _status(dev, "execute_cross_entropy_loss_grad_gpu", _h(log_probs), _h(targets), _h(grad),
            _h(loss), B, S, V)


# --- layout ------------------------------------------------------------------------------------

@_wraps("execute_transpose_on_gpu")
def transpose(dev, x, y, rows, cols) -> None:
    _status(dev, "execute_transpose_on_gpu", _h(x), _h(y), rows, cols)


@_wraps("execute_transpose_backward_on_gpu")
def transpose_backward(dev, dc, da, rows_a, cols_a) -> None:
    _status(dev, "execute_transpose_backward_on_gpu", _h(dc), _h(da), rows_a, cols_a)


@_wraps("execute_transpose_batched_gpu")
def transpose_batched(dev, x, y, B_flat, d1, d2) -> None:
    _status(dev, "execute_transpose_batched_gpu", _h(x), _h(y), B_flat, d1, d2)


@_wraps("execute_transpose_12_batched_gpu")
def transpose_12_batched(dev, x, y, B, D1, D2, D3) -> None:
    _status(dev, "execute_transpose_12_batched_gpu", _h(x), _h(y), B, D1, D2, D3)


# --- reductions, broadcasts, embeddings -------------------------------------------------------

@_wraps("execute_reduce_sum_gpu")
def reduce_sum(dev, x, out, B, M, N) -> None:
    _status(dev, "execute_reduce_sum_gpu", _h(x), _h(out), B, M, N)


@_wraps("execute_broadcast_add_gpu")
def broadcast_add(dev, a, bias, c, B, M, N) -> None:
    _status(dev, "execute_broadcast_add_gpu", _h(a), _h(bias), _h(c), B, M, N)


@_wraps("execute_add_broadcast_pe_gpu")
def add_broadcast_pe(dev, x, pe, y, B, S, E) -> None:
    _status(dev, "execute_add_broadcast_pe_gpu", _h(x), _h(pe), _h(y), B, S, E)


@_wraps("execute_embedding_lookup_gpu")
def embedding_lookup(dev, idx, weights, out, b, s, d, v) -> None:
    _status(dev, "execute_embedding_lookup_gpu", _h(idx), _h(weights), _h(out), b, s, d, v)


@_wraps("execute_embedding_backward_gpu")
def embedding_backward(dev, d_out, idx, d_weights, b, s, d, v) -> None:
    _status(dev, "execute_embedding_backward_gpu", _h(d_out), _h(idx), _h(d_weights), b, s, d, v)


# --- optimiser ---------------------------------------------------------------------------------

@_wraps("execute_adam_update_on_gpu")
def adam_update(dev, param, grad, m, v, num_elements, t, lr, beta1, beta2, eps,
                weight_decay) -> None:
    _status(dev, "execute_adam_update_on_gpu", _h(param), _h(grad), _h(m), _h(v), num_elements,
            int(t), float(lr), float(beta1), float(beta2), float(eps), float(weight_decay))


# --- host-memory ("simulated") API ---------------------------------------------------------------

@_wraps("simulated_kernel_allocate")
def sim_allocate(dev, size: int) -> int:
    lib, index = _target(dev)
    return lib.check_handle("simulated_kernel_allocate", index, int(size))


@_wraps("simulated_kernel_free")
def sim_free(dev, address: int, size: int = 0) -> None:
    lib, index = _target(dev)
    lib.simulated_kernel_free(index, int(address), int(size))


@_wraps("simulated_kernel_write")
def sim_write(dev, address: int, size: int, source) -> None:
    _void_call(dev, "simulated_kernel_write", int(address), int(size), _host_pointer(source))


@_wraps("simulated_kernel_read")
def sim_read(dev, address: int, size: int, destination) -> None:
    _void_call(dev, "simulated_kernel_read", int(address), int(size), _host_pointer(destination))


@_wraps("simulated_matrix_multiply")
def sim_matrix_multiply(dev, address_a: int, address_b: int, size_a: int, size_b: int,
                        shape_a: Sequence[int], shape_b: Sequence[int]) -> int:
    lib, index = _target(dev)
    sa, sb = (ctypes.c_int * 2)(*shape_a), (ctypes.c_int * 2)(*shape_b)
    return lib.check_handle("simulated_matrix_multiply", index, int(address_a), int(address_b),
                            int(size_a), int(size_b), sa, sb)


@_wraps("simulated_get_compute_unit_count")
def sim_compute_unit_count(dev: DeviceLike = 0) -> int:
    lib, index = _target(dev)
    return int(lib.simulated_get_compute_unit_count(index))


# --- your own kernels, typed memory, the kernel log, interop (ABI version 3) --------------------
# Programs and kernels are raw tokens here; aethercl.Program / Kernel (Device.compile) wrap them.

def _text(value: Optional[str]) -> Optional[bytes]:
    return value.encode("utf-8") if isinstance(value, str) else value


@_wraps("aethercl_program_create")
def program_create(dev: DeviceLike, source: str, options: Optional[str] = None) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_program_create", index, _text(source), _text(options))


@_wraps("aethercl_program_create_il")
def program_create_il(dev: DeviceLike, il: bytes, options: Optional[str] = None) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_program_create_il", index, bytes(il), len(il),
                            _text(options))


@_wraps("aethercl_program_create_binary")
def program_create_binary(dev: DeviceLike, binary: bytes, options: Optional[str] = None) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_program_create_binary", index, bytes(binary), len(binary),
                            _text(options))


@_wraps("aethercl_program_binary")
def program_binary(dev: DeviceLike, program: int) -> bytes:
    lib, _ = _target(dev)
    size = lib.aethercl_program_binary(program, None, 0)
    out = ctypes.create_string_buffer(max(1, size))
    if size == 0 or lib.aethercl_program_binary(program, out, size) != size:
        raise lib.error("aethercl_program_binary")
    return out.raw[:size]


@_wraps("aethercl_program_destroy")
def program_destroy(dev: DeviceLike, program: int) -> None:
    _target(dev)[0].check("aethercl_program_destroy", program)


@_wraps("aethercl_kernel_create")
def kernel_create(dev: DeviceLike, program: int, name: str) -> int:
    return _target(dev)[0].check_handle("aethercl_kernel_create", program, _text(name))


@_wraps("aethercl_kernel_info")
def kernel_info(dev: DeviceLike, kernel: int) -> str:
    return _target(dev)[0].json_call("aethercl_kernel_info", kernel)


@_wraps("aethercl_kernel_destroy")
def kernel_destroy(dev: DeviceLike, kernel: int) -> None:
    _target(dev)[0].check("aethercl_kernel_destroy", kernel)


@_wraps("aethercl_launch")
def launch(dev: DeviceLike, kernel: int, stream, global_size: Sequence[int],
           local_size: Optional[Sequence[int]], args: Sequence[Tuple[int, int, Optional[int]]]
           ) -> None:
    """args: (kind, size, value) per argument, value a buffer handle or a host address."""
    from .abi import AetherclArg
    array = (AetherclArg * max(1, len(args)))(*[AetherclArg(*a) for a in args])
    global_array = (ctypes.c_size_t * len(global_size))(*global_size)
    local_array = (ctypes.c_size_t * len(local_size))(*local_size) if local_size else None
    _status(dev, "aethercl_launch", kernel, _h(stream) if isinstance(stream, Buffer) else stream,
            len(global_size), global_array, local_array, len(args), array)


@_wraps("aethercl_buffer_set_dtype")
def buffer_set_dtype(dev: DeviceLike, buffer: Handle, dtype: int) -> None:
    _status(dev, "aethercl_buffer_set_dtype", _h(buffer), int(dtype))


@_wraps("aethercl_convert")
def convert(dev: DeviceLike, src: Handle, src_dtype: int, dst: Handle, dst_dtype: int,
            count: int, stream=None) -> None:
    _status(dev, "aethercl_convert", _h(src), int(src_dtype), _h(dst), int(dst_dtype), int(count),
            stream)


@_wraps("aethercl_kernel_log")
def kernel_log(dev: DeviceLike) -> str:
    lib, index = _target(dev)
    return lib.json_call("aethercl_kernel_log", index)


@_wraps("aethercl_cl_context")
def cl_context(dev: DeviceLike) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_cl_context", index)


@_wraps("aethercl_cl_queue")
def cl_queue(dev: DeviceLike, stream=None) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_cl_queue", index, stream)


@_wraps("aethercl_cl_mem")
def cl_mem(dev: DeviceLike, buffer: Handle) -> int:
    lib, index = _target(dev)
    return lib.check_handle("aethercl_cl_mem", index, _h(buffer))


__all__ = sorted(ENTRY_POINTS) + ["ENTRY_POINTS", "Buffer", "Device"]
