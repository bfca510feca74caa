"""Faults, end to end through the library in child processes: corrupt, truncated and foreign
entries of the on-disk kernel binary cache are detected and rebuilt; a kernel family that fails
to build (a broken elementwise.cl through AETHERCL_KERNEL_DIR) is reported with its build log and
leaves memory ops and every other family working."""
import json
import os
from pathlib import Path

import pytest

from helpers import run_child

HERE = Path(__file__).resolve().parent

ADD_AND_STATS = r"""
import json
from hostile_cases import Harness
assert lib.initialize_gpu(0) == 1
Harness(lib, 0).roundtrip()          # builds (or loads) the elementwise family
s = json.loads(lib.json_call("aethercl_memory_stats", 0))
print(json.dumps({"builds": s["program_source_builds"], "hits": s["program_cache_hits"]}))
"""


def _child(code, **env):
    backup = dict(os.environ)
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        result = run_child(f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + code, timeout=300)
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


BROKEN_FAMILY = r"""
import ctypes, json
from hostile_cases import Harness, _buffers, _call, _values
from op_specs import SPECS
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
