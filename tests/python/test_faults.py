"""Faults, end to end through the library in child processes: corrupt, truncated and foreign
entries of the on-disk kernel binary cache are detected and rebuilt; entries that cannot be read
at all (a directory, a FIFO, an I/O error by that name) are misses and a cache that cannot be
written is skipped, each with one warning per process; a kernel family that fails
to build (a broken elementwise.cl through AETHERCL_KERNEL_DIR) is reported with its build log and
leaves memory ops and every other family working."""
import json
import os
from pathlib import Path

import pytest

from support.helpers import run_child

HERE = Path(__file__).resolve().parent

ADD_AND_STATS = r"""
import json
from support.hostile_cases import Harness
assert lib.initialize_gpu(0) == 1
Harness(lib, 0).roundtrip()          # builds (or loads) the elementwise family
s = json.loads(lib.json_call("aethercl_memory_stats", 0))
print(json.dumps({"builds": s["program_source_builds"], "hits": s["program_cache_hits"]}))
"""


def _child(code, timeout=300, **env):
    """Runs code in a child process with the cache on whatever the device (PoCL devices leave it
    off unless AETHERCL_CACHE=1 asks) and the given environment on top; None unsets a variable."""
    backup = dict(os.environ)
    for name, value in {"AETHERCL_CACHE": "1", **env}.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)
    try:
        result = run_child(f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + code,
                           timeout=timeout)
    finally:
        os.environ.clear()
        os.environ.update(backup)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _stats(cache_dir):
    out = _child(ADD_AND_STATS, AETHERCL_CACHE_DIR=cache_dir).stdout
    return json.loads(out.strip().splitlines()[-1])


CORRUPTIONS = {
    "payload_bit_flip": lambda b: b[:-100] + bytes([b[-100] ^ 0x40]) + b[-99:],
    "truncated_to_half": lambda b: b[: len(b) // 2],
    "truncated_header": lambda b: b[:20],
    "empty": lambda b: b"",
    "garbage": lambda b: os.urandom(len(b)),
    "length_field_lies": lambda b: b[:40] + (len(b) * 2).to_bytes(8, "little") + b[48:],
}


@pytest.fixture(scope="module")
def good_entry(tmp_path_factory):
    """(file name, bytes) of the elementwise family's cache entry, built once from source."""
    directory = tmp_path_factory.mktemp("cache")
    assert _stats(directory) == {"builds": 1, "hits": 0}
    entries = list(directory.glob("*.bin"))
    assert len(entries) == 1
    return entries[0].name, entries[0].read_bytes()


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_damaged_cache_entry_is_detected_and_rebuilt(tmp_path, good_entry, corruption):
    name, good = good_entry
    entries = [tmp_path / name]
    entries[0].write_bytes(CORRUPTIONS[corruption](good))
    rebuilt = _stats(tmp_path)   # the round trip inside checks results stay correct
    assert rebuilt == {"builds": 1, "hits": 0}, "a damaged entry was used"
    assert entries[0].read_bytes() != CORRUPTIONS[corruption](good)  # rewritten
    assert _stats(tmp_path) == {"builds": 0, "hits": 1}              # and good again


# Three kernel families (elementwise, layout, rowwise), each result checked.
THREE_FAMILIES = r"""
import json
from support.hostile_cases import Harness
assert lib.initialize_gpu(0) == 1
h = Harness(lib, 0)
h.roundtrip()
x = np.arange(12, dtype=np.float32).reshape(3, 4)
a, b = h.alloc(48), h.alloc(48)
assert lib.write_host_to_gpu_blocking(0, a, 0, 48, x.ctypes.data) == 1
assert lib.execute_transpose_on_gpu(0, a, b, 3, 4) == 1, lib.last_error()
out = np.zeros((4, 3), np.float32)
assert lib.read_gpu_to_host_blocking(0, b, 0, 48, out.ctypes.data) == 1
assert (out == x.T).all()
assert lib.execute_softmax_on_gpu(0, a, b, 3, 4) == 1, lib.last_error()
out = np.zeros((3, 4), np.float32)
assert lib.read_gpu_to_host_blocking(0, b, 0, 48, out.ctypes.data) == 1
e = np.exp(x - x.max(1, keepdims=True))
assert np.allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5)
s = json.loads(lib.json_call("aethercl_memory_stats", 0))
print(json.dumps({"builds": s["program_source_builds"], "hits": s["program_cache_hits"]}))
"""


def _warnings(stderr, phrase):
    return [line for line in stderr.splitlines() if "warning" in line and phrase in line]


@pytest.fixture(scope="module")
def three_entry_names(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cache3")
    result = _child(THREE_FAMILIES, AETHERCL_CACHE_DIR=directory)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"builds": 3, "hits": 0}
    names = sorted(p.name for p in directory.glob("*.bin"))
    assert len(names) == 3
    return names


UNREADABLE = {
    "directory": lambda path: (path / "inside").mkdir(parents=True),
    "fifo": os.mkfifo,                                      # a blocking open() would hang
    "io_error": lambda path: path.symlink_to("/proc/self/mem"),  # EIO on read, even as root
    "char_device": lambda path: path.symlink_to("/dev/zero"),    # endless
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_unreadable_cache_entries_are_misses_with_one_warning(tmp_path, three_entry_names, kind):
    for name in three_entry_names:
        UNREADABLE[kind](tmp_path / name)
    result = _child(THREE_FAMILIES, timeout=60, AETHERCL_CACHE_DIR=tmp_path,
                    AETHERCL_LOG_LEVEL="warn")
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"builds": 3, "hits": 0}
    read_warnings = _warnings(result.stderr, "cannot be read")
    assert len(read_warnings) == 1, result.stderr     # once per process, not per entry
    assert any(name in read_warnings[0] for name in three_entry_names)
    assert len(_warnings(result.stderr, "cannot store")) <= 1, result.stderr
    if kind == "directory":
        assert all((tmp_path / name / "inside").is_dir() for name in three_entry_names)
    else:  # the new entries replaced the obstacles: the next process hits the cache
        again = _child(THREE_FAMILIES, timeout=60, AETHERCL_CACHE_DIR=tmp_path,
                       AETHERCL_LOG_LEVEL="warn")
        assert json.loads(again.stdout.strip().splitlines()[-1]) == {"builds": 0, "hits": 3}


def test_an_unwritable_cache_is_skipped_with_one_warning(tmp_path):
    not_a_directory = tmp_path / "cache-is-a-file"
    not_a_directory.write_text("x")
    for _ in range(2):
        result = _child(THREE_FAMILIES, timeout=60, AETHERCL_CACHE_DIR=not_a_directory,
                        AETHERCL_LOG_LEVEL="warn")
        assert json.loads(result.stdout.strip().splitlines()[-1]) == {"builds": 3, "hits": 0}
        assert len(_warnings(result.stderr, "cannot store")) == 1, result.stderr
        assert not _warnings(result.stderr, "cannot be read"), result.stderr
    assert not_a_directory.read_text() == "x"


BROKEN_FAMILY = r"""
import ctypes, json
from support.hostile_cases import Harness, _buffers, _call, _values
from support.op_specs import SPECS
assert lib.initialize_gpu(0) == 1
h = Harness(lib, 0)
report = {"add": [], "working": [], "broken": [], "tried": []}
for attempt in range(2):   # the failure is reported again, not cached as success
    a = h.alloc(16)
    report["add"].append([lib.execute_add_on_gpu(0, a, a, a, 4), lib.last_error_code(),
                          lib.last_error()])
    h.cleanup()
# memory ops still work
a, b = h.alloc(64, 1), h.alloc(64, 2)
report["memory_ops"] = (lib.execute_clone_on_gpu(0, a, b, 64) == 1 and
                        h.contents(b, 64) == bytes([1]) * 64)
h.cleanup()
for s in lib.symbols:
    if s.name not in SPECS:
        continue
    spec = SPECS[s.name]
    values = dict(_values(s), **spec.scalars)
    result = _call(h, s, _buffers(h, spec, values), values)
    code, message = lib.last_error_code(), lib.last_error()
    h.cleanup()
    report["tried"].append(s.name)
    if result == 1:
        report["working"].append(s.name)
    else:
        report["broken"].append([s.name, code, message[:300]])
print(json.dumps(report))
"""


def test_a_kernel_build_failure_is_reported_and_isolated(tmp_path):
    source = (HERE.parents[1] / "kernels" / "elementwise.cl").read_text()
    (tmp_path / "elementwise.cl").write_text(
        source + "\n__kernel void broken_on_purpose(__global float* x) "
                 "{ x[0] = undeclared_name; }\n")
    cache = tmp_path / "cache"
    report = json.loads(_child(BROKEN_FAMILY, AETHERCL_KERNEL_DIR=tmp_path,
                               AETHERCL_CACHE_DIR=cache).stdout.strip().splitlines()[-1])
    for result, code, message in report["add"]:
        assert result == 0 and code == 7, message        # AETHERCL_BUILD_FAILED
        assert message.startswith("execute_add_on_gpu: ")
        assert "elementwise" in message and "undeclared_name" in message, message  # the log
    assert report["memory_ops"] is True
    # only entry points that use the elementwise family fail, each with the build log
    for name, code, message in report["broken"]:
        assert code == 7 and "elementwise" in message, (name, message)
    elementwise = {"execute_add_on_gpu", "execute_mul_on_gpu", "execute_mul_backward_on_gpu",
                   "execute_gelu_on_gpu", "execute_gelu_backward_on_gpu"}
    assert {name for name, _, _ in report["broken"]} == elementwise
    assert set(report["working"]) == set(report["tried"]) - elementwise   # every other family
    assert not list(cache.glob("*.bin")) or all(
        b"undeclared_name" not in p.read_bytes() for p in cache.glob("*.bin"))


POCL_DEVICE = r"""
import json
info = json.loads(lib.json_call("aethercl_device_info", 0))
print(json.dumps({"pocl": "PoCL" in info["device_version"] or
                  info["platform"] == "Portable Computing Language"}))
"""


def test_pocl_devices_leave_the_cache_off_unless_asked(tmp_path):
    """PoCL binaries carry only generic work-group functions (README, AETHERCL_CACHE): on PoCL the
    default writes no entry and AETHERCL_CACHE=1 writes them; on other devices the default does."""
    default_dir, asked_dir = tmp_path / "default", tmp_path / "asked"
    result = _child(ADD_AND_STATS + POCL_DEVICE, AETHERCL_CACHE=None,
                    AETHERCL_CACHE_DIR=default_dir)
    pocl = json.loads(result.stdout.strip().splitlines()[-1])["pocl"]
    default_entries = list(default_dir.glob("*.bin")) if default_dir.exists() else []
    _child(ADD_AND_STATS, AETHERCL_CACHE_DIR=asked_dir)
    assert list(asked_dir.glob("*.bin"))
    if pocl:
        assert not default_entries
    else:
        assert default_entries
