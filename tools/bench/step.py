"""One training step of the unmodified llm.py (docs/ABI.md §7.8: 695-696 driver calls with the
default model's sizes, including its host-side NumPy work) timed on driver.so and on the do-nothing
driver_null.so in the same run: the ratio is what the driver adds on top of the frontend itself.
A second, instrumented pass attributes host time to each entry point (where the time goes).

Usage: tools/aethercl bench step [--steps 20] [--warmup 3] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # llm_replay, also when imported


class TimedDll:
    """Proxies a ctypes library, adding up the host time spent in each function."""

    def __init__(self, dll: ctypes.CDLL):
        self._dll = dll
        self.seconds: Counter = Counter()
        self.calls: Counter = Counter()

    def __getattr__(self, name):
        function = getattr(self._dll, name)
        seconds, calls, clock = self.seconds, self.calls, time.perf_counter

        def timed(*args):
            start = clock()
            result = function(*args)
            seconds[name] += clock() - start
            calls[name] += 1
            return result
        return timed


def child(library: str, gpu: int, steps: int, warmup: int) -> dict:
    import numpy as np
    from llm_replay import B, S, V, LlmStep, Recorder, declare, make_weights

    dll = ctypes.CDLL(library)
    declare(dll)
    assert dll.initialize_gpu(gpu) == 1
    rng = np.random.default_rng(1)
    params, pe = make_weights(rng)

    def batch():
        ids = rng.integers(1, V - 1, size=(B, S)).astype(np.int32)
        targets = np.roll(ids, -1, axis=1)
        return ids, targets

    model = LlmStep(Recorder(dll, gpu), params, pe)
    for _ in range(warmup):
        model.step(*batch())
    times = []
    for _ in range(steps):
        data = batch()
        start = time.perf_counter()
        model.step(*data)
        times.append(time.perf_counter() - start)
    model.teardown()

    timed = TimedDll(dll)
    model = LlmStep(Recorder(timed, gpu), params, pe)
    model.step(*batch())
    timed.seconds.clear()
    timed.calls.clear()
    tracing = hasattr(dll, "aethercl_trace_start") and not library.endswith("driver_null.so")
    if tracing:  # device time per kernel and transfer, from OpenCL profiling events
        dll.aethercl_trace_start.argtypes = [ctypes.c_char_p]
        dll.aethercl_trace_summary.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        dll.aethercl_trace_summary.restype = ctypes.c_size_t
        trace_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"step-trace-{os.getpid()}.json")
        assert dll.aethercl_trace_start(trace_path.encode()) == 1
    for _ in range(steps):
        model.step(*batch())
    device = {}
    if tracing:
        dll.aethercl_synchronize(gpu)
        size = dll.aethercl_trace_summary(None, 0)
        text = ctypes.create_string_buffer(size + 1)
        dll.aethercl_trace_summary(text, size + 1)
        device = {k["name"]: 1e-6 * k["total_ns"] / steps for k in json.loads(text.value)["kernels"]}
        dll.aethercl_trace_stop()
        os.remove(trace_path)
    model.teardown()
    dll.shutdown_driver()
    per_op = {name: {"ms_per_step": 1e3 * s / steps, "calls_per_step": timed.calls[name] / steps}
              for name, s in timed.seconds.items()}
    return {"median_ms": 1e3 * statistics.median(times), "mean_ms": 1e3 * statistics.mean(times),
            "per_op": per_op, "device_ms_per_step": device}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.gpu, args.steps, args.warmup)))
        return 0
    build = Path(args.build).resolve()
    results = {}
    for name in ("driver.so", "driver_null.so"):
        out = subprocess.run([sys.executable, __file__, "--child", str(build / name), "--gpu",
                              str(args.gpu), "--steps", str(args.steps), "--warmup",
                              str(args.warmup)], check=True, capture_output=True, text=True)
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    real, null = results["driver.so"], results["driver_null.so"]
    print(f"llm.py training step (default model), median of {args.steps} after {args.warmup} warm-up")
    print(f"  driver.so       {real['median_ms']:9.2f} ms/step")
    print(f"  driver_null.so  {null['median_ms']:9.2f} ms/step  (the frontend alone)")
    print(f"  ratio           {real['median_ms'] / null['median_ms']:9.2f}x")
    print("\nwhere the time goes on driver.so (host time inside each entry point, instrumented pass):")
    print(f"  {'entry point':<40} {'calls/step':>10} {'ms/step':>9} {'vs null':>9}")
    rows = sorted(real["per_op"].items(), key=lambda kv: -kv[1]["ms_per_step"])
    for name, row in rows:
        null_ms = null["per_op"].get(name, {}).get("ms_per_step", 0.0)
        print(f"  {name:<40} {row['calls_per_step']:>10.0f} {row['ms_per_step']:>9.3f} "
              f"{null_ms:>9.3f}")
    inside = sum(r["ms_per_step"] for r in real["per_op"].values())
    print(f"  {'total inside the driver':<40} {'':>10} {inside:>9.3f}")
    device = sorted(real["device_ms_per_step"].items(), key=lambda kv: -kv[1])
    if device:
        print("\ndevice time per step on driver.so (OpenCL profiling, traced pass):")
        for name, ms in device:
            print(f"  {name:<40} {ms:>9.3f} ms")
        print(f"  {'total device time':<40} {sum(ms for _, ms in device):>9.3f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
