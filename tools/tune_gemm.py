"""Tunes the GEMM engine's parameters for one device and stores the winner in the tuning file.

Usage: python3 tools/tune_gemm.py --build BUILD_DIR [--gpu 0] [--budget SECONDS] [--out FILE]
       (or: tools/aethercl tune [same options])

Needs only Python 3 and NumPy next to a built driver.so. Every candidate runs in a worker
process through AETHERCL_GEMM_PARAMS, so a candidate that fails to build, is refused by the
device, crashes or hangs is skipped. Every result is checked against NumPy (float64) before the
candidate may win. The search is staged: a first sweep over tile shapes and register blocks, then
the best few varied one parameter at a time (prefetching, K-step, vector width, padding, A layout,
group shape), within the time budget. Two roles are tuned (gemm/params.h): `large` on large squares
and `small` on the skinny and batched llm.py shapes. The winners of both are checked on the
backward products (transposed operands) and written to the tuning file (AETHERCL_TUNING_FILE, else
gemm_tuning.tsv next to the kernel binary cache), keyed by device name, driver version and
library version, where driver.so reads them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("tile_m", "tile_n", "tile_k", "wpt_m", "wpt_n", "pad", "vec", "a_kmajor", "direct",
        "dbuf")
RTOL = 8 * 2.0 ** -24  # the bound of tests/python/test_matmul.py

# (B, M, N, K, batched): the llm.py shapes. (1, 1024, 16, 16) is the (16*64) x 16 x 16 product
# of the attention projections and the skinny 1024 x 16 x 16; (16, 64, 53, 16) flattens to
# 1024 x 53 x 16; (64, 64, 64, 4) is the batched product over 64 heads.
SMALL_SHAPES = [(1, 1024, 16, 16, False), (16, 64, 53, 16, False), (64, 64, 64, 4, True)]
# Backward checks of a winner: odd sizes (scalar loads) and multiples of 4 (vector loads).
BACKWARD_SHAPES = [(2, 133, 70, 41), (2, 136, 132, 40)]


# ---- parameters and the search space ----------------------------------------------------------

def params_text(p: dict) -> str:
    return ",".join(f"{key}={p[key]}" for key in KEYS)


def parse_params(text: str) -> dict:
    """A full parameter dict from "key=value,..."; keys left out take the tiled GPU defaults."""
    params = tiled(64, 64, 16, 4, 4)
    for item in filter(None, text.split(",")):
        key, value = item.split("=")
        if key.strip() not in KEYS:
            raise ValueError(f"unknown GEMM parameter '{key}'")
        params[key.strip()] = int(value)
    return params


def fits(p: dict, max_wg: int, local_bytes: int) -> bool:
    """Mirrors gemm_params_problem (driver/gemm/params.cpp)."""
    if p["tile_m"] % p["wpt_m"] or p["tile_n"] % p["wpt_n"] or p["wpt_n"] % p["vec"]:
        return False
    if p["vec"] not in ((1, 2, 4, 8, 16) if p["direct"] else (1, 2, 4)):
        return False
    if p["dbuf"] not in (0, 1) or (p["direct"] and p["dbuf"]):
        return False
    if not (1 <= p["tile_m"] <= 256 and 1 <= p["tile_n"] <= 256 and 1 <= p["tile_k"] <= 128
            and p["wpt_m"] <= 32 and p["wpt_n"] <= 32 and 0 <= p["pad"] <= 32):
        return False
    threads = (p["tile_m"] // p["wpt_m"]) * (p["tile_n"] // p["wpt_n"])
    if threads > max_wg:
        return False
    if p["direct"]:
        return True
    vec = p["vec"]
    a = p["tile_k"] * (p["tile_m"] + p["pad"]) if p["a_kmajor"] else \
        p["tile_m"] * (p["tile_k"] + p["pad"])
    b = p["tile_k"] * (p["tile_n"] + p["pad"])
    rounded = lambda x: (x + vec - 1) // vec * vec  # noqa: E731
    buffers = 2 if p["dbuf"] else 1
    return buffers * (rounded(a) + rounded(b)) * 4 <= local_bytes


def tiled(tm, tn, tk, wm, wn, vec=4, pad=None, a_kmajor=1, dbuf=0):
    if pad is None:
        pad = vec if vec > 1 else 1
    return dict(tile_m=tm, tile_n=tn, tile_k=tk, wpt_m=wm, wpt_n=wn, pad=pad, vec=vec,
                a_kmajor=a_kmajor, direct=0, dbuf=dbuf)


def direct(wm, wn, vec, rt_m=8, rt_n=4, unroll=4):
    return dict(tile_m=wm * rt_m, tile_n=wn * rt_n, tile_k=unroll, wpt_m=wm, wpt_n=wn, pad=0,
                vec=vec, a_kmajor=1, direct=1, dbuf=0)


def first_sweep(kind: str, role: str) -> list:
    """The first stage: tile shapes and register blocks, most promising first."""
    if kind == "cpu":
        if role == "large":
            blocks = [(12, 32, 16), (8, 32, 16), (6, 32, 16), (16, 16, 16), (8, 16, 8),
                      (4, 32, 8), (12, 16, 8), (10, 32, 16), (8, 16, 16), (6, 16, 8)]
            space = [direct(wm, wn, vec) for wm, wn, vec in blocks]
            space += [tiled(64, 64, 16, 4, 4), tiled(32, 32, 16, 4, 4, vec=1)]
        else:
            blocks = [(4, 16, 16, 8, 1), (8, 16, 16, 8, 1), (2, 16, 16, 8, 1), (4, 16, 8, 8, 1),
                      (4, 16, 16, 4, 4), (8, 16, 8, 4, 2), (4, 32, 16, 8, 1), (1, 16, 16, 16, 1)]
            space = [direct(wm, wn, vec, rt_m, rt_n) for wm, wn, vec, rt_m, rt_n in blocks]
            space += [tiled(32, 16, 16, 4, 4, vec=4)]
        return space
    if role == "large":
        # Hopper-class first (the H100's best single-buffer shape and 128x128 / 8x8 with the
        # next K-tile prefetched, then 128x128 / 128x64 tiles, 8x8 / 8x4 per item, 256 items,
        # float4 loads, A k-major), then smaller tiles for smaller or older GPUs.
        prefetched = [tiled(64, 64, 16, 8, 8, pad=4, dbuf=1), tiled(128, 128, 16, 8, 8, dbuf=1)]
        shapes = [(128, 128, 8, 8), (128, 64, 8, 4), (64, 128, 4, 8), (128, 128, 8, 4),
                  (64, 64, 4, 4), (64, 64, 8, 4), (128, 64, 4, 4), (64, 128, 4, 4),
                  (64, 64, 4, 8), (64, 64, 8, 8), (32, 32, 4, 4), (128, 32, 8, 4)]
        return prefetched + [tiled(tm, tn, 16, wm, wn) for tm, tn, wm, wn in shapes] + \
               [tiled(128, 128, 8, 8, 8), tiled(128, 64, 8, 8, 4)]
    shapes = [(32, 32, 4, 4), (32, 16, 2, 4), (16, 16, 2, 2), (64, 16, 4, 4), (32, 32, 2, 2),
              (16, 16, 1, 1), (64, 32, 4, 4), (32, 16, 4, 4), (16, 32, 2, 4)]
    return [tiled(tm, tn, 16, wm, wn, vec=min(4, wn)) for tm, tn, wm, wn in shapes] + \
           [tiled(32, 32, 8, 4, 4), tiled(32, 32, 16, 4, 4, vec=1)]


def neighbours(p: dict) -> list:
    """The second stage: one parameter of a good candidate changed at a time."""
    out = []
    def variant(**changes):
        q = dict(p)
        q.update(changes)
        out.append(q)
    if p["direct"]:
        for unroll in (1, 2, 8):
            variant(tile_k=unroll)
        rt_m, rt_n = p["tile_m"] // p["wpt_m"], p["tile_n"] // p["wpt_n"]
        for a, b in ((1, 1), (4, 4), (8, 8), (16, 2), (2, 16), (1, 8)):
            if (a, b) != (rt_m, rt_n):
                variant(tile_m=p["wpt_m"] * a, tile_n=p["wpt_n"] * b)
        if p["vec"] == 16 and p["wpt_n"] % 8 == 0:
            variant(vec=8)
        if p["vec"] == 8 and p["wpt_n"] % 16 == 0:
            variant(vec=16)
        return out
    variant(dbuf=1 - p["dbuf"])
    for tk in (8, 16, 32):
        if tk != p["tile_k"]:
            variant(tile_k=tk)
    variant(a_kmajor=1 - p["a_kmajor"])
    for pad in sorted({0, 1, p["vec"]} - {p["pad"]}):
        variant(pad=pad)
    for vec in (1, 2, 4):
        if vec != p["vec"] and p["wpt_n"] % vec == 0:
            variant(vec=vec, pad=vec if p["pad"] else 0)
    return out


# ---- the worker: runs candidates in its own process --------------------------------------------

class Worker:
    """A child process that evaluates candidates; restarted after a crash or a hang."""

    def __init__(self, args):
        self.args = args
        self.process = None

    def start(self):
        env = dict(os.environ)
        env["AETHERCL_LIBRARY"] = str(Path(self.args.build).resolve() / "driver.so")
        env.pop("AETHERCL_GEMM_PARAMS", None)
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--gpu",
             str(self.args.gpu), "--build", self.args.build],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env, bufsize=1)

    def stop(self):
        if self.process:
            self.process.kill()
            self.process.wait()
            self.process = None

    def ask(self, request: dict, timeout: float) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.start()
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return {"ok": False, "error": "worker exited"}
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.stop()
            return {"ok": False, "error": "timed out" if not ready else "worker crashed"}
        return json.loads(line)


def worker_main(args) -> int:
    sys.path.insert(0, str(ROOT / "python_harness"))
    import ctypes
    import numpy as np
    from aethercl import Library
    lib = Library()
    gpu = args.gpu
    if lib.initialize_gpu(gpu) != 1:
        print(json.dumps({"ok": False, "error": lib.aethercl_last_error().decode()}), flush=True)
        return 1
    rng = np.random.default_rng(1)
    poison = np.full(1, np.nan, np.float32)

    def error():
        message = lib.aethercl_last_error()
        return message.decode() if isinstance(message, bytes) else str(message)

    class Buffer:
        def __init__(self, array):
            self.array = np.ascontiguousarray(array, np.float32)
            self.handle = lib.allocate_gpu_memory(gpu, max(4, self.array.nbytes))
            if not self.handle:
                raise RuntimeError(error())
            self.write(self.array)

        def write(self, array):
            data = np.ascontiguousarray(array, np.float32)
            if lib.write_host_to_gpu_blocking(gpu, self.handle, 0, data.nbytes,
                                              data.ctypes.data_as(ctypes.c_void_p)) != 1:
                raise RuntimeError(error())

        def read(self):
            out = np.empty_like(self.array)
            if lib.read_gpu_to_host_blocking(gpu, self.handle, 0, out.nbytes,
                                             out.ctypes.data_as(ctypes.c_void_p)) != 1:
                raise RuntimeError(error())
            return out

    def reference(x, y, length):
        """The float64 product and the error bound of every element."""
        ref = np.matmul(x.astype(np.float64), y.astype(np.float64))
        bound = RTOL * math.sqrt(max(length, 1)) * np.matmul(np.abs(x.astype(np.float64)),
                                                             np.abs(y.astype(np.float64)))
        return ref, bound

    def check(out, x, y, length, what, expected=None):
        ref, bound = expected or reference(x, y, length)
        bad = ~(np.abs(out.astype(np.float64) - ref) <= bound)
        if bad.any():
            raise RuntimeError(f"wrong result: {int(bad.sum())} of {bad.size} elements of "
                               f"{what} off")

    inputs = {}

    def operands(shape):
        if shape not in inputs:
            B, M, N, K, batched = shape
            a = rng.standard_normal((B, M, K)).astype(np.float32)
            b = rng.standard_normal((B, K, N) if batched else (K, N)).astype(np.float32)
            c = np.zeros((B, M, N), np.float32)
            inputs[shape] = (a, b, Buffer(a), Buffer(b), Buffer(c), reference(a, b, K))
        return inputs[shape]

    def forward(shape, reps, inner):
        B, M, N, K, batched = shape
        a, b, ta, tb, tc, expected = operands(shape)
        name = "execute_matmul_batched_on_gpu" if batched else "execute_matmul_on_gpu"
        call = getattr(lib, name)
        tc.write(np.broadcast_to(poison, tc.array.shape))
        if call(gpu, ta.handle, tb.handle, tc.handle, B, M, N, K) != 1 or \
                lib.aethercl_synchronize(gpu) != 1:
            raise RuntimeError(error())
        check(tc.read(), a, b, K, f"{B}x{M}x{N}x{K}", expected)
        best = float("inf")
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(inner):
                if call(gpu, ta.handle, tb.handle, tc.handle, B, M, N, K) != 1:
                    raise RuntimeError(error())
            if lib.aethercl_synchronize(gpu) != 1:
                raise RuntimeError(error())
            best = min(best, (time.perf_counter() - start) / inner)
        return best

    def backward(shape):
        B, M, N, K = shape
        a = rng.standard_normal((B, M, K)).astype(np.float32)
        b = rng.standard_normal((B, K, N)).astype(np.float32)
        dc = rng.standard_normal((B, M, N)).astype(np.float32)
        ta, tb, tdc = Buffer(a), Buffer(b), Buffer(dc)
        tda, tdb = Buffer(np.full_like(a, np.nan)), Buffer(np.full_like(b, np.nan))
        try:
            if lib.execute_matmul_batched_backward_on_gpu(gpu, ta.handle, tb.handle, tdc.handle,
                                                          tda.handle, tdb.handle, B, M, N,
                                                          K) != 1:
                raise RuntimeError(error())
            check(tda.read(), dc, b.transpose(0, 2, 1), N, "dA")
            check(tdb.read(), a.transpose(0, 2, 1), dc, M, "dB")
        finally:
            for t in (ta, tb, tdc, tda, tdb):
                lib.free_gpu_memory(gpu, t.handle)

    for line in sys.stdin:
        request = json.loads(line)
        if request.get("info"):
            size = lib.aethercl_device_info(gpu, None, 0)
            text = ctypes.create_string_buffer(size + 1)
            lib.aethercl_device_info(gpu, text, size + 1)
            info = json.loads(text.value.decode())
            version = lib.aethercl_version()
            info["library"] = version.decode() if isinstance(version, bytes) else version
            print(json.dumps({"ok": True, "info": info}), flush=True)
            continue
        os.environ["AETHERCL_GEMM_PARAMS"] = request["params"]
        try:
            if request.get("backward"):
                for shape in BACKWARD_SHAPES:
                    backward(tuple(shape))
                result = {"ok": True}
            else:
                seconds = [forward(tuple(s), request["reps"], request["inner"][i])
                           for i, s in enumerate(request["shapes"])]
                result = {"ok": True, "seconds": seconds}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, candidate skipped
            result = {"ok": False, "error": str(exc).strip().splitlines()[0][:300]}
        print(json.dumps(result), flush=True)
    return 0


# ---- the search -------------------------------------------------------------------------------

def flops(shape):
    B, M, N, K, _ = shape
    return 2.0 * B * M * N * K


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


class Tuner:
    def __init__(self, args, worker, info):
        self.args = args
        self.worker = worker
        self.info = info
        self.deadline = time.monotonic() + args.budget
        self.rows = []  # (role, params, score or None, note)

    def time_left(self):
        return self.deadline - time.monotonic()

    def evaluate(self, role, p, shapes, inner):
        text = params_text(p)
        if any(r[0] == role and r[1] == text for r in self.rows):
            return None
        result = self.worker.ask({"params": text, "shapes": shapes, "reps": self.args.reps,
                                  "inner": inner}, timeout=max(5.0, self.args.candidate_timeout))
        if result["ok"]:
            rates = [flops(s) / t / 1e9 for s, t in zip(shapes, result["seconds"])]
            score = geomean(rates)
            note = " ".join(f"{r:.1f}" for r in rates)
        else:
            score, note = None, result["error"]
        self.rows.append((role, text, score, note))
        shown = f"{score:9.1f}" if score is not None else "   failed"
        print(f"{role:<6} {shown}  {text}  [{note}]", flush=True)
        return score

    def search(self, role, shapes, inner, share):
        """Staged search for one role within `share` of the remaining budget."""
        stop = time.monotonic() + self.time_left() * share
        limits = (self.info["max_work_group_size"], self.info["local_mem_bytes"])
        scored = []
        for p in first_sweep(self.args.kind, role)[: self.args.max_candidates]:
            if time.monotonic() > stop:
                break
            if fits(p, *limits):
                score = self.evaluate(role, p, shapes, inner)
                if score:
                    scored.append((score, p))
        scored.sort(key=lambda sp: -sp[0])
        tried = len(scored)
        for _, seed in list(scored[:3]):
            for p in neighbours(seed):
                if time.monotonic() > stop or tried >= self.args.max_candidates * 3:
                    break
                if fits(p, *limits):
                    tried += 1
                    score = self.evaluate(role, p, shapes, inner)
                    if score:
                        scored.append((score, p))
        scored.sort(key=lambda sp: -sp[0])
        return scored

    def confirm(self, role, scored):
        """The best candidate that also computes the backward products correctly."""
        for score, p in scored[:4]:
            result = self.worker.ask({"params": params_text(p), "backward": True},
                                     timeout=max(30.0, self.args.candidate_timeout))
            if result["ok"]:
                return p
            print(f"{role:<6} rejected {params_text(p)}: backward check: {result['error']}")
        return None


def default_tuning_path() -> Path:
    """As driver/gemm/database.cpp: AETHERCL_TUNING_FILE, else next to the kernel cache."""
    if os.environ.get("AETHERCL_TUNING_FILE"):
        return Path(os.environ["AETHERCL_TUNING_FILE"])
    if os.environ.get("AETHERCL_CACHE_DIR"):
        return Path(os.environ["AETHERCL_CACHE_DIR"]) / "gemm_tuning.tsv"
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "aethercl" / "gemm_tuning.tsv"
    return Path.home() / ".cache" / "aethercl" / "gemm_tuning.tsv"


def store(path: Path, key, large: str, small: str):
    """Adds or replaces the key's entry (format of driver/gemm/database.h), atomically."""
    if any(ch in field for field in key for ch in "\t\r\n"):
        raise ValueError("a tuning key may not contain tabs or line breaks")
    lines = []
    if path.exists():
        for line in path.read_text().splitlines():
            fields = line.split("\t")
            if line and not (len(fields) >= 3 and tuple(fields[:3]) == tuple(key)):
                lines.append(line)
    if not lines or not lines[0].startswith("#"):
        lines.insert(0, "# AetherCL GEMM tuning: device, driver, library, large, small")
    lines.append("\t".join([*key, large, small]))
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + f".tmp.{os.getpid()}")
    temp.write_text("\n".join(lines) + "\n")
    temp.replace(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"),
                        help="the build folder holding driver.so")
    parser.add_argument("--gpu", type=int, default=0, help="device index (as initialize_gpu)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the search (default: 150 on GPUs, 270 on CPUs)")
    parser.add_argument("--out", default=None, help="tuning file (default: as the library)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="large squares (default: 1024 2048 on GPUs, 1024 on CPUs)")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions (best counts)")
    parser.add_argument("--max-candidates", type=int, default=16,
                        help="candidates of the first sweep per role (the second stage tries "
                             "at most twice as many)")
    parser.add_argument("--candidate-timeout", type=float, default=120.0,
                        help="seconds before a candidate counts as hung")
    parser.add_argument("--candidates", nargs="+", default=None, metavar="PARAMS",
                        help="evaluate only these parameter lists (for both roles)")
    parser.add_argument("--dry-run", action="store_true", help="do not write the tuning file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args)

    if not (Path(args.build) / "driver.so").exists():
        print(f"no driver.so in {args.build}: build first (tools/aethercl build)", file=sys.stderr)
        return 1
    worker = Worker(args)
    try:
        reply = worker.ask({"info": True}, timeout=120)
        if not reply["ok"]:
            print(f"cannot open device {args.gpu}: {reply['error']}", file=sys.stderr)
            return 1
        info = reply["info"]
        args.kind = "cpu" if info["type"] == "cpu" else "gpu"
        if args.budget is None:
            args.budget = 270.0 if args.kind == "cpu" else 150.0
        sizes = args.sizes or ([1024] if args.kind == "cpu" else [1024, 2048])
        large_shapes = [(1, s, s, s, False) for s in sizes]
        print(f"tuning GEMM on {info['name']} ({info['type']}, driver {info['driver_version']}, "
              f"library {info['library']}, {info['compute_units']} compute units, work-groups "
              f"<= {info['max_work_group_size']}, {info['local_mem_bytes']} B local memory); "
              f"budget {args.budget:.0f} s")
        print(f"large: {[f'{s}^3' for s in sizes]}  small: "
              f"{[f'{b}x{m}x{n}x{k}' for b, m, n, k, _ in SMALL_SHAPES]} (B x M x N x K)")
        print(f"{'role':<6} {'GFLOP/s':>9}  parameters  [GFLOP/s per shape or why it failed]")
        tuner = Tuner(args, worker, info)
        large_inner = [1] * len(large_shapes)
        small_inner = [20] * len(SMALL_SHAPES)
        if args.candidates:
            fixed = [parse_params(text) for text in args.candidates]
            results = {}
            for role, shapes, inner in (("large", large_shapes, large_inner),
                                        ("small", SMALL_SHAPES, small_inner)):
                scored = [(s, p) for p in fixed
                          if (s := tuner.evaluate(role, p, shapes, inner))]
                results[role] = sorted(scored, key=lambda sp: -sp[0])
        else:
            results = {"large": tuner.search("large", large_shapes, large_inner, 0.6)}
            results["small"] = tuner.search("small", SMALL_SHAPES, small_inner, 0.85)
        winners = {}
        for role in ("large", "small"):
            winner = tuner.confirm(role, results[role])
            if winner is None:
                print(f"no {role} candidate passed every check: nothing stored", file=sys.stderr)
                return 1
            winners[role] = params_text(winner)
    finally:
        worker.stop()

    print("\nbest of each role (GFLOP/s: geometric mean over the role's shapes):")
    for role in ("large", "small"):
        score = next(r[2] for r in tuner.rows if r[0] == role and r[1] == winners[role])
        print(f"  {role:<6} {score:9.1f}  {winners[role]}")
    key = (info["name"], info["driver_version"], info["library"])
    path = Path(args.out) if args.out else default_tuning_path()
    if args.dry_run:
        print("dry run: tuning file not written")
    else:
        store(path, key, winners["large"], winners["small"])
        print(f"stored in {path} for {key[0]} (driver {key[1]}, library {key[2]})")
    print("built-in table line (driver/gemm/database.cpp, kKnownDevices):")
    print(f'    {{"{info["name"]}", "{winners["large"]}",\n     "{winners["small"]}"}},')
    return 0


if __name__ == "__main__":
    sys.exit(main())
