"""Launch capture (AETHERCL_CAPTURE_DIR) and its replay tool (tools/gpu/replay_launch.py).

Captures are taken in child processes, since the library reads the variables once. On PoCL the
program binary is not PTX: the capture is still written (arguments classified from the kernel's
argument info), and the replay tool refuses it; the replay's planning is checked on a capture
with PTX written here, the form NVIDIA's compiler emits."""
import ctypes
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import run_child

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "tools" / "gpu" / "replay_launch.py"

# A user kernel with two buffers, a float and a uint, launched three times, and one with a
# __local argument, launched once.
CHILD = r"""
import numpy as np, aethercl
gpu = aethercl.Device(0)
program = gpu.compile('''
__kernel void scale(__global const float* x, __global float* y, float alpha, uint n) {
  size_t i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i];
}
__kernel void staged(__global float* y, __local float* scratch) {
  scratch[get_local_id(0)] = 1.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  y[get_global_id(0)] = scratch[get_local_id(0)];
}
''')
scale, staged = program.kernel("scale"), program.kernel("staged")
x = gpu.buffer(np.arange(100, dtype=np.float32))
y = gpu.buffer(np.zeros(128, np.float32))
for alpha in (2.0, 3.0, 4.0):
    scale(128, 32, x, y, np.float32(alpha), np.uint32(100))
staged(128, 32, y, aethercl.Local(32, np.float32))
gpu.wait()
print("ok", y.read()[:3].tolist())
"""


def capture(monkeypatch, directory, **variables):
    monkeypatch.setenv("AETHERCL_CAPTURE_DIR", str(directory))
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    result = run_child(CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok [1.0, 1.0, 1.0]" in result.stdout
    return result


def test_a_capture_names_the_kernel_its_geometry_and_every_argument(tmp_path, monkeypatch):
    capture(monkeypatch, tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    # The first launch of each kernel (the default limit), and one program file for both.
    assert [f for f in files if f.endswith(".json")] == ["scale-0.json", "staged-0.json"], files
    programs = [f for f in files if f.startswith("program-")]
    assert len(programs) == 1, files
    record = json.loads((tmp_path / "scale-0.json").read_text())
    assert record["kernel"] == "scale"
    assert record["entry_point"] == "aethercl_launch"
    assert record["binary"] == programs[0]
    assert (tmp_path / record["binary"]).stat().st_size > 0
    assert record["global"] == [128] and record["local"] == [32]
    x, y, alpha, n = record["args"]
    assert x["kind"] == y["kind"] == "buffer"
    assert x["bytes"] >= 400 and y["bytes"] >= 512
    assert alpha == {"kind": "scalar", "size": 4, "hex": "00000040"}
    assert n == {"kind": "scalar", "size": 4, "hex": "64000000"}
    staged = json.loads((tmp_path / "staged-0.json").read_text())
    assert staged["args"][0]["kind"] == "buffer"
    assert staged["args"][1] == {"kind": "local", "bytes": 128}


def test_the_kernel_filter_and_the_limit(tmp_path, monkeypatch):
    capture(monkeypatch, tmp_path, AETHERCL_CAPTURE_KERNELS="sca, nothing",
            AETHERCL_CAPTURE_LIMIT="2")
    names = sorted(p.name for p in tmp_path.glob("*.json"))
    assert names == ["scale-0.json", "scale-1.json"], names
    second = json.loads((tmp_path / "scale-1.json").read_text())
    assert second["args"][2]["hex"] == "00004040"  # the second launch's alpha, 3.0


def test_an_unwritable_directory_never_fails_a_launch(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = capture(monkeypatch, blocker / "captures")
    assert result.stderr.count("AETHERCL_CAPTURE_DIR") == 1, result.stderr[-2000:]


def test_a_malformed_limit_warns_and_keeps_the_default(tmp_path, monkeypatch):
    result = capture(monkeypatch, tmp_path, AETHERCL_CAPTURE_LIMIT="many")
    assert "AETHERCL_CAPTURE_LIMIT" in result.stderr
    assert sorted(p.name for p in tmp_path.glob("scale-*.json")) == ["scale-0.json"]


def replay(*args):
    return subprocess.run([sys.executable, str(REPLAY), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_replay_plans_ptx_captures_and_refuses_others(tmp_path, monkeypatch):
    # NVIDIA devices give PTX, which the replay plans; other devices' binaries are refused.
    capture(monkeypatch, tmp_path)
    record = json.loads((tmp_path / "scale-0.json").read_text())
    result = replay(tmp_path / "scale-0.json", "--plan")
    if record["binary_format"] == "ptx":
        assert result.returncode == 0, result.stderr
        assert "scale grid [4, 1, 1] block [32, 1, 1]" in result.stdout
    else:
        assert result.returncode == 1
        assert "not PTX" in result.stderr


PTX = """//
// Generated by NVIDIA NVVM Compiler
.version 8.8
.target sm_90
.address_size 64

.visible .entry scale(
\t.param .u64 .ptr .global .align 4 scale_param_0,
\t.param .u64 .ptr .global .align 4 scale_param_1,
\t.param .f32 scale_param_2,
\t.param .u32 scale_param_3
)
.reqntid 32, 1, 1
{
\tret;
}
"""


def write_ptx_capture(directory, args, local=(32,)):
    (directory / "program-x.ptx").write_text(PTX)
    record = {"kernel": "scale", "entry_point": "aethercl_launch", "device": "NVIDIA H100",
              "binary": "program-x.ptx", "binary_format": "ptx", "global": [128],
              "local": list(local) if local else None, "args": args}
    path = directory / "scale-0.json"
    path.write_text(json.dumps(record))
    return path


GOOD_ARGS = [{"kind": "buffer", "bytes": 400}, {"kind": "buffer", "bytes": 512},
             {"kind": "scalar", "size": 4, "hex": "00000040"},
             {"kind": "scalar", "size": 4, "hex": "64000000"}]


def replay_module():
    spec = importlib.util.spec_from_file_location("replay_launch", REPLAY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_replay_plans_a_ptx_capture(tmp_path):
    result = replay(write_ptx_capture(tmp_path, GOOD_ARGS), "--plan")
    assert result.returncode == 0, result.stderr
    assert ("scale grid [4, 1, 1] block [32, 1, 1] (buffer 400 B, buffer 512 B, 0x40000000, "
            "0x00000064)") in result.stdout


def test_replay_sets_opencls_launch_registers(tmp_path):
    # NVIDIA's OpenCL PTX reads group and global offsets, group counts and the work dimensions
    # from %envreg registers, which CUDA leaves undefined; the replayed module reads what OpenCL
    # would have set for the captured grid (4 groups in one dimension), and the tool says so.
    path = write_ptx_capture(tmp_path, GOOD_ARGS)
    reads = "".join(f"\tmov.b32 %r{i}, %envreg{i};\n" for i in (0, 3, 6, 7, 9))
    (tmp_path / "program-x.ptx").write_text(PTX.replace("\tret;", reads + "\tret;"))
    result = replay(path, "--plan")
    assert result.returncode == 0, result.stderr
    assert "%envreg0, %envreg3, %envreg6, %envreg7, %envreg9 (OpenCL's launch registers)" in \
        result.stdout
    ptx = replay_module().plan(path)["ptx"]
    assert "%envreg" not in ptx
    for register, value in ((0, 0), (3, 0), (6, 4), (7, 1), (9, 1)):
        assert f"mov.b32 %r{register}, {value};" in ptx, register


def test_replay_keeps_only_what_cuda_loads(tmp_path):
    # Programs built with argument info end in a .metadata_section, and a kernel with a __local
    # argument has a .shared pointer parameter: CUDA's JIT refuses either as an invalid image.
    # The replayed module is the captured kernel's PTX without them (and without trailing NULs).
    path = write_ptx_capture(tmp_path, GOOD_ARGS)
    staged = ("\t// .globl\tstaged\n.entry staged(\n"
              "\t.param .u64 .ptr .global .align 4 staged_param_0,\n"
              "\t.param .u64 .ptr .shared .align 4 staged_param_1\n"
              ")\n{\n\tbar.sync \t0;\n\tret;\n\n}\n")
    metadata = ('.metadata_section {\n\n.metadata 0 {\n\t"cl_kernel_arg_addr_space",\n\t"global"'
                '\n}\n} // end of .metadata_section\n\n\0\0')
    (tmp_path / "program-x.ptx").write_text(PTX + staged + metadata)
    ptx = replay_module().plan(path)["ptx"]
    assert ptx.startswith(PTX) and "\0" not in ptx
    assert ptx[len(PTX):].split() == ["//", ".globl", "staged", "//", "end", "of",
                                       ".metadata_section"]


def test_replay_refuses_what_it_cannot_pass(tmp_path):
    cases = [
        (GOOD_ARGS[:3], "4 parameters, the capture 3"),
        ([{"kind": "unknown", "size": 8, "hex": "00" * 8}] + GOOD_ARGS[1:], "not replayable"),
        ([GOOD_ARGS[0], GOOD_ARGS[2], GOOD_ARGS[1], GOOD_ARGS[3]], "not replayable"),
        ([{"kind": "local", "bytes": 64}] + GOOD_ARGS[1:], "not replayable"),
    ]
    for args, message in cases:
        result = replay(write_ptx_capture(tmp_path, args), "--plan")
        assert result.returncode == 1 and message in result.stderr, (args, result.stderr)
    result = replay(write_ptx_capture(tmp_path, GOOD_ARGS, local=None), "--plan")
    assert result.returncode == 1 and "picked the work-group size" in result.stderr
    result = replay(write_ptx_capture(tmp_path, GOOD_ARGS, local=(48,)), "--plan")
    assert result.returncode == 1 and "not a multiple" in result.stderr


def cuda_driver_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_replay_runs_an_nvidia_capture_with_its_arguments(tmp_path, monkeypatch, lib, device):
    # Where the device is NVIDIA's and the CUDA driver is installed: the captured PTX loads as a
    # CUDA module and runs with the captured scalars (alpha 2.0 over n = 100 elements of ones).
    info = json.loads(lib.json_call("aethercl_device_info", device.index))
    if "NVIDIA" not in info["vendor"].upper() or not cuda_driver_loads():
        pytest.skip("replay needs an NVIDIA device (PTX) and libcuda.so.1")
    capture(monkeypatch, tmp_path)
    result = replay(tmp_path / "scale-0.json", "--reps", "3", "--expect", "1=2.0:100")
    assert result.returncode == 0, result.stderr
    assert "us per launch" in result.stdout
