"""Child process of test_vendor_engines.py: runs a list of steps against the driver on two devices
and saves what it saw. The vendor engines load once per process, so each scenario (which engine
library, which variables) is a process of its own.

Usage: python vendor_child.py STEPS_JSON OUT_NPZ. Steps: {"op": "comm", "ranks": P, "alloc": bool}
creates the communicator over devices 0 .. P-1 (P = 2 unless given; later steps run on it, and
with "alloc" allocate their buffers through aethercl_comm_alloc); {"op": "all_reduce"
| "reduce_scatter" | "all_gather" | "broadcast" | "copy_peer", "dtype", "count", "red", "root"} runs
one call on fresh inputs (seeded by the step index) with outputs poisoned (0xFF) and GUARD bytes
(0x5A) behind every buffer; {"op": "env", "set": {...}, "unset": [...]} changes variables the fake
engines read at call time. For each step
the archive holds its status, error text and code, and the bytes of every input and output buffer
(guards included), read right after the call returns."""
import ctypes
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402

GUARD = 64
ELEMENT = {0: 4, 1: 2, 2: 2}


def stored(dtype, values):
    if dtype == 0:
        return values.astype(np.float32).tobytes()
    if dtype == 1:
        return values.astype(np.float16).tobytes()
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16).tobytes()


class Buffer:
    # A communicator here: buffers come from aethercl_comm_alloc (rank = gpu) instead.
    comm = None

    def __init__(self, lib, gpu, nbytes, content=None):
        self.lib, self.gpu, self.nbytes = lib, gpu, nbytes
        if Buffer.comm is not None:
            self.handle = lib.check_handle("aethercl_comm_alloc", Buffer.comm, gpu, nbytes + GUARD)
        else:
            self.handle = lib.check_handle("allocate_gpu_memory", gpu, nbytes + GUARD)
        data = content if content is not None else b"\xff" * nbytes
        lib.check("write_host_to_gpu_blocking", gpu, self.handle, 0, nbytes + GUARD,
                  data + b"\x5a" * GUARD)

    def read(self):
        out = ctypes.create_string_buffer(self.nbytes + GUARD)
        self.lib.check("read_gpu_to_host_blocking", self.gpu, self.handle, 0, self.nbytes + GUARD,
                       out)
        return np.frombuffer(out.raw, dtype=np.uint8).copy()

    def free(self):
        self.lib.free_gpu_memory(self.gpu, self.handle)


def tokens(buffers):
    return (ctypes.c_void_p * len(buffers))(*[b.handle for b in buffers])


def run(lib, comm, index, step, ranks=2):
    op, dtype, count = step["op"], step.get("dtype", 0), step.get("count", 0)
    size = ELEMENT[dtype] * count
    rng = np.random.default_rng(1000 + index)

    def values(n):
        return stored(dtype, rng.standard_normal(n).astype(np.float32) * 3)

    inputs, outputs = [], []
    if op == "all_reduce" or op == "broadcast":
        inputs = [Buffer(lib, r, size, values(count)) for r in range(ranks)]
        outputs = inputs
        if op == "all_reduce":
            result = lib.aethercl_all_reduce(comm, tokens(inputs), count, dtype, step["red"])
        else:
            result = lib.aethercl_broadcast(comm, tokens(inputs), count, dtype, step["root"])
    elif op == "reduce_scatter":
        inputs = [Buffer(lib, r, size * ranks, values(count * ranks)) for r in range(ranks)]
        outputs = [Buffer(lib, r, size) for r in range(ranks)]
        result = lib.aethercl_reduce_scatter(comm, tokens(inputs), tokens(outputs), count, dtype,
                                             step["red"])
    elif op == "all_gather":
        inputs = [Buffer(lib, r, size, values(count)) for r in range(ranks)]
        outputs = [Buffer(lib, r, size * ranks) for r in range(ranks)]
        result = lib.aethercl_all_gather(comm, tokens(inputs), tokens(outputs), count, dtype)
    else:  # copy_peer from device 0 at byte 3 to device 1 at byte 5
        inputs = [Buffer(lib, 0, count + 3, bytes(rng.integers(0, 256, count + 3, np.uint8)))]
        outputs = [Buffer(lib, 1, count + 5)]
        result = lib.aethercl_copy_peer(1, outputs[0].handle, 5, 0, inputs[0].handle, 3, count)
    record = {"status": int(result), "error": lib.last_error() if result != 1 else "",
              "code": lib.last_error_code() if result != 1 else 0}
    arrays = {}
    # Read right after the call returns: the header promises the result is visible to later work.
    for r, buffer in enumerate(outputs):
        arrays[f"s{index}_out{r}"] = buffer.read()
    seen = set()
    for r, buffer in enumerate(inputs):
        if id(buffer) not in {id(b) for b in outputs}:
            arrays[f"s{index}_in{r}"] = buffer.read()
    for buffer in inputs + outputs:
        if id(buffer) not in seen:
            seen.add(id(buffer))
            buffer.free()
    return record, arrays


def main():
    steps = json.loads(sys.argv[1])
    out_path = sys.argv[2]
    lib = Library()
    most = max([step.get("ranks", 2) for step in steps if step["op"] == "comm"] + [2])
    for gpu in range(most):
        lib.check("initialize_gpu", gpu)
    comm, ranks = None, 2
    records, arrays = [], {}
    for index, step in enumerate(steps):
        if step["op"] == "env":
            for name, value in step.get("set", {}).items():
                os.environ[name] = value
            for name in step.get("unset", []):
                os.environ.pop(name, None)
            records.append({"status": 1})
            continue
        if step["op"] == "comm":
            ranks = step.get("ranks", 2)
            indices = (ctypes.c_int * ranks)(*range(ranks))
            comm = lib.aethercl_comm_create(ranks, indices)
            Buffer.comm = comm if step.get("alloc") else None
            records.append({"status": 1 if comm else 0, "error": "" if comm else lib.last_error(),
                            "code": 0 if comm else lib.last_error_code()})
            continue
        record, saved = run(lib, comm, index, step, ranks)
        records.append(record)
        arrays.update(saved)
    if comm:
        lib.check("aethercl_comm_destroy", comm)
    lib.shutdown_driver()
    np.savez(out_path, records=np.array(json.dumps(records)), **arrays)


if __name__ == "__main__":
    main()
