"""Replays the unmodified llm.py's per-step call sequence (docs/ABI.md §7.2 and §7.8, default model
B=16, S=64, E=16, H=4, d_ff=256, L=6, V=53) for two steps against a copy of the library loaded the
way the original client loads it: `ctypes.CDLL(".../driver.dll")` with argtypes written by hand
from docs/ABI.md §4.1 (deliberately not taken from the shim or the manifest).

Checked: every return value; the per-phase call composition and the traffic per step against the
tables of section 6.4; the loss against a float64 NumPy forward of the same weights (relative
1e-4); the Adam update of the output bias; every allocation freed, with the driver's live-buffer
count back at its baseline. The replay runs in a child process (it shuts its copy down)."""
from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "bench"))
from llm_replay import (B, S, V, LlmStep, Recorder, adam_reference, declare,  # noqa: E402
                        make_weights, reference_loss)


def replay(dll_path: str, gpu: int) -> dict:
    dll = ctypes.CDLL(dll_path)
    declare(dll)
    assert dll.initialize_gpu(gpu) == 1
    rec = Recorder(dll, gpu)
    baseline = rec.live_buffers()
    rng = np.random.default_rng(2024)
    params, pe = make_weights(rng)
    model = LlmStep(rec, params, pe)
    setup = dict(rec.calls)
    report = {"setup": setup, "steps": []}
    m = np.zeros((1, V), np.float32)
    v = np.zeros((1, V), np.float32)
    for step in range(2):
        ids = rng.integers(1, V - 1, size=(B, S)).astype(np.int32)
        targets = np.roll(ids, -1, axis=1)
        targets[:, -1] = 0                                   # padding targets
        traffic_before = rec.traffic.copy()
        bias_before = rec.peek(model.param_h[-1], (1, V))
        loss, phases, bias_grad = model.step(ids, targets)
        expected = reference_loss(params, pe, ids, targets)
        bias_after = rec.peek(model.param_h[-1], (1, V))
        want, m, v = adam_reference(bias_before, bias_grad.astype(np.float32), m, v, step + 1)
        report["steps"].append({
            "loss": loss, "expected_loss": expected,
            "phases": {k: dict(c) for k, c in phases.items()},
            "traffic": dict(rec.traffic - traffic_before),
            "bias_max_error": float(np.abs(bias_after - want).max()),
            "bias_max_change": float(np.abs(bias_after - bias_before).max()),
        })
        if step == 0:  # the bias changed on the device: the reference forward must use it
            params = list(params)
            params[-1] = bias_after
    model.teardown()
    report["live_handles"] = len(rec.live)
    report["allocated"] = rec.calls["allocate"]
    report["freed"] = rec.calls["free"]
    report["live_buffers_baseline"] = baseline
    report["live_buffers_end"] = rec.live_buffers()
    dll.shutdown_driver()
    return report


# --- the pytest side ----------------------------------------------------------------------------

FORWARD = {"allocate": 207, "free": 206, "write": 45, "read": 38, "clone": 39, "matmul": 37,
           "transpose_12": 24, "layernorm": 13, "add": 12, "matmul_batched": 12,
           "transpose_batched": 6, "mul": 6, "softmax": 6, "gelu": 6, "add_broadcast_pe": 1}
LOSS_BACKWARD = {"allocate": 10, "free": 9, "write": 4, "read": 2, "add": 2, "clone": 2, "mul": 1,
                 "log_softmax": 1, "cross_entropy": 1}
TRAFFIC = {"h2d": 21_234_088, "d2h": 7_523_284, "clone": 14_508_244, "allocated": 74_101_372}


def test_llm_py_call_sequence_replays_on_a_driver_dll_copy(lib, gpu_index, tmp_path):
    dll = tmp_path / "driver.dll"
    shutil.copy(lib.path, dll)
    child = subprocess.run([sys.executable, __file__, str(dll), str(gpu_index)],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert child.returncode == 0, child.stderr[-4000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])

    assert report["setup"] == {"allocate": 172, "write": 172}
    first, second = report["steps"]
    assert first["phases"]["zero_grad"] == {}
    assert second["phases"]["zero_grad"] == {"free": 1, "allocate": 1, "write": 1}
    for step in (first, second):
        assert step["phases"]["forward"] == FORWARD
        assert step["phases"]["optimizer"] == {"adam": 1}
        assert step["phases"]["release"] == {"free": 2}
        assert math.isfinite(step["loss"])
        assert step["loss"] == pytest.approx(step["expected_loss"], rel=1e-4)
        assert step["bias_max_change"] > 0
        assert step["bias_max_error"] <= 1e-6
    assert first["phases"]["loss_backward"] == dict(LOSS_BACKWARD, allocate=11, write=5)
    assert second["phases"]["loss_backward"] == LOSS_BACKWARD
    assert sum(sum(p.values()) for p in first["phases"].values()) == 695
    assert sum(sum(p.values()) for p in second["phases"].values()) == 696
    assert second["traffic"] == TRAFFIC
    assert report["live_handles"] == 0
    assert report["allocated"] == report["freed"]
    assert report["live_buffers_end"] == report["live_buffers_baseline"]


if __name__ == "__main__":
    print(json.dumps(replay(sys.argv[1], int(sys.argv[2]))))
