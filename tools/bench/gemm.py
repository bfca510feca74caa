"""GEMM throughput per compute mode: aethercl_gemm next to cuBLAS (PyTorch on the same GPU) and
CLBlast SGEMM (tools/bench/gemm_bench.cpp), all in the same run, plus accuracy against float64.

Usage: tools/aethercl bench gemm [--modes fp32 tf32 3xtf32 bf16 fp16] [--sizes 1024 2048 ...]
          [--skinny] [--shapes 16x8192x8192 ...] [--accuracy 4096]
          [--mma-configs "default;bm=128,bn=128;..."] [--trans-b] [--kernel-times] [--out DIR]

Per mode, A and B are stored as the mode's natural type (float32 for fp32/tf32/3xtf32, bf16 for
bf16, f16 for fp16) and C like them, as torch.matmul does; cuBLAS runs the same product: FP32
with TF32 off, TF32 on (allow_tf32), bf16 and f16 tensors; 3xTF32 is compared with cuBLAS FP32,
whose accuracy it matches. Times: after a warm-up (kernel builds, probes), batches of launches
between synchronisations, long enough to hide the synchronisation; the median batch. Inputs are
random (never zeros). CLBlast has no half-precision GEMM on devices without cl_khr_fp16, so it
appears in the FP32 rows (next to both our FP32 entry points); on CPU devices NumPy's float32
matmul (the host's BLAS) is timed beside them. Writes gemm.json and gemm.png.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402

# (m, n, k): llm-like products, a GPT-2-small step at 8192 tokens (QKV, attention output, MLP
# up and down, the vocabulary projection) and decode-like skinny ones.
SKINNY = [(8192, 2304, 768), (8192, 768, 768), (8192, 3072, 768), (8192, 768, 3072),
          (8192, 50304, 768), (128, 4096, 4096), (16, 8192, 8192)]
STORAGE = {"fp32": g.F32, "tf32": g.F32, "3xtf32": g.F32, "bf16": g.BF16, "fp16": g.F16}
TARGET_BATCH_SECONDS = 0.05


def encode(values: np.ndarray, dtype: int) -> np.ndarray:
    if dtype == g.F32:
        return values.astype(np.float32)
    if dtype == g.F16:
        return values.astype(np.float16).view(np.uint16)
    u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def decode(raw: np.ndarray, dtype: int) -> np.ndarray:
    if dtype == g.F32:
        return raw.astype(np.float64)
    if dtype == g.F16:
        return raw.view(np.float16).astype(np.float64)
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def timed(run, sync, max_inner: int = 200) -> float:
    """Seconds per call: warm-up, then the median of batches of at most max_inner back-to-back
    calls (as many as fill TARGET_BATCH_SECONDS)."""
    run()
    sync()
    start = time.perf_counter()
    run()
    sync()
    once = max(time.perf_counter() - start, 1e-6)
    inner = max(1, min(max_inner, int(TARGET_BATCH_SECONDS / once)))
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        sync()
        batches.append((time.perf_counter() - start) / inner)
    return statistics.median(batches)


class Ours:
    def __init__(self, lib: Library, gpu: int):
        self.lib, self.gpu = lib, gpu
        lib.check("initialize_gpu", gpu)
        info = json.loads(lib.json_call("aethercl_device_info", gpu))
        self.device = info["name"]
        self.is_cpu = str(info.get("type", "")).lower() == "cpu"

    def upload(self, array: np.ndarray) -> int:
        handle = self.lib.check_handle("allocate_gpu_memory", self.gpu, array.nbytes)
        self.lib.check("write_host_to_gpu_blocking", self.gpu, handle, 0, array.nbytes,
                       array.ctypes.data)
        return handle

    def product(self, mode: str, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int,
                want_result: bool = False, trans_b: bool = False, kernel_times: bool = False):
        """Seconds per product (or its result); B stored n x k when trans_b. With kernel_times,
        self.kernels holds each kernel's device microseconds per product, from a trace."""
        dtype = STORAGE[mode]
        stored_b = np.ascontiguousarray(b.T) if trans_b else b
        ha, hb = self.upload(encode(a, dtype)), self.upload(encode(stored_b, dtype))
        c_bytes = m * n * g.DTYPE_BYTES[dtype]
        hc = self.lib.check_handle("allocate_gpu_memory", self.gpu, c_bytes)
        desc = g.gemm_desc(ha, hb, hc, m, n, k, dtype_a=dtype, dtype_c=dtype,
                           compute=g.COMPUTE_MODES[mode], trans_b=int(trans_b))
        run = lambda: g.gemm(self.lib, self.gpu, desc)  # noqa: E731
        sync = lambda: self.lib.check("aethercl_synchronize", self.gpu)  # noqa: E731
        result = None
        try:
            seconds = timed(run, sync) if not want_result else None
            if kernel_times:
                self.kernels = self.kernel_split(run, sync)
            if want_result:
                run()
                raw = np.empty(m * n, np.float32 if dtype == g.F32 else np.uint16)
                self.lib.check("read_gpu_to_host_blocking", self.gpu, hc, 0, c_bytes,
                               raw.ctypes.data)
                result = decode(raw, dtype).reshape(m, n)
        finally:
            for handle in (ha, hb, hc):
                self.lib.free_gpu_memory(self.gpu, handle)
        return result if want_result else seconds


    def kernel_split(self, run, sync, reps: int = 10) -> dict:
        """Device microseconds per call of each kernel run() launches (aethercl_trace_summary)."""
        with tempfile.TemporaryDirectory() as folder:
            self.lib.check("aethercl_trace_start", str(Path(folder) / "trace.json").encode())
            try:
                for _ in range(reps):
                    run()
                sync()
                summary = json.loads(self.lib.json_call("aethercl_trace_summary"))
            finally:
                self.lib.check("aethercl_trace_stop")
        return {kernel["name"]: kernel["total_ns"] / reps / 1e3 for kernel in summary["kernels"]
                if kernel["calls"] and "copy" not in kernel["name"]}


class Cublas:
    """torch.matmul on the CUDA device (cuBLAS)."""

    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        self.torch = torch
        self.device = torch.cuda.get_device_name(0)

    def tensors(self, mode, a, b):
        torch = self.torch
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode, torch.float32)
        return (torch.from_numpy(a).to("cuda", dtype), torch.from_numpy(b).to("cuda", dtype))

    def product(self, mode, a, b, want_result=False):
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        ta, tb = self.tensors(mode, a, b)
        if want_result:
            return torch.matmul(ta, tb).double().cpu().numpy()
        out = torch.empty((ta.shape[0], tb.shape[1]), dtype=ta.dtype, device="cuda")
        seconds = timed(lambda: torch.matmul(ta, tb, out=out), torch.cuda.synchronize)
        del ta, tb, out
        torch.cuda.empty_cache()
        return seconds


def clblast_rows(build: Path, gpu: int, shapes, reps: int):
    """CLBlast SGEMM and our execute_matmul_on_gpu (FP32 exact) from bench_gemm, per shape."""
    binary = build / "bench" / "bench_gemm"
    if not binary.exists():
        print("bench_gemm is not built (no CLBlast): no CLBlast column", file=sys.stderr)
        return {}
    rows = {}
    for m, n, k in shapes:
        result = subprocess.run([str(binary), str(build / "driver.so"), str(gpu), str(reps),
                                 f"{m}x{n}x{k}"], capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if lines:
            row = json.loads(lines[-1])
            rows[(m, n, k)] = (row["clblast_gflops"] / 1e3, row["ours_gflops"] / 1e3)
        else:
            print(f"bench_gemm {m}x{n}x{k} failed: {result.stderr.strip()[-300:]}",
                  file=sys.stderr)
    return rows


def accuracy(ours: Ours, cublas, size: int, modes, rng) -> list:
    """Relative Frobenius error against float64 of each mode, ours and cuBLAS, same inputs."""
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    norm = np.linalg.norm(ref)
    rows = []
    for mode in modes:
        if STORAGE[mode] != g.F32:
            continue
        row = {"mode": mode, "size": size,
               "ours": float(np.linalg.norm(ours.product(mode, a, b, size, size, size, True)
                                            - ref) / norm)}
        if cublas is not None:
            reference_mode = "fp32" if mode == "3xtf32" else mode
            row["cublas_" + reference_mode] = float(
                np.linalg.norm(cublas.product(reference_mode, a, b, True) - ref) / norm)
        rows.append(row)
        print(f"accuracy {size}^3 {mode:>7}: " + ", ".join(
            f"{key} {value:.3e}" for key, value in row.items() if key not in ("mode", "size")))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("AETHERCL_BUILD_DIR", "build"))
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--modes", nargs="+", default=list(STORAGE), choices=list(STORAGE))
    parser.add_argument("--sizes", nargs="*", type=int, default=[1024, 2048, 4096, 8192])
    parser.add_argument("--skinny", action="store_true", help="add the llm-like shapes")
    parser.add_argument("--shapes", nargs="+", default=[], metavar="MxNxK",
                        help="add these shapes, e.g. 16x8192x8192")
    parser.add_argument("--reps", type=int, default=5, help="CLBlast repetitions")
    parser.add_argument("--accuracy", type=int, default=0, help="accuracy check at this size")
    parser.add_argument("--no-cublas", action="store_true")
    parser.add_argument("--no-clblast", action="store_true")
    parser.add_argument("--mma-configs", default="",
                        help="';'-separated AETHERCL_MMA_PARAMS values to compare (tuning); "
                             "'default' is the library's own choice")
    parser.add_argument("--trans-b", action="store_true", help="B stored transposed (n x k)")
    parser.add_argument("--kernel-times", action="store_true",
                        help="each kernel's device time per product, from a trace")
    parser.add_argument("--out", default=None, help="folder for gemm.json and gemm.png")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    os.environ.setdefault("AETHERCL_LIBRARY", str(build / "driver.so"))
    out = Path(args.out or build / "bench")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)

    ours = Ours(Library(), args.gpu)
    cublas = None
    if not args.no_cublas:
        try:
            cublas = Cublas()
        except Exception as error:  # no torch, no CUDA: the cuBLAS column stays empty
            print(f"no cuBLAS reference: {error}", file=sys.stderr)
    shapes = ([(s, s, s) for s in args.sizes] + (SKINNY if args.skinny else []) +
              [tuple(int(d) for d in shape.split("x")) for shape in args.shapes])
    clblast = {} if args.no_clblast else clblast_rows(
        build, args.gpu, shapes if "fp32" in args.modes else [], args.reps)
    configs = [None if c == "default" else c for c in args.mma_configs.split(";") if c] or [None]

    rows = []
    print(f"device: {ours.device}" + (f"; cuBLAS on {cublas.device}" if cublas else ""))
    header = (f"{'M x N x K':<20} {'mode':>7} {'config':>32} {'ours TF/s':>10} "
              f"{'cuBLAS':>8} {'ratio':>6} {'CLBlast':>8} {'ratio':>6}")
    print(header)
    for m, n, k in shapes:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        flops = 2.0 * m * n * k
        for mode in args.modes:
            reference = None
            if cublas is not None:
                reference = flops / cublas.product("fp32" if mode == "3xtf32" else mode, a, b)
            for config in configs:
                if config:
                    os.environ["AETHERCL_MMA_PARAMS"] = config
                else:
                    os.environ.pop("AETHERCL_MMA_PARAMS", None)
                try:
                    rate = flops / ours.product(mode, a, b, m, n, k, trans_b=args.trans_b,
                                                kernel_times=args.kernel_times)
                except Exception as error:
                    print(f"{m}x{n}x{k} {mode}: {error}", file=sys.stderr)
                    continue
                row = {"device": ours.device, "m": m, "n": n, "k": k, "mode": mode,
                       "config": config or "default", "ours_tflops": rate / 1e12,
                       "cublas_tflops": reference / 1e12 if reference else None}
                if args.kernel_times:
                    row["kernel_us"] = ours.kernels
                if mode == "fp32" and (m, n, k) in clblast:
                    row["clblast_tflops"], row["ours_seed_fp32_tflops"] = clblast[(m, n, k)]
                if mode == "fp32" and ours.is_cpu and config is None:
                    # On CPU devices the host's BLAS (NumPy float32 matmul, all cores) too.
                    row["numpy_tflops"] = flops / timed(lambda: np.matmul(a, b), lambda: None) / 1e12
                rows.append(row)
                cb = row["cublas_tflops"]
                cl = row.get("clblast_tflops")
                print(f"{f'{m}x{n}x{k}':<20} {mode:>7} {(config or 'default'):>32} "
                      f"{row['ours_tflops']:>10.1f} {cb or float('nan'):>8.1f} "
                      f"{row['ours_tflops'] / cb if cb else float('nan'):>6.2f} "
                      f"{cl or float('nan'):>8.1f} "
                      f"{row['ours_tflops'] / cl if cl else float('nan'):>6.2f}"
                      + (f"  NumPy {row['numpy_tflops'] * 1e3:.1f} GF/s" if "numpy_tflops" in row
                         else "")
                      + ("  device µs: " + ", ".join(f"{name} {us:.0f}" for name, us in
                                                     row["kernel_us"].items())
                         if "kernel_us" in row else ""), flush=True)
    os.environ.pop("AETHERCL_MMA_PARAMS", None)
    result = {"rows": rows}
    if args.accuracy:
        result["accuracy"] = accuracy(ours, cublas, args.accuracy, args.modes, rng)
    (out / "gemm.json").write_text(json.dumps(result, indent=1))
    plot(rows, out / "gemm.png")
    return 0


def plot(rows, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    squares = [r for r in rows if r["m"] == r["n"] == r["k"] and r["config"] == "default"]
    if not squares:
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for mode in dict.fromkeys(r["mode"] for r in squares):
        mine = [r for r in squares if r["mode"] == mode]
        sizes = [r["m"] for r in mine]
        line, = ax.plot(sizes, [r["ours_tflops"] for r in mine], "o-", label=f"AetherCL {mode}")
        if any(r["cublas_tflops"] for r in mine):
            ax.plot(sizes, [r["cublas_tflops"] or float("nan") for r in mine], "s--",
                    color=line.get_color(), alpha=0.6, label=f"cuBLAS {mode}")
    clblast = [r for r in squares if r.get("clblast_tflops")]
    if clblast:
        ax.plot([r["m"] for r in clblast], [r["clblast_tflops"] for r in clblast], "^:",
                color="black", label="CLBlast SGEMM")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"GEMM on {squares[0]['device']}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
