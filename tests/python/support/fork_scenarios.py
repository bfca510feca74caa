"""fork() scenarios for test_fork.py, each run as `python fork_scenarios.py SCENARIO [ARG]` in a
process group of its own (so a hung grandchild can be killed with it). Each prints one JSON line
{"parent": {...}, "children": [...]} describing what the parent and its forked children saw.

Every forked child arms signal.alarm(CHILD_ALARM_S) first, as a backstop; the parent gives up on
a child after CHILD_WAIT_S, notes where it was waiting and kills it, so a hang shows up as
"hung_or_died" instead of hanging the suite. The file is a real module so multiprocessing's spawn
start method can re-import it.

Under AddressSanitizer (the CI's sanitizer pass preloads GCC 12's libasan) there is one hang that
is not the driver's: that ASan runtime takes no precautions around fork(), so a child forked while
another thread held one of its allocator's size-class locks waits forever in its first malloc of
that size (Python's own allocations included). fork_child recognises exactly that wait - a futex
on the allocator's region metadata - and forks again, counting it; any other hang is reported."""
from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # tests/python: support.* imports from there
sys.path.insert(0, str(HERE.parents[1] / "python_harness"))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from aethercl import Library  # noqa: E402

CHILD_ALARM_S = 60
CHILD_WAIT_S = 20
PARENT_WAIT_S = 40
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
# GCC 12 libasan on x86-64: SizeClassAllocator64 reserves [0x600000000000, 0x640000000000) for
# chunks and keeps each size class's RegionInfo (and its mutex) just past that space.
ASAN_REGION_INFO = range(0x640000000000, 0x640000010000)
FUTEX_SYSCALL_X86_64 = 202
sanitizer_allocator_refork = 0  # children forked again because of the ASan runtime's wait
NOT_INITIALIZED = 5
N = 64
# Functions that need no device and must keep working in any child.
HOST_ONLY = {"aethercl_version", "aethercl_abi_version", "aethercl_last_error",
             "aethercl_last_error_code", "aethercl_status_name", "simulated_kernel_allocate",
             "simulated_kernel_free", "simulated_kernel_write", "simulated_kernel_read"}
FAILURE_VALUE = {"simulated_get_compute_unit_count": 16}

lib = None


def load():
    global lib
    if lib is None:
        lib = Library()
    return lib


# ---- parent-side helpers -------------------------------------------------------------------
def use_device():
    """initialize_gpu, then an add round trip; returns the (handle_a, handle_c) it leaves live."""
    assert lib.initialize_gpu(0) == 1, lib.last_error()
    a = lib.allocate_gpu_memory(0, N * 4)
    c = lib.allocate_gpu_memory(0, N * 4)
    x = np.arange(N, dtype=np.float32)
    assert lib.write_host_to_gpu_blocking(0, a, 0, N * 4, x.ctypes.data) == 1
    assert add_and_read(a, c) == (x + x).tolist()
    return a, c


def add_and_read(a, c):
    if lib.execute_add_on_gpu(0, a, a, c, N) != 1:
        return lib.last_error()
    out = np.zeros(N, np.float32)
    if lib.read_gpu_to_host_blocking(0, c, 0, N * 4, out.ctypes.data) != 1:
        return lib.last_error()
    return out.tolist()


def host_blocks_work():
    """simulated_kernel_allocate / write / read / free round trip."""
    address = lib.simulated_kernel_allocate(0, 16)
    if not address:
        return f"allocate: {lib.last_error()}"
    lib.simulated_kernel_write(0, address, 16, b"0123456789abcdef")
    out = ctypes.create_string_buffer(16)
    lib.simulated_kernel_read(0, address, 16, out)
    lib.simulated_kernel_free(0, address, 16)
    if lib.last_error_code() != 0 or out.raw != b"0123456789abcdef":
        return f"round trip: {out.raw!r} {lib.last_error()}"
    return "ok"


def fork_child(body, exit_mode="_exit"):
    """Forks; the child runs body() -> dict, writes it as JSON to a pipe and leaves by exit_mode
    ("_exit": os._exit; "exit": sys.exit, running atexit handlers and library destructors).
    Returns the child's dict, or {"hung_or_died": status} when it did not report. Under ASan a
    child stuck in the sanitizer's allocator lock (see the module note) is forked again, twice at
    most."""
    global sanitizer_allocator_refork
    for _ in range(3):
        report = fork_child_once(body, exit_mode)
        if not report.pop("in_sanitizer_allocator", False):
            return report
        sanitizer_allocator_refork += 1
    return report


def fork_child_once(body, exit_mode):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.alarm(CHILD_ALARM_S)
        os.close(read_end)
        try:
            report = body()
        except BaseException as error:  # noqa: BLE001 - report everything to the parent
            report = {"exception": repr(error)}
        os.write(write_end, json.dumps(report).encode())
        os.close(write_end)
        if exit_mode == "exit":
            sys.exit(0)
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_WAIT_S
    status = None
    stuck_in_sanitizer = False
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        stuck_in_sanitizer = UNDER_ASAN and waits_on_sanitizer_allocator(pid)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = "killed after waiting"
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    if not data:
        return {"hung_or_died": status if isinstance(status, str) else describe(status),
                "in_sanitizer_allocator": stuck_in_sanitizer}
    report = json.loads(data)
    report["exit"] = describe(status) if not isinstance(status, str) else status
    return report


def waits_on_sanitizer_allocator(pid):
    """True when the (single-threaded) child sleeps in futex() on a lock inside ASan's allocator
    region metadata, read from /proc/PID/syscall ("NR arg0 ..."; arg0 is the futex address)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        return (len(fields) > 1 and int(fields[0]) == FUTEX_SYSCALL_X86_64
                and int(fields[1], 16) in ASAN_REGION_INFO)
    except (OSError, ValueError):
        return False


def describe(status):
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status)}"


# ---- child-side checks ---------------------------------------------------------------------
def timed(function, *args):
    start = time.monotonic()
    result = getattr(lib, function)(*args)
    return result, lib.last_error_code(), lib.last_error(), time.monotonic() - start


def refused(function, *args):
    """A device call in the child: {"function", "ok", "detail"}; ok when it failed at once with
    AETHERCL_NOT_INITIALIZED and a message about fork()."""
    result, code, message, seconds = timed(function, *args)
    expected = FAILURE_VALUE.get(function, None)
    failed = result == expected if expected is not None else not result
    ok = failed and code == NOT_INITIALIZED and "fork" in message and seconds < 2
    return {"function": function, "ok": ok,
            "detail": f"returned {result!r}, code {code}, {seconds:.2f} s: {message}"}


def sweep_every_device_function(handle):
    """Every exported function except the host-only ones, called with zeros and NULLs (the guard
    must refuse before looking at any argument); free_gpu_memory gets a live parent handle,
    since freeing NULL is a documented silent no-op."""
    results = []
    for symbol in lib.symbols:
        if symbol.name in HOST_ONLY:
            continue
        args = [0 if t in (ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_float,
                           ctypes.c_ulonglong, ctypes.c_long, ctypes.c_longlong) else None
                for t in symbol.argtypes]
        if symbol.name == "free_gpu_memory":
            args = [0, handle]
        if symbol.restype is None:  # void: only the message tells
            start = time.monotonic()
            getattr(lib, symbol.name)(*args)
            code, message = lib.last_error_code(), lib.last_error()
            ok = code == NOT_INITIALIZED and "fork" in message and time.monotonic() - start < 2
            results.append({"function": symbol.name, "ok": ok, "detail": f"code {code}: "
                            f"{message}"})
        else:
            results.append(refused(symbol.name, *args))
    return results


def child_checks(a, c, exit_mode):
    """What a child of an initialised parent must see. With exit_mode "exit" the child also
    registers the clean-up a frontend would (free + shutdown at exit)."""
    import atexit
    if exit_mode == "exit":
        atexit.register(lib.shutdown_driver)
        atexit.register(lib.free_gpu_memory, 0, a)
    out = np.zeros(N, np.float32)
    checks = [refused("read_gpu_to_host_blocking", 0, c, 0, N * 4, out.ctypes.data),
              refused("execute_add_on_gpu", 0, a, a, c, N),
              refused("initialize_gpu", 0),
              refused("allocate_gpu_memory", 0, 64)]
    checks += sweep_every_device_function(a)
    return {"checks": checks, "host_blocks": host_blocks_work(),
            "version": lib.aethercl_version().decode()}


# ---- scenarios -----------------------------------------------------------------------------
def scenario_initialised(exit_mode):
    load()
    a, c = use_device()
    child = fork_child(lambda: child_checks(a, c, exit_mode), exit_mode)
    parent = {"after_fork": add_and_read(a, c), "expected": (2 * np.arange(N)).tolist(),
              "stats": lib.aethercl_memory_stats(0, None, 0) > 0}
    return {"parent": parent, "children": [child]}


def scenario_counted_only(_):
    load()
    count = lib.aethercl_device_count()

    def body():
        return {"checks": [refused("initialize_gpu", 0), refused("aethercl_device_count")],
                "host_blocks": host_blocks_work()}
    child = fork_child(body)
    a, c = use_device()  # the parent can still initialise and compute
    return {"parent": {"count": count, "after_fork": add_and_read(a, c),
                       "expected": (2 * np.arange(N)).tolist()}, "children": [child]}


def scenario_never_used(_):
    load()
    assert host_blocks_work() == "ok"  # host memory only: no OpenCL yet

    def body():
        a, c = use_device()
        return {"computed": add_and_read(a, c), "expected": (2 * np.arange(N)).tolist()}
    child = fork_child(body)
    a, c = use_device()
    return {"parent": {"after_fork": add_and_read(a, c),
                       "expected": (2 * np.arange(N)).tolist()}, "children": [child]}


def scenario_busy_threads(_):
    """Forks repeatedly while other threads are inside device calls and host-block calls, so the
    child may inherit the driver's locks held: it must neither hang nor touch them."""
    load()
    a, c = use_device()
    stop = threading.Event()

    def device_loop():
        while not stop.is_set():
            add_and_read(a, c)

    def host_loop():
        while not stop.is_set():
            host_blocks_work()
    threads = [threading.Thread(target=device_loop), threading.Thread(target=host_loop)]
    for thread in threads:
        thread.start()
    children = []
    try:
        for _ in range(12):
            time.sleep(0.01)
            children.append(fork_child(lambda: {
                "checks": [refused("execute_add_on_gpu", 0, a, a, c, N),
                           refused("aethercl_synchronize", 0)] + sweep_every_device_function(a),
                "host_blocks": host_blocks_work()}))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return {"parent": {"after_fork": add_and_read(a, c),
                       "expected": (2 * np.arange(N)).tolist()}, "children": children}


def pool_worker(index):
    """A multiprocessing worker: one add round trip on the device (fresh handles)."""
    load()
    start = time.monotonic()
    initialised = lib.initialize_gpu(0)  # a spawned worker starts afresh; a forked one cannot
    handle = lib.allocate_gpu_memory(0, N * 4)
    if not handle:
        return {"index": index, "initialised": initialised, "result": None,
                "code": lib.last_error_code(), "message": lib.last_error()[:200],
                "seconds": time.monotonic() - start}
    out = add_and_read(handle, handle) if lib.write_host_to_gpu_blocking(
        0, handle, 0, N * 4, np.ones(N, np.float32).ctypes.data) == 1 else lib.last_error()
    return {"index": index, "initialised": initialised, "result": out,
            "code": lib.last_error_code(), "message": lib.last_error()[:200],
            "seconds": time.monotonic() - start}


def scenario_multiprocessing(method):
    load()
    a, c = use_device()
    context = multiprocessing.get_context(method)
    with context.Pool(2, initializer=signal.alarm, initargs=(CHILD_ALARM_S,)) as pool:
        pending = pool.map_async(pool_worker, range(4))
        try:
            workers = pending.get(timeout=PARENT_WAIT_S)
        except multiprocessing.TimeoutError:
            pool.terminate()
            workers = [{"hung": True}]
    return {"parent": {"after_fork": add_and_read(a, c),
                       "expected": (2 * np.arange(N)).tolist()}, "children": workers}


SCENARIOS = {"initialised": scenario_initialised, "counted_only": scenario_counted_only,
             "never_used": scenario_never_used, "busy_threads": scenario_busy_threads,
             "multiprocessing": scenario_multiprocessing}

if __name__ == "__main__":
    name, argument = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    result = SCENARIOS[name](argument)
    result["sanitizer_allocator_refork"] = sanitizer_allocator_refork
    print(json.dumps(result), flush=True)
