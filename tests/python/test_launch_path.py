"""Structure of the launch path: every kernel launch of the driver goes through one function
(runtime/launch.cpp: submit_launch), and kernels' work-group limits are queried once per kernel
(runtime/program_cache.cpp; runtime/program/user_kernel.cpp for user kernels), never per call. A grep over driver/ keeps it that way."""
from pathlib import Path

DRIVER = Path(__file__).resolve().parents[2] / "driver"

ONLY_IN = {
    "clEnqueueNDRangeKernel": {"runtime/launch.cpp"},
    # A graph's command buffer binds each recorded launch to a kernel object of its own, once
    # (runtime/graph_command_buffer.cpp says why); every other binding goes through launch.cpp.
    "clSetKernelArg": {"runtime/launch.cpp", "runtime/graph_command_buffer.cpp"},
    # once per kernel: the program cache's kernels, and a user kernel when its token is created
    "clGetKernelWorkGroupInfo": {"runtime/program_cache.cpp", "runtime/program/user_kernel.cpp"},
}


def _files_calling(name):
    found = set()
    for path in DRIVER.rglob("*"):
        if path.suffix in (".cpp", ".h") and f"{name}(" in path.read_text():
            found.add(path.relative_to(DRIVER).as_posix())
    return found


def test_one_place_calls_each_launch_function():
    for name, allowed in ONLY_IN.items():
        assert _files_calling(name) == allowed, name
