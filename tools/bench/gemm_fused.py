"""The fused GEMM epilogue and the bias-gradient column sum, timed on one device.

Usage: tools/aethercl bench gemm-fused [--gpu 0] [--modes tf32 bf16] [--shapes 8192x3072x768 ...]
          [--sums 8192x768 ...] [--out DIR]

Rows of the first table: aethercl_gemm_fused (bias + GELU-tanh, bias + ReLU, bias alone) against
the unfused sequence a training step runs without it: aethercl_gemm, execute_broadcast_add_gpu
for the bias and aethercl_unary for the activation (three launches and two extra passes over C).
A and B are stored as the mode's natural type (float32 for fp32/tf32, bf16 for bf16); C is
float32 in both rows (the unfused bias add takes float32). Shapes default to a GPT-2-small step
at 8192 tokens (QKV, MLP up, MLP down).
Rows of the second table: execute_reduce_sum_gpu over rows x cols float32 (the backward's bias
gradient: B * M rows summed into N columns) against execute_clone_on_gpu of the same bytes. GB/s
counts bytes moved: the sum reads rows * cols * 4 (and writes cols * 4), the copy reads and
writes rows * cols * 4 each; the ratio is the sum's GB/s over the copy's.
Times: after a warm-up (kernel builds), the median of 5 batches of back-to-back calls between
synchronisations. Writes gemm_fused.json to --out (default: the current folder).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))

from aethercl import Library  # noqa: E402
from aethercl import gemm as g  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm as gemm_bench  # noqa: E402  (tools/bench/gemm.py)

SHAPES = [(8192, 2304, 768), (8192, 3072, 768), (8192, 768, 3072)]
SUMS = [(8192, 768), (8192, 2304), (8192, 3072), (65536, 768), (512, 768)]
STORAGE = {"fp32": g.F32, "tf32": g.F32, "bf16": g.BF16, "fp16": g.F16}
KINDS = [("bias_gelu_tanh", 6), ("bias_relu", 0), ("bias", None)]  # aethercl_unary op codes


def timed(run, sync) -> float:
    """Seconds per call (bench gemm's timing, with batches of up to 500 calls: these are short)."""
    return gemm_bench.timed(run, sync, max_inner=500)


class Bench:
    def __init__(self, gpu: int):
        self.lib, self.gpu = Library(), gpu
        self.lib.check("initialize_gpu", gpu)
        self.device = json.loads(self.lib.json_call("aethercl_device_info", gpu))["name"]
        self.handles = []

    def sync(self):
        self.lib.check("aethercl_synchronize", self.gpu)

    def upload(self, array: np.ndarray) -> int:
        handle = self.alloc(array.nbytes)
        self.lib.check("write_host_to_gpu_blocking", self.gpu, handle, 0, array.nbytes,
                       array.ctypes.data)
        return handle

    def alloc(self, nbytes: int) -> int:
        handle = self.lib.check_handle("allocate_gpu_memory", self.gpu, nbytes)
        self.handles.append(handle)
        return handle

    def free_all(self):
        for handle in self.handles:
            self.lib.free_gpu_memory(self.gpu, handle)
        self.handles = []

    def epilogue_rows(self, mode: str, shape, rng) -> list:
        m, n, k = shape
        dtype = STORAGE[mode]
        ha = self.upload(gemm_bench.encode(rng.standard_normal((m, k)), dtype))
        hb = self.upload(gemm_bench.encode(rng.standard_normal((k, n)) / np.sqrt(k), dtype))
        hbias = self.upload(rng.standard_normal(n).astype(np.float32))
        hc = self.alloc(m * n * 4)
        desc = g.gemm_desc(ha, hb, hc, m, n, k, dtype_a=dtype, dtype_c=g.F32,
                           compute=g.COMPUTE_MODES[mode])
        rows = []
        try:
            plain = timed(lambda: g.gemm(self.lib, self.gpu, desc), self.sync)
            for kind, unary in KINDS:
                epilogue = g.gemm_epilogue(kind, bias=hbias)

                def unfused():
                    g.gemm(self.lib, self.gpu, desc)
                    self.lib.check("execute_broadcast_add_gpu", self.gpu, hc, hbias, hc, 1, m, n)
                    if unary is not None:
                        self.lib.check("aethercl_unary", self.gpu, unary, hc, hc, m * n,
                                       ctypes.c_float(0.0), None)
                fused = timed(lambda: g.gemm_fused(self.lib, self.gpu, desc, epilogue),
                              self.sync)
                separate = timed(unfused, self.sync)
                rows.append({"mode": mode, "m": m, "n": n, "k": k, "epilogue": kind,
                             "gemm_us": plain * 1e6, "fused_us": fused * 1e6,
                             "unfused_us": separate * 1e6, "speedup": separate / fused})
        finally:
            self.free_all()
        return rows

    def sum_row(self, rows: int, cols: int, rng) -> dict:
        x = self.upload(rng.standard_normal((rows, cols)).astype(np.float32))
        out = self.alloc(cols * 4)
        copy = self.alloc(rows * cols * 4)
        nbytes = rows * cols * 4
        try:
            summed = timed(lambda: self.lib.check("execute_reduce_sum_gpu", self.gpu, x, out, 1,
                                                  rows, cols), self.sync)
            copied = timed(lambda: self.lib.check("execute_clone_on_gpu", self.gpu, x, copy,
                                                  nbytes), self.sync)
        finally:
            self.free_all()
        sum_gbs = (nbytes + cols * 4) / summed / 1e9
        copy_gbs = 2 * nbytes / copied / 1e9
        return {"rows": rows, "cols": cols, "sum_us": summed * 1e6, "copy_us": copied * 1e6,
                "sum_gbs": sum_gbs, "copy_gbs": copy_gbs, "ratio": sum_gbs / copy_gbs}


def parse_shape(text: str, parts: int):
    values = tuple(int(v) for v in text.lower().split("x"))
    if len(values) != parts or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: want {parts} positive sizes joined by x")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--build", help="ignored (tools/aethercl passes it)")
    parser.add_argument("--modes", nargs="+", default=["tf32", "bf16"], choices=list(STORAGE))
    parser.add_argument("--shapes", nargs="+", type=lambda t: parse_shape(t, 3), default=SHAPES)
    parser.add_argument("--sums", nargs="+", type=lambda t: parse_shape(t, 2), default=SUMS)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    bench = Bench(args.gpu)
    rng = np.random.default_rng(1)
    print(f"device: {bench.device}")
    print(f"{'mode':6} {'m x n x k':>18} {'epilogue':>15} {'gemm us':>9} {'fused us':>9} "
          f"{'unfused us':>10} {'speedup':>7}")
    epilogues = []
    for mode in args.modes:
        for shape in args.shapes:
            for row in bench.epilogue_rows(mode, shape, rng):
                epilogues.append(row)
                print(f"{mode:6} {'x'.join(map(str, shape)):>18} {row['epilogue']:>15} "
                      f"{row['gemm_us']:9.1f} {row['fused_us']:9.1f} {row['unfused_us']:10.1f} "
                      f"{row['speedup']:7.2f}")
    print(f"\n{'rows x cols':>14} {'sum us':>9} {'sum GB/s':>9} {'copy us':>9} {'copy GB/s':>9} "
          f"{'ratio':>6}")
    sums = []
    for rows, cols in args.sums:
        row = bench.sum_row(rows, cols, rng)
        sums.append(row)
        print(f"{f'{rows}x{cols}':>14} {row['sum_us']:9.1f} {row['sum_gbs']:9.1f} "
              f"{row['copy_us']:9.1f} {row['copy_gbs']:9.1f} {row['ratio']:6.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gemm_fused.json").write_text(json.dumps(
        {"device": bench.device, "epilogues": epilogues, "column_sums": sums}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
