"""16-bit operands of the training-op suites: encoding float64 values into f16 / bf16 / f32
storage, decoding results, rounding a float64 reference to a format (nearest even), one unit in
the last place of a format, and tagged, poisoned device tensors with guard bytes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aethercl import dtypes

BF16_MAX = float(np.float32(np.frombuffer(np.uint32(0x7F7F0000).tobytes(), np.float32)[0]))
# Quiet NaNs with payloads no op writes (ops write NaN only for NaN results, with other bits).
POISON_F16 = np.uint16(0x7E5A)
POISON_BF16 = np.uint16(0x7FDA)


def round_bf16(values) -> np.ndarray:
    """float64 values rounded to bfloat16 (8 significant bits, nearest even, +-inf beyond the
    largest bf16, subnormal quantum 2^-133), as float64."""
    v = np.asarray(values, np.float64)
    out = v.copy()
    finite = np.isfinite(v) & (v != 0)
    _, e = np.frexp(v[finite])  # v = m 2^e, 0.5 <= |m| < 1: the quantum is 2^(e - 8)
    e = np.maximum(e, -125)
    out[finite] = np.ldexp(np.rint(np.ldexp(v[finite], 8 - e)), e - 8)  # rint: ties to even
    out[np.abs(out) > BF16_MAX] = np.copysign(np.inf, out[np.abs(out) > BF16_MAX])
    return out


def ulp_bf16(values) -> np.ndarray:
    v = np.abs(np.asarray(values, np.float64))
    _, e = np.frexp(np.where(np.isfinite(v) & (v > 0), v, 1.0))
    return np.ldexp(1.0, np.maximum(e, -125) - 8)


@dataclass(frozen=True)
class Format:
    """One storage format: its name, aethercl_dtype code and host array type."""
    name: str
    code: int
    storage: type

    def round(self, values) -> np.ndarray:
        """The float64 values rounded once to this format (float32: unrounded; a float32 result
        is compared with the float32 op's own tolerance)."""
        v = np.asarray(values, np.float64)
        if self.name == "f16":
            return v.astype(np.float16).astype(np.float64)
        if self.name == "bf16":
            return round_bf16(v)
        return v

    def ulp(self, values) -> np.ndarray:
        """One unit in the last place of the format at |values| (0 for float32, see round)."""
        v = np.abs(np.asarray(values, np.float64))
        if self.name == "f16":
            # spacing(65504) overflows in float16: values from 2^15 up share the ulp 32
            finite = np.where(np.isfinite(v), np.minimum(v, 32768.0), 1.0)
            return np.spacing(finite.astype(np.float16)).astype(np.float64)
        if self.name == "bf16":
            return ulp_bf16(v)
        return np.zeros_like(v)

    def encode(self, values) -> np.ndarray:
        """Host storage holding the values rounded to the format."""
        v = self.round(values)
        if self.name == "f16":
            return v.astype(np.float16)
        if self.name == "bf16":
            return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return v.astype(np.float32)

    def decode(self, stored) -> np.ndarray:
        stored = np.asarray(stored)
        if self.name == "bf16":
            return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return stored.astype(np.float64)

    def poison(self, shape) -> np.ndarray:
        if self.name == "f16":
            return np.full(shape, POISON_F16, np.uint16).view(np.float16)
        if self.name == "bf16":
            return np.full(shape, POISON_BF16, np.uint16)
        from support.helpers import POISON_F32
        return np.full(shape, POISON_F32, np.float32)

    def exact(self, values) -> np.ndarray:
        """The values the device reads after encode (exactly representable inputs)."""
        return self.decode(self.encode(values))


F32 = Format("f32", dtypes.F32, np.float32)
F16 = Format("f16", dtypes.F16, np.float16)
BF16 = Format("bf16", dtypes.BF16, np.uint16)
FORMATS = {"f32": F32, "f16": F16, "bf16": BF16}


class TypedTensors:
    """Tagged tensors of one test in a Scope (guard bytes checked at its end). A float32 operand
    stays untagged unless tag_f32: untagged is how float32 is meant to be written."""

    def __init__(self, scope, lib, tag_f32: bool = False):
        self.scope, self.lib, self.tag_f32 = scope, lib, tag_f32

    def _tag(self, tensor, fmt: Format):
        if fmt is not F32 or self.tag_f32:
            self.lib.check("aethercl_buffer_set_dtype", self.scope.device.index, tensor.handle,
                           fmt.code)
        tensor.format = fmt
        return tensor

    def input(self, values, fmt: Format):
        """An input holding the values rounded to fmt (tensor.exact: what the device reads)."""
        tensor = self.scope.in_(fmt.encode(values))
        tensor.exact = fmt.exact(values)
        return self._tag(tensor, fmt)

    def output(self, shape, fmt: Format):
        """A poisoned output in fmt."""
        return self._tag(self.scope.in_(fmt.poison(shape)), fmt)


def read(tensor) -> np.ndarray:
    """A typed tensor's values as float64, after checking that no element is still poison."""
    stored = tensor.numpy()
    fmt = tensor.format
    bits = np.ascontiguousarray(stored).view(np.uint16 if fmt is not F32 else np.uint32)
    poison = np.ascontiguousarray(fmt.poison(1)).view(bits.dtype)[0]
    assert not (bits == poison).any(), f"an output element ({fmt.name}) was never written"
    return fmt.decode(stored)


def check(tensor, reference, rtol: float, atol: float, what: str = "") -> None:
    """The tensor (any format) against a float64 reference computed from the exact 16-bit inputs.

    The float32 op is documented (its own suite) to return r with |r - ref| <= atol + rtol |ref|;
    the typed op stores r rounded once to nearest in the output's format. Rounding to nearest is
    monotone and moves a value by at most half a unit in the last place, so the stored value and
    the reference rounded the same way differ by at most atol + rtol |ref| + 1 ulp (the ulp at the
    larger of the two magnitudes). Infinities and NaNs of the rounded reference must match
    exactly (an f16 overflow is +-inf on both sides)."""
    got = read(tensor)
    fmt = tensor.format
    reference = np.broadcast_to(np.asarray(reference, np.float64), got.shape)
    want = fmt.round(reference)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    special = ~np.isfinite(want)
    if special.any():
        np.testing.assert_array_equal(got[special], want[special], err_msg=f"{what} specials")
    finite = ~special
    tolerance = (atol + rtol * np.abs(reference[finite])
                 + fmt.ulp(np.maximum(np.abs(want[finite]), np.abs(got[finite]))))
    error = np.abs(got[finite] - want[finite])
    bad = ~(error <= tolerance)
    assert not bad.any(), (
        f"{what} ({fmt.name}): {int(bad.sum())} of {bad.size} elements off; worst "
        f"{error[bad].max() if bad.any() else 0} (got {got[finite][bad][:4]}, want "
        f"{want[finite][bad][:4]}, tolerance {tolerance[bad][:4]})")
