"""PyTorch's side of `bench train`, run as a child process by whichever Python has torch: each
variant (plain eager, SDPA + fused AdamW, bf16 autocast + torch.compile) in each precision, from
our initial weights on our batches. Prints one JSON line per variant, or {"skipped": reason}.

    python3 tools/bench/train_torch.py SPEC.json DATA.npz
SPEC: model, sizes, variants [[name, precision]...], device, threads, check_steps, warmup,
compile_warmup, steps. DATA: weights as w:NAME, check_x/check_y, x0/y0, x1/y1, ..."""
from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from train_common import CNN_OPTIM, GPT_OPTIM, PAD_ID, measure  # noqa: E402
from train_torch_models import build_cnn, build_gpt  # noqa: E402

VARIANTS = ("eager", "sdpa_fused", "compile")


def why_not(torch, device, variant: str, precision: str):
    """The reason this variant cannot run here, or None."""
    if precision == "tf32" and device.type != "cuda":
        return "TF32 is a CUDA tensor-core mode (on this device it would be FP32 again)"
    if precision == "tf32" and variant != "eager":
        return "measured for plain eager only"
    if variant == "compile":
        if precision != "bf16":
            return "measured with bf16 autocast only"
        if device.type == "cuda":
            try:
                import triton  # noqa: F401
            except ImportError:
                return "torch.compile on CUDA needs Triton, which is not installed"
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16"
    return None


def set_precision(torch, precision: str) -> None:
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def run_variant(torch, spec, data, variant: str, precision: str) -> dict:
    device = torch.device(spec["device"])
    sizes, kind = spec["sizes"], spec["model"]
    weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
    set_precision(torch, precision)
    torch.manual_seed(0)
    if kind == "gpt":
        model = build_gpt(torch, sizes, weights, sdpa=variant != "eager").to(device)
        hyper = GPT_OPTIM
    else:
        model = build_cnn(torch, sizes, weights).to(device)
        if variant != "eager" and device.type == "cuda":
            model = model.to(memory_format=torch.channels_last)
        hyper = CNN_OPTIM
    fused = {"fused": True} if variant != "eager" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=hyper["lr"], betas=hyper["betas"],
                                  eps=hyper["eps"], weight_decay=hyper["weight_decay"], **fused)
    forward = torch.compile(model) if variant == "compile" else model
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) \
        if precision == "bf16" else contextlib.nullcontext
    F = torch.nn.functional

    def to_device(batch):
        x, y = batch
        x = torch.from_numpy(x).to(device, non_blocking=True)
        y = torch.from_numpy(y).to(device, non_blocking=True).long()
        return x.long() if kind == "gpt" else x, y

    def step(batch) -> float:
        x, y = to_device(batch)
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            logits = forward(x)
            if kind == "gpt":
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1),
                                       ignore_index=PAD_ID)
            else:
                loss = F.cross_entropy(logits.float(), y,
                                       label_smoothing=sizes["label_smoothing"])
        loss.backward()
        if kind == "cnn":
            torch.nn.utils.clip_grad_norm_(model.parameters(), sizes["clip"])
        optimizer.step()
        return loss.item()   # read every step, as ours does

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    check = (data["check_x"], data["check_y"])
    batches = [(data[f"x{i}"], data[f"y{i}"]) for i in range(spec["pool"])]
    warmup = spec["compile_warmup"] if variant == "compile" else spec["warmup"]
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    result = measure(step, sync, check, batches, spec["check_steps"], warmup, spec["steps"])
    result["setup_s"] = time.perf_counter() - started
    if device.type == "cuda":
        result["peak_bytes"] = int(torch.cuda.max_memory_reserved(device))
        result["peak_bytes_allocated"] = int(torch.cuda.max_memory_allocated(device))
    return result


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    data = np.load(sys.argv[2])
    import torch
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    device = torch.device(spec["device"])
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(json.dumps({"torch": torch.__version__, "device": name,
                      "threads": torch.get_num_threads()}), flush=True)
    for variant, precision in spec["variants"]:
        row = {"side": "torch", "variant": variant, "precision": precision}
        reason = why_not(torch, device, variant, precision)
        if reason is None:
            try:
                row.update(run_variant(torch, spec, data, variant, precision))
            except Exception as error:  # noqa: BLE001 - a variant that fails is reported, not fatal
                lines = traceback.format_exception_only(type(error), error)
                reason = f"failed: {lines[-1].strip()[:300]}"
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        if reason is not None:
            row["skipped"] = reason
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
