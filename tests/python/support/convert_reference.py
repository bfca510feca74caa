"""An exact reference for aethercl_convert, written independently of the kernel: every element is
decoded into an exact rational (fractions.Fraction) or a special (NaN, +-inf, -0), then rounded
to the target with Python's round() on a Fraction (round half to even) or truncated and
saturated for integers. Slow (a Python loop) and therefore used on arrays of a few hundred
elements; test_convert also checks it against NumPy's own casts where NumPy has them."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Dict, Tuple

import numpy as np

F32, F16, BF16, F64, I32, I64, I8, U8 = range(8)
# code -> (storage dtype, (exponent bits, mantissa bits) for floats / (lowest, highest) for ints)
FLOATS: Dict[int, Tuple[int, int]] = {F32: (8, 23), F16: (5, 10), BF16: (8, 7), F64: (11, 52)}
INTS: Dict[int, Tuple[int, int]] = {I32: (-2**31, 2**31 - 1), I64: (-2**63, 2**63 - 1),
                                    I8: (-128, 127), U8: (0, 255)}
STORAGE = {F32: np.uint32, F16: np.uint16, BF16: np.uint16, F64: np.uint64, I32: np.int32,
           I64: np.int64, I8: np.int8, U8: np.uint8}
NAMES = {F32: "f32", F16: "f16", BF16: "bf16", F64: "f64", I32: "i32", I64: "i64", I8: "i8",
         U8: "u8"}

NAN, POS_INF, NEG_INF, NEG_ZERO = "nan", "+inf", "-inf", "-0"


def decode(code: int, raw: int):
    """An element's value: a Fraction, or NAN / POS_INF / NEG_INF / NEG_ZERO (with NaN sign)."""
    if code in INTS:
        return Fraction(int(raw))
    exp_bits, man_bits = FLOATS[code]
    bias = (1 << (exp_bits - 1)) - 1
    raw = int(raw)
    sign = raw >> (exp_bits + man_bits) & 1
    exponent = raw >> man_bits & ((1 << exp_bits) - 1)
    fraction = raw & ((1 << man_bits) - 1)
    if exponent == (1 << exp_bits) - 1:
        if fraction:
            return (NAN, sign)
        return NEG_INF if sign else POS_INF
    if exponent == 0:
        value = Fraction(fraction, 1) * Fraction(2) ** (1 - bias - man_bits)
    else:
        value = Fraction((1 << man_bits) | fraction) * Fraction(2) ** (exponent - bias - man_bits)
    if value == 0 and sign:
        return NEG_ZERO
    return -value if sign else value


def _floor_log2(value: Fraction) -> int:
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exponent > value:
        exponent -= 1
    return exponent


def encode_float(code: int, value) -> int:
    exp_bits, man_bits = FLOATS[code]
    bias = (1 << (exp_bits - 1)) - 1
    inf = ((1 << exp_bits) - 1) << man_bits
    sign_bit = 1 << (exp_bits + man_bits)
    if isinstance(value, tuple):  # NaN: quiet, sign kept
        return (sign_bit if value[1] else 0) | inf | (1 << (man_bits - 1))
    if value == POS_INF:
        return inf
    if value == NEG_INF:
        return sign_bit | inf
    if value == NEG_ZERO:
        return sign_bit
    sign = sign_bit if value < 0 else 0
    magnitude = abs(value)
    if magnitude == 0:
        return sign
    exponent = _floor_log2(magnitude)
    if exponent >= 1 - bias:
        mantissa = round(magnitude / Fraction(2) ** (exponent - man_bits))  # half to even
        if mantissa == 1 << (man_bits + 1):
            mantissa >>= 1
            exponent += 1
        if exponent > bias:
            return sign | inf
        return sign | ((exponent + bias) << man_bits) | (mantissa - (1 << man_bits))
    # subnormal; a result of 1 << man_bits is the smallest normal and has those very bits
    return sign | round(magnitude / Fraction(2) ** (1 - bias - man_bits))


def encode_int(code: int, value) -> int:
    lowest, highest = INTS[code]
    if isinstance(value, tuple):
        return 0
    if value == POS_INF:
        return highest
    if value == NEG_INF:
        return lowest
    if value == NEG_ZERO:
        return 0
    truncated = math.trunc(value)  # toward zero
    return max(lowest, min(highest, truncated))


def convert(src_code: int, raw: np.ndarray, dst_code: int) -> np.ndarray:
    """The reference output (storage dtype of dst_code) for raw elements of src_code."""
    out = np.empty(raw.shape, STORAGE[dst_code])
    flat = raw.reshape(-1)
    result = out.reshape(-1)
    for i, element in enumerate(flat.tolist()):
        value = decode(src_code, element)
        result[i] = encode_float(dst_code, value) if dst_code in FLOATS else \
            encode_int(dst_code, value)
    return out


def special_values(code: int) -> np.ndarray:
    """Edge cases of a source type: zeros, infinities, NaNs, extremes, subnormals, rounding ties
    for every narrower float, integer limits."""
    storage = STORAGE[code]
    if code in INTS:
        lowest, highest = INTS[code]
        values = {0, 1, -1, lowest, highest, lowest + 1, highest - 1, 127, 128, -128, -129, 255,
                  256, 2**24 + 1, 2**24 + 3, 2**31 - 1, -2**31, 2**53 + 1, 2**62 + 2**39,
                  65504, 65520, 65519, 2**63 - 2**39, -(2**63 - 2**39)}
        values = [v for v in values if lowest <= v <= highest]
        return np.array(sorted(values), dtype=storage)
    exp_bits, man_bits = FLOATS[code]
    bias = (1 << (exp_bits - 1)) - 1
    exact = []
    for value in [0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.5, 255.9, -128.9, 65504.0,
                  65519.99, 65520.0, 2.0**31, -2.0**31, 2.0**31 - 128, 2.0**63, -2.0**63,
                  3.0e38, 1.0e-8, 6.0e-8, 5.9e-8, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11,
                  1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24,
                  2.0**-126, 2.0**-133, 2.0**-149, 2.0**-25, 2.0**-24, 1.0e300, 1.0e-310]:
        for signed in (value, -value):
            fraction = Fraction(signed)
            bits = encode_float(code, NEG_ZERO if signed == 0 and math.copysign(1, signed) < 0
                                else fraction)
            exact.append(bits)
    inf = ((1 << exp_bits) - 1) << man_bits
    sign = 1 << (exp_bits + man_bits)
    exact += [inf, sign | inf, inf | 1, sign | inf | (1 << (man_bits - 1)),  # inf, NaNs
              (1 << man_bits) - 1, 1, sign | 1,                            # subnormal extremes
              inf - 1, sign | (inf - 1), bias << man_bits]                 # max finite, 1.0
    return np.array(exact, dtype=np.uint64).astype(storage)


def random_values(code: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Random raw elements: arbitrary bit patterns (every class) for floats, full range ints."""
    storage = np.dtype(STORAGE[code])
    raw = rng.integers(0, 2**63, size=count, dtype=np.uint64) ^ \
        (rng.integers(0, 2, size=count, dtype=np.uint64) << np.uint64(63))
    patterns = raw.view(np.uint64) >> np.uint64(64 - 8 * storage.itemsize)
    values = patterns.astype(np.dtype(f"u{storage.itemsize}")).view(storage)
    if code in FLOATS:  # half the elements: moderate magnitudes, where conversions round
        exp_bits, man_bits = FLOATS[code]
        moderate = rng.standard_normal(count // 2) * np.exp2(rng.integers(-30, 40, count // 2))
        values[: count // 2] = np.array([encode_float(code, Fraction(float(v))) for v in moderate],
                                        dtype=np.uint64).astype(storage)
    return values
