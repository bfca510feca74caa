"""Where a training step's time goes: kernels per step, device-busy share of the step's wall time
and the costliest kernels, from the library's trace (`bench train --trace DIR`)."""
from __future__ import annotations

import json
import time
from typing import Callable, List

TRACED_STEPS = 3


def trace_steps(step: Callable[[tuple], float], sync: Callable[[], None], batches: List[tuple],
                path: str, steps: int = TRACED_STEPS) -> dict:
    """Runs steps more training steps with tracing on (Chrome trace written to path) and returns
    per-step figures: wall_ms, busy_ms (sum of kernel and transfer device times), launches,
    transfers and the kernels by device time ({"name", "calls", "us"} per step)."""
    from aethercl import ops
    sync()
    ops.trace_start(0, path)
    try:
        start = time.perf_counter()
        for i in range(steps):
            step(batches[i % len(batches)])
        sync()
        wall = time.perf_counter() - start
        summary = json.loads(ops.trace_summary(0))
    finally:
        ops.trace_stop(0)
    kernels = [k for k in summary["kernels"] if k["calls"]]
    is_transfer = lambda k: k.get("bytes") or "copy" in k["name"] or "write" in k["name"]  # noqa
    per_step = sorted(({"name": k["name"], "calls": k["calls"] / steps,
                        "us": k["total_ns"] / steps / 1e3, "transfer": bool(is_transfer(k))}
                       for k in kernels), key=lambda k: -k["us"])
    return {"steps": steps, "wall_ms": 1e3 * wall / steps,
            "busy_ms": sum(k["us"] for k in per_step) / 1e3,
            "launches": sum(k["calls"] for k in per_step if not k["transfer"]),
            "transfers": sum(k["calls"] for k in per_step if k["transfer"]),
            "kernels": per_step, "trace": path}


def describe(profile: dict, top: int = 15) -> str:
    """A few lines for the log: the step's shape and its costliest kernels."""
    lines = [f"    traced step: {profile['wall_ms']:.2f} ms wall (tracing on), device busy "
             f"{profile['busy_ms']:.2f} ms ({profile['busy_ms'] / profile['wall_ms']:.0%}), "
             f"{profile['launches']:.0f} launches, {profile['transfers']:.0f} transfers"]
    for k in profile["kernels"][:top]:
        lines.append(f"      {k['us']:9.1f} us  {k['calls']:5.0f}x  {k['name']}")
    return "\n".join(lines)
