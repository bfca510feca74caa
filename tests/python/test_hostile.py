"""Hostile input for every exported function (cases: hostile_cases.py, one JSON line each).

All cases run in child processes, so a crash is counted instead of ending the suite: one child
runs the whole list; if it dies, the case it was running is re-run alone (to tell a reproducible
crash from damage done by earlier cases) and a new child carries on after it. Then one test per
function reports that function's cases: each must pass, or be "unsupported" where the case itself
names the device feature whose absence makes AETHERCL_NOT_IMPLEMENTED the right answer."""
import json
import os
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from support.hostile_cases import all_cases, covered_functions, manifest_symbols
from support.op_specs import SPECIAL, SPECS

HERE = Path(__file__).resolve().parent
SYMBOLS = manifest_symbols()
CASES = all_cases(SYMBOLS)
CASE_IDS = [case_id for case_id, _ in CASES]
# Functions exercised by the lifecycle child (test_lifecycle_hostile) rather than per-case.
LIFECYCLE_ONLY = {"shutdown_driver"}


def _run_child(start=0, only=None, timeout=600):
    command = [sys.executable, str(HERE / "support" / "hostile_cases.py"), "--start", str(start)]
    if only:
        command += ["--only", only]
    process = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                             env=dict(os.environ))
    lines = [json.loads(line) for line in process.stdout.splitlines() if line.startswith("{")]
    return process, lines


@pytest.fixture(scope="module")
def results():
    outcomes = {}
    start = 0
    while start < len(CASES):
        process, lines = _run_child(start)
        running = None
        for line in lines:
            if "setup_error" in line:
                pytest.fail(f"hostile child could not initialise: {line['setup_error']}")
            if "start" in line:
                running = line
            elif "id" in line:
                outcomes[line["id"]] = (line["outcome"], line["detail"])
                running = None
        if lines and lines[-1].get("done"):
            break
        if running is None:
            pytest.fail(f"hostile child died outside a case (rc {process.returncode}): "
                        f"{process.stderr[-2000:]}")
        alone, alone_lines = _run_child(only=running["start"])
        reproduces = not (alone_lines and alone_lines[-1].get("done"))
        outcomes[running["start"]] = (
            "crash", f"rc {process.returncode}; "
            f"{'reproduces alone' if reproduces else 'only after earlier cases'}; "
            f"stderr: {process.stderr[-1500:]}")
        start = running["index"] + 1
    counts = Counter(outcome for outcome, _ in outcomes.values())
    summary = {"cases": len(CASES), **counts}
    print(f"\nhostile input: {summary}")
    out_dir = Path(os.environ.get("AETHERCL_BUILD_DIR", HERE.parents[1] / "build"))
    if out_dir.is_dir():
        (out_dir / "hostile_summary.json").write_text(json.dumps(
            {"summary": summary, "outcomes": outcomes}, indent=1))
    return outcomes


def test_every_exported_function_has_hostile_cases():
    names = {s.name for s in SYMBOLS}
    missing_specs = {n for n in names if n.startswith("execute_")} - set(SPECS) - SPECIAL
    assert not missing_specs, f"add these to op_specs.SPECS: {sorted(missing_specs)}"
    uncovered = names - covered_functions(CASES) - LIFECYCLE_ONLY
    assert not uncovered, f"no hostile cases for {sorted(uncovered)}"


@pytest.mark.parametrize("function", sorted(covered_functions(CASES)))
def test_hostile_cases(results, function):
    mine = {i: results.get(i, ("missing", "the case produced no result"))
            for i in CASE_IDS if i.split("/")[0] == function}
    bad = {i: r for i, r in mine.items() if r[0] not in ("pass", "unsupported")}
    assert not bad, "\n".join(f"{i}: {o}: {d}" for i, (o, d) in bad.items())


class _FakeLibrary:
    """The last error a must-succeed call left behind, for the verdict test below."""

    def __init__(self, code, message):
        self.code, self.message = code, message

    def last_error(self):
        return self.message

    def last_error_code(self):
        return self.code


def test_not_implemented_passes_only_where_a_case_names_the_missing_feature():
    from support.hostile_cases import CaseResult, Harness
    message = "aethercl_program_create_il: this device has no IL (SPIR-V) support"
    h = Harness(_FakeLibrary(9, message), 0)
    h.function = "aethercl_program_create_il"
    with pytest.raises(CaseResult) as verdict:
        h.succeeded(None, True)                                # no expectation: a failure
    assert verdict.value.outcome == "fail"
    with pytest.raises(CaseResult) as verdict:
        h.succeeded(None, True, unless_unsupported="IL")      # the case names the feature
    assert verdict.value.outcome == "unsupported"
    with pytest.raises(CaseResult) as verdict:
        h.succeeded(None, True, unless_unsupported="fp64")    # another feature: a failure
    assert verdict.value.outcome == "fail"
    with pytest.raises(CaseResult) as verdict:                 # a refusal case never accepts it
        h.refused(0, 0, {1}, [])
    assert verdict.value.outcome == "fail"
    h.lib = _FakeLibrary(1, "aethercl_program_create_il: il is NULL")
    h.refused(0, 0, {1}, ["NULL"])


LIFECYCLE_SCRIPT = r"""
import ctypes, json
from support.hostile_cases import Harness
DEFAULTS = {"int": 1, "unsigned int": 1, "float": 0.5, "size_t": 16, "unsigned long long": 0x1000}
# Work without an initialised device (enumeration, static strings, host-memory blocks,
# process-wide tracing).
NEEDS_NO_DEVICE = {"aethercl_version", "aethercl_abi_version", "aethercl_last_error",
                   "aethercl_last_error_code", "aethercl_status_name", "aethercl_device_count",
                   "aethercl_device_info", "simulated_kernel_allocate", "simulated_kernel_free",
                   "simulated_kernel_write", "simulated_kernel_read", "initialize_gpu",
                   "shutdown_driver", "free_gpu_memory", "simulated_get_compute_unit_count",
                   "aethercl_trace_start", "aethercl_trace_stop", "aethercl_trace_summary",
                   "aethercl_comm_unique_id"}
host = ctypes.create_string_buffer(64)
shape = (ctypes.c_int * 2)(1, 1)
problems, calls = [], 0

def call_everything(phase, handle):
    global calls
    for s in lib.symbols:
        if s.name in NEEDS_NO_DEVICE:
            continue
        args = []
        for p in s.parameters:
            if p.name == "gpu_index":
                args.append(0)
            elif p.c_type == "void*":
                args.append(handle)
            elif p.c_type in ("const void*",):
                args.append(ctypes.addressof(host))
            elif p.c_type == "char*":
                args.append(None)
            elif p.c_type == "const char*":
                args.append(b"label")
            elif p.c_type in ("int*", "const int*"):
                args.append(shape)
            elif p.c_type == "void* const*":   # token arrays of the collectives
                args.append((ctypes.c_void_p * 2)(handle, handle))
            elif p.c_type == "const size_t*":
                args.append((ctypes.c_size_t * 3)(1, 1, 1))
            elif p.c_type == "float*":
                args.append(ctypes.byref(ctypes.c_float()))
            elif p.c_type.endswith("*"):  # arrays and descriptors of the version-3 functions
                args.append(None)
            else:
                args.append(DEFAULTS[p.c_type])
        result = getattr(lib, s.name)(*args)
        calls += 1
        message, code = lib.last_error(), lib.last_error_code()
        if result not in (0, None) and s.return_type != "void":
            problems.append(f"{phase}: {s.name} returned {result!r}")
        elif not message.startswith(s.name + ": ") or code not in (
                (1, 2, 5) if s.name == "simulated_matrix_multiply" else (5,)):
            problems.append(f"{phase}: {s.name}: code {code}, message {message!r}")

# before initialize_gpu
call_everything("before init", 0xDEAD00AE)
lib.free_gpu_memory(0, 0xDEAD00AE); lib.shutdown_driver(); lib.shutdown_driver()
if lib.simulated_get_compute_unit_count(0) != 16:
    problems.append("compute units before init != 16")
assert lib.initialize_gpu(0) == 1
h = Harness(lib, 0)
stale = lib.allocate_gpu_memory(0, 256)
h.roundtrip()
block = lib.simulated_kernel_allocate(0, 64)   # host blocks survive shutdown (docs/ABI.md §3.1)
if not block:
    problems.append(f"simulated_kernel_allocate before shutdown: {lib.last_error()!r}")
lib.simulated_kernel_write(0, block, 64, b"s" * 64)
lib.shutdown_driver()
lib.simulated_kernel_read(0, block, 64, host)
if host.raw[:64] != b"s" * 64:
    problems.append(f"a host block did not survive shutdown: {lib.last_error()!r}")
lib.simulated_kernel_free(0, block, 64)
# after shutdown, with a handle that was live before it
call_everything("after shutdown", stale)
lib.free_gpu_memory(0, stale); lib.shutdown_driver()
assert lib.initialize_gpu(0) == 1
h.roundtrip()
if lib.read_gpu_to_host_blocking(0, stale, 0, 4, host) != 0 or "freed" not in lib.last_error():
    problems.append("a handle from before shutdown works again after re-initialisation")
print(json.dumps({"calls": calls, "problems": problems}))
"""


def test_lifecycle_calls_before_init_and_after_shutdown():
    from support.helpers import run_child
    code = f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + LIFECYCLE_SCRIPT
    result = run_child(code, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["calls"] >= 30
    assert not report["problems"], "\n".join(report["problems"])


FOREIGN_SCRIPT = r"""
import ctypes, json
from support.hostile_cases import Harness, _buffers, _call, _values
from support.op_specs import SPECS
count = lib.aethercl_device_count()
if count < 2:
    print(json.dumps({"devices": count})); raise SystemExit(0)
assert lib.initialize_gpu(0) == 1 and lib.initialize_gpu(1) == 1
h0, h1 = Harness(lib, 0), Harness(lib, 1)
problems, tried = [], 0
for s in lib.symbols:
    if s.name not in SPECS:
        continue
    spec = SPECS[s.name]
    values = dict(_values(s), **spec.scalars)
    for buffer in spec.buffers:
        buffers = _buffers(h0, spec, values)
        foreign = _buffers(h1, spec, values)[buffer]
        buffers[buffer] = foreign
        result = _call(h0, s, buffers, values)
        tried += 1
        message, code = lib.last_error(), lib.last_error_code()
        h0.cleanup(); h1.cleanup()
        if (result != 0 or code != 2 or "belongs to device 1" not in message
                or buffer not in message):
            problems.append(f"{s.name}/{buffer}: {result} {code} {message!r}")
# version-3 training ops: each buffer argument in turn from the other device
from support.hostile_train_cases import Call, alloc_buffers, clip_buffers
from support.op_specs import TRAIN_SPECS
for s in lib.symbols:
    if s.name not in TRAIN_SPECS:
        continue
    spec = TRAIN_SPECS[s.name]
    clip = s.name == "aethercl_clip_grad_norm"
    names = ["grads[0]", "total_norm"] if clip else list(spec.buffers)
    for buffer in names:
        make = (lambda h: clip_buffers(h, spec.values)) if clip else (
            lambda h: alloc_buffers(h, spec, spec.values))
        buffers = make(h0)
        buffers[buffer] = make(h1)[buffer]
        call = Call(h0, s, spec)
        result = call.run(spec.values, buffers)
        tried += 1
        message, code = lib.last_error(), lib.last_error_code()
        h0.cleanup(); h1.cleanup()
        if (result != 0 or code != 2 or "belongs to device 1" not in message
                or call.name_of(buffer) not in message):
            problems.append(f"{s.name}/{buffer}: {result} {code} {message!r}")
# memory entry points, labels, and a free on the wrong device (must not free it)
mine, theirs = lib.allocate_gpu_memory(0, 64), lib.allocate_gpu_memory(1, 64)
host = ctypes.create_string_buffer(64)
for name, args in (("write_host_to_gpu_blocking", (0, theirs, 0, 64, host)),
                   ("read_gpu_to_host_blocking", (0, theirs, 0, 64, host)),
                   ("execute_clone_on_gpu", (0, mine, theirs, 64)),
                   ("execute_clone_on_gpu", (0, theirs, mine, 64)),
                   ("aethercl_set_buffer_label", (0, theirs, b"x"))):
    tried += 1
    if getattr(lib, name)(*args) != 0 or "belongs to device 1" not in lib.last_error():
        problems.append(f"{name}: {lib.last_error()!r}")
lib.free_gpu_memory(0, theirs)
tried += 1
if "belongs to device 1" not in lib.last_error():
    problems.append(f"free_gpu_memory on the wrong device: {lib.last_error()!r}")
if lib.write_host_to_gpu_blocking(1, theirs, 0, 64, host) != 1:
    problems.append("a free on the wrong device released the buffer")
# with two devices initialised an index that names neither is an error (docs/ABI.md §3.2)
tried += 1
if lib.allocate_gpu_memory(5, 16) is not None or lib.last_error_code() != 5:
    problems.append(f"gpu_index 5 with two devices: {lib.last_error()!r}")
lib.free_gpu_memory(0, mine); lib.free_gpu_memory(1, theirs)
h0.roundtrip(); h1.roundtrip()
print(json.dumps({"devices": count, "tried": tried, "problems": problems}))
"""


def test_tokens_of_another_device_are_refused():
    """PoCL can show its CPU twice (POCL_DEVICES); elsewhere a second device is needed, and the
    doctest 'foreign tokens' checks the registry's device check with one device."""
    from support.helpers import run_child
    env_backup = dict(os.environ)
    os.environ.setdefault("POCL_DEVICES", "pthread pthread")
    os.environ.pop("AETHERCL_DEVICES", None)
    try:
        code = f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + FOREIGN_SCRIPT
        result = run_child(code, timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["devices"] < 2:
        print("only one OpenCL device: foreign tokens are covered by the doctest "
              "'a token of another device is refused' only")
        warnings.warn("only one OpenCL device: foreign-token cases ran in the doctest only")
        return
    assert report["tried"] >= 60
    assert not report["problems"], "\n".join(report["problems"])
