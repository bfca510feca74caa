"""aethercl.inspect: the token, read-only endpoints, bounded history and the JSON the page reads
(in-process server), then the page itself in headless Chromium against a real training run."""
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from aethercl import Device as ShimDevice, find_library, inspect
from aethercl.inspect import app as inspect_app
from aethercl.inspect.history import History

from support import webdriver

ROOT = Path(__file__).resolve().parents[2]


def request(url, token=None, method="GET", header=True):
    headers = {"Authorization": f"Bearer {token}"} if token and header else {}
    if token and not header:
        url += ("&" if "?" in url else "?") + "token=" + token
    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            body = response.read()
            return response.status, body, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers


@pytest.fixture
def inspector(lib, device):
    server = inspect.serve(port=0, library=lib, sample_period_s=0.05, announce=False)
    try:
        yield server
    finally:
        server.close()
    assert inspect.active() is None


def base(server):
    return f"http://127.0.0.1:{server.port}"


def test_binds_loopback_and_refuses_requests_without_the_right_token(inspector):
    assert inspector.server.server_address[0] == "127.0.0.1"
    assert len(inspector.token) >= 32
    for path in ("/", "/gpus", "/gpus/0/state", "/gpus/0/allocations", "/gpus/0/kernel_log",
                 "/events", "/training", "/nonexistent"):
        status, body, headers = request(base(inspector) + path)
        assert status == 401, path
        assert json.loads(body)["status"] == 401
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert request(base(inspector) + path, "x" + inspector.token)[0] == 401
    assert request(base(inspector) + "/gpus", inspector.token)[0] == 200
    assert request(base(inspector) + "/gpus", inspector.token, header=False)[0] == 200


def test_loopback_addresses_are_recognised():
    assert inspect.is_loopback("127.0.0.1") and inspect.is_loopback("::1")
    assert inspect.is_loopback("localhost")
    assert not inspect.is_loopback("0.0.0.0") and not inspect.is_loopback("192.168.1.2")


def test_read_only_every_other_method_is_refused(inspector):
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        status, body, headers = request(base(inspector) + "/gpus", inspector.token, method)
        assert status == 405, method
        assert headers["Allow"] == "GET, HEAD"


def test_devices_state_allocations_and_events(inspector, lib, gpu_index):
    shim_device = ShimDevice(gpu_index, library=lib)
    with shim_device.alloc(12345, label="inspect-test-buffer") as buffer:
        buffer.write(np.zeros(12345 // 4, np.float32))
        typed = symbol_in_build("aethercl_buffer_set_dtype")
        if typed:   # a dtype tag (version 3) shows in the table; 0 is f32
            set_dtype = ctypes.CDLL(str(find_library())).aethercl_buffer_set_dtype
            set_dtype.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
            assert set_dtype(gpu_index, buffer.handle, 0) == 1
        status, body, _ = request(base(inspector) + "/gpus", inspector.token)
        gpus = json.loads(body)
        assert gpus["pid"] == os.getpid()
        assert gpus["devices"][gpu_index]["name"] and gpus["devices"][gpu_index]["initialized"]
        time.sleep(0.3)  # a few sampler periods
        state = json.loads(request(base(inspector) + f"/gpus/{gpu_index}/state",
                                   inspector.token)[1])
        assert state["initialized"] and state["memory"]["bytes_in_use"] >= 12345
        assert state["memory"]["peak_bytes_reserved"] >= state["memory"]["bytes_reserved"] > 0
        assert len(state["history"]) >= 2 and "bytes_cached" in state["history"][-1]
        def labelled_rows():
            allocations = json.loads(request(base(inspector) + f"/gpus/{gpu_index}/allocations",
                                             inspector.token)[1])
            return [a for a in allocations["allocations"] if a["label"] == "inspect-test-buffer"]
        rows = labelled_rows()
        assert len(rows) == 1 and rows[0]["bytes"] == 12345 and rows[0]["age_s"] >= 0
        assert (rows[0]["dtype"] is not None) == typed
        deadline = time.monotonic() + 10
        while labelled_rows()[0]["age_s"] < rows[0]["age_s"] + 0.2:   # its age grows
            assert time.monotonic() < deadline
            time.sleep(0.05)
        handle = rows[0]["handle"]
    allocations = json.loads(request(base(inspector) + f"/gpus/{gpu_index}/allocations",
                                     inspector.token)[1])
    assert handle not in {a["handle"] for a in allocations["allocations"]}
    events = json.loads(request(base(inspector) + "/events", inspector.token)[1])["events"]
    assert any(e["kind"] == "inspector" for e in events)
    newer = json.loads(request(base(inspector) + f"/events?since={events[-1]['id']}",
                               inspector.token)[1])["events"]
    assert all(e["id"] > events[-1]["id"] for e in newer)
    status, body, _ = request(base(inspector) + "/gpus/999/state", inspector.token)
    assert status == 404 and "no device 999" in json.loads(body)["error"]


def test_kernel_log_entries_or_the_not_available_marker(inspector, lib, device, gpu_index):
    a = device.upload(np.ones(257, np.float32))
    b = device.upload(np.ones(257, np.float32))
    out = device.empty((257,))
    lib.check("execute_add_on_gpu", gpu_index, a.handle, b.handle, out.handle, 257)
    lib.check("aethercl_synchronize", gpu_index)
    for t in (a, b, out):
        t.free()
    log = json.loads(request(base(inspector) + f"/gpus/{gpu_index}/kernel_log?limit=5",
                             inspector.token)[1])
    if inspector.sources.kernel_log_available:
        assert log["available"] and 1 <= len(log["entries"]) <= 5
        newest = log["entries"][0]
        assert newest["entry_point"] == "execute_add_on_gpu" and newest["kernel"]
        assert newest["queued_ns"] <= log["now_ns"]
    else:
        assert log == {"device": gpu_index, "available": False, "total": 0, "entries": [],
                       "message": "not available in this library build"}


def test_training_losses_are_reported_only_while_serving(inspector):
    inspect.report_loss(1, 2.5)
    inspect.report_loss(2, float("nan"))
    inspect.report_loss(2, 2.25, "validation")
    training = json.loads(request(base(inspector) + "/training", inspector.token)[1])
    assert training["reported"]
    assert [(l["step"], l["loss"], l["split"]) for l in training["losses"]] == [
        (1, 2.5, "train"), (2, None, "train"), (2, 2.25, "validation")]


def test_reporting_without_an_inspector_is_a_no_op():
    assert inspect.active() is None
    inspect.report_loss(1, 1.0)
    inspect.report_event("x", "nobody listens")


def test_history_is_bounded():
    history = History(memory_samples=8, events=5, losses=7)
    for i in range(100):
        history.add_memory_sample(0, {"bytes_in_use": i, "peak_bytes_reserved": i}, float(i))
        history.add_event("test", str(i))
        history.add_loss(i, 1.0 / (i + 1), "train")
    assert [s["bytes_in_use"] for s in history.memory(0)] == list(range(92, 100))
    assert len(history.events()) == 5 and history.events()[-1]["message"] == "99"
    assert len(history.losses()) == 7
    for i in range(inspect_app.KERNEL_ROWS_MAX):
        history.first_seen(0, hex(i), 0.0)
    assert len(history._first_seen) <= 20000


def test_page_loads_nothing_from_outside():
    html = inspect_app.page_html()
    assert "/*INSPECT_JS*/" not in html and "/*INSPECT_CSS*/" not in html
    external = [u for u in re.findall(r"https?://[^\s\"'<>)]+", html)
                if not u.startswith("http://www.w3.org/2000/svg")]
    assert external == []
    assert "connect-src 'self'" in inspect_app.SECURITY_HEADERS["Content-Security-Policy"]
    assert "innerHTML" not in html   # program-supplied text is inserted as text only


# --- the page in a real browser, against a training run in another process ---

def start_training(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python_harness"))
    command = [sys.executable, str(ROOT / "python_harness" / "train_demo.py"), "--inspect", "0",
               "--steps", "100000", "--time_limit", "120", "--embed_dim", "32", "--num_layers",
               "1", "--num_heads", "2", "--d_ff", "64", "--max_len", "32", "--batch_size", "4",
               "--eval_every", "25", "--eval_batches", "1", "--sample_length", "0",
               "--save_dir", str(tmp_path)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    for line in process.stderr:
        found = re.search(r"serving on (http://\S+)", line)
        if found:   # keep draining its stderr so the run never blocks on a full pipe
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, found.group(1)
        if time.monotonic() > deadline:
            break
    process.kill()
    raise AssertionError("the training run did not print the inspector URL")


def page_text(browser, selector):
    return browser.script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent);",
        selector)


@pytest.mark.skipif(webdriver.find_browser() is None and os.environ.get("CI") != "true",
                    reason="chromium + chromium-driver not installed (tools/aethercl setup)")
def test_page_in_headless_chromium_during_training(tmp_path):
    started = time.monotonic()
    process, url = start_training(tmp_path)
    try:
        with webdriver.Browser() as browser:
            browser.get(url)
            cards = browser.wait_for(lambda: page_text(browser, ".card.device .name"),
                                     what="the device cards")
            assert cards[0].startswith("GPU 0: ")
            labels = browser.wait_for(
                lambda: [t for t in page_text(browser, "#allocations tbody td:first-child")
                         if t.startswith("adam_m_")], what="a labelled allocation")
            assert labels
            if kernel_log_in_build():
                kernels = browser.wait_for(lambda: page_text(browser, "#kernels tbody tr"),
                                           what="recent kernels")
                assert len(kernels) >= 5 and "ago" in kernels[0]
            else:
                browser.wait_for(lambda: "not available in this library build" in
                                 page_text(browser, "#kernel-count")[0],
                                 what="the kernel log's not-available marker")
            browser.wait_for(lambda: not browser.script(
                "return document.getElementById('training-section').hidden"),
                what="the training loss chart")
            status = browser.script(
                "return fetch('/gpus').then(r => r.status);")
            assert status == 401
            authorized = browser.script(
                "return fetch('/gpus', {headers: {Authorization: 'Bearer ' + TOKEN}})"
                ".then(r => r.status);")
            assert authorized == 200
            shot = os.environ.get("AETHERCL_INSPECT_SCREENSHOT")
            if shot:
                time.sleep(float(os.environ.get("AETHERCL_INSPECT_SCREENSHOT_DELAY", "0")))
                browser.screenshot(shot)
    finally:
        process.kill()
        process.wait()
    assert time.monotonic() - started < 50


def symbol_in_build(name: str) -> bool:
    return hasattr(ctypes.CDLL(str(find_library())), name)


def kernel_log_in_build() -> bool:
    return symbol_in_build("aethercl_kernel_log")
