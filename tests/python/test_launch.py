"""aethercl_launch: results of 1-, 2- and 3-D launches with buffers, scalars of every size and
local memory; the validation of arguments and geometry (each refusal names the argument and leaves
every buffer as it was); zero work; many threads on one kernel token; a faulting kernel.
Results are exact: integer index arithmetic, and float sums whose order the kernels fix."""
import ctypes
import json
import threading

import numpy as np
import pytest

from aethercl.abi import AetherclArg
from support.helpers import run_child

BUFFER, SCALAR, LOCAL = 0, 1, 2
SIZE_MAX = 2**64 - 1

SOURCE = """
__kernel void index3(__global int* out, int base) {
  size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
  size_t w = get_global_size(0), h = get_global_size(1);
  out[(z * h + y) * w + x] = base + (int)(x + 10 * y + 100 * z);
}
__kernel void scalars(__global double* out, char c, uchar uc, short s, ushort us, int i, uint ui,
                      long l, ulong ul, float f, double d, float4 v, int3 w) {
  out[0] = c; out[1] = uc; out[2] = s; out[3] = us; out[4] = i; out[5] = ui; out[6] = l;
  out[7] = ul; out[8] = f; out[9] = d; out[10] = v.x + v.y + v.z + v.w; out[11] = w.x + w.y + w.z;
}
__kernel void block_sum(__global const float* x, __global float* sums, __local float* scratch) {
  size_t lid = get_local_id(0), n = get_local_size(0);
  scratch[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float total = 0.0f;
    for (size_t k = 0; k < n; ++k) total += scratch[k];
    sums[get_group_id(0)] = total;
  }
}
__kernel void add_one(__global int* data, int amount) { data[get_global_id(0)] += amount; }
"""


@pytest.fixture(scope="module")
def program(lib, device):
    handle = lib.aethercl_program_create(device.index, SOURCE.encode(), None)
    assert handle, lib.last_error()
    yield handle
    lib.aethercl_program_destroy(handle)


@pytest.fixture(scope="module")
def kernels(lib, program):
    made = {}
    for name in ("index3", "scalars", "block_sum", "add_one"):
        made[name] = lib.aethercl_kernel_create(program, name.encode())
        assert made[name], lib.last_error()
    yield made
    for handle in made.values():
        lib.aethercl_kernel_destroy(handle)


class Args:
    """An aethercl_arg array whose scalar storage lives as long as the object."""

    def __init__(self, *items):
        self.keep = []
        self.array = (AetherclArg * max(1, len(items)))()
        for i, (kind, size, value) in enumerate(items):
            if kind == SCALAR and value is not None and not isinstance(value, int):
                data = (ctypes.c_char * len(value)).from_buffer_copy(value)
                self.keep.append(data)
                value = ctypes.addressof(data)
            self.array[i] = AetherclArg(kind, size, value)
        self.count = len(items)


def sizes(*values):
    return (ctypes.c_size_t * len(values))(*values) if values else None


def launch(lib, index, kernel, global_size, local_size, args, num_args=None, work_dim=None,
           stream=None):
    work_dim = len(global_size) if work_dim is None else work_dim
    return lib.aethercl_launch(index, kernel, stream, work_dim,
                               sizes(*global_size) if global_size is not None else None,
                               sizes(*local_size) if local_size else None,
                               args.count if num_args is None else num_args, args.array)


def buffer_of(lib, index, array):
    handle = lib.check_handle("allocate_gpu_memory", index, max(1, array.nbytes))
    lib.check("write_host_to_gpu_blocking", index, handle, 0, array.nbytes, array.ctypes.data)
    return handle


def read(lib, index, handle, like):
    out = np.empty_like(like)
    lib.check("read_gpu_to_host_blocking", index, handle, 0, out.nbytes, out.ctypes.data)
    return out


@pytest.mark.parametrize("shape,local", [((37,), None), ((64,), (16,)), ((5, 7), None),
                                         ((8, 6), (4, 2)), ((3, 5, 7), None),
                                         ((4, 4, 2), (2, 2, 2))])
def test_index_kernel_in_one_two_and_three_dimensions(lib, device, kernels, shape, local):
    full = tuple(shape) + (1,) * (3 - len(shape))
    out = np.full(int(np.prod(shape)), -7, np.int32)
    handle = buffer_of(lib, device.index, out)
    args = Args((BUFFER, 0, handle), (SCALAR, 4, np.int32(1000).tobytes()))
    assert launch(lib, device.index, kernels["index3"], shape, local, args) == 1, lib.last_error()
    x, y, z = np.meshgrid(np.arange(full[0]), np.arange(full[1]), np.arange(full[2]), indexing="ij")
    expect = (1000 + x + 10 * y + 100 * z).transpose(2, 1, 0).reshape(-1)
    np.testing.assert_array_equal(read(lib, device.index, handle, out), expect)
    lib.free_gpu_memory(device.index, handle)


def test_scalars_of_every_size_arrive_exactly(lib, device, kernels):
    out = np.zeros(12, np.float64)
    handle = buffer_of(lib, device.index, out)
    values = [np.int8(-5), np.uint8(250), np.int16(-30000), np.uint16(65000), np.int32(-2**31),
              np.uint32(2**32 - 1), np.int64(-2**40), np.uint64(2**50 + 3), np.float32(1.5),
              np.float64(0.1), np.array([1, 2, 3, 4], np.float32), np.array([7, 8, 9, 0], np.int32)]
    args = Args((BUFFER, 0, handle), *[(SCALAR, v.nbytes, v.tobytes()) for v in values])
    assert launch(lib, device.index, kernels["scalars"], (1,), None, args) == 1, lib.last_error()
    got = read(lib, device.index, handle, out)
    expect = [-5, 250, -30000, 65000, -2**31, 2**32 - 1, -2**40, float(2**50 + 3), 1.5, 0.1, 10, 24]
    np.testing.assert_array_equal(got, np.array(expect, np.float64))
    lib.free_gpu_memory(device.index, handle)


@pytest.mark.parametrize("group", [1, 4, 16])
def test_local_memory_block_sums(lib, device, kernels, rng, group):
    x = rng.integers(-100, 100, 16 * group).astype(np.float32)  # integer sums: exact
    bx = buffer_of(lib, device.index, x)
    sums = np.full(16, np.nan, np.float32)
    bs = buffer_of(lib, device.index, sums)
    args = Args((BUFFER, 0, bx), (BUFFER, 0, bs), (LOCAL, 4 * group, None))
    assert launch(lib, device.index, kernels["block_sum"], (16 * group,), (group,), args) == 1, \
        lib.last_error()
    np.testing.assert_array_equal(read(lib, device.index, bs, sums), x.reshape(16, group).sum(1))
    for h in (bx, bs):
        lib.free_gpu_memory(device.index, h)


def test_a_zero_global_component_launches_nothing(lib, device, kernels):
    data = np.arange(8, dtype=np.int32)
    handle = buffer_of(lib, device.index, data)
    args = Args((BUFFER, 0, handle), (SCALAR, 4, np.int32(5).tobytes()))
    for shape in ((0,), (8, 0), (0, 0, 0)):
        assert launch(lib, device.index, kernels["add_one"], shape, None, args) == 1
        assert lib.last_error() == ""
    # the checks still run for zero work
    assert launch(lib, device.index, kernels["add_one"], (0,), None, args, num_args=1) == 0
    np.testing.assert_array_equal(read(lib, device.index, handle, data), data)
    lib.free_gpu_memory(device.index, handle)


def refusal_cases(lib, device, kernels, scratch, freed, foreign_type):
    """(case id, callable returning the launch result, status code, words in the message)."""
    index = device.index
    k_add, k_sum = kernels["add_one"], kernels["block_sum"]
    good = lambda: Args((BUFFER, 0, scratch), (SCALAR, 4, np.int32(1).tobytes()))  # noqa: E731
    info = json.loads(lib.json_call("aethercl_device_info", index))
    kinfo = json.loads(lib.json_call("aethercl_kernel_info", k_add))
    max_items = info["max_work_item_sizes"]
    return [
        ("kernel=NULL", lambda: launch(lib, index, None, (4,), None, good()), 1, "kernel is NULL"),
        ("kernel=buffer", lambda: launch(lib, index, scratch, (4,), None, good()), 2,
         "is a buffer handle, not a kernel"),
        ("kernel=never_issued", lambda: launch(lib, index, ((1 << 40) << 8) | 0xB2, (4,), None,
                                               good()), 2, "never issued"),
        ("stream=token", lambda: launch(lib, index, k_add, (4,), None, good(), stream=0xAE00), 2,
         "stream"),
        ("work_dim=0", lambda: launch(lib, index, k_add, (4,), None, good(), work_dim=0), 1,
         "work_dim = 0"),
        ("work_dim=4", lambda: launch(lib, index, k_add, (4, 1, 1, 1), None, good()), 1,
         "work_dim = 4"),
        ("global=NULL", lambda: launch(lib, index, k_add, None, None, good(), work_dim=1), 1,
         "global_size is NULL"),
        ("global_overflows", lambda: launch(lib, index, k_add, (2**40, 2**40), None, good()), 1,
         "global_size"),
        ("local=0", lambda: launch(lib, index, k_add, (4,), (0,), good()), 1, "local_size[0] is 0"),
        ("local_not_dividing", lambda: launch(lib, index, k_add, (10,), (4,), good()), 1,
         "not a multiple"),
        ("local_over_device_dim", lambda: launch(lib, index, k_add, (max_items[0] * 2,),
                                                 (max_items[0] * 2,), good()), 1, "local_size[0]"),
        ("local_over_kernel_limit", lambda: launch(
            lib, index, k_add, (kinfo["max_work_group_size"] * 2, 2),
            (kinfo["max_work_group_size"], 2), good()), 1, "work-group limit"),
        ("num_args=1", lambda: launch(lib, index, k_add, (4,), None, good(), num_args=1), 1,
         "takes 2 arguments"),
        ("num_args=-1", lambda: launch(lib, index, k_add, (4,), None, good(), num_args=-1), 1,
         "negative"),
        ("args=NULL", lambda: lib.aethercl_launch(index, k_add, None, 1, sizes(4), None, 2, None),
         1, "args is NULL"),
        ("kind=7", lambda: launch(lib, index, k_add, (4,), None,
                                  Args((7, 0, scratch), (SCALAR, 4, b"\0" * 4))), 1,
         "args[0].kind = 7"),
        ("scalar_for_buffer", lambda: launch(lib, index, k_add, (4,), None,
                                             Args((SCALAR, 4, b"\0" * 4), (SCALAR, 4, b"\0" * 4))),
         1, "args[0] is a scalar"),
        ("buffer_for_scalar", lambda: launch(lib, index, k_add, (4,), None,
                                             Args((BUFFER, 0, scratch), (BUFFER, 0, scratch))), 1,
         "args[1] is a buffer"),
        ("local_for_buffer", lambda: launch(lib, index, k_sum, (4,), None,
                                            Args((LOCAL, 16, None), (BUFFER, 0, scratch),
                                                 (LOCAL, 16, None))), 1, "args[0] is local"),
        ("buffer=NULL", lambda: launch(lib, index, k_add, (4,), None,
                                       Args((BUFFER, 0, None), (SCALAR, 4, b"\0" * 4))), 1,
         "args[0].value is NULL"),
        ("buffer=freed", lambda: launch(lib, index, k_add, (4,), None,
                                        Args((BUFFER, 0, freed), (SCALAR, 4, b"\0" * 4))), 2,
         "freed"),
        ("buffer=kernel_token", lambda: launch(lib, index, k_add, (4,), None,
                                               Args((BUFFER, 0, foreign_type),
                                                    (SCALAR, 4, b"\0" * 4))), 2,
         "is a kernel, not a buffer"),
        ("scalar_size=8", lambda: launch(lib, index, k_add, (4,), None,
                                         Args((BUFFER, 0, scratch), (SCALAR, 8, b"\0" * 8))), 1,
         "args[1].size = 8"),
        ("scalar_size=0", lambda: launch(lib, index, k_add, (4,), None,
                                         Args((BUFFER, 0, scratch), (SCALAR, 0, b"\0" * 4))), 1,
         "args[1].size is 0"),
        ("scalar_value=NULL", lambda: launch(lib, index, k_add, (4,), None,
                                             Args((BUFFER, 0, scratch), (SCALAR, 4, None))), 1,
         "args[1].value is NULL"),
        ("local_size=0", lambda: launch(lib, index, k_sum, (4,), None,
                                        Args((BUFFER, 0, scratch), (BUFFER, 0, scratch),
                                             (LOCAL, 0, None))), 1, "args[2].size is 0"),
        ("local_too_big", lambda: launch(lib, index, k_sum, (4,), None,
                                         Args((BUFFER, 0, scratch), (BUFFER, 0, scratch),
                                              (LOCAL, info["local_mem_bytes"] + 1, None))), 3,
         "local memory"),
        ("local_size_max", lambda: launch(lib, index, k_sum, (4,), None,
                                          Args((BUFFER, 0, scratch), (BUFFER, 0, scratch),
                                               (LOCAL, SIZE_MAX, None))), 3, "local memory"),
    ]


def test_refusals_name_the_argument_and_touch_nothing(lib, device, kernels):
    index = device.index
    data = np.arange(16, dtype=np.int32)
    scratch = buffer_of(lib, index, data)
    freed = lib.check_handle("allocate_gpu_memory", index, 16)
    lib.free_gpu_memory(index, freed)
    failures = []
    for case_id, call, code, words in refusal_cases(lib, device, kernels, scratch, freed,
                                                    kernels["index3"]):
        result = call()
        message = lib.last_error()
        if result != 0 or lib.last_error_code() != code or words not in message or \
                not message.startswith("aethercl_launch: "):
            failures.append(f"{case_id}: result {result}, code {lib.last_error_code()}, "
                            f"{message!r}")
    np.testing.assert_array_equal(read(lib, index, scratch, data), data)
    lib.free_gpu_memory(index, scratch)
    assert not failures, "\n".join(failures)


def test_image_parameters_are_not_launchable(lib, device):
    source = b"__kernel void img(__read_only image2d_t i, __global float* o) { o[0] = 1.0f; }"
    program = lib.aethercl_program_create(device.index, source, None)
    if not program:  # a device without images refuses the source itself
        assert lib.last_error_code() == 7
        return
    kernel = lib.aethercl_kernel_create(program, b"img")
    info = json.loads(lib.json_call("aethercl_kernel_info", kernel))
    assert info["args"][0]["kind"] == "unknown"
    out = lib.check_handle("allocate_gpu_memory", device.index, 4)
    args = Args((BUFFER, 0, out), (BUFFER, 0, out))
    assert launch(lib, device.index, kernel, (1,), None, args) == 0
    assert lib.last_error_code() == 9 and "image2d_t" in lib.last_error()
    lib.free_gpu_memory(device.index, out)
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(program)


def test_a_foreign_devices_kernel_and_buffers_are_refused():
    """PoCL can show its CPU twice (POCL_DEVICES), which gives two devices here."""
    code = r"""
import json, ctypes, os
from aethercl.abi import AetherclArg
if lib.aethercl_device_count() < 2:
    print(json.dumps({"devices": lib.aethercl_device_count()})); raise SystemExit(0)
assert lib.initialize_gpu(0) == 1 and lib.initialize_gpu(1) == 1
src = b"__kernel void k(__global int* o, int v) { o[get_global_id(0)] = v; }"
p1 = lib.aethercl_program_create(1, src, None); k1 = lib.aethercl_kernel_create(p1, b"k")
p0 = lib.aethercl_program_create(0, src, None); k0 = lib.aethercl_kernel_create(p0, b"k")
b0, b1 = lib.allocate_gpu_memory(0, 16), lib.allocate_gpu_memory(1, 16)
v = ctypes.c_int(3)
def go(kernel, buf):
    args = (AetherclArg * 2)(AetherclArg(0, 0, buf), AetherclArg(1, 4, ctypes.addressof(v)))
    return lib.aethercl_launch(0, kernel, None, 1, (ctypes.c_size_t * 1)(4), None, 2, args), lib.last_error()
out = {"devices": 2, "foreign_kernel": go(k1, b0), "foreign_buffer": go(k0, b1), "ok": go(k0, b0)}
out["convert"] = [lib.aethercl_convert(0, b1, 0, b0, 0, 4, None), lib.last_error()]
out["cl_mem"] = [lib.aethercl_cl_mem(0, b1), lib.last_error()]
print(json.dumps(out))
"""
    import os
    env_backup = dict(os.environ)
    os.environ.setdefault("POCL_DEVICES", "pthread pthread")
    os.environ.pop("AETHERCL_DEVICES", None)
    try:
        result = run_child(code)
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["devices"] < 2:
        pytest.fail("this test needs two OpenCL devices (PoCL gives two with POCL_DEVICES)")
    assert report["ok"] == [1, ""]
    assert report["foreign_kernel"][0] == 0 and "kernel" in report["foreign_kernel"][1] and \
        "belongs to device 1" in report["foreign_kernel"][1]
    assert report["foreign_buffer"][0] == 0 and "args[0].value" in report["foreign_buffer"][1] \
        and "belongs to device 1" in report["foreign_buffer"][1]
    assert report["convert"][0] == 0 and "belongs to device 1" in report["convert"][1]
    assert report["cl_mem"][0] is None and "belongs to device 1" in report["cl_mem"][1]


# Launches a kernel PoCL has never compiled and exits at once, the launch still queued.
EXIT_WITH_WORK_QUEUED = r"""
import numpy as np, aethercl
gpu = aethercl.Device(0)
program = gpu.compile('''
__kernel void busy(__global float* y, uint rounds) {
  float v = (float)get_global_id(0);
  for (uint r = 0; r < rounds; ++r) v = v * 1.0001f + sin(v) * cos(v + (float)r);
  y[get_global_id(0)] = v;
}''')
y = gpu.buffer(np.zeros(1 << 16, np.float32))
program.kernel("busy")(1 << 16, 64, y, np.uint32(200))
print("launched", flush=True)
"""


def test_exiting_with_work_still_queued_finishes_it_first(tmp_path, monkeypatch):
    # PoCL compiles a kernel for its work-group size on its worker threads when the launch runs.
    # A process that exited meanwhile tore LLVM down under that compilation: a segmentation fault
    # in about one exit in four with the submission thread (cold PoCL cache). The library now
    # finishes the queues from the main thread's exit, before any library is torn down.
    monkeypatch.setenv("AETHERCL_CACHE", "0")
    for submit in ("0", "1"):
        monkeypatch.setenv("AETHERCL_SUBMIT_THREAD", submit)
        for attempt in range(6):
            monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / f"pocl-{submit}-{attempt}"))
            result = run_child(EXIT_WITH_WORK_QUEUED)
            assert result.returncode == 0 and "launched" in result.stdout, (
                submit, attempt, result.returncode, result.stderr[-2000:])


def test_one_kernel_token_from_eight_threads(lib, device, kernels):
    """Each thread launches the shared add_one token on its own buffer with its own amount; a
    launch that saw another thread's arguments would add the wrong amount or to the wrong buffer."""
    index, kernel = device.index, kernels["add_one"]
    threads, rounds, n = 8, 40, 257
    handles = [buffer_of(lib, index, np.zeros(n, np.int32)) for _ in range(threads)]
    errors = []

    def work(t):
        try:
            for r in range(rounds):
                args = Args((BUFFER, 0, handles[t]), (SCALAR, 4, np.int32(t + 1).tobytes()))
                if launch(lib, index, kernel, (n,), None, args) != 1:
                    errors.append(lib.last_error())
        except Exception as error:  # noqa: BLE001
            errors.append(repr(error))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors[:3]
    for t, handle in enumerate(handles):
        got = read(lib, index, handle, np.zeros(n, np.int32))
        np.testing.assert_array_equal(got, np.full(n, rounds * (t + 1), np.int32))
        lib.free_gpu_memory(index, handle)


FAULT_CHILD = r"""
import ctypes, json, os, sys
from aethercl.abi import AetherclArg
assert lib.initialize_gpu(0) == 1
info = json.loads(lib.json_call("aethercl_device_info", 0))
print(json.dumps({"type": info["type"]}), flush=True)
src = b"__kernel void wild(__global int* p, ulong far) { p[far + get_global_id(0) * 4096] = 1; }"
kernel = lib.aethercl_kernel_create(lib.aethercl_program_create(0, src, None), b"wild")
buf = lib.allocate_gpu_memory(0, 16)
far = ctypes.c_ulong(1 << 40)
args = (AetherclArg * 2)(AetherclArg(0, 0, buf), AetherclArg(1, 8, ctypes.addressof(far)))
launched = lib.aethercl_launch(0, kernel, None, 1, (ctypes.c_size_t * 1)(1 << 16), None, 2, args)
synced = lib.aethercl_synchronize(0)
report = {"launched": launched, "synced": synced, "message": lib.last_error(),
          "code": lib.last_error_code()}
later = lib.allocate_gpu_memory(0, 16)
report["later_alloc"] = bool(later)
report["later_sync"] = lib.aethercl_synchronize(0)
print(json.dumps(report), flush=True)
"""


def test_a_faulting_kernel_is_reported_or_ends_only_its_own_process():
    """A kernel that writes far outside its buffer. A GPU runtime reports the fault at the next
    synchronising call (AETHERCL_DEVICE_ERROR naming the launch) and, where it can recover, later
    work runs; PoCL runs kernels in the calling process, so the fault is a signal in that process
    (docs/ARCHITECTURE.md says so). Either way the test process itself is unharmed."""
    result = run_child(FAULT_CHILD, timeout=300)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, result.stderr[-2000:]
    if result.returncode < 0 or len(lines) == 1:
        assert lines[0]["type"] == "cpu", "a GPU runtime must report a fault, not crash"
        return
    report = lines[1]
    assert report["launched"] == 1
    assert report["synced"] == 0, "the fault was not reported at the synchronising call"
    assert report["code"] in (8, 4) and report["message"].startswith("aethercl_synchronize: ")
    # later calls answer (work again, or keep reporting the lost context), they do not crash:
    # reaching this line with the report printed is the point
