"""Float64 NumPy references for the version-3 training ops, and the Philox4x32-10 generator
written independently in NumPy (the device output must match it bit for bit)."""
from __future__ import annotations

import numpy as np

PHILOX_M0, PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
PHILOX_W0, PHILOX_W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counters: np.ndarray, key) -> np.ndarray:
    """counters: (n, 4) uint32; key: two uint32 words. Returns (n, 4) uint32 outputs."""
    c = np.asarray(counters, np.uint32).astype(np.uint64)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    x0, x1, x2, x3 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    for _ in range(10):
        p0 = PHILOX_M0 * x0
        p1 = PHILOX_M1 * x2
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0 = (k0 + np.uint64(PHILOX_W0)) & MASK32
        k1 = (k1 + np.uint64(PHILOX_W1)) & MASK32
    return np.stack([x0, x1, x2, x3], axis=1).astype(np.uint32)


def philox_words(seed: int, offset: int, count: int) -> np.ndarray:
    """Stream words offset .. offset + count - 1: word e is lane e % 4 of block e // 4."""
    if count == 0:
        return np.zeros(0, np.uint32)
    first, last = offset // 4, (offset + count - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    counters = np.zeros((blocks.size, 4), np.uint32)
    counters[:, 0] = (blocks & MASK32).astype(np.uint32)
    counters[:, 1] = (blocks >> np.uint64(32)).astype(np.uint32)
    key = (seed & 0xFFFFFFFF, seed >> 32)
    words = philox4x32_10(counters, key).reshape(-1)
    start = offset - 4 * first
    return words[start:start + count]


def uniform01(words: np.ndarray) -> np.ndarray:
    return (words >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def rng_uniform(seed, offset, count, low, high) -> np.ndarray:
    low, high = np.float32(low), np.float32(high)
    u = uniform01(philox_words(seed, offset, count))
    return (low + (high - low) * u).astype(np.float32)


def rng_normal(seed, offset, count, mean, std) -> np.ndarray:
    """Float64 Box-Muller over the same words (the device computes it in float)."""
    if count == 0:
        return np.zeros(0)
    first_pair, last_pair = offset // 2, (offset + count - 1) // 2
    words = philox_words(seed, 2 * first_pair, 2 * (last_pair - first_pair + 1)).reshape(-1, 2)
    u1 = ((words[:, 0] >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0 ** -24
    u2 = (words[:, 1] >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    radius = np.sqrt(-2.0 * np.log(u1))
    z = np.stack([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)], 1).reshape(-1)
    start = offset - 2 * first_pair
    return mean + std * z[start:start + count]


# ---- elementwise -----------------------------------------------------------------------------
def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


_K = np.sqrt(2.0 / np.pi)


def unary_forward(op: str, x: np.ndarray, alpha: float) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return {
            "relu": lambda: np.where(x < 0, 0.0, x),
            "leaky_relu": lambda: np.where(x < 0, alpha * x, x),
            "sigmoid": lambda: _sigmoid(x),
            "tanh": lambda: np.tanh(x),
            "silu": lambda: x * _sigmoid(x),
            "gelu": lambda: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
            "gelu_tanh": lambda: 0.5 * x * (1 + np.tanh(_K * (x + 0.044715 * x ** 3))),
            "exp": lambda: np.exp(x), "log": lambda: np.log(x), "sqrt": lambda: np.sqrt(x),
            "rsqrt": lambda: 1 / np.sqrt(x), "abs": lambda: np.abs(x), "neg": lambda: -x,
            "add_scalar": lambda: x + alpha, "sub_scalar": lambda: x - alpha,
            "rsub_scalar": lambda: alpha - x, "mul_scalar": lambda: x * alpha,
            "div_scalar": lambda: x / alpha, "rdiv_scalar": lambda: alpha / x,
            "max_scalar": lambda: np.where(x < alpha, alpha, x),
            "min_scalar": lambda: np.where(x > alpha, alpha, x),
            "pow_scalar": lambda: np.power(x, alpha),
        }[op]()


def unary_derivative(op: str, x: np.ndarray, alpha: float) -> np.ndarray:
    """Analytic derivatives (used where finite differences hit a kink)."""
    x = x.astype(np.float64)
    s = _sigmoid(x)
    with np.errstate(all="ignore"):
        return {
            "relu": lambda: (x > 0).astype(float),
            "leaky_relu": lambda: np.where(x > 0, 1.0, alpha),
            "abs": lambda: np.sign(x),
            "max_scalar": lambda: (x >= alpha).astype(float),
            "min_scalar": lambda: (x <= alpha).astype(float),
            "sigmoid": lambda: s * (1 - s),
        }[op]()


BINARY_REF = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "max": np.maximum, "min": np.minimum, "pow": np.power,
}


def sum_to_shape(g: np.ndarray, shape) -> np.ndarray:
    """Sums a broadcast gradient back to `shape` (NumPy broadcasting in reverse)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g.reshape(shape)


def binary_grads(op: str, a: np.ndarray, b: np.ndarray, dc: np.ndarray):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    A, B = np.broadcast_arrays(a, b)
    with np.errstate(all="ignore"):
        if op == "add":
            ga, gb = dc, dc
        elif op == "sub":
            ga, gb = dc, -dc
        elif op == "mul":
            ga, gb = dc * B, dc * A
        elif op == "div":
            ga, gb = dc / B, -dc * A / (B * B)
        elif op in ("max", "min"):
            better = A > B if op == "max" else A < B
            worse = B > A if op == "max" else B < A
            ga = dc * np.where(better, 1.0, np.where(A == B, 0.5, 0.0))
            gb = dc * np.where(worse, 1.0, np.where(A == B, 0.5, 0.0))
        else:
            ga, gb = dc * B * np.power(A, B - 1), dc * np.power(A, B) * np.log(A)
    return sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)


def numeric_gradient(f, x: np.ndarray, weights: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of sum(weights * f(x)) with respect to x, in float64."""
    x = x.astype(np.float64).copy()
    grad = np.zeros_like(x)
    flat, g = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + h
        plus = float((weights * f(x)).sum())
        flat[i] = keep - h
        minus = float((weights * f(x)).sum())
        flat[i] = keep
        g[i] = (plus - minus) / (2 * h)
    return grad


# ---- norms -----------------------------------------------------------------------------------
def norm_forward(x, gamma, beta, eps, rms):
    x = x.astype(np.float64)
    mean = 0.0 if rms else x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def batchnorm_train(x, gamma, beta, eps):
    """x (n, c, s) -> y, mean, biased var, unbiased var."""
    x = x.astype(np.float64)
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    m = x.shape[0] * x.shape[2]
    y = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + eps)
    if gamma is not None:
        y = y * gamma[None, :, None]
    if beta is not None:
        y = y + beta[None, :, None]
    return y, mean, var, var * m / (m - 1)


# ---- losses ----------------------------------------------------------------------------------
def log_softmax(x):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def cross_entropy(logits, targets, ignore_index, smoothing, reduction):
    """Per-row losses or their SUM / MEAN over rows not ignored, as PyTorch defines them."""
    lp = log_softmax(logits)
    rows, classes = lp.shape
    losses = np.zeros(rows)
    valid = targets != ignore_index
    for r in range(rows):
        if not valid[r]:
            continue
        t = targets[r]
        if t < 0 or t >= classes:
            losses[r] = np.nan
            continue
        losses[r] = -(1 - smoothing) * lp[r, t] - smoothing * lp[r].mean()
    if reduction == "none":
        return losses
    total = losses.sum()
    return total / valid.sum() if reduction == "mean" else total


# ---- convolution and pooling -----------------------------------------------------------------
def conv2d(x, w, bias, stride, pad, dilation, groups):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c_in, h, wd = x.shape
    c_out, cg, kh, kw = w.shape
    sh, sw = stride
    ph, pw = pad
    dh, dw = dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = np.zeros((n, c_out, oh, ow))
    og = c_out // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh,
                           kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                wk = w[g * og:(g + 1) * og, :, ky, kx]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wk)
    if bias is not None:
        y += bias.astype(np.float64)[None, :, None, None]
    return y


def pool2d(x, kind, kernel, stride, pad, count_include_pad):
    """Returns y and, for max, the int flat indices within each plane."""
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    ph, pw = pad
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * sh - ph, ox * sw - pw
            ys = range(max(y0, 0), min(y0 + kh, h))
            xs = range(max(x0, 0), min(x0 + kw, w))
            window = x[:, :, ys.start:ys.stop, xs.start:xs.stop].reshape(n, c, -1)
            if kind == "max":
                k = window.argmax(axis=2)
                y[:, :, oy, ox] = window.max(axis=2)
                idx[:, :, oy, ox] = (ys.start + k // len(xs)) * w + xs.start + k % len(xs)
            else:
                divisor = kh * kw if count_include_pad else len(ys) * len(xs)
                y[:, :, oy, ox] = window.sum(axis=2) / divisor
    return y, idx
