"""Argument errors of the Python layer name the mistake (issue 29, part 3): a kernel called with
the wrong number of arguments or a value of the wrong kind for a parameter is refused in Python
with the count or the parameter's kind and type, and a dtype no buffer can hold is refused where
the buffer is made, before anything is allocated."""
import numpy as np
import pytest

import aethercl
from aethercl import AetherCLError, KernelArgumentError

SOURCE = """
__kernel void f(float a, __global float* x) { x[get_global_id(0)] = a; }
__kernel void g(__global float* out, __local float* scratch, uint n) {
  scratch[get_local_id(0)] = (float)n;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = scratch[0];
}
"""


@pytest.fixture(scope="module")
def dev(device):
    return aethercl.Device(device.index)


@pytest.fixture(scope="module")
def kernels(dev):
    with dev.compile(SOURCE) as program:
        yield program.kernel("f"), program.kernel("g")


def _refusal(kernel, *args) -> str:
    with pytest.raises(KernelArgumentError) as refused:
        kernel(4, None, *args)
    error = refused.value
    assert isinstance(error, TypeError) and isinstance(error, AetherCLError) and error.code == 1
    return str(error)


def test_the_argument_count_is_named(dev, kernels):
    f, _ = kernels
    x = dev.empty((4,))
    assert _refusal(f, 2.0, x, 3) == "kernel 'f' takes 2 arguments, got 3"
    assert _refusal(f, 2.0) == "kernel 'f' takes 2 arguments, got 1"


def test_the_kind_of_a_parameter_is_named(dev, kernels):
    f, g = kernels
    x = dev.empty((4,))
    assert _refusal(f, 2.0, 1.5) == "argument 1 of 'f' is a buffer (float*), got a float"
    assert _refusal(f, x, x) == "argument 0 of 'f' is a scalar (float), got a Buffer"
    host = _refusal(f, 2.0, np.zeros(4, np.float32))
    assert host.startswith("argument 1 of 'f' is a buffer (float*), got a NumPy array")
    assert "dev.from_numpy" in host
    assert _refusal(f, 2.0, aethercl.Local(16)).startswith(
        "argument 1 of 'f' is a buffer (float*), got local memory")
    local = _refusal(g, x, x, 4)
    assert local.startswith("argument 1 of 'g' is local memory (float*), got a Buffer")
    assert "aethercl.Local" in local
    assert "is None" in _refusal(f, None, x)
    assert "give 1 number, got a str" in _refusal(f, "2", x)


def test_right_arguments_still_launch(dev, kernels):
    f, g = kernels
    x = dev.empty((4,))
    f(4, None, 2.5, x)
    np.testing.assert_array_equal(x.read(), np.full(4, 2.5, np.float32))
    g(4, 4, x, aethercl.Local(4, np.float32), 7)
    np.testing.assert_array_equal(x.read(), np.full(4, 7.0, np.float32))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, object, "U3", "S2",
                                   "datetime64[s]", [("a", np.int32)]])
def test_dtypes_no_buffer_can_hold_are_refused_where_the_buffer_is_made(dev, dtype):
    live = dev.memory_stats()["live_buffers"]
    with pytest.raises(TypeError, match="a buffer cannot hold"):
        dev.empty((4,), dtype)
    with pytest.raises(TypeError, match="a buffer cannot hold"):
        dev.from_numpy(np.zeros(4, dtype))
    with pytest.raises(TypeError, match="a buffer cannot hold"):
        dev.buffer(size=4, dtype=dtype)
    assert dev.memory_stats()["live_buffers"] == live


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, aethercl.bfloat16,
                                   np.int8, np.uint16, np.int32, np.uint64, np.bool_])
def test_every_element_type_opencl_has_is_accepted(dev, dtype):
    with dev.empty((3,), dtype) as buffer:
        assert buffer.dtype == aethercl.dtypes.normalize(dtype)
