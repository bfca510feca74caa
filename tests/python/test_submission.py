"""The submission thread under racing threads: eight threads issue work (each on a stream of its
own, and on the default stream) while the main thread shuts the driver down and initialises it
again, with AETHERCL_SUBMIT_THREAD forced on and off. Every call must return 0 or 1 with the
contract's messages, nothing may hang or crash, and every read that succeeds must return the
right bytes (a buffer that did not survive a shutdown makes the read fail, never return garbage).
Runs in child processes, since it shuts the driver down."""
import json
import os

import pytest

from support.helpers import run_child

RACE = r"""
import json, threading, time
import numpy as np
INVALID_HANDLE, NOT_INITIALIZED, INVALID_ARGUMENT = 2, 5, 1
assert lib.initialize_gpu(0) == 1
stop = threading.Event()
problems, counts = [], {"ok": 0, "refused": 0, "rounds": 0}
lock = threading.Lock()

def note(kind, text=""):
    with lock:
        if kind == "problem" and len(problems) < 20:
            problems.append(text)
        elif kind in counts:
            counts[kind] += 1

def check(name, result, expect_one=True):
    if result == 1 or (result and not expect_one):
        if lib.last_error():
            note("problem", f"{name} succeeded with an error: {lib.last_error()}")
        return True
    code, message = lib.last_error_code(), lib.last_error()
    if not message.startswith(name + ": ") or code not in (INVALID_HANDLE, NOT_INITIALIZED):
        note("problem", f"{name}: code {code}, {message!r}")
    note("refused")
    return False

def worker(seed):
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        n = int(rng.integers(1, 4000))
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        out = np.empty(n, np.float32)
        use_stream = seed % 2 == 0
        stream = lib.aethercl_stream_create(0, 0) if use_stream else None
        if use_stream and not check("aethercl_stream_create", stream, expect_one=False):
            continue
        if use_stream and not check("aethercl_stream_set_current",
                                    lib.aethercl_stream_set_current(0, stream)):
            continue
        handles = []
        for _ in range(3):
            handle = lib.allocate_gpu_memory(0, n * 4)
            if not check("allocate_gpu_memory", handle, expect_one=False):
                break
            handles.append(handle)
        if len(handles) == 3:
            ok = (check("write_host_to_gpu_blocking",
                        lib.write_host_to_gpu_blocking(0, handles[0], 0, n * 4, a.ctypes.data))
                  and check("write_host_to_gpu_blocking",
                            lib.write_host_to_gpu_blocking(0, handles[1], 0, n * 4, b.ctypes.data))
                  and check("execute_add_on_gpu",
                            lib.execute_add_on_gpu(0, handles[0], handles[1], handles[2], n))
                  and check("read_gpu_to_host_blocking",
                            lib.read_gpu_to_host_blocking(0, handles[2], 0, n * 4,
                                                          out.ctypes.data)))
            if ok:
                if not (out == a + b).all():
                    note("problem", f"wrong sum after a successful read (n={n})")
                note("ok")
        for h in handles:
            if h:
                lib.free_gpu_memory(0, h)
        if use_stream:
            lib.aethercl_stream_set_current(0, None)
            lib.aethercl_stream_destroy(0, stream)

threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for round in range(12):
    time.sleep(0.05)
    lib.shutdown_driver()
    time.sleep(0.01)
    assert lib.initialize_gpu(0) == 1, lib.last_error()
    counts["rounds"] += 1
time.sleep(0.1)
stop.set()
for t in threads:
    t.join(120)
    assert not t.is_alive(), "a worker hangs"
from support.hostile_cases import Harness
Harness(lib, 0).roundtrip()
lib.shutdown_driver()
print(json.dumps({"problems": problems, **counts}))
"""


@pytest.mark.parametrize("submit_thread", ["1", "0"])
def test_shutdown_racing_calls(submit_thread):
    backup = dict(os.environ)
    os.environ["AETHERCL_SUBMIT_THREAD"] = submit_thread
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        child = run_child(f"import sys; sys.path.insert(0, {here!r})\n" + RACE, timeout=600)
    finally:
        os.environ.clear()
        os.environ.update(backup)
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert not result["problems"], "\n".join(result["problems"])
    assert result["rounds"] == 12
    assert result["ok"] > 0, "no round trip completed between the shutdowns"
