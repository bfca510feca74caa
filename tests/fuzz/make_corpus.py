#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_entry_points.cpp: short, valid programs in its input format
(per step: op, gpu, 5 handle bytes, 4 dim bytes, 5 float bytes, then op-specific bytes), so the
fuzzer starts from sequences that allocate, transfer and compute. Run it after changing the
format: python3 tests/fuzz/make_corpus.py"""
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus"
OPS = {"alloc": 0, "free": 4, "write": 7, "read": 9, "clone": 11, "matmul": 12, "add": 14,
       "mul": 15, "mul_backward": 16, "gelu": 17, "layernorm": 19, "softmax": 21,
       "transpose": 23, "adam": 25, "transpose_batched": 28, "reduce_sum": 30,
       "embedding": 32, "log_softmax": 34, "cross_entropy": 35, "sim_alloc": 37,
       "sim_write": 39, "sim_read": 40, "sim_mm": 41, "stats": 42, "lifecycle": 43,
       "train": 44, "kernels": 200}
# fuzz_runtime.h: the first extra byte of a "kernels" step picks the function
RUNTIME = {"program": 0, "binary": 4, "kernel": 6, "launch": 8, "typed": 10, "log": 11}


def live(i, n):
    """A handle byte that selects live buffer i of n."""
    return next(b for b in range(4, 256) if b % 10 >= 4 and b % n == i)


def step(op, handles=(), dims=(), floats=(), extra=()):
    hs = list(handles) + [live(0, 1)] * (5 - len(handles))
    ds = list(dims) + [1] * (4 - len(dims))
    fs = list(floats) + [3] * (5 - len(floats))
    return bytes([OPS[op], 0] + hs + ds + fs + list(extra))


def program(n_buffers, size_byte, calls):
    data = b"".join(step("alloc", extra=(size_byte,)) for _ in range(n_buffers))
    for i in range(n_buffers):
        data += step("write", handles=(live(i, n_buffers),), extra=(0, size_byte, 1))
    return data + b"".join(calls)


def main():
    OUT.mkdir(exist_ok=True)
    three = [live(i, 3) for i in range(3)]
    five = [live(i, 5) for i in range(5)]
    seeds = {
        "add_roundtrip": program(3, 16, [step("add", three, (16,)),
                                         step("read", (three[2],), extra=(0, 16, 1))]),
        "elementwise_mix": program(5, 64, [step("mul", five[:3], (23,)),
                                           step("mul_backward", five, (17,)),
                                           step("gelu", five[:2], (11,))]),
        "rowwise": program(3, 100, [step("layernorm", three, (4, 5)),
                                    step("softmax", three, (5, 4)),
                                    step("log_softmax", three, (2, 3, 7))]),
        "matmul": program(3, 120, [step("matmul", three, (1, 3, 5, 7)),
                                   step("transpose", three, (5, 7)),
                                   step("transpose_batched", three, (2, 3, 5))]),
        "adam": program(4, 40, [step("adam", [live(i, 4) for i in range(4)], (10, 2))]),
        "clone_free": program(2, 64, [step("clone", (live(0, 2), live(1, 2)), extra=(16,)),
                                      step("free", extra=(0,)), step("free", extra=(0,))]),
        "sim": step("sim_alloc", extra=(40,)) + step("sim_alloc", extra=(48,))
               + step("sim_write", extra=(5, 40, 1)) + step("sim_mm", dims=(5, 4, 6),
                                                             extra=(1, 5, 6, 40, 48, 1, 1)),
        "lifecycle": program(2, 8, [step("lifecycle", extra=(0, 0)), step("stats", extra=(0, 1)),
                                    step("add", (live(0, 2),) * 3, (2,))]),
        # training ops (fuzz_train_ops.inc): which, seed (4 bytes), offset selector + 4 bytes,
        # count byte (x4 / 4 elements), then per-function bytes; relu and rng_fill on 16 floats
        "train_ops": program(3, 16, [step("train", three, extra=(3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 16,
                                                                  0, 0)),
                                     step("train", three, extra=(0, 0, 0, 0, 9, 1, 0, 0, 0, 3, 16,
                                                                  1, 0))]),
        # aethercl_optimizer_step (which 13: AdamW over 16 floats), then the many-step call on
        # four AdamW descriptors of 16 floats over five buffers (selector 1; per descriptor kind,
        # count, step; no bad struct_size; count 4; descs non-NULL; default stream)
        "optimizer_multi": program(5, 16, [step("train", [live(i, 5) for i in range(5)],
                                                extra=(13, 0, 0, 0, 0, 1, 0, 0, 0, 0, 16,
                                                       1, 0, 3, 0, 1)
                                                + (1, 16, 0) * 4 + (1, 4, 1, 0))]),
        # program (source 0, options 0, non-NULL), kernel "fz" of it, a launch of 4 items in
        # groups of 2 with (buffer, uchar, local 1 byte), a dtype tag and an f32 -> f16 conversion,
        # the program's binary into scratch, the kernel log
        "runtime": program(2, 16, [
            step("kernels", extra=(RUNTIME["program"], 0, 0, 1)),
            step("kernels", extra=(RUNTIME["kernel"], 4, 0)),
            step("kernels", (live(0, 2),) * 5,
                 extra=(RUNTIME["launch"], 0, 5, 1, 1, 3, 1, 1, 9, 0, 1, 5, 0, 1, 0, 1, 1, 0, 1,
                        4, 1, 1, 1)),
            step("kernels", (live(0, 2), live(1, 2)), dims=(1, 2),
                 extra=(RUNTIME["typed"], 2, 3)),
            step("kernels", extra=(RUNTIME["binary"], 1, 4, 145)),
            step("kernels", extra=(RUNTIME["log"], 0, 1))]),
        "hostile_dims": program(3, 16, [step("add", three, (200,)),
                                        step("matmul", three, (255, 200, 220, 230)),
                                        step("reduce_sum", three, (190, 180, 181))]),
    }
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
