"""aethercl_gemm from Python: the aethercl_gemm_desc struct, dtype and compute-mode codes (from the
generated aethercl.structs), and a call that fills the descriptor from keyword arguments; likewise
aethercl_gemm_fused and its aethercl_gemm_epilogue."""
from __future__ import annotations

import ctypes

from .streams import resolve
from .structs import (BF16, COMPUTE_3XTF32, COMPUTE_BF16, COMPUTE_DEFAULT,  # noqa: F401
                      COMPUTE_FP16, COMPUTE_FP32, COMPUTE_TF32, EPILOGUE_BIAS,
                      EPILOGUE_BIAS_GELU, EPILOGUE_BIAS_GELU_TANH, EPILOGUE_BIAS_RELU,
                      EPILOGUE_DGELU, EPILOGUE_GELU, EPILOGUE_RELU, F16, F32, F64, I8, I32, I64, U8, GemmDesc,
                      GemmEpilogue)

COMPUTE_MODES = {"default": COMPUTE_DEFAULT, "fp32": COMPUTE_FP32, "tf32": COMPUTE_TF32,
                 "3xtf32": COMPUTE_3XTF32, "bf16": COMPUTE_BF16, "fp16": COMPUTE_FP16}
DTYPE_BYTES = {F32: 4, F16: 2, BF16: 2}


def gemm_desc(a, b, c, m, n, k, *, trans_a=0, trans_b=0, batch=1, lda=None, ldb=None, ldc=None,
              stride_a=None, stride_b=None, stride_c=None, alpha=1.0, beta=0.0, offset_a=0,
              offset_b=0, offset_c=0, dtype_a=F32, dtype_b=None, dtype_c=None,
              compute=COMPUTE_DEFAULT) -> GemmDesc:
    """A descriptor with dense defaults: leading dimensions the stored row lengths, strides one
    matrix (row-major, no padding)."""
    lda = lda if lda is not None else max(1, m if trans_a else k)
    ldb = ldb if ldb is not None else max(1, k if trans_b else n)
    ldc = ldc if ldc is not None else max(1, n)
    desc = GemmDesc()
    desc.struct_size = ctypes.sizeof(GemmDesc)
    desc.trans_a, desc.trans_b = trans_a, trans_b
    desc.m, desc.n, desc.k, desc.batch = m, n, k, batch
    desc.stride_a = stride_a if stride_a is not None else (k if trans_a else m) * lda
    desc.stride_b = stride_b if stride_b is not None else (n if trans_b else k) * ldb
    desc.stride_c = stride_c if stride_c is not None else m * ldc
    desc.lda, desc.ldb, desc.ldc = lda, ldb, ldc
    desc.alpha, desc.beta = alpha, beta
    desc.a, desc.offset_a, desc.dtype_a = a, offset_a, dtype_a
    desc.b, desc.offset_b = b, offset_b
    desc.dtype_b = dtype_b if dtype_b is not None else dtype_a
    desc.c, desc.offset_c = c, offset_c
    desc.dtype_c = dtype_c if dtype_c is not None else F32
    desc.compute = compute
    return desc


def gemm(lib, gpu_index: int, desc: GemmDesc, stream=None) -> None:
    """aethercl_gemm on stream (None: the calling thread's current stream); raises AetherCLError
    with the driver's message when refused."""
    lib.check("aethercl_gemm", gpu_index, ctypes.byref(desc), resolve(lib, gpu_index, stream))


EPILOGUES = {"bias": EPILOGUE_BIAS, "bias_relu": EPILOGUE_BIAS_RELU,
             "bias_gelu": EPILOGUE_BIAS_GELU, "bias_gelu_tanh": EPILOGUE_BIAS_GELU_TANH,
             "relu": EPILOGUE_RELU, "gelu": EPILOGUE_GELU, "dgelu": EPILOGUE_DGELU}


def gemm_epilogue(kind, *, bias=None, offset_bias=0, dtype_bias=F32, pre=None,
                  offset_pre=0, residual=None, offset_residual=0) -> GemmEpilogue:
    """An aethercl_gemm_epilogue: kind a code or a name of EPILOGUES; residual (in C's layout
    and dtype) is added after it."""
    epilogue = GemmEpilogue()
    epilogue.struct_size = ctypes.sizeof(GemmEpilogue)
    epilogue.kind = EPILOGUES[kind] if isinstance(kind, str) else kind
    epilogue.bias, epilogue.offset_bias, epilogue.dtype_bias = bias, offset_bias, dtype_bias
    epilogue.pre, epilogue.offset_pre = pre, offset_pre
    epilogue.residual, epilogue.offset_residual = residual, offset_residual
    return epilogue


def gemm_fused(lib, gpu_index: int, desc: GemmDesc, epilogue, stream=None) -> None:
    """aethercl_gemm_fused (epilogue None: NULL, the plain product) on stream (None: the calling
    thread's current stream); raises AetherCLError with the driver's message when refused."""
    lib.check("aethercl_gemm_fused", gpu_index, ctypes.byref(desc),
              ctypes.byref(epilogue) if epilogue is not None else None,
              resolve(lib, gpu_index, stream))
