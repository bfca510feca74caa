"""Interop: the cl_context, cl_command_queue and cl_mem behind the driver work with plain OpenCL
calls (libOpenCL through ctypes, as PyOpenCL or CLBlast would use them), and work enqueued on the
returned queue is ordered with the driver's own. CLBlast on the driver's buffers is the C example
tools/examples/clblast_sgemm.c (ctest example_clblast_sgemm)."""
import ctypes
import ctypes.util

import numpy as np
import pytest

CL_MEM_SIZE = 0x1102
CL_MEM_CONTEXT = 0x1106
CL_QUEUE_CONTEXT = 0x1090
CL_CONTEXT_REFERENCE_COUNT = 0x1080


@pytest.fixture(scope="module")
def opencl():
    library = ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
    library.clGetMemObjectInfo.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t,
                                           ctypes.c_void_p, ctypes.c_void_p]
    library.clGetCommandQueueInfo.argtypes = library.clGetMemObjectInfo.argtypes
    library.clGetContextInfo.argtypes = library.clGetMemObjectInfo.argtypes
    library.clEnqueueFillBuffer.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
    return library


def info_pointer(function, handle, what):
    value = ctypes.c_void_p()
    assert function(handle, what, ctypes.sizeof(value), ctypes.byref(value), None) == 0
    return value.value


def test_the_objects_belong_together(lib, device, opencl):
    index = device.index
    context = lib.aethercl_cl_context(index)
    queue = lib.aethercl_cl_queue(index, None)
    handle = lib.check_handle("allocate_gpu_memory", index, 1000)
    mem = lib.aethercl_cl_mem(index, handle)
    assert context and queue and mem, lib.last_error()
    assert info_pointer(opencl.clGetCommandQueueInfo, queue, CL_QUEUE_CONTEXT) == context
    assert info_pointer(opencl.clGetMemObjectInfo, mem, CL_MEM_CONTEXT) == context
    size = ctypes.c_size_t()
    assert opencl.clGetMemObjectInfo(mem, CL_MEM_SIZE, ctypes.sizeof(size), ctypes.byref(size),
                                     None) == 0
    assert size.value >= 1000  # pooled: may be larger than the allocation
    count = ctypes.c_uint()
    assert opencl.clGetContextInfo(context, CL_CONTEXT_REFERENCE_COUNT, 4, ctypes.byref(count),
                                   None) == 0 and count.value >= 1
    lib.free_gpu_memory(index, handle)


def test_work_on_the_queue_is_ordered_with_the_drivers(lib, device, opencl):
    """driver write -> OpenCL fill of the middle -> driver add -> driver read."""
    index, n = device.index, 64
    data = np.arange(n, dtype=np.float32)
    handle = lib.check_handle("allocate_gpu_memory", index, data.nbytes)
    lib.check("write_host_to_gpu_blocking", index, handle, 0, data.nbytes, data.ctypes.data)
    pattern = ctypes.c_float(-3.0)
    queue = lib.aethercl_cl_queue(index, None)
    assert opencl.clEnqueueFillBuffer(queue, lib.aethercl_cl_mem(index, handle),
                                      ctypes.byref(pattern), 4, 16 * 4, 32 * 4, 0, None, None) == 0
    lib.check("execute_add_on_gpu", index, handle, handle, handle, n)
    out = np.empty(n, np.float32)
    lib.check("read_gpu_to_host_blocking", index, handle, 0, out.nbytes, out.ctypes.data)
    expect = data.copy()
    expect[16:48] = -3.0
    np.testing.assert_array_equal(out, 2 * expect)
    lib.free_gpu_memory(index, handle)


@pytest.mark.parametrize("function,args,code,words", [
    ("aethercl_cl_queue", (0x12345600 | 0xB2,), 2, "stream"),
    ("aethercl_cl_mem", (None,), 1, "buffer is NULL"),
    ("aethercl_cl_mem", (((1 << 40) << 8) | 0xAE,), 2, "never issued"),
])
def test_refusals(lib, device, function, args, code, words):
    assert getattr(lib, function)(device.index, *args) is None
    assert lib.last_error_code() == code and words in lib.last_error()
    assert lib.last_error().startswith(function + ": ")


def test_a_freed_buffer_has_no_cl_mem(lib, device):
    handle = lib.check_handle("allocate_gpu_memory", device.index, 16)
    lib.free_gpu_memory(device.index, handle)
    assert lib.aethercl_cl_mem(device.index, handle) is None and "freed" in lib.last_error()


SUBMIT_CHILD = r"""
import json
assert lib.initialize_gpu(0) == 1
before = json.loads(lib.json_call("aethercl_memory_stats", 0))["submission_thread"]
h = lib.allocate_gpu_memory(0, 16)
lib.execute_add_on_gpu(0, h, h, h, 4)
queue = lib.aethercl_cl_queue(0, None)
after = json.loads(lib.json_call("aethercl_memory_stats", 0))["submission_thread"]
again = lib.aethercl_cl_queue(0, None)
print(json.dumps({"before": before, "after": after, "same": queue == again and bool(queue)}))
"""


def test_handing_out_a_queue_stops_the_submission_thread():
    """With a submission thread, work the driver recorded but has not enqueued yet could be
    overtaken by what the caller enqueues on the queue; so handing out a queue drains the thread
    and turns it off (forced on here: PoCL runs without it by default)."""
    import json as json_module
    import os
    from support.helpers import run_child
    env_backup = dict(os.environ)
    os.environ["AETHERCL_SUBMIT_THREAD"] = "1"
    try:
        result = run_child(SUBMIT_CHILD)
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json_module.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"before": True, "after": False, "same": True}
