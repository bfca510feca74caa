"""The unmodified llm.py's per-step driver call sequence (docs/ABI.md §7.2 and §7.8, default
model B=16, S=64, E=16, H=4, d_ff=256, L=6, V=53), replayable against any library that exports the
ABI: driver.so, a copy named driver.dll, or the do-nothing driver_null.so.

The argtypes are written by hand from docs/ABI.md §4.1, the way the original client declares them
(deliberately not taken from the shim or the manifest). A test and benchmark fixture, not part of
the library: tests/python/test_replay.py checks every value, tools/bench/step.py times steps on the
real and the null library, and tools/soak.py repeats steps for hours, watching memory."""
from __future__ import annotations

import ctypes
import json
import math
import time
from collections import Counter
from ctypes import POINTER, c_float, c_int, c_size_t, c_uint, c_uint64, c_void_p

import numpy as np

B, S, E, H, DK, DFF, L, V = 16, 64, 16, 4, 4, 256, 6, 53
LR, BETA1, BETA2, ADAM_EPS, WD = 3e-4, 0.9, 0.999, 1e-8, 0.02
F4 = 4


def declare(dll: ctypes.CDLL) -> None:
    """docs/ABI.md §4.1, by hand, the way llm.py declares it."""
    vp, i, f, sz = c_void_p, c_int, c_float, c_size_t
    table = {
        "initialize_gpu": ([i], c_int),
        "allocate_gpu_memory": ([i, sz], c_void_p),
        "free_gpu_memory": ([i, vp], None),  # restype left at the ctypes default int below
        "write_host_to_gpu_blocking": ([i, vp, sz, sz, vp], c_int),
        "read_gpu_to_host_blocking": ([i, vp, sz, sz, vp], c_int),
        "execute_clone_on_gpu": ([i, vp, vp, sz], c_int),
        "execute_matmul_on_gpu": ([i, vp, vp, vp, i, i, i, i], c_int),
        "execute_matmul_backward_on_gpu": ([i, vp, vp, vp, vp, vp, i, i, i, i], c_int),
        "execute_add_on_gpu": ([i, vp, vp, vp, i], c_int),
        "execute_mul_on_gpu": ([i, vp, vp, vp, i], c_int),
        "execute_mul_backward_on_gpu": ([i, vp, vp, vp, vp, vp, i], c_int),
        "execute_gelu_on_gpu": ([i, vp, vp, i], c_int),
        "execute_gelu_backward_on_gpu": ([i, vp, vp, vp, i], c_int),
        "execute_layernorm_on_gpu": ([i, vp, vp, i, i, f], c_int),
        "execute_layernorm_backward_on_gpu": ([i, vp, vp, vp, i, i, f], c_int),
        "execute_softmax_on_gpu": ([i, vp, vp, i, i], c_int),
        "execute_softmax_backward_on_gpu": ([i, vp, vp, vp, i, i], c_int),
        "execute_transpose_on_gpu": ([i, vp, vp, i, i], c_int),
        "execute_transpose_backward_on_gpu": ([i, vp, vp, i, i], c_int),
        "execute_adam_update_on_gpu": ([i, vp, vp, vp, vp, i, i, f, f, f, f, f], c_int),
        "execute_matmul_batched_on_gpu": ([i, vp, vp, vp, i, i, i, i], c_int),
        "execute_matmul_batched_backward_on_gpu": ([i, vp, vp, vp, vp, vp, i, i, i, i], c_int),
        "execute_transpose_batched_gpu": ([i, vp, vp, i, i, i], c_int),
        "execute_transpose_12_batched_gpu": ([i, vp, vp, i, i, i, i], c_int),
        "execute_reduce_sum_gpu": ([i, vp, vp, i, i, i], c_int),
        "execute_add_broadcast_pe_gpu": ([i, vp, vp, vp, i, i, i], c_int),
        "execute_embedding_lookup_gpu": ([i, vp, vp, vp, i, i, i, i], c_int),
        "execute_embedding_backward_gpu": ([i, vp, vp, vp, i, i, i, i], c_int),
        "execute_log_softmax_stable_gpu": ([i, vp, vp, i, i, i], c_int),
        "execute_cross_entropy_loss_grad_gpu": ([i, vp, vp, vp, vp, i, i, i], c_int),
        "execute_broadcast_add_gpu": ([i, vp, vp, vp, i, i, i], c_int),
        "simulated_kernel_allocate": ([i, sz], c_uint64),
        "simulated_kernel_free": ([i, c_uint64, sz], None),
        "simulated_kernel_write": ([i, c_uint64, sz, vp], None),
        "simulated_kernel_read": ([i, c_uint64, sz, vp], None),
        "simulated_matrix_multiply": ([i, c_uint64, c_uint64, sz, sz, POINTER(c_int),
                                       POINTER(c_int)], c_uint64),
        "simulated_get_compute_unit_count": ([i], c_uint),
        # AetherCL extension used for the leak check
        "aethercl_memory_stats": ([i, ctypes.c_char_p, sz], c_size_t),
    }
    for name, (argtypes, restype) in table.items():
        function = getattr(dll, name)
        function.argtypes = argtypes
        if name != "free_gpu_memory":
            function.restype = restype
    dll.shutdown_driver.restype = None


class Recorder:
    """Driver calls with every return value checked, counted per call and per byte."""

    def __init__(self, dll: ctypes.CDLL, gpu: int):
        self.dll, self.gpu = dll, gpu
        self.calls: Counter = Counter()
        self.traffic: Counter = Counter()
        self.live = set()

    def _ok(self, name, *args):
        result = getattr(self.dll, name)(self.gpu, *args)
        assert result == 1, f"{name}{args} returned {result}"

    def alloc(self, nbytes: int) -> int:
        handle = self.dll.allocate_gpu_memory(self.gpu, nbytes)
        self.calls["allocate"] += 1
        self.traffic["allocated"] += nbytes
        assert handle, f"allocate_gpu_memory({nbytes}) returned NULL"
        self.live.add(handle)
        return handle

    def free(self, handle: int) -> None:
        self.dll.free_gpu_memory(self.gpu, handle)
        self.calls["free"] += 1
        self.live.remove(handle)

    def write(self, handle: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        result = self.dll.write_host_to_gpu_blocking(self.gpu, handle, 0, array.nbytes,
                                                     array.ctypes.data)
        self.calls["write"] += 1
        self.traffic["h2d"] += array.nbytes
        assert result == 1, f"write of {array.nbytes} B returned {result}"

    def upload(self, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        handle = self.alloc(array.nbytes)
        self.write(handle, array)
        return handle

    def zeros(self, nbytes: int) -> int:
        return self.upload(np.zeros(nbytes // F4, np.float32))

    def read(self, handle: int, shape, dtype=np.float32) -> np.ndarray:
        out = np.empty(shape, dtype)
        result = self.dll.read_gpu_to_host_blocking(self.gpu, handle, 0, out.nbytes,
                                                    out.ctypes.data)
        self.calls["read"] += 1
        self.traffic["d2h"] += out.nbytes
        assert result == 1, f"read of {out.nbytes} B returned {result}"
        return out

    def peek(self, handle: int, shape) -> np.ndarray:
        """A verification read outside the replayed sequence (not counted)."""
        out = np.empty(shape, np.float32)
        assert self.dll.read_gpu_to_host_blocking(self.gpu, handle, 0, out.nbytes,
                                                  out.ctypes.data) == 1
        return out

    def clone(self, src: int, nbytes: int) -> int:
        dst = self.alloc(nbytes)
        self.clone_into(src, dst, nbytes)
        return dst

    def clone_into(self, src: int, dst: int, nbytes: int) -> None:
        self._ok("execute_clone_on_gpu", src, dst, nbytes)
        self.calls["clone"] += 1
        self.traffic["clone"] += nbytes

    def op(self, short: str, name: str, *args) -> None:
        self._ok(name, *args)
        self.calls[short] += 1

    def live_buffers(self) -> int:
        size = self.dll.aethercl_memory_stats(self.gpu, None, 0)
        buffer = ctypes.create_string_buffer(size + 1)
        self.dll.aethercl_memory_stats(self.gpu, buffer, size + 1)
        return int(json.loads(buffer.value.decode())["live_buffers"])


def make_weights(rng):
    """The 57 parameters of section 6.2 in their order, plus the PE table."""
    def w(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    params = [w(V, E, scale=1.0)]
    for _ in range(L):
        params += [w(E, E), w(E, E), w(E, E), w(E, E), w(1, E), w(E, DFF), w(1, DFF),
                   w(DFF, E, scale=0.1), w(1, E)]
    params += [w(E, V), w(1, V)]
    pos = np.arange(64)[:, None]
    div = np.exp(np.arange(0, E, 2) * (-math.log(10000.0) / E))
    pe = np.zeros((64, E))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    return params, pe.astype(np.float32)


def reference_loss(params, pe, ids, targets) -> float:
    """float64 forward of the documented model (no mask), mean loss over targets != 0."""
    p = [x.astype(np.float64) for x in params]

    def ln(x):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

    erf = np.vectorize(math.erf)
    x = p[0][ids] + pe[:S].astype(np.float64)
    for layer in range(L):
        wq, wk, wv, wo, bo, w1, b1, w2, b2 = p[1 + 9 * layer: 10 + 9 * layer]
        h = ln(x)
        q, k, v = ((h @ m).reshape(B, S, H, DK).transpose(0, 2, 1, 3) for m in (wq, wk, wv))
        sc = q @ k.transpose(0, 1, 3, 2) * 0.5
        e = np.exp(sc - sc.max(-1, keepdims=True))
        att = e / (e.sum(-1, keepdims=True) + 1e-9)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(B, S, E)
        x = x + (o @ wo + bo)
        f = ln(x) @ w1 + b1
        x = x + (0.5 * f * (1 + erf(f / math.sqrt(2)))) @ w2 + b2
    logits = ln(x) @ p[-2] + p[-1]
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0] - lse
    valid = targets != 0
    return float(-(picked * valid).sum() / valid.sum())


class LlmStep:
    """One training step of the unmodified llm.py, call for call (docs/ABI.md §7.2, §7.8)."""

    def __init__(self, rec: Recorder, params, pe):
        self.rec = rec
        self.host = params
        self.param_h = [rec.upload(p) for p in params]
        self.pe_h = rec.upload(pe)
        self.m_h = [rec.zeros(p.nbytes) for p in params]
        self.v_h = [rec.zeros(p.nbytes) for p in params]
        self.bias_grad = None
        self.t = 0

    # --- pieces of the forward pass ------------------------------------------------------------
    def layernorm(self, x: int, rows: int, temps: list) -> int:
        r = self.rec
        nbytes = rows * E * F4
        y = r.alloc(nbytes)
        r.op("layernorm", "execute_layernorm_on_gpu", x, y, rows, E, c_float(1e-5))
        saved = r.clone(x, nbytes)
        grad_x = r.zeros(nbytes)
        grad_clone = r.clone(grad_x, nbytes)
        r.free(saved)
        r.free(grad_clone)
        temps.append(grad_x)  # dies with x
        return y

    def matmul(self, a: int, w: int, b_: int, m: int, n: int, k: int) -> int:
        out = self.rec.alloc(b_ * m * n * F4)
        self.rec.op("matmul", "execute_matmul_on_gpu", a, w, out, b_, m, n, k)
        return out

    def host_bias_add(self, x: int, bias_index: int, n: int) -> int:
        r = self.rec
        act = r.read(x, (B * S, n))
        bias = r.read(self.param_h[bias_index], (1, n))
        return r.upload(act + bias)

    def transpose12(self, x: int, d1: int, d2: int, d3: int) -> int:
        out = self.rec.alloc(B * d1 * d2 * d3 * F4)
        self.rec.op("transpose_12", "execute_transpose_12_batched_gpu", x, out, B, d1, d2, d3)
        return out

    def block(self, x: int, layer: int, temps: list) -> int:
        r = self.rec
        base = 1 + 9 * layer
        wq, wk, wv, wo, bo, w1, b1, w2, b2 = range(base, base + 9)
        h = self.layernorm(x, B * S, temps)
        q, k, v = (self.matmul(h, self.param_h[i], B, S, E, E) for i in (wq, wk, wv))
        qh, kh, vh = (self.transpose12(t, S, H, DK) for t in (q, k, v))
        kt = r.alloc(B * H * DK * S * F4)
        r.op("transpose_batched", "execute_transpose_batched_gpu", kh, kt, B * H, S, DK)
        scores = r.alloc(B * H * S * S * F4)
        r.op("matmul_batched", "execute_matmul_batched_on_gpu", qh, kt, scores, B * H, S, S, DK)
        const = r.upload(np.full(B * H * S * S, 0.5, np.float32))
        scaled = r.alloc(B * H * S * S * F4)
        r.op("mul", "execute_mul_on_gpu", scores, const, scaled, B * H * S * S)
        r.free(const)
        probs = r.alloc(B * H * S * S * F4)
        r.op("softmax", "execute_softmax_on_gpu", scaled, probs, B * H * S, S)
        saved = r.clone(probs, B * H * S * S * F4)
        grad_p = r.zeros(B * H * S * S * F4)
        grad_clone = r.clone(grad_p, B * H * S * S * F4)
        r.free(saved)
        r.free(grad_clone)
        ctx = r.alloc(B * H * S * DK * F4)
        r.op("matmul_batched", "execute_matmul_batched_on_gpu", probs, vh, ctx, B * H, S, DK, S)
        merged = self.transpose12(ctx, H, S, DK)
        proj = self.matmul(merged, self.param_h[wo], B, S, E, E)
        attn = self.host_bias_add(proj, bo, E)
        x1 = r.alloc(B * S * E * F4)
        r.op("add", "execute_add_on_gpu", x, attn, x1, B * S * E)
        h2 = self.layernorm(x1, B * S, temps)
        f1 = self.matmul(h2, self.param_h[w1], B, S, DFF, E)
        f1b = self.host_bias_add(f1, b1, DFF)
        g = r.alloc(B * S * DFF * F4)
        r.op("gelu", "execute_gelu_on_gpu", f1b, g, B * S * DFF)
        f2 = self.matmul(g, self.param_h[w2], B, S, E, DFF)
        f2b = self.host_bias_add(f2, b2, E)
        x2 = r.alloc(B * S * E * F4)
        r.op("add", "execute_add_on_gpu", x1, f2b, x2, B * S * E)
        temps += [h, q, k, v, qh, kh, vh, kt, scores, scaled, probs, grad_p, ctx, merged, proj,
                  attn, x1, h2, f1, f1b, g, f2, f2b]
        return x2

    # --- the step ------------------------------------------------------------------------------
    def step(self, ids: np.ndarray, targets: np.ndarray):
        r = self.rec
        phases = {}
        mark = r.calls.copy()

        def phase(name):
            nonlocal mark
            phases[name] = +(r.calls - mark)
            mark = r.calls.copy()

        if self.bias_grad is not None:  # zero_grad: only the output bias has a grad buffer
            r.free(self.bias_grad)
            self.bias_grad = r.zeros(V * F4)
        phase("zero_grad")

        temps: list = []
        emb_host = self.host[0][ids]                      # host-side embedding
        x = r.upload(emb_host)
        pe_slice = r.alloc(S * E * F4)
        r.clone_into(self.pe_h, pe_slice, S * E * F4)
        xp = r.alloc(B * S * E * F4)
        r.op("add_broadcast_pe", "execute_add_broadcast_pe_gpu", x, pe_slice, xp, B, S, E)
        r.free(pe_slice)
        temps += [x]
        cur = xp
        for layer in range(L):
            nxt = self.block(cur, layer, temps)
            temps.append(cur)
            cur = nxt
        hf = self.layernorm(cur, B * S, temps)
        temps.append(cur)
        out = self.matmul(hf, self.param_h[-2], B, S, V, E)
        logits = self.host_bias_add(out, len(self.param_h) - 1, V)
        temps += [hf, out]
        for handle in temps:
            r.free(handle)
        phase("forward")

        rows = B * S
        lp, tgt, grad, loss = (r.alloc(rows * V * F4), r.alloc(rows * F4), r.alloc(rows * V * F4),
                               r.alloc(rows * F4))
        r.write(tgt, targets.astype(np.int32).reshape(-1))
        r.op("log_softmax", "execute_log_softmax_stable_gpu", logits, lp, B, S, V)
        r.op("cross_entropy", "execute_cross_entropy_loss_grad_gpu", lp, tgt, grad, loss, B, S, V)
        per_row = r.read(loss, (rows,))
        valid = targets.reshape(-1) != 0
        mean_loss = float(per_row[valid].astype(np.float64).mean())
        const = r.upload(np.full(rows * V, 1.0 / valid.sum(), np.float32))
        scaled = r.alloc(rows * V * F4)
        r.op("mul", "execute_mul_on_gpu", grad, const, scaled, rows * V)
        r.free(const)
        # backward reaches the logits and, through the host bias add, the output bias only
        logits_grad = r.zeros(rows * V * F4)
        tmp = r.alloc(rows * V * F4)
        r.op("add", "execute_add_on_gpu", logits_grad, scaled, tmp, rows * V)
        r.clone_into(tmp, logits_grad, rows * V * F4)
        r.free(tmp)
        bias_inc_host = r.read(logits_grad, (rows, V)).sum(0, keepdims=True)
        if self.bias_grad is None:
            self.bias_grad = r.zeros(V * F4)
        bias_inc = r.upload(bias_inc_host)
        tmp = r.alloc(V * F4)
        r.op("add", "execute_add_on_gpu", self.bias_grad, bias_inc, tmp, V)
        r.clone_into(tmp, self.bias_grad, V * F4)
        r.free(tmp)
        r.free(bias_inc)
        r.free(scaled)
        for handle in (lp, tgt, grad, loss):
            r.free(handle)
        phase("loss_backward")

        self.t += 1
        r.op("adam", "execute_adam_update_on_gpu", self.param_h[-1], self.bias_grad,
             self.m_h[-1], self.v_h[-1], V, self.t, c_float(LR), c_float(BETA1), c_float(BETA2),
             c_float(ADAM_EPS), c_float(WD))
        phase("optimizer")
        r.free(logits)
        r.free(logits_grad)
        phase("release")
        return mean_loss, phases, bias_inc_host

    def teardown(self):
        for handle in self.param_h + [self.pe_h] + self.m_h + self.v_h + [self.bias_grad]:
            self.rec.free(handle)


def adam_reference(p, g, m, v, t):
    g = g + np.float32(WD) * p
    m = np.float32(BETA1) * m + np.float32(1 - BETA1) * g
    v = np.float32(BETA2) * v + np.float32(1 - BETA2) * g * g
    mh = m / (np.float32(1 - BETA1 ** t) + np.float32(1e-9))
    vh = v / (np.float32(1 - BETA2 ** t) + np.float32(1e-9))
    return p - np.float32(LR) * mh / (np.sqrt(vh) + np.float32(ADAM_EPS)), m, v
