"""fork(): a child forked after the driver touched OpenCL gets an immediate, explained failure
from every device function instead of hanging in its first synchronising call; its host-memory
functions keep working; it may leave by exit() or _exit(); the parent keeps working; a child of a
process that never touched OpenCL, and a multiprocessing "spawn" worker, use the device normally.

Each scenario (fork_scenarios.py) runs in a process group of its own with a deadline: a hang
fails the test and the whole group is killed, so it never holds up the suite."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEADLINE_S = 120
EXPECTED = [2.0 * i for i in range(64)]


def run_scenario(name, argument=""):
    script = HERE / "support" / "fork_scenarios.py"
    process = subprocess.Popen([sys.executable, str(script), name, argument],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env=dict(os.environ))
    try:
        stdout, stderr = process.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"scenario {name} {argument} hung for {DEADLINE_S} s; stderr: {stderr[-2000:]}")
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # leftovers of the group, if any
        except ProcessLookupError:
            pass
    assert process.returncode == 0, stderr[-3000:]
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no report; stderr: {stderr[-2000:]}"
    report = json.loads(lines[-1])
    # A child forked again because it hung in ASan's allocator (fork_scenarios.py's module note)
    # is only ever the sanitizer runtime's doing; without ASan it must never happen.
    assert report["sanitizer_allocator_refork"] == 0 or "libasan" in os.environ.get(
        "LD_PRELOAD", ""), report["sanitizer_allocator_refork"]
    return report


def assert_child_refused_device_calls(child):
    assert "hung_or_died" not in child, f"the child did not report: {child}"
    assert "exception" not in child, child
    bad = [f"{c['function']}: {c['detail']}" for c in child["checks"] if not c["ok"]]
    assert not bad, "device calls in the forked child did not fail at once:\n" + "\n".join(bad)
    assert child["host_blocks"] == "ok"
    assert child.get("exit", "exit 0") == "exit 0", child["exit"]


@pytest.mark.parametrize("exit_mode", ["_exit", "exit"])
def test_child_of_an_initialised_parent_fails_fast_and_exits(exit_mode):
    report = run_scenario("initialised", exit_mode)
    (child,) = report["children"]
    assert_child_refused_device_calls(child)
    functions = {c["function"] for c in child["checks"]}
    assert {"read_gpu_to_host_blocking", "shutdown_driver", "free_gpu_memory",
            "aethercl_device_count", "simulated_matrix_multiply"} <= functions
    message = next(c["detail"] for c in child["checks"] if c["function"] == "initialize_gpu")
    assert "spawn" in message and "exec" in message, message  # says what to do
    assert report["parent"]["after_fork"] == EXPECTED
    assert report["parent"]["stats"]


def test_child_forked_after_device_enumeration_only_is_refused_too():
    report = run_scenario("counted_only")
    (child,) = report["children"]
    assert_child_refused_device_calls(child)
    assert report["parent"]["count"] >= 1
    assert report["parent"]["after_fork"] == EXPECTED


def test_child_of_a_parent_that_never_touched_opencl_uses_the_device():
    report = run_scenario("never_used")
    (child,) = report["children"]
    assert child.get("computed") == EXPECTED, child
    assert child["exit"] == "exit 0"
    assert report["parent"]["after_fork"] == EXPECTED


def test_fork_while_other_threads_are_inside_the_driver():
    report = run_scenario("busy_threads")
    assert len(report["children"]) == 12
    for child in report["children"]:
        assert_child_refused_device_calls(child)
    assert report["parent"]["after_fork"] == EXPECTED


def test_multiprocessing_fork_workers_fail_fast():
    report = run_scenario("multiprocessing", "fork")
    assert report["children"] != [{"hung": True}], "fork-method workers hung"
    for worker in report["children"]:
        assert worker["initialised"] == 0 and worker["result"] is None, worker
        assert worker["code"] == 5 and "fork" in worker["message"], worker
        assert worker["seconds"] < 2, worker
    assert report["parent"]["after_fork"] == EXPECTED


def test_multiprocessing_spawn_workers_use_the_device():
    report = run_scenario("multiprocessing", "spawn")
    for worker in report["children"]:
        assert worker["initialised"] == 1 and worker["result"] == [2.0] * 64, worker
    assert report["parent"]["after_fork"] == EXPECTED
