"""Effective memory bandwidth of elementwise and row-wise kernels, next to a device-to-device
copy (execute_clone_on_gpu) of the same bytes measured in the same run.

Usage: tools/aethercl bench bandwidth [--mib 256] [--reps 10] [--row 1024] [--host | --no-host]
GB/s = bytes each kernel must read + write / median time (call + aethercl_synchronize).
With --host (the default on CPU devices) each kernel is also timed as NumPy does the same work on
host arrays of the same size (tools/bench/host_reference.py), in the same run: "vs NumPy" is
NumPy's time over ours (above 1: ours is faster). A second table times column sums (execute_reduce_sum_gpu: a GPT step's bias gradients, rows =
tokens) of --sums shapes and of the operand viewed as rows of --row, each against a copy of the
same bytes in the same run: the sum reads rows * cols floats, the copy reads and writes them
(with --host also against NumPy's sum over the rows of a host array of that shape).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from aethercl import Library  # noqa: E402

import host_reference  # noqa: E402  (tools/bench, beside this file)


def timed_host(reps, call) -> float:
    """Median seconds of call() over reps runs after one untimed run."""
    call()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def timed(lib, gpu, reps, call) -> float:
    """timed_host of call() and the synchronisation that waits for it."""
    return timed_host(reps, lambda: (call(), lib.check("aethercl_synchronize", gpu)))


def training_cases(lib, gpu, a, b, c, n, rows, row):
    """The version-3 training ops over the same buffers: (name, float32 streams moved, call).
    Streams count each operand read or written once (uint8 masks as 1/4 stream; per-row or
    per-column vectors are negligible and not counted)."""
    from aethercl import train as T
    from aethercl import train_types as TT
    mask = lib.check_handle("allocate_gpu_memory", gpu, n)
    small = lib.check_handle("allocate_gpu_memory", gpu, max(row, 4) * 4 * 4)
    zeros = (ctypes.c_char * (row * 16))()
    lib.check("write_host_to_gpu_blocking", gpu, small, 0, row * 16, zeros)
    bias_desc = T.broadcast_desc((rows, row), (row,), a, small, c)
    norm = TT.NormDesc(kind=TT.NORM_LAYER, rows=rows, cols=row, eps=1e-5, x=a, gamma=small,
                       beta=small, y=c)
    channels = 64
    bn = TT.BatchNormDesc(n=n // (channels * row), channels=channels, spatial=row, training=0,
                          momentum=0.1, eps=1e-5, x=a, running_mean=small, running_var=small,
                          y=c)
    quarter = n // 4  # v lives in the n-byte mask buffer
    adamw = TT.OptimizerDesc(kind=TT.OPTIMIZER_ADAMW, count=quarter, param=a, grad=b, state1=c,
                             state2=mask, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1)
    sgd = TT.OptimizerDesc(kind=TT.OPTIMIZER_SGD, count=n, param=a, grad=b, state1=c, lr=1e-3,
                           momentum=0.9, step=2)
    return [
        ("rng_fill uniform", 1, lambda: T.rng_fill(gpu, a, n, TT.RNG_UNIFORM, 0, 1, 1, 0)),
        ("rng_fill normal", 1, lambda: T.rng_fill(gpu, a, n, TT.RNG_NORMAL, 0, 1, 1, 0)),
        ("dropout (+mask)", 2.25, lambda: T.dropout(gpu, a, c, mask, n, 0.1, 1, 0)),
        ("dropout_backward", 2.25, lambda: T.dropout_backward(gpu, a, mask, c, n, 0.1)),
        ("unary relu", 2, lambda: T.unary(gpu, "relu", a, c, n)),
        ("unary gelu_tanh", 2, lambda: T.unary(gpu, "gelu_tanh", a, c, n)),
        ("unary_backward silu", 3, lambda: T.unary_backward(gpu, "silu", a, b, c, n)),
        ("binary add (bias row)", 2, lambda: T.binary(gpu, "add", bias_desc)),
        ("binary mul (same shape)", 3, lambda: T.binary(
            gpu, "mul", T.broadcast_desc((n,), (n,), a, b, c))),
        ("reduce sum (last axis)", 1, lambda: T.reduce(gpu, TT.SUM, a, c, (rows, row), 1)),
        ("reduce max (first axis)", 1, lambda: T.reduce(gpu, TT.MAX, a, c, (rows, row), 0)),
        ("reduce sum (first axis)", 1, lambda: T.reduce(gpu, TT.SUM, a, c, (rows, row), 0)),
        ("reduce mean (middle axis)", 1,
         lambda: T.reduce(gpu, TT.MEAN, a, c, (4, rows // 4, row), 1)),
        ("norm_forward affine", 2, lambda: T.norm_forward(gpu, norm)),
        ("batchnorm eval", 2, lambda: T.batchnorm_forward(gpu, bn)),
        ("optimizer sgd momentum", 4, lambda: T.optimizer_step(gpu, sgd)),
        ("optimizer adamw (n/4)", 7 / 4, lambda: T.optimizer_step(gpu, adamw)),
        ("grad norm (clip, inf)", 1, lambda: T.clip_grad_norm(gpu, [a], [n], float("inf"))),
        ("mse_loss (+grad)", 3, lambda: T.mse_loss(gpu, a, b, None, c, n, TT.MEAN)),
    ]


def column_sums(lib, gpu, reps, src, dst, nbytes, shapes):
    """Rows of the column-sum table: (rows, cols, sum GB/s, same-bytes copy GB/s), shapes that
    do not fit in the operand skipped."""
    results = []
    for rows, cols in shapes:
        size = rows * cols * 4
        if size > nbytes:
            continue
        summed = timed(lib, gpu, reps, lambda: lib.check("execute_reduce_sum_gpu", gpu, src, dst,
                                                         1, rows, cols))
        copied = timed(lib, gpu, reps, lambda: lib.check("execute_clone_on_gpu", gpu, src, dst,
                                                         size))
        results.append((rows, cols, size / summed / 1e9, 2 * size / copied / 1e9))
    return results


def parse_shape(text: str):
    rows, cols = (int(v) for v in text.lower().split("x"))
    if rows <= 0 or cols <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: want ROWSxCOLS, both positive")
    return rows, cols


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--mib", type=int, default=256, help="size of each operand")
    parser.add_argument("--row", type=int, default=1024, help="row length for row-wise kernels")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--sums", nargs="*", type=parse_shape,
                        default=[(8192, 768), (8192, 2304), (8192, 3072), (65536, 768)],
                        help="column-sum shapes ROWSxCOLS (besides the operand as rows of --row)")
    parser.add_argument("--host", action=argparse.BooleanOptionalAction, default=None,
                        help="time NumPy's equivalents too (default: on CPU devices)")
    args = parser.parse_args()
    lib = Library()
    gpu = args.gpu
    lib.check("initialize_gpu", gpu)
    host = args.host
    if host is None:
        info = json.loads(lib.json_call("aethercl_device_info", gpu))
        host = str(info.get("type", "")).upper() == "CPU"
    n = args.mib * 2**20 // 4
    rows = n // args.row
    nbytes = n * 4
    bufs = [lib.check_handle("allocate_gpu_memory", gpu, nbytes) for _ in range(3)]
    zeros = (ctypes.c_char * nbytes)()
    for b in bufs:
        lib.check("write_host_to_gpu_blocking", gpu, b, 0, nbytes, zeros)
    a, b, c = bufs
    cases = [
        ("clone (reference)", 2, lambda: lib.check("execute_clone_on_gpu", gpu, a, c, nbytes)),
        ("add", 3, lambda: lib.check("execute_add_on_gpu", gpu, a, b, c, n)),
        ("mul", 3, lambda: lib.check("execute_mul_on_gpu", gpu, a, b, c, n)),
        ("gelu", 2, lambda: lib.check("execute_gelu_on_gpu", gpu, a, c, n)),
        ("gelu_backward", 3, lambda: lib.check("execute_gelu_backward_on_gpu", gpu, a, b, c, n)),
        ("softmax", 2, lambda: lib.check("execute_softmax_on_gpu", gpu, a, c, rows, args.row)),
        ("softmax_backward", 3,
         lambda: lib.check("execute_softmax_backward_on_gpu", gpu, a, b, c, rows, args.row)),
        ("layernorm", 2,
         lambda: lib.check("execute_layernorm_on_gpu", gpu, a, c, rows, args.row, ctypes.c_float(1e-5))),
        ("layernorm_backward", 3,
         lambda: lib.check("execute_layernorm_backward_on_gpu", gpu, a, b, c, rows, args.row,
                           ctypes.c_float(1e-5))),
    ]
    cases += training_cases(lib, gpu, a, b, c, n, rows, args.row)
    # The row-wise kernels again as they streamed rows before the register path (the variable is
    # read at every launch): the same run's figures for both.
    def loop(call):
        def run():
            os.environ["AETHERCL_ROW_KERNEL"] = "loop"
            try:
                call()
            finally:
                del os.environ["AETHERCL_ROW_KERNEL"]
        return run
    cases += [(f"{name} (loop kernel)", streams, loop(call))
              for name, streams, call in cases if "softmax" in name or "layernorm" in name]
    numpy_cases = host_reference.cases(n, args.row) if host else {}
    print(f"{args.mib} MiB per operand, rows of {args.row}")
    print(f"{'kernel':<30} {'GB/s':>9} {'vs copy':>8}" +
          (f" {'NumPy GB/s':>11} {'vs NumPy':>9}" if host else ""))
    reference = None
    for name, streams, call in cases:
        try:
            seconds = timed(lib, gpu, args.reps, call)
        except Exception as error:  # an op that is refused is reported, not hidden
            print(f"{name:<30} failed: {error}")
            continue
        gbps = streams * nbytes / seconds / 1e9
        reference = reference or gbps
        line = f"{name:<30} {gbps:>9.2f} {gbps / reference:>8.2f}"
        if host:
            numpy_call = numpy_cases.get(name.removesuffix(" (loop kernel)"))
            if numpy_call is None:
                line += f" {'-':>11} {'-':>9}"
            else:
                numpy_seconds = timed_host(args.reps, numpy_call)
                line += (f" {streams * nbytes / numpy_seconds / 1e9:>11.2f} "
                         f"{numpy_seconds / seconds:>9.2f}")
        print(line)
    print("\ncolumn sums (execute_reduce_sum_gpu) vs a copy of the same bytes")
    print(f"{'rows x cols':<30} {'GB/s':>9} {'copy':>9} {'vs copy':>8}" +
          (f" {'NumPy GB/s':>11} {'vs NumPy':>9}" if host else ""))
    shapes = list(args.sums) + [(rows, args.row)]
    for r, cols, sum_gbs, copy_gbs in column_sums(lib, gpu, args.reps, a, c, nbytes, shapes):
        line = f"{f'{r} x {cols}':<30} {sum_gbs:>9.2f} {copy_gbs:>9.2f} {sum_gbs / copy_gbs:>8.2f}"
        if host:
            numpy_gbs = r * cols * 4 / timed_host(args.reps, host_reference.column_sums(r, cols)) / 1e9
            line += f" {numpy_gbs:>11.2f} {sum_gbs / numpy_gbs:>9.2f}"
        print(line)
    for buf in bufs:
        lib.free_gpu_memory(gpu, buf)
    lib.shutdown_driver()
    return 0


if __name__ == "__main__":
    sys.exit(main())
