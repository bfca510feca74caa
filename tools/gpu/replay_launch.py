"""Replays a kernel launch captured with AETHERCL_CAPTURE_DIR through the CUDA driver, so that
Nsight Compute can profile this library's OpenCL kernels (ncu does not attach to OpenCL launches):

    AETHERCL_CAPTURE_DIR=cap AETHERCL_CAPTURE_KERNELS=gemm_mma \\
        tools/aethercl bench gemm --sizes --shapes 128x4096x4096 --modes tf32 --no-clblast
    ncu --set full python3 tools/gpu/replay_launch.py cap/gemm_mma_product-0.json
    python3 tools/gpu/replay_launch.py cap/gemm_mma_product-0.json --reps 20   # times it
    python3 tools/gpu/replay_launch.py cap/*.json --plan     # what would run; no GPU needed

The captured PTX is loaded as a CUDA module, each buffer is allocated at its captured size and
filled with one 32-bit pattern (default 1.0f), scalars are passed as captured, and the grid is the
captured global size over the work-group size. Only PTX captures (NVIDIA devices) replay; a launch
with __local arguments, arguments the capture could not classify, or no work-group size is refused.
Exit status: 0 when every launch ran (or was planned), 1 otherwise.
"""
import argparse
import ctypes
import json
import re
import struct
import sys
from pathlib import Path

PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s*(\.ptr\b[^,]*?)?\s*([\w$]+)"
                   r"(?:\s*\[(\d+)\])?\s*$")
# NVIDIA's OpenCL driver sets %envreg registers at a launch, which a CUDA launch leaves undefined.
# Read off the PTX of one kernel per work-item function (driver 580): 0-2 the group-id offsets of a
# grid split into several CUDA launches, 3-5 the global work offset, 6-8 the number of groups per
# dimension (get_num_groups), 9 the work dimensions. A replayed grid is one launch without offset.
ENVREG = re.compile(r"%envreg(\d+)")
METADATA = re.compile(r"^\.metadata_section\s*\{", re.M)
ENTRY = re.compile(r"^[ \t]*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(", re.M)
TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4,
              "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


class ReplayError(Exception):
    pass


def block_end(text: str, open_brace: int) -> int:
    """The index just past the brace that closes the one at open_brace."""
    depth = 0
    for index in range(open_brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    raise ReplayError("unbalanced braces in the PTX")


def module_text(ptx: str, kernel: str) -> str:
    """The PTX as CUDA's JIT takes it, which refuses NVIDIA's OpenCL PTX as an invalid image
    otherwise: without the trailing NULs of a program binary, the .metadata_section (kernel
    argument info) appended to it, and the program's other kernels (a __local argument is a
    .shared pointer parameter, which a CUDA kernel cannot have)."""
    ptx = ptx.rstrip("\0")
    cuts = []
    found = METADATA.search(ptx)
    if found:
        cuts.append((found.start(), block_end(ptx, found.end() - 1)))
    for entry in ENTRY.finditer(ptx):
        if entry.group(1) != kernel:
            body = ptx.find("{", ptx.find(")", entry.end()))
            cuts.append((entry.start(), block_end(ptx, body)))
    for start, end in sorted(cuts, reverse=True):
        ptx = ptx[:start] + ptx[end:]
    return ptx


def with_launch_registers(ptx: str, grid: list, dimensions: int) -> str:
    """The PTX with each %envreg read replaced by the value OpenCL's driver would have set."""
    def value(match):
        index = int(match.group(1))
        if 6 <= index <= 8:
            return str(grid[index - 6])
        return str(dimensions) if index == 9 else "0"
    return ENVREG.sub(value, ptx)


def entry_params(ptx: str, kernel: str) -> list:
    """(bytes, is_pointer) of each parameter of `kernel`'s .entry, in order."""
    match = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\((.*?)\)", ptx, re.S)
    if not match:
        raise ReplayError(f"the PTX has no .entry {kernel}")
    params = []
    for text in (p.strip() for p in match.group(1).split(",")):
        if not text:
            continue
        found = PARAM.match(text)
        if not found or found.group(1) not in TYPE_BYTES:
            raise ReplayError(f"unrecognised PTX parameter: {text!r}")
        count = int(found.group(4) or 1)
        params.append((TYPE_BYTES[found.group(1)] * count, found.group(2) is not None))
    return params


def plan(capture_path: Path) -> dict:
    """The launch a capture describes, checked against its PTX: module text, kernel, grid, block
    and the arguments as ("buffer", bytes) or ("scalar", bytes)."""
    capture = json.loads(capture_path.read_text())
    if capture.get("binary_format") != "ptx":
        raise ReplayError(f"{capture_path.name}: the program is not PTX "
                          f"({capture.get('binary_format')}); only NVIDIA captures replay")
    kernel = capture["kernel"]
    ptx = module_text((capture_path.parent / capture["binary"]).read_text(), kernel)
    params = entry_params(ptx, kernel)
    if len(params) != len(capture["args"]):
        raise ReplayError(f"{kernel}: the PTX entry has {len(params)} parameters, the capture "
                          f"{len(capture['args'])} arguments")
    args = []
    for index, (arg, (size, pointer)) in enumerate(zip(capture["args"], params)):
        kind = arg["kind"]
        if kind == "buffer" and pointer:
            args.append(("buffer", arg["bytes"]))
        elif kind == "scalar" and not pointer and arg["size"] == size:
            args.append(("scalar", bytes.fromhex(arg["hex"])))
        else:
            raise ReplayError(f"{kernel}: argument {index} is {kind} ({arg}), the PTX parameter "
                              f"{'a pointer' if pointer else f'{size} bytes'}: not replayable")
    local = capture.get("local")
    if local is None:
        raise ReplayError(f"{kernel}: the runtime picked the work-group size; nothing to replay")
    global_size = capture["global"]
    if any(g % l for g, l in zip(global_size, local)):
        raise ReplayError(f"{kernel}: global size {global_size} is not a multiple of the "
                          f"work-group size {local}")
    pad = [1] * (3 - len(local))
    grid = [g // l for g, l in zip(global_size, local)] + pad
    envregs = [f"%envreg{i}" for i in sorted({int(i) for i in ENVREG.findall(ptx)})]
    return {"ptx": with_launch_registers(ptx, grid, len(global_size)), "kernel": kernel,
            "args": args, "grid": grid, "block": list(local) + pad, "envregs": envregs}


class Cuda:
    """The few CUDA driver calls a replay needs, through ctypes."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise ReplayError(f"no CUDA driver (libcuda.so.1): {error}") from error
        self.call("cuInit", 0)
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), 0)
        self.context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), device)
        self.call("cuCtxSetCurrent", self.context)

    def call(self, name, *args):
        status = getattr(self.lib, name)(*args)
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(text))
            raise ReplayError(f"{name}: {text.value.decode() if text.value else status}")

    def function(self, ptx: str, kernel: str):
        log = ctypes.create_string_buffer(16384)
        options = (ctypes.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, ..._SIZE_BYTES
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), len(log))
        module = ctypes.c_void_p()
        try:
            self.call("cuModuleLoadDataEx", ctypes.byref(module), ptx.encode() + b"\0", 2,
                      options, values)
        except ReplayError as error:
            raise ReplayError(f"{error}: {log.value.decode(errors='replace')}") from error
        function = ctypes.c_void_p()
        self.call("cuModuleGetFunction", ctypes.byref(function), module, kernel.encode())
        return function

    def buffer(self, size: int, pattern: int):
        pointer = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(max(size, 4)))
        self.call("cuMemsetD32_v2", pointer, ctypes.c_uint(pattern),
                  ctypes.c_size_t(max(size, 4) // 4))
        return pointer


def replay(launch: dict, reps: int, fill: float, expect=None) -> float:
    """Runs the launch reps times after one warm-up; the mean microseconds per launch. expect
    (argument index, value, count): after the warm-up, that buffer's first count float32 values
    must all equal value (checks that the arguments reached the kernel as captured)."""
    cuda = Cuda()
    function = cuda.function(launch["ptx"], launch["kernel"])
    pattern = struct.unpack("<I", struct.pack("<f", fill))[0]
    values = [cuda.buffer(value, pattern) if kind == "buffer"
              else ctypes.create_string_buffer(value, len(value))
              for kind, value in launch["args"]]
    params = (ctypes.c_void_p * len(values))(
        *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
    grid, block = launch["grid"], launch["block"]

    def run():
        cuda.call("cuLaunchKernel", function, *[ctypes.c_uint(x) for x in grid + block],
                  ctypes.c_uint(0), None, params, None)

    run()
    cuda.call("cuCtxSynchronize")
    if expect is not None:
        index, value, count = expect
        if launch["args"][index][0] != "buffer":
            raise ReplayError(f"--expect: argument {index} is not a buffer")
        host = (ctypes.c_float * count)()
        cuda.call("cuMemcpyDtoH_v2", host, values[index], ctypes.c_size_t(4 * count))
        wrong = [i for i in range(count) if host[i] != value]
        if wrong:
            raise ReplayError(f"--expect: argument {index} holds {host[wrong[0]]} at "
                              f"{wrong[0]}, not {value} ({len(wrong)} of {count} differ)")
    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    cuda.call("cuEventCreate", ctypes.byref(start), 0)
    cuda.call("cuEventCreate", ctypes.byref(end), 0)
    cuda.call("cuEventRecord", start, None)
    for _ in range(reps):
        run()
    cuda.call("cuEventRecord", end, None)
    cuda.call("cuEventSynchronize", end)
    milliseconds = ctypes.c_float()
    cuda.call("cuEventElapsedTime", ctypes.byref(milliseconds), start, end)
    return milliseconds.value * 1e3 / max(reps, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", type=Path, help="<kernel>-<n>.json files")
    parser.add_argument("--reps", type=int, default=1, help="timed launches after a warm-up")
    parser.add_argument("--fill", type=float, default=1.0, help="value every buffer holds")
    parser.add_argument("--plan", action="store_true", help="print the launches; run nothing")
    parser.add_argument("--expect", default=None, metavar="ARG=VALUE:COUNT",
                        help="check: buffer argument ARG's first COUNT floats equal VALUE")
    args = parser.parse_args()
    expect = None
    if args.expect:
        index, _, rest = args.expect.partition("=")
        value, _, count = rest.partition(":")
        expect = (int(index), float(value), int(count or 1))
    failed = 0
    for path in args.captures:
        try:
            launch = plan(path)
            shown = ", ".join(f"buffer {v} B" if k == "buffer" else f"0x{v[::-1].hex()}"
                              for k, v in launch["args"])
            print(f"{path.name}: {launch['kernel']} grid {launch['grid']} block "
                  f"{launch['block']} ({shown})")
            if launch["envregs"]:
                print(f"{path.name}: {', '.join(launch['envregs'])} (OpenCL's launch registers) "
                      "set as for one launch without offset")
            if not args.plan:
                microseconds = replay(launch, args.reps, args.fill, expect)
                print(f"{path.name}: {microseconds:.1f} us per launch")
        except (ReplayError, OSError, KeyError, ValueError) as error:
            print(f"{path.name}: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
