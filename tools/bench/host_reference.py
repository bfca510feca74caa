"""NumPy equivalents of bench bandwidth's kernels, for the CPU table: each case name maps to a
function of preallocated float32 host arrays doing the same work (same sizes, same outputs), so a
PoCL figure can be read beside what the host's NumPy does with the same bytes. Cases without an
equivalent are absent (the table shows a dash)."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

SQRT_2_OVER_PI = np.float32(0.7978845608028654)


def _gelu_tanh(x, out, tmp):
    np.multiply(x, x, out=tmp)
    np.multiply(tmp, x, out=tmp)
    tmp *= np.float32(0.044715)
    tmp += x
    tmp *= SQRT_2_OVER_PI
    np.tanh(tmp, out=tmp)
    tmp += np.float32(1)
    np.multiply(x, tmp, out=out)
    out *= np.float32(0.5)


def _gelu_backward(x, dy, out, tmp):
    # d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    u = SQRT_2_OVER_PI * (x + np.float32(0.044715) * x * x * x)
    t = np.tanh(u, out=tmp)
    du = SQRT_2_OVER_PI * (np.float32(1) + np.float32(3 * 0.044715) * x * x)
    np.multiply(dy, np.float32(0.5) * (np.float32(1) + t) + np.float32(0.5) * x *
                (np.float32(1) - t * t) * du, out=out)


def _softmax(x2, out2):
    np.subtract(x2, x2.max(axis=1, keepdims=True), out=out2)
    np.exp(out2, out=out2)
    out2 /= out2.sum(axis=1, keepdims=True)


def _layernorm(x2, out2):
    mean = x2.mean(axis=1, keepdims=True)
    np.subtract(x2, mean, out=out2)
    var = np.mean(out2 * out2, axis=1, keepdims=True)
    out2 /= np.sqrt(var + np.float32(1e-5))


def _layernorm_backward(x2, dy2, out2):
    mean = x2.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x2 - mean) ** 2).mean(axis=1, keepdims=True) + np.float32(1e-5))
    xhat = (x2 - mean) * rstd
    np.multiply(rstd, dy2 - dy2.mean(axis=1, keepdims=True)
                - xhat * (dy2 * xhat).mean(axis=1, keepdims=True), out=out2)


def cases(n: int, row: int) -> Dict[str, Callable[[], None]]:
    """name -> a call doing that kernel's work on host arrays of n float32 (rows of `row`)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.empty(n, np.float32)
    tmp = np.empty(n, np.float32)
    mask = np.empty(n, np.bool_)
    rows = n // row
    a2, b2, c2 = a[:rows * row].reshape(rows, row), b[:rows * row].reshape(rows, row), \
        c[:rows * row].reshape(rows, row)
    bias = rng.standard_normal(row, dtype=np.float32)
    column = np.empty(row, np.float32)
    a3 = a[:rows // 4 * 4 * row].reshape(4, rows // 4, row)
    columns4 = np.empty((4, row), np.float32)
    per_row = np.empty(rows, np.float32)
    quarter = n // 4
    m, v = np.zeros(quarter, np.float32), np.zeros(quarter, np.float32)
    p, g = a[:quarter].copy(), b[:quarter]

    def dropout():
        rng.random(n, dtype=np.float32, out=tmp)
        np.greater_equal(tmp, np.float32(0.1), out=mask)
        np.multiply(a, mask, out=c)
        np.multiply(c, np.float32(1 / 0.9), out=c)

    def adamw():
        m[:] = np.float32(0.9) * m + np.float32(0.1) * g
        v[:] = np.float32(0.999) * v + np.float32(0.001) * g * g
        p[:] = p * np.float32(1 - 1e-5) - np.float32(1e-3 / 0.1) * m / (
            np.sqrt(v) * np.float32(1 / np.sqrt(0.001)) + np.float32(1e-8))

    momentum = np.zeros(n, np.float32)

    def sgd_momentum():
        np.multiply(momentum, np.float32(0.9), out=momentum)
        np.add(momentum, b, out=momentum)
        np.subtract(a, np.float32(1e-3) * momentum, out=a)

    return {
        "clone (reference)": lambda: np.copyto(c, a),
        "add": lambda: np.add(a, b, out=c),
        "mul": lambda: np.multiply(a, b, out=c),
        "gelu": lambda: _gelu_tanh(a, c, tmp),
        "gelu_backward": lambda: _gelu_backward(a, b, c, tmp),
        "softmax": lambda: _softmax(a2, c2),
        "softmax_backward": lambda: np.multiply(
            b2, a2 - (a2 * b2).sum(axis=1, keepdims=True), out=c2),
        "layernorm": lambda: _layernorm(a2, c2),
        "layernorm_backward": lambda: _layernorm_backward(a2, b2, c2),
        "rng_fill uniform": lambda: rng.random(n, dtype=np.float32, out=c),
        "rng_fill normal": lambda: rng.standard_normal(n, dtype=np.float32, out=c),
        "dropout (+mask)": dropout,
        "dropout_backward": lambda: np.multiply(a, mask, out=c),
        "unary relu": lambda: np.maximum(a, np.float32(0), out=c),
        "unary gelu_tanh": lambda: _gelu_tanh(a, c, tmp),
        "binary add (bias row)": lambda: np.add(a2, bias, out=c2),
        "binary mul (same shape)": lambda: np.multiply(a, b, out=c),
        "reduce sum (last axis)": lambda: np.sum(a2, axis=1, out=per_row),
        "reduce max (first axis)": lambda: np.max(a2, axis=0, out=column),
        "reduce sum (first axis)": lambda: np.sum(a2, axis=0, out=column),
        "reduce mean (middle axis)": lambda: np.mean(a3, axis=1, out=columns4),
        "norm_forward affine": lambda: _layernorm(a2, c2),
        "optimizer sgd momentum": sgd_momentum,
        "optimizer adamw (n/4)": adamw,
        "grad norm (clip, inf)": lambda: np.sqrt(np.dot(a, a)),
        "mse_loss (+grad)": lambda: np.multiply(np.subtract(a, b, out=c), np.float32(2 / n),
                                                out=c),
    }


def column_sums(rows: int, cols: int) -> Callable[[], None]:
    """NumPy's column sums (execute_reduce_sum_gpu) of a rows x cols float32 host array."""
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    out = np.empty(cols, np.float32)
    return lambda: np.sum(x, axis=0, out=out)
