"""Hostile-input cases for the 16-bit operands of the training ops (aethercl_buffer_set_dtype
tags read by aethercl_unary ... aethercl_cross_entropy): per function, baselines with every
activation operand tagged f16, bf16 or a mix of formats (sized in elements of each format:
accepted), each operand one 16-bit element short (AETHERCL_OUT_OF_RANGE), each operand
tagged with a non-float type (refused, naming it and the tag), and each float32-only operand
(gamma, beta, their gradients, the loss) tagged f16 or bf16 (refused, naming it). Built on the
version-3 specs (op_specs.TRAIN_SPECS) and hostile_train_cases.Call; imported by
hostile_cases.all_cases."""
from __future__ import annotations

from typing import Dict, List

from support.hostile_train_cases import Call, buffer_sizes
from support.op_specs import TRAIN_SPECS

F32, F16, BF16, F64, I32, I64, I8, U8 = range(8)
NAMES = {F16: "AETHERCL_F16", BF16: "AETHERCL_BF16", F64: "AETHERCL_F64", I32: "AETHERCL_I32",
         I64: "AETHERCL_I64", I8: "AETHERCL_I8", U8: "AETHERCL_U8"}
C_INVALID_ARGUMENT, C_OUT_OF_RANGE = 1, 3

# function -> (operands that may be 16-bit, operands that stay float32)
TYPED = {
    "aethercl_unary": (("x", "y"), ()),
    "aethercl_unary_backward": (("x", "dy", "dx"), ()),
    "aethercl_binary": (("a", "b", "c"), ()),
    "aethercl_binary_backward": (("a", "b", "dc", "da", "db"), ()),
    "aethercl_norm_forward": (("x", "y"), ("gamma", "beta")),
    "aethercl_norm_backward": (("x", "dy", "dx"), ("gamma", "dgamma", "dbeta")),
    "aethercl_cross_entropy": (("logits", "grad"), ("loss",)),
}

# A mix of formats per function: test_train_typed's mixed layouts (a float32 input or residual
# with bf16 outputs, a float32 bias row), so the programs they build are the ones these use.
MIXED = {
    "aethercl_unary": {"x": F32, "y": BF16},
    "aethercl_unary_backward": {"x": F32, "dy": BF16, "dx": F32},
    "aethercl_binary": {"a": BF16, "b": F32, "c": BF16},
    "aethercl_binary_backward": {"a": BF16, "b": F32, "dc": BF16, "da": BF16, "db": F32},
    "aethercl_norm_forward": {"x": F32, "y": BF16},
    "aethercl_norm_backward": {"x": F32, "dy": BF16, "dx": F32},
    "aethercl_cross_entropy": {"logits": BF16, "grad": F32},
}


def typed_buffers(h, spec, formats: Dict[str, int], short: str = "",
                  sized: bool = True) -> Dict[str, int]:
    """The spec's buffers for its baseline values, each operand in `formats` tagged with that
    format and (when sized) allocated in it, the one named `short` one element short; the rest
    as the spec sizes them (float32, untagged)."""
    values = dict(spec.values)
    buffers = {}
    for name, size in buffer_sizes(spec, values).items():
        fmt = formats.get(name)
        if sized and fmt in (F16, BF16):
            size = size // 2
        if name == short:
            size -= 2 if fmt in (F16, BF16) else 4
        buffers[name] = h.alloc(size)
        if fmt is not None and fmt != F32:
            if h.lib.aethercl_buffer_set_dtype(h.index, buffers[name], fmt) != 1:
                from support.hostile_cases import fail
                fail(f"setup: aethercl_buffer_set_dtype: {h.lib.last_error()}")
    return buffers


def typed_cases(symbols) -> List[tuple]:
    cases = []
    for symbol in symbols:
        if symbol.name not in TYPED:
            continue
        spec = TRAIN_SPECS[symbol.name]
        operands, masters = TYPED[symbol.name]
        naming = Call(None, symbol, spec)

        def add(case_id, function, name=symbol.name):
            cases.append((f"{name}/{case_id}", function))

        def run(h, buffers, symbol=symbol, spec=spec):
            return Call(h, symbol, spec).run(dict(spec.values), buffers)

        mixes = {"all_f16": {o: F16 for o in operands}, "all_bf16": {o: BF16 for o in operands},
                 "mixed_formats": MIXED[symbol.name]}
        for mix_name, formats in mixes.items():
            add(f"typed_{mix_name}", lambda h, formats=formats, run=run, spec=spec:
                h.succeeded(run(h, typed_buffers(h, spec, formats))))
        for operand in operands:
            label = naming.name_of(operand)

            def short(h, operand=operand, label=label, run=run, spec=spec, operands=operands):
                formats = {o: BF16 for o in operands}
                need = buffer_sizes(spec, dict(spec.values))[operand] // 2
                h.refused(run(h, typed_buffers(h, spec, formats, short=operand)), 0,
                          {C_OUT_OF_RANGE}, [label, f"{need - 2} bytes", f"{need} bytes"])
            add(f"{operand}_bf16_one_element_too_small", short)
            for tag in (I32, F64, U8):
                def non_float(h, operand=operand, label=label, tag=tag, run=run, spec=spec):
                    h.refused(run(h, typed_buffers(h, spec, {operand: tag})), 0,
                              {C_INVALID_ARGUMENT}, [label, NAMES[tag]])
                add(f"{operand}_tagged_{NAMES[tag]}", non_float)
        for master in masters:
            label = naming.name_of(master)
            for tag in (F16, BF16):
                def narrow_master(h, master=master, label=label, tag=tag, run=run, spec=spec):
                    h.refused(run(h, typed_buffers(h, spec, {master: tag}, sized=False)), 0,
                              {C_INVALID_ARGUMENT}, [label, NAMES[tag], "float32"])
                add(f"{master}_tagged_{NAMES[tag]}_refused", narrow_master)
    return cases
