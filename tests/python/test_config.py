"""Loud configuration: every AETHERCL_* value is parsed strictly; a malformed one warns once,
naming the variable and the value, and means the default, never something else. AETHERCL_TRACE is
written at process exit when shutdown_driver never ran. Each case runs in a child process (the
driver reads its environment once)."""
import json

import pytest

from support.helpers import run_child

STATS = """
import json
assert lib.initialize_gpu(0) == 1
handles = [lib.allocate_gpu_memory(0, 1 << 20) for _ in range(4)]
assert all(handles), lib.aethercl_last_error()
for h in handles:
    lib.free_gpu_memory(0, h)
print(json.dumps(json.loads(lib.json_call("aethercl_memory_stats", 0))))
"""


def _child(monkeypatch, env, code=STATS):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run_child(code)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _warnings_about(stderr, name):
    return [line for line in stderr.splitlines() if f"{name}=" in line]


@pytest.mark.parametrize("value, limit", [("1.5G", 3 << 29), ("512m", 512 << 20),
                                          ("64 MiB", 64 << 20), ("100000000", 100000000)])
def test_memory_limit_with_units(monkeypatch, value, limit):
    result = _child(monkeypatch, {"AETHERCL_MEMORY_LIMIT": value})
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    assert stats["limit_bytes"] == limit
    assert not _warnings_about(result.stderr, "AETHERCL_MEMORY_LIMIT")


@pytest.mark.parametrize("value", ["lots", "0", "1.5", "-1G", "2X"])
def test_malformed_memory_limit_warns_once_and_means_no_limit(monkeypatch, value):
    result = _child(monkeypatch, {"AETHERCL_MEMORY_LIMIT": value})
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    assert stats["limit_bytes"] > 64 << 20  # the device's own memory, not 0 and not a guess
    warnings = _warnings_about(result.stderr, "AETHERCL_MEMORY_LIMIT")
    assert len(warnings) == 1, result.stderr
    assert f"AETHERCL_MEMORY_LIMIT='{value}'" in warnings[0] and "size" in warnings[0]


def test_malformed_flag_warns_once_across_devices_and_calls(monkeypatch):
    code = STATS + """
lib.shutdown_driver()
assert lib.initialize_gpu(0) == 1
lib.shutdown_driver()
"""
    result = _child(monkeypatch, {"AETHERCL_POOL": "maybe"}, code)
    warnings = _warnings_about(result.stderr, "AETHERCL_POOL")
    assert len(warnings) == 1, result.stderr
    assert "AETHERCL_POOL='maybe'" in warnings[0] and "boolean" in warnings[0]


def test_log_level_in_any_case(monkeypatch):
    result = _child(monkeypatch, {"AETHERCL_LOG_LEVEL": "DEBUG"})
    assert "[aethercl info] initialised device 0" in result.stderr
    assert not _warnings_about(result.stderr, "AETHERCL_LOG_LEVEL")


def test_unknown_log_level_warns_and_keeps_warn(monkeypatch):
    result = _child(monkeypatch, {"AETHERCL_LOG_LEVEL": "verbose"})
    warnings = _warnings_about(result.stderr, "AETHERCL_LOG_LEVEL")
    assert len(warnings) == 1 and "AETHERCL_LOG_LEVEL='verbose'" in warnings[0], result.stderr
    assert "initialised device" not in result.stderr  # still warn: info is not shown


def test_device_list_entries_that_match_nothing_warn(monkeypatch):
    result = _child(monkeypatch, {"AETHERCL_DEVICES": "0,,no-such-device"})
    warnings = _warnings_about(result.stderr, "AETHERCL_DEVICES")
    assert len(warnings) == 1, result.stderr
    assert "AETHERCL_DEVICES='0,,no-such-device'" in warnings[0]
    assert "no-such-device" in warnings[0] and "visible devices are: 0:" in warnings[0]


def test_testing_knobs_take_counts_not_sizes(monkeypatch):
    result = _child(monkeypatch, {"AETHERCL_WG_LIMIT": "7K", "AETHERCL_ROW_GROUP": "0"}, """
import numpy as np
assert lib.initialize_gpu(0) == 1
x = np.random.default_rng(1).standard_normal((5, 33)).astype(np.float32)
a = lib.allocate_gpu_memory(0, x.nbytes); o = lib.allocate_gpu_memory(0, x.nbytes)
assert lib.write_host_to_gpu_blocking(0, a, 0, x.nbytes, x.ctypes.data) == 1
assert lib.execute_softmax_on_gpu(0, a, o, 5, 33) == 1
assert lib.execute_transpose_on_gpu(0, a, o, 5, 33) == 1
assert lib.read_gpu_to_host_blocking(0, o, 0, x.nbytes, x.ctypes.data) == 1
""")
    assert len(_warnings_about(result.stderr, "AETHERCL_WG_LIMIT")) == 1, result.stderr
    assert len(_warnings_about(result.stderr, "AETHERCL_ROW_GROUP")) == 1, result.stderr


def test_trace_from_the_environment_is_written_at_exit_without_shutdown(monkeypatch, tmp_path):
    path = tmp_path / "exit-trace.json"
    result = _child(monkeypatch, {"AETHERCL_TRACE": str(path)}, """
import numpy as np
assert lib.initialize_gpu(0) == 1
x = np.arange(64, dtype=np.float32)
h = lib.allocate_gpu_memory(0, 256); o = lib.allocate_gpu_memory(0, 256)
assert lib.write_host_to_gpu_blocking(0, h, 0, 256, x.ctypes.data) == 1
assert lib.execute_add_on_gpu(0, h, h, o, 64) == 1
print("exiting without shutdown_driver")
""")
    assert "trace written" in result.stderr
    events = json.loads(path.read_text())["traceEvents"]
    # the plain form on GPUs, the lanes form on CPU devices
    assert any(event.get("name") in ("elementwise_add_vec4", "elementwise_add_lanes") for event in events)


def test_every_variable_the_driver_reads_is_in_the_readme_table():
    """driver/support/env.h names every AETHERCL_* variable the library reads; each must have a
    row in README.md's environment table (merges have dropped rows silently before)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    names = set(re.findall(r'"(AETHERCL_[A-Z0-9_]+)"', (root / "driver/support/env.h").read_text()))
    table = "\n".join(line for line in (root / "README.md").read_text().splitlines()
                      if line.startswith("| `AETHERCL_"))
    missing = sorted(name for name in names if f"`{name}`" not in table)
    assert names and not missing, missing
