"""A NumPy stand-in for the driver with the interface of aethercl.Library (check, check_handle,
free_gpu_memory, json_call, last_error...), implementing the OCL-LLM entry points of docs/ABI.md
§4 in float64 on host memory (results stored as float32). Tests run the frontend on it and
on the real driver and compare: it is a reference, not a product."""
from __future__ import annotations

import ctypes
import json
import math

import numpy as np

from aethercl import AetherCLError

_erf = np.vectorize(math.erf)


class ReferenceLibrary:
    def __init__(self):
        self.memory = {}
        self.next_handle = 0x1000
        self.calls = []
        self._error = ""

    # --- Library interface ----------------------------------------------------------------------
    def check(self, name, index, *args):
        self.calls.append(name)
        self._error = ""
        try:
            getattr(self, "_" + name)(*args)
        except Exception as error:  # noqa: BLE001 - report like the driver does
            self._error = f"{name}: {error}"
            raise AetherCLError(name, 1, self._error) from error
        return 1

    def check_handle(self, name, index, *args):
        self.calls.append(name)
        return getattr(self, "_" + name)(*args)

    def free_gpu_memory(self, index, handle):
        self.calls.append("free_gpu_memory")
        self.memory.pop(handle, None)

    def shutdown_driver(self):
        self.memory.clear()

    def json_call(self, name, index):
        if name == "aethercl_device_info":
            return json.dumps({"name": "numpy reference", "platform": "host", "type": "cpu",
                               "compute_units": 1})
        return json.dumps({"live_buffers": len(self.memory)})

    def last_error(self):
        return self._error

    def last_error_code(self):
        return 1 if self._error else 0

    def error(self, name):
        return AetherCLError(name, 1, self._error)

    # --- memory -----------------------------------------------------------------------------------
    def _initialize_gpu(self):
        pass

    def _aethercl_set_buffer_label(self, handle, label):
        pass

    def _allocate_gpu_memory(self, size):
        self.next_handle += 16
        self.memory[self.next_handle] = np.zeros(size, np.uint8)
        return self.next_handle

    def _buf(self, handle):
        if handle not in self.memory:
            raise ValueError(f"unknown handle {handle}")
        return self.memory[handle]

    def f32(self, handle, n, shape=None):
        a = self._buf(handle)[: 4 * n].view(np.float32).astype(np.float64)
        return a.reshape(shape) if shape is not None else a

    def i32(self, handle, n):
        return self._buf(handle)[: 4 * n].view(np.int32).astype(np.int64)

    def put(self, handle, values):
        values = np.ascontiguousarray(values, np.float32).reshape(-1)
        self._buf(handle)[: values.nbytes] = values.view(np.uint8)

    def _write_host_to_gpu_blocking(self, handle, offset, size, src):
        if size:
            ctypes.memmove(self._buf(handle)[offset:offset + size].ctypes.data, src, size)

    def _read_gpu_to_host_blocking(self, handle, offset, size, dst):
        if size:
            ctypes.memmove(dst, self._buf(handle)[offset:offset + size].ctypes.data, size)

    def _execute_clone_on_gpu(self, src, dst, size):
        self._buf(dst)[:size] = self._buf(src)[:size]

    # --- compute ---------------------------------------------------------------------------------
    def _execute_matmul_on_gpu(self, a, w, c, B, M, N, K):
        self.put(c, self.f32(a, B * M * K, (B, M, K)) @ self.f32(w, K * N, (K, N)))

    def _execute_matmul_backward_on_gpu(self, a, w, dc, da, dw, B, M, N, K):
        A, W, DC = self.f32(a, B * M * K, (B, M, K)), self.f32(w, K * N, (K, N)), \
            self.f32(dc, B * M * N, (B, M, N))
        if da:
            self.put(da, DC @ W.T)
        if dw:
            self.put(dw, np.einsum("bmk,bmn->kn", A, DC))

    def _execute_matmul_batched_on_gpu(self, a, b, c, B, M, N, K):
        self.put(c, self.f32(a, B * M * K, (B, M, K)) @ self.f32(b, B * K * N, (B, K, N)))

    def _execute_matmul_batched_backward_on_gpu(self, a, b, dc, da, db, B, M, N, K):
        A, Bt = self.f32(a, B * M * K, (B, M, K)), self.f32(b, B * K * N, (B, K, N))
        DC = self.f32(dc, B * M * N, (B, M, N))
        if da:
            self.put(da, DC @ Bt.transpose(0, 2, 1))
        if db:
            self.put(db, A.transpose(0, 2, 1) @ DC)

    def _execute_add_on_gpu(self, a, b, c, n):
        self.put(c, self.f32(a, n) + self.f32(b, n))

    def _execute_mul_on_gpu(self, a, b, c, n):
        self.put(c, self.f32(a, n) * self.f32(b, n))

    def _execute_mul_backward_on_gpu(self, dc, a, b, da, db, n):
        if da:
            self.put(da, self.f32(dc, n) * self.f32(b, n))
        if db:
            self.put(db, self.f32(dc, n) * self.f32(a, n))

    def _execute_gelu_on_gpu(self, x, y, n):
        v = self.f32(x, n)
        self.put(y, 0.5 * v * (1 + _erf(v / math.sqrt(2))))

    def _execute_gelu_backward_on_gpu(self, x, dy, dx, n):
        v = self.f32(x, n)
        d = 0.5 * (1 + _erf(v / math.sqrt(2))) + v * np.exp(-v * v / 2) / math.sqrt(2 * math.pi)
        self.put(dx, self.f32(dy, n) * d)

    def _execute_layernorm_on_gpu(self, x, y, rows, cols, eps):
        v = self.f32(x, rows * cols, (rows, cols))
        mu = v.mean(1, keepdims=True)
        var = ((v - mu) ** 2).mean(1, keepdims=True)
        self.put(y, (v - mu) / np.sqrt(var + eps))

    def _execute_layernorm_backward_on_gpu(self, dy, x, dx, rows, cols, eps):
        v = self.f32(x, rows * cols, (rows, cols))
        g = self.f32(dy, rows * cols, (rows, cols))
        mu = v.mean(1, keepdims=True)
        inv = 1 / np.sqrt(((v - mu) ** 2).mean(1, keepdims=True) + eps)
        xh = (v - mu) * inv
        self.put(dx, inv / cols * (cols * g - g.sum(1, keepdims=True)
                                   - xh * (g * xh).sum(1, keepdims=True)))

    def _softmax(self, v):
        e = np.exp(v - v.max(1, keepdims=True))
        return e / (e.sum(1, keepdims=True) + 1e-9)

    def _execute_softmax_on_gpu(self, x, y, rows, cols):
        self.put(y, self._softmax(self.f32(x, rows * cols, (rows, cols))))

    def _execute_softmax_backward_on_gpu(self, dy, y, dx, rows, cols):
        g, p = self.f32(dy, rows * cols, (rows, cols)), self.f32(y, rows * cols, (rows, cols))
        self.put(dx, (g - (g * p).sum(1, keepdims=True)) * p)

    def _execute_log_softmax_stable_gpu(self, x, out, B, S, V):
        v = self.f32(x, B * S * V, (B * S, V))
        mu = v.max(1, keepdims=True)
        self.put(out, v - mu - np.log(np.exp(v - mu).sum(1, keepdims=True) + 1e-9))

    def _execute_cross_entropy_loss_grad_gpu(self, lp, tgt, grad, loss, B, S, V):
        p = self.f32(lp, B * S * V, (B * S, V))
        t = self.i32(tgt, B * S)
        g = np.exp(p)
        ok = (t >= 0) & (t < V)
        rows = np.arange(B * S)
        g[rows[ok], t[ok]] -= 1
        losses = np.zeros(B * S)
        losses[ok] = -p[rows[ok], t[ok]]
        self.put(grad, g)
        self.put(loss, losses)

    def _execute_transpose_on_gpu(self, x, y, rows, cols):
        self.put(y, self.f32(x, rows * cols, (rows, cols)).T)

    def _execute_transpose_backward_on_gpu(self, dc, da, rows_a, cols_a):
        self.put(da, self.f32(dc, rows_a * cols_a, (cols_a, rows_a)).T)

    def _execute_transpose_batched_gpu(self, x, y, b, d1, d2):
        self.put(y, self.f32(x, b * d1 * d2, (b, d1, d2)).transpose(0, 2, 1))

    def _execute_transpose_12_batched_gpu(self, x, y, B, D1, D2, D3):
        self.put(y, self.f32(x, B * D1 * D2 * D3, (B, D1, D2, D3)).transpose(0, 2, 1, 3))

    def _execute_reduce_sum_gpu(self, x, out, B, M, N):
        self.put(out, self.f32(x, B * M * N, (B * M, N)).sum(0))

    def _execute_broadcast_add_gpu(self, a, bias, c, B, M, N):
        self.put(c, self.f32(a, B * M * N, (B * M, N)) + self.f32(bias, N))

    def _execute_add_broadcast_pe_gpu(self, x, pe, y, B, S, E):
        self.put(y, self.f32(x, B * S * E, (B, S, E)) + self.f32(pe, S * E, (S, E)))

    def _execute_embedding_lookup_gpu(self, idx, w, out, b, s, d, v):
        ids = self.i32(idx, b * s)
        table = self.f32(w, v * d, (v, d))
        rows = np.zeros((b * s, d))
        ok = (ids >= 0) & (ids < v)
        rows[ok] = table[ids[ok]]
        self.put(out, rows)

    def _execute_embedding_backward_gpu(self, do, idx, dw, b, s, d, v):
        ids = self.i32(idx, b * s)
        g = self.f32(do, b * s * d, (b * s, d))
        acc = self.f32(dw, v * d, (v, d))
        ok = (ids >= 0) & (ids < v)
        np.add.at(acc, ids[ok], g[ok])
        self.put(dw, acc)

    def _execute_adam_update_on_gpu(self, p, g, m, v, n, t, lr, b1, b2, eps, wd):
        P, G, Mm, Vv = (self.f32(h, n).astype(np.float32) for h in (p, g, m, v))
        if wd > 0:
            G = G + np.float32(wd) * P
        Mm = np.float32(b1) * Mm + np.float32(1 - b1) * G
        Vv = np.float32(b2) * Vv + np.float32(1 - b2) * G * G
        mh = Mm / np.float32(1 - np.float32(b1 ** t) + 1e-9)
        vh = Vv / np.float32(1 - np.float32(b2 ** t) + 1e-9)
        self.put(p, P - np.float32(lr) * mh / (np.sqrt(vh) + np.float32(eps)))
        self.put(m, Mm)
        self.put(v, Vv)
