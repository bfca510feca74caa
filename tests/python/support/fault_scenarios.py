"""The scenarios of the OpenCL fault loop (test_cl_faults.py) and the child process that runs one
under the fault layer (tests/faults/cl_fault_layer.c, preloaded): `python fault_scenarios.py NAME`
runs scenario NAME twice, the first time with whatever fault the layer's environment asks for, and
prints one JSON line with what happened. Each scenario returns a digest of its results, which the
parent compares with a run without faults, so a fault that is swallowed cannot pass as success
with wrong numbers."""
import ctypes
import hashlib
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

from aethercl import Library  # noqa: E402


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for array in arrays:
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


def rng():
    return np.random.default_rng(37)


# ---- scenarios: each takes the library and returns a digest of its results ---------------------

def seed(lib):
    """The seed API: initialise, allocate, write, add, matmul, read, free, shut down."""
    r = rng()
    M, K, N = 5, 7, 3
    a, b = r.standard_normal((M, K), np.float32), r.standard_normal((K, N), np.float32)
    x, y = r.standard_normal(29, np.float32), r.standard_normal(29, np.float32)
    lib.check("initialize_gpu", 0)
    handles = []
    try:
        for nbytes in (a.nbytes, b.nbytes, M * N * 4, x.nbytes, y.nbytes, x.nbytes):
            handles.append(lib.check_handle("allocate_gpu_memory", 0, nbytes))
        ha, hb, hc, hx, hy, hz = handles
        for handle, array in ((ha, a), (hb, b), (hx, x), (hy, y)):
            lib.check("write_host_to_gpu_blocking", 0, handle, 0, array.nbytes, array.ctypes.data)
        lib.check("execute_add_on_gpu", 0, hx, hy, hz, x.size)
        lib.check("execute_matmul_on_gpu", 0, ha, hb, hc, 1, M, N, K)
        c, z = np.empty((M, N), np.float32), np.empty_like(x)
        lib.check("read_gpu_to_host_blocking", 0, hc, 0, c.nbytes, c.ctypes.data)
        lib.check("read_gpu_to_host_blocking", 0, hz, 0, z.nbytes, z.ctypes.data)
    finally:
        for handle in handles:
            lib.free_gpu_memory(0, handle)
    lib.shutdown_driver()
    return digest(c, z)


LAUNCH_SOURCE = """
__kernel void axpy(__global float* y, __global const float* x, float a, __local float* scratch) {
  size_t i = get_global_id(0);
  scratch[get_local_id(0)] = x[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  y[i] = a * scratch[get_local_id(0)] + y[i];
}
"""


def launch(lib):
    """A user kernel: compile, create, launch with buffer, scalar and local arguments, read."""
    from aethercl import Device
    from aethercl.program import Local
    r = rng()
    x, y = r.standard_normal(64, np.float32), r.standard_normal(64, np.float32)
    device = Device(0, library=lib)
    program = device.compile(LAUNCH_SOURCE)
    try:
        kernel = program.kernel("axpy")
        try:
            bx, by = device.from_numpy(x), device.from_numpy(y)
            try:
                kernel(64, 16, by, bx, np.float32(2.5), Local(16 * 4))
                out = by.to_numpy()
            finally:
                bx.free()
                by.free()
        finally:
            kernel.destroy()
    finally:
        program.destroy()
    return digest(out)


def graph(lib):
    """Capture add and matmul on a stream, replay twice with new inputs in between, read."""
    from aethercl import Device
    r = rng()
    a, b = r.standard_normal((4, 6), np.float32), r.standard_normal((6, 5), np.float32)
    device = Device(0, library=lib)
    ba, bb = device.from_numpy(a), device.from_numpy(b)
    bc, bd = device.empty((4, 5)), device.empty((4, 5))
    outs = []
    try:
        g = device.graph()
        try:
            with g:
                lib.check("execute_matmul_on_gpu", 0, ba.handle, bb.handle, bc.handle, 1, 4, 5, 6)
                lib.check("execute_add_on_gpu", 0, bc.handle, bc.handle, bd.handle, 20)
            for step in range(2):
                ba.write(a + step)
                g.replay()
                outs.append(bd.to_numpy())
        finally:
            g.close()
    finally:
        for buffer in (ba, bb, bc, bd):
            buffer.free()
    return digest(*outs)


def sim(lib):
    """The simulated_* API: host blocks and the float64 product."""
    r = rng()
    a, b = r.standard_normal((3, 5)), r.standard_normal((5, 4))
    lib.check("initialize_gpu", 0)
    blocks = []
    try:
        for array in (a, b):
            address = lib.simulated_kernel_allocate(0, array.nbytes)
            if not address:
                raise lib.error("simulated_kernel_allocate")
            blocks.append(address)
            lib.simulated_kernel_write(0, address, array.nbytes, array.ctypes.data)
            if lib.aethercl_last_error_code() != 0:
                raise lib.error("simulated_kernel_write")
        shape_a, shape_b = (ctypes.c_int * 2)(3, 5), (ctypes.c_int * 2)(5, 4)
        product = lib.simulated_matrix_multiply(0, blocks[0], blocks[1], a.nbytes, b.nbytes,
                                                shape_a, shape_b)
        if not product:
            raise lib.error("simulated_matrix_multiply")
        blocks.append(product)
        out = np.empty((3, 4))
        lib.simulated_kernel_read(0, product, out.nbytes, out.ctypes.data)
        if lib.aethercl_last_error_code() != 0:
            raise lib.error("simulated_kernel_read")
        units = lib.simulated_get_compute_unit_count(0)
    finally:
        for address in blocks:
            lib.simulated_kernel_free(0, address, 0)
    return digest(out, np.array([units]))


def collective(lib):
    """An all-reduce over the first two devices (PoCL: POCL_DEVICES="pthread pthread")."""
    from aethercl import Device
    from aethercl.collectives import Communicator
    count = lib.aethercl_device_count()
    if count == 0 and lib.aethercl_last_error_code() != 0:
        raise lib.error("aethercl_device_count")
    if count < 2:
        return "skipped: fewer than two devices"
    r = rng()
    arrays = [r.standard_normal(33, np.float32) for _ in range(2)]
    devices = [Device(i, library=lib) for i in range(2)]
    buffers = [d.from_numpy(x) for d, x in zip(devices, arrays)]
    try:
        comm = Communicator(devices, library=lib)
        try:
            comm.all_reduce(buffers, 33)
            outs = [b.to_numpy() for b in buffers]
        finally:
            comm.close()
    finally:
        for buffer in buffers:
            buffer.free()
    return digest(*outs)


TRAIN_CONFIG = dict(vocab_size=11, max_len=6, batch_size=2, embed_dim=8, num_heads=2, d_ff=8,
                    num_layers=1)


def train(lib):
    """One ocl_llm training step of a one-layer model."""
    from ocl_llm import ocl_initialize, ocl_shutdown
    from ocl_llm.config import DEFAULT_CONFIG
    from ocl_llm.model import SimpleModel
    from ocl_llm.train import make_optimizer, train_step
    config = dict(DEFAULT_CONFIG, **TRAIN_CONFIG)
    r = rng()
    inputs = r.integers(1, 11, (2, 6)).astype(np.int32)
    targets = r.integers(1, 11, (2, 6)).astype(np.int32)
    ocl_initialize(0, library=lib, verbose=False)
    model = optimizer = None
    try:
        model = SimpleModel(config)
        optimizer = make_optimizer(model, config)
        loss = train_step(model, optimizer, inputs, targets)
        state = model.state_dict()
        return digest(np.array([loss], np.float64), *[state[k] for k in sorted(state)])
    finally:
        ocl_shutdown(model, optimizer, shutdown_driver=False)


SCENARIOS = {"seed": seed, "launch": launch, "graph": graph, "sim": sim,
             "collective": collective, "train": train}


# ---- the child ----------------------------------------------------------------------------------

def attempt(lib, scenario):
    """(outcome, digest or None, details): 'ok', or 'refused' with the exception's text."""
    try:
        return "ok", scenario(lib), {}
    except Exception as error:  # every failure is recorded; the parent judges it
        details = {"type": type(error).__name__, "message": str(error),
                   "function": getattr(error, "function", None),
                   "code": getattr(error, "code", None),
                   "where": traceback.format_exc()[-1500:]}
        return "refused", None, details


def main(name):
    layer = ctypes.CDLL(None)
    layer.aethercl_fault_calls.restype = ctypes.c_ulong
    layer.aethercl_fault_hit.restype = ctypes.c_ulong
    layer.aethercl_fault_hit.argtypes = [ctypes.POINTER(ctypes.c_char_p)] * 2
    layer.aethercl_fault_live_objects.restype = ctypes.c_long
    lib = Library()
    scenario = SCENARIOS[name]
    report = {"scenario": name}
    report["first"], report["first_digest"], report["first_error"] = attempt(lib, scenario)
    report["calls"] = layer.aethercl_fault_calls()
    call, error = ctypes.c_char_p(), ctypes.c_char_p()
    report["hit_at"] = layer.aethercl_fault_hit(ctypes.byref(call), ctypes.byref(error))
    report["hit_call"] = call.value.decode() if call.value else ""
    trace = os.environ.get("AETHERCL_FAULT_TRACE")
    if trace:
        layer.aethercl_fault_write_trace(trace.encode(), 1, report["calls"])
    # The library after the fault: the same scenario again, which must now succeed.
    report["second"], report["second_digest"], report["second_error"] = attempt(lib, scenario)
    lib.shutdown_driver()
    text = ctypes.create_string_buffer(512)
    report["live_objects"] = layer.aethercl_fault_live_objects(text, len(text))
    report["live_detail"] = text.value.decode()
    print("FAULT-REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
