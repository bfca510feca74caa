"""User programs and kernels: building from source, SPIR-V and binaries, options, build logs, the
on-disk cache across processes, kernel descriptions, and the token rules of programs and kernels.
Results of the kernels run here are exact (integer arithmetic or single float additions)."""
import ctypes
import json
import os
import uuid

import numpy as np
import pytest

import aethercl
from aethercl import spirv
from support.helpers import run_child

SOURCE = """
__kernel void scale_add(__global const float* x, __global float* y, float alpha, uint n) {
  size_t i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i] + OFFSET;
}
__kernel void fill_index(__global int* out) { out[get_global_id(0)] = (int)get_global_id(0); }
"""
C_BUILD_FAILED, C_NOT_IMPLEMENTED, C_INVALID_ARGUMENT, C_INVALID_HANDLE = 7, 9, 1, 2


def build(lib, index, source=SOURCE, options=b"-DOFFSET=1.0f"):
    handle = lib.aethercl_program_create(index, source.encode(), options)
    assert handle, lib.last_error()
    return handle


def launch_scale_add(lib, index, kernel, n=37, alpha=2.0):
    x = np.arange(n, dtype=np.float32)
    bx = lib.check_handle("allocate_gpu_memory", index, x.nbytes)
    by = lib.check_handle("allocate_gpu_memory", index, x.nbytes)
    lib.check("write_host_to_gpu_blocking", index, bx, 0, x.nbytes, x.ctypes.data)
    from aethercl.abi import AetherclArg
    a, count = ctypes.c_float(alpha), ctypes.c_uint(n)
    args = (AetherclArg * 4)(AetherclArg(0, 0, bx), AetherclArg(0, 0, by),
                             AetherclArg(1, 4, ctypes.addressof(a)),
                             AetherclArg(1, 4, ctypes.addressof(count)))
    global_size = (ctypes.c_size_t * 1)(n)
    lib.check("aethercl_launch", index, kernel, None, 1, global_size, None, 4, args)
    out = np.empty(n, np.float32)
    lib.check("read_gpu_to_host_blocking", index, by, 0, out.nbytes, out.ctypes.data)
    lib.free_gpu_memory(index, bx)
    lib.free_gpu_memory(index, by)
    return x, out


def test_source_program_with_options_runs(lib, device):
    program = build(lib, device.index, options=b"-DOFFSET=0.25f")
    kernel = lib.aethercl_kernel_create(program, b"scale_add")
    assert kernel, lib.last_error()
    x, out = launch_scale_add(lib, device.index, kernel)
    np.testing.assert_array_equal(out, 2.0 * x + 0.25)
    assert lib.aethercl_kernel_destroy(kernel) == 1
    assert lib.aethercl_program_destroy(program) == 1


def test_build_failure_returns_null_with_the_compiler_log(lib, device):
    broken = "__kernel void broken(__global float* y) { y[0] = undeclared_variable; }"
    assert lib.aethercl_program_create(device.index, broken.encode(), None) is None
    message = lib.last_error()
    assert lib.last_error_code() == C_BUILD_FAILED
    assert message.startswith("aethercl_program_create: ") and "undeclared_variable" in message
    # options reach the compiler: a missing define is the same failure
    assert lib.aethercl_program_create(device.index, SOURCE.encode(), None) is None
    assert "OFFSET" in lib.last_error()
    assert lib.aethercl_program_create(device.index, SOURCE.encode(), b"-DOFFSET=1 -qqq-bogus") \
        is None and lib.last_error_code() == C_BUILD_FAILED


@pytest.mark.parametrize("source,words", [(None, "source is NULL"), (b"", "source is empty")])
def test_source_refusals(lib, device, source, words):
    assert lib.aethercl_program_create(device.index, source, None) is None
    assert lib.last_error_code() == C_INVALID_ARGUMENT and words in lib.last_error()


def test_binary_round_trip(lib, device):
    program = build(lib, device.index)
    size = lib.aethercl_program_binary(program, None, 0)
    assert size > 0, lib.last_error()
    small = ctypes.create_string_buffer(b"\x33" * 16, 16)
    assert lib.aethercl_program_binary(program, small, 15) == 0
    assert lib.last_error_code() == 3 and small.raw == b"\x33" * 16
    binary = ctypes.create_string_buffer(size)
    assert lib.aethercl_program_binary(program, binary, size) == size
    loaded = lib.aethercl_program_create_binary(device.index, binary, size, None)
    assert loaded, lib.last_error()
    kernel = lib.aethercl_kernel_create(loaded, b"scale_add")
    assert kernel, lib.last_error()
    x, out = launch_scale_add(lib, device.index, kernel)
    np.testing.assert_array_equal(out, 2.0 * x + 1.0)
    for handle, destroy in ((kernel, "aethercl_kernel_destroy"), (loaded, "aethercl_program_destroy"),
                            (program, "aethercl_program_destroy")):
        assert getattr(lib, destroy)(handle) == 1


@pytest.mark.parametrize("damage,words", [("truncate", "truncated"), ("flip", "corrupt"),
                                          ("identity", "another device")])
def test_damaged_binaries_are_refused_before_the_runtime_sees_them(lib, device, damage, words):
    program = build(lib, device.index)
    size = lib.aethercl_program_binary(program, None, 0)
    binary = ctypes.create_string_buffer(size)
    lib.aethercl_program_binary(program, binary, size)
    data = bytearray(binary.raw)
    assert data[:8] == b"AECLPRG1"
    if damage == "truncate":
        data = data[: size - 1]
    elif damage == "flip":
        data[size // 2] ^= 1
    else:
        data[8:40] = b"f" * 32
    assert lib.aethercl_program_create_binary(device.index, bytes(data), len(data), None) is None
    assert lib.last_error_code() == C_INVALID_ARGUMENT and words in lib.last_error()
    lib.aethercl_program_destroy(program)


def test_a_bare_vendor_binary_is_accepted(lib, device):
    """The payload after the 56-byte header is the runtime's own binary, loadable as it is."""
    program = build(lib, device.index)
    size = lib.aethercl_program_binary(program, None, 0)
    binary = ctypes.create_string_buffer(size)
    lib.aethercl_program_binary(program, binary, size)
    bare = binary.raw[56:]
    loaded = lib.aethercl_program_create_binary(device.index, bare, len(bare), None)
    assert loaded, lib.last_error()
    kernel = lib.aethercl_kernel_create(loaded, b"scale_add")
    x, out = launch_scale_add(lib, device.index, kernel)
    np.testing.assert_array_equal(out, 2.0 * x + 1.0)
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(loaded)
    lib.aethercl_program_destroy(program)


@pytest.mark.parametrize("case", ["NULL", "size=0", "garbage"])
def test_binary_refusals(lib, device, case):
    junk = ctypes.create_string_buffer(bytes(range(256)) * 4)
    data, size = {"NULL": (None, 16), "size=0": (junk, 0), "garbage": (junk, 1024)}[case]
    assert lib.aethercl_program_create_binary(device.index, data, size, None) is None
    assert lib.last_error_code() == (C_BUILD_FAILED if case == "garbage" else C_INVALID_ARGUMENT)
    assert lib.last_error().startswith("aethercl_program_create_binary: ")


def test_spirv_builds_where_the_device_takes_il_and_is_refused_elsewhere(lib, device):
    """Debian's clang + llvm-spirv make the module; a device that reports an IL version must
    build and run it, any other must refuse with AETHERCL_NOT_IMPLEMENTED naming what it lacks."""
    try:
        module = spirv.compile_to_spirv(SOURCE, ["-DOFFSET=1.0f"])
    except aethercl.spirv.SpirvToolsMissing as missing:
        if os.environ.get("CI"):  # CI installs the tools (tools/aethercl setup): never skipped there
            raise
        pytest.skip(str(missing))
    assert module[:4] == b"\x03\x02\x23\x07"
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    program = lib.aethercl_program_create_il(device.index, module, len(module), None)
    if "SPIR-V" in info["il_version"]:
        assert program, lib.last_error()
        kernel = lib.aethercl_kernel_create(program, b"scale_add")
        x, out = launch_scale_add(lib, device.index, kernel)
        np.testing.assert_array_equal(out, 2.0 * x + 1.0)
        lib.aethercl_kernel_destroy(kernel)
        lib.aethercl_program_destroy(program)
    else:
        assert program is None
        assert lib.last_error_code() == C_NOT_IMPLEMENTED
        assert "intermediate language" in lib.last_error() or "IL" in lib.last_error()


@pytest.mark.parametrize("case", ["NULL", "short", "not_multiple_of_4", "bad_magic"])
def test_il_refusals(lib, device, case):
    module = b"\x03\x02\x23\x07" + bytes(60)
    data, size, words = {"NULL": (None, 64, "il is NULL"), "short": (module, 16, "size 16"),
                         "not_multiple_of_4": (module, 62, "size 62"),
                         "bad_magic": (b"\x7fELF" + bytes(60), 64, "not SPIR-V")}[case]
    assert lib.aethercl_program_create_il(device.index, data, size, None) is None
    assert lib.last_error_code() == C_INVALID_ARGUMENT and words in lib.last_error()


CACHE_CHILD = r"""
import json, os
assert lib.initialize_gpu(0) == 1
source = os.environ["SOURCE"].encode()
program = lib.aethercl_program_create(0, source, b"-DOFFSET=3.0f")
assert program, lib.last_error()
kernel = lib.aethercl_kernel_create(program, b"scale_add")
info = json.loads(lib.json_call("aethercl_kernel_info", kernel))
stats = json.loads(lib.json_call("aethercl_memory_stats", 0))
import ctypes
wide = ctypes.c_double(1.0)
from aethercl.abi import AetherclArg
args = (AetherclArg * 4)()
lib.aethercl_launch(0, kernel, None, 1, (ctypes.c_size_t * 1)(1), None, 4, args)
refused = lib.last_error()
print(json.dumps({"builds": stats["user_program_builds"], "hits": stats["user_program_cache_hits"],
                  "arg_info": info["arg_info"], "types": [a["type"] for a in info["args"]],
                  "refused": refused}))
"""


def test_second_process_loads_the_program_from_the_disk_cache(tmp_path):
    env_backup = dict(os.environ)
    os.environ["AETHERCL_CACHE_DIR"] = str(tmp_path)
    os.environ["AETHERCL_CACHE"] = "1"  # on PoCL devices too (off there by default)
    os.environ["SOURCE"] = SOURCE + f"// {uuid.uuid4()}\n"
    try:
        reports = []
        for _ in range(2):
            result = run_child(CACHE_CHILD)
            assert result.returncode == 0, result.stderr[-3000:]
            reports.append(json.loads(result.stdout.strip().splitlines()[-1]))
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    first, second = reports
    assert (first["builds"], first["hits"]) == (1, 0)
    assert (second["builds"], second["hits"]) == (0, 1)
    # the cached binary keeps what launches check: argument types
    assert first["arg_info"] and second["arg_info"]
    assert second["types"] == first["types"] == ["float*", "float*", "float", "uint"]
    assert "args[0]" in second["refused"]
    assert any(name.endswith(".bin") for name in os.listdir(tmp_path))


KINDS_SOURCE = """
typedef struct { float a; int b; } pair_t;
__kernel void kinds(__global float* g, __constant float* c, __local float* l, float f, uint4 v,
                    ulong u, short s, char3 h, pair_t p, __global const int* restrict r) {
  l[get_local_id(0)] = f;
  barrier(CLK_LOCAL_MEM_FENCE);
  g[get_global_id(0)] = l[0] + c[0] + (float)v.x + (float)u + (float)s + (float)p.b + r[0];
}
"""


def test_kernel_info_describes_every_parameter(lib, device):
    program = lib.aethercl_program_create(device.index, KINDS_SOURCE.encode(), None)
    assert program, lib.last_error()
    kernel = lib.aethercl_kernel_create(program, b"kinds")
    assert kernel, lib.last_error()
    info = json.loads(lib.json_call("aethercl_kernel_info", kernel))
    device_info = json.loads(lib.json_call("aethercl_device_info", device.index))
    assert info["name"] == "kinds" and info["num_args"] == 10 and info["arg_info"] is True
    kinds = [a["kind"] for a in info["args"]]
    assert kinds == ["buffer", "buffer", "local", "scalar", "scalar", "scalar", "scalar", "scalar",
                     "scalar", "buffer"]
    assert [a["index"] for a in info["args"]] == list(range(10))
    assert [a["name"] for a in info["args"]][:4] == ["g", "c", "l", "f"]
    sizes = [a["size"] for a in info["args"]]
    assert sizes[3:8] == [4, 16, 8, 2, 4]  # a 3-vector takes the room of 4 lanes
    assert sizes[8] is None  # a struct: size unknown, any size is passed on
    assert 1 <= info["max_work_group_size"] <= device_info["max_work_group_size"]
    assert info["local_mem_bytes"] >= 0
    # the buffer-rule contract of JSON calls
    buffer = ctypes.create_string_buffer(b"\x77" * 8, 8)
    full = lib.aethercl_kernel_info(kernel, None, 0)
    assert lib.aethercl_kernel_info(kernel, buffer, 1) == full > 0
    assert buffer.raw == b"\x00" + b"\x77" * 7
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(program)


def test_kernel_create_refusals(lib, device):
    program = build(lib, device.index)
    assert lib.aethercl_kernel_create(program, b"no_such_kernel") is None
    message = lib.last_error()
    assert lib.last_error_code() == C_INVALID_ARGUMENT
    assert "no_such_kernel" in message and "scale_add" in message and "fill_index" in message
    assert lib.aethercl_kernel_create(program, None) is None and "name is NULL" in lib.last_error()
    lib.aethercl_program_destroy(program)


def test_program_destroy_leaves_its_kernels_usable(lib, device):
    program = build(lib, device.index)
    kernel = lib.aethercl_kernel_create(program, b"scale_add")
    assert lib.aethercl_program_destroy(program) == 1
    x, out = launch_scale_add(lib, device.index, kernel)
    np.testing.assert_array_equal(out, 2.0 * x + 1.0)
    assert lib.aethercl_kernel_create(program, b"scale_add") is None
    assert "destroyed" in lib.last_error()
    lib.aethercl_kernel_destroy(kernel)


def test_tokens_of_the_wrong_type_or_age_are_refused_by_name(lib, device):
    program = build(lib, device.index)
    kernel = lib.aethercl_kernel_create(program, b"fill_index")
    buffer = lib.check_handle("allocate_gpu_memory", device.index, 16)
    checks = [
        (lambda: lib.aethercl_program_destroy(kernel), "is a kernel, not a program"),
        (lambda: lib.aethercl_kernel_destroy(program), "is a program, not a kernel"),
        (lambda: lib.aethercl_kernel_create(buffer, b"x"), "is a buffer handle, not a program"),
        (lambda: lib.aethercl_kernel_info(buffer, None, 0), "is a buffer handle, not a kernel"),
        (lambda: lib.aethercl_program_binary(((1 << 40) << 8) | 0xB1, None, 0), "never issued"),
        (lambda: lib.aethercl_program_destroy(0x1234), "is not a program handle"),
        (lambda: lib.aethercl_kernel_destroy(None), "kernel is NULL"),
        (lambda: lib.write_host_to_gpu_blocking(device.index, kernel, 0, 4, b"abcd"),
         "is a kernel, not a buffer handle"),
    ]
    for call, words in checks:
        assert not call()
        assert words in lib.last_error(), lib.last_error()
    assert lib.aethercl_kernel_destroy(kernel) == 1
    assert lib.aethercl_kernel_destroy(kernel) == 0 and "destroyed" in lib.last_error()
    assert lib.aethercl_program_destroy(program) == 1
    lib.free_gpu_memory(device.index, buffer)


def test_programs_and_kernels_count_in_memory_statistics(lib, device):
    before = json.loads(lib.json_call("aethercl_memory_stats", device.index))
    program = build(lib, device.index)
    kernel = lib.aethercl_kernel_create(program, b"fill_index")
    during = json.loads(lib.json_call("aethercl_memory_stats", device.index))
    assert during["user_programs"] == before["user_programs"] + 1
    assert during["user_kernels"] == before["user_kernels"] + 1
    lib.aethercl_kernel_destroy(kernel)
    lib.aethercl_program_destroy(program)
    after = json.loads(lib.json_call("aethercl_memory_stats", device.index))
    assert (after["user_programs"], after["user_kernels"]) == \
        (before["user_programs"], before["user_kernels"])


SHUTDOWN_CHILD = r"""
import json
assert lib.initialize_gpu(0) == 1
program = lib.aethercl_program_create(0, b"__kernel void k(__global int* o) { o[0] = 1; }", None)
kernel = lib.aethercl_kernel_create(program, b"k")
lib.shutdown_driver()
after = [lib.aethercl_kernel_info(kernel, None, 0), lib.last_error_code()]
assert lib.initialize_gpu(0) == 1
stale = [lib.aethercl_kernel_create(program, b"k"), lib.last_error()]
print(json.dumps({"after": after, "stale": stale}))
"""


def test_shutdown_releases_programs_and_their_tokens_stay_dead():
    result = run_child(SHUTDOWN_CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["after"] == [0, 5]
    assert report["stale"][0] is None and "destroyed" in report["stale"][1]
