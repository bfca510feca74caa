"""ocl_llm: the OCL-LLM frontend (tensors with autograd, layers, the documented transformer, Adam,
the character tokenizer, checkpoints and the training job) on the AetherCL driver.

Modules, one concern each (a module only imports those above it):
  config      element types, DEFAULT_CONFIG, the bundled corpus
  runtime     Runtime (an initialised device and its frontend buffers), ocl_initialize/_shutdown,
              set_matmul_precision, set_activation_precision
  buffer      GPUBuffer (an aethercl.Buffer of the frontend), constant and mask caches
  autograd    grad mode, FunctionContext and the backward contexts, topological order
  tensor      OclTensor and its operations, Parameter
  weight_copies  a weight's 16-bit copies for a 16-bit Linear (a kernel of the frontend's own)
  mixed       16-bit activations: Linear, LayerNorm and the loss in bf16 / fp16 storage
  functional  functions on tensors with autograd over the version-3 training ops
  state       state dicts: host copies of named tensors, loaded back with differences named
  model       the documented transformer: its layers and SimpleModel
  layers      Module-style layers (Module, Sequential, Linear, Conv2d, ...)
  optimizers  AdamOptimizer (the transformer's), SGD, AdamW, clip_grad_norm
  loss        cross_entropy_loss_and_backward
  loss_scale  LossScaler: dynamic loss scaling for fp16 gradients
  text        TinyTokenizer, read_corpus, TextData
  legacy      the checkpoint format before serialize, read as the current one
  serialize   save / load: JSON metadata beside .npz weights, SHA-256 per tensor (also of
              ocl_llm.layers and ocl_llm.optimizers)
  checkpoint  save/read/load_checkpoint of the training job (through save / load)
  gradcheck   gradcheck: device gradients against finite differences
  report      ProgressBar, plot_losses, print_summary
  data_parallel  DataParallel: replicas on several devices, gradients all-reduced
  train, cli  train_step, evaluate, generate, train; the command line (main)

Written from the OCL-LLM frontend's documented interface and the calls of docs/ABI.md §7. Unlike
the original frontend the autograd graph holds strong references and backward walks it in
topological order, so every parameter trains and every backward entry point runs. Everything in a
training step stays on the device except the token ids going up and the per-row losses coming
back."""
from aethercl import AetherCLError, Device, Library

from .autograd import (AddBackwardContext, AddBroadcastPEBackwardContext,
                       BatchedTransposeLastTwoBackwardContext, EmbeddingBackwardContext,
                       FunctionContext, GeluBackwardContext, LayerNormBackwardContext,
                       MatMulBackwardContext, MatMulBatchedBackwardContext, MulBackwardContext,
                       NoGradContext, ReshapeBackwardContext, ScalarMulBackwardContext,
                       SoftmaxBackwardContext, Transpose12BatchedBackwardContext,
                       TransposeBackwardContext, TransposeCPUFallbackBackwardContext,
                       is_grad_enabled, topological_order)
from .buffer import MASK_VALUE, GPUBuffer, causal_mask, constant_buffer
from .checkpoint import CHECKPOINT_FORMAT, load_checkpoint, read_checkpoint, save_checkpoint
from .serialize import load, save
from .gradcheck import gradcheck
from .cli import build_arg_parser, config_from_args, main, parse_gpus, start_inspector
from .data_parallel import DataParallel
from .config import BUNDLED_CORPUS, DEFAULT_CONFIG, FP_TYPE, IDX_TYPE
from .loss import cross_entropy_loss_and_backward
from .loss_scale import LossScaler
from .model import (Embedding, GeLUActivation, LayerNorm, Linear, MultiHeadAttention,
                    PositionalEncoding, SimpleModel, TransformerBlock)
from .optimizers import AdamOptimizer
from .report import ProgressBar, plot_losses, print_summary
from .runtime import (ACTIVATION_PRECISIONS, MATMUL_PRECISIONS, Runtime, current_device,
                      current_runtime, ocl_initialize, ocl_shutdown, release_all,
                      set_activation_precision, set_matmul_precision)
from .tensor import OclTensor, Parameter
from .text import TOKENIZER_CHARS, UNK_DISPLAY, TextData, TinyTokenizer, read_corpus
from .train import evaluate, generate, train, train_step

__all__ = [
    # driver shim
    "AetherCLError", "Device", "Library",
    # runtime and buffers
    "Runtime", "ocl_initialize", "ocl_shutdown", "release_all", "current_runtime",
    "current_device", "set_matmul_precision", "MATMUL_PRECISIONS",
    "set_activation_precision", "ACTIVATION_PRECISIONS",
    "GPUBuffer", "constant_buffer", "causal_mask", "MASK_VALUE",
    # tensors and autograd
    "OclTensor", "FunctionContext", "NoGradContext", "is_grad_enabled", "topological_order",
    "gradcheck",
    "MatMulBackwardContext", "MatMulBatchedBackwardContext", "AddBackwardContext",
    "AddBroadcastPEBackwardContext", "MulBackwardContext", "ScalarMulBackwardContext",
    "GeluBackwardContext", "SoftmaxBackwardContext", "LayerNormBackwardContext",
    "TransposeBackwardContext", "BatchedTransposeLastTwoBackwardContext",
    "Transpose12BatchedBackwardContext", "TransposeCPUFallbackBackwardContext",
    "ReshapeBackwardContext", "EmbeddingBackwardContext",
    # layers, model, optimiser, loss
    "Parameter", "Linear", "Embedding", "GeLUActivation", "LayerNorm", "PositionalEncoding",
    "MultiHeadAttention", "TransformerBlock", "SimpleModel", "AdamOptimizer",
    "cross_entropy_loss_and_backward", "LossScaler",
    # text, checkpoints, training
    "TinyTokenizer", "TOKENIZER_CHARS", "UNK_DISPLAY", "TextData", "read_corpus",
    "CHECKPOINT_FORMAT", "save_checkpoint", "read_checkpoint", "load_checkpoint", "save", "load",
    "train_step", "evaluate", "generate", "train", "ProgressBar", "plot_losses",
    "print_summary", "build_arg_parser", "config_from_args", "main", "parse_gpus",
    "start_inspector", "DataParallel",
    # configuration
    "FP_TYPE", "IDX_TYPE", "DEFAULT_CONFIG", "BUNDLED_CORPUS",
]
