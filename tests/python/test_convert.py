"""aethercl_convert and dtype tags: every pair of the eight dtypes against an exact reference.

Tolerance: none. Conversions are exact functions (round to nearest even, truncation with
saturation), so every output element must equal the reference bit for bit; the only freedom is a
NaN's payload, so NaN outputs are compared as "NaN with the same sign". The reference
(convert_reference.py) decodes to exact rationals; it is itself checked against NumPy's casts for
the pairs NumPy implements with correct rounding (float64/float32/float16 among themselves and
from int8/uint8/int32). Outputs are poisoned before each call and followed by guard bytes."""
import ctypes
import itertools
import json

import numpy as np
import pytest

from support import convert_reference as ref
from support.helpers import GUARD_BYTES, GUARD_PATTERN

CODES = list(range(8))
SIZE_MAX = 2**64 - 1


def upload_raw(device, raw: np.ndarray, guard=GUARD_BYTES) -> int:
    blob = raw.tobytes() + bytes([GUARD_PATTERN]) * guard
    handle = device.lib.check_handle("allocate_gpu_memory", device.index, max(1, len(blob)))
    device.lib.check("write_host_to_gpu_blocking", device.index, handle, 0, len(blob), blob)
    return handle


def read_raw(device, handle, nbytes) -> bytes:
    out = ctypes.create_string_buffer(max(1, nbytes))
    device.lib.check("read_gpu_to_host_blocking", device.index, handle, 0, nbytes, out)
    return out.raw[:nbytes]


def run_convert(device, src_code, raw, dst_code):
    itemsize = np.dtype(ref.STORAGE[dst_code]).itemsize
    n = raw.size
    src = upload_raw(device, raw)
    dst = upload_raw(device, np.full(n * itemsize, 0xCD, np.uint8))  # poisoned
    try:
        device.lib.check("aethercl_convert", device.index, src, src_code, dst, dst_code, n, None)
        blob = read_raw(device, dst, n * itemsize + GUARD_BYTES)
        assert blob[n * itemsize:] == bytes([GUARD_PATTERN]) * GUARD_BYTES, "guard overwritten"
        assert read_raw(device, src, raw.nbytes) == raw.tobytes(), "the source changed"
        return np.frombuffer(blob[: n * itemsize], ref.STORAGE[dst_code]).copy()
    finally:
        device.lib.free_gpu_memory(device.index, src)
        device.lib.free_gpu_memory(device.index, dst)


def nan_mask(code, raw):
    if code not in ref.FLOATS:
        return np.zeros(raw.shape, bool)
    exp_bits, man_bits = ref.FLOATS[code]
    bits = raw.astype(np.uint64)
    exponent = (bits >> np.uint64(man_bits)) & np.uint64((1 << exp_bits) - 1)
    return (exponent == (1 << exp_bits) - 1) & ((bits & np.uint64((1 << man_bits) - 1)) != 0)


def assert_same(dst_code, got, want, context):
    got_nan, want_nan = nan_mask(dst_code, got), nan_mask(dst_code, want)
    np.testing.assert_array_equal(got_nan, want_nan, err_msg=f"{context}: NaN positions")
    if dst_code in ref.FLOATS:
        sign = np.uint64(1 << sum(ref.FLOATS[dst_code]))
        np.testing.assert_array_equal(got.astype(np.uint64)[got_nan] & sign,
                                      want.astype(np.uint64)[want_nan] & sign,
                                      err_msg=f"{context}: NaN signs")
    mismatch = np.nonzero((got != want) & ~want_nan)[0]
    assert mismatch.size == 0, (f"{context}: {mismatch.size} elements differ, first at "
                                f"{mismatch[:5]}: got {got[mismatch[:5]]}, want {want[mismatch[:5]]}")


@pytest.mark.parametrize("src_code,dst_code", list(itertools.product(CODES, CODES)),
                         ids=lambda c: ref.NAMES[c])
def test_every_pair_matches_the_exact_reference(device, rng, src_code, dst_code):
    raw = np.concatenate([ref.special_values(src_code), ref.random_values(src_code, 331, rng)])
    got = run_convert(device, src_code, raw, dst_code)
    assert_same(dst_code, got, ref.convert(src_code, raw, dst_code),
                f"{ref.NAMES[src_code]} -> {ref.NAMES[dst_code]}")


NUMPY = {ref.F32: np.float32, ref.F16: np.float16, ref.F64: np.float64, ref.I32: np.int32,
         ref.I8: np.int8, ref.U8: np.uint8}


@pytest.mark.parametrize("src_code", [ref.F32, ref.F16, ref.F64, ref.I32, ref.I8, ref.U8],
                         ids=lambda c: ref.NAMES[c])
@pytest.mark.parametrize("dst_code", [ref.F32, ref.F16, ref.F64], ids=lambda c: ref.NAMES[c])
def test_the_reference_agrees_with_numpy_casts(rng, src_code, dst_code):
    raw = np.concatenate([ref.special_values(src_code), ref.random_values(src_code, 257, rng)])
    values = raw.view(NUMPY[src_code]) if src_code in ref.FLOATS else raw
    with np.errstate(all="ignore"):
        numpy_bits = values.astype(NUMPY[dst_code]).view(ref.STORAGE[dst_code])
    assert_same(dst_code, ref.convert(src_code, raw, dst_code), numpy_bits, "reference vs NumPy")


def bf16_from_f32_numpy(x: np.ndarray) -> np.ndarray:
    """The usual bit trick for float32 -> bfloat16 (nearest even), NaN made quiet."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


@pytest.mark.parametrize("n", [1, 255, 257, 65537, 1_000_003])
def test_large_counts_f32_to_bf16_and_f16_and_back(device, rng, n):
    """Many work-groups (and the grid-stride loop past 2^24 groups is not needed): float32 data
    to bf16 and f16 and back to float32, against NumPy."""
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    bf16 = run_convert(device, ref.F32, x.view(np.uint32), ref.BF16)
    np.testing.assert_array_equal(bf16, bf16_from_f32_numpy(x))
    f16 = run_convert(device, ref.F32, x.view(np.uint32), ref.F16)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(f16, x.astype(np.float16).view(np.uint16))
    back = run_convert(device, ref.BF16, bf16, ref.F32).view(np.float32)
    np.testing.assert_array_equal(back, (bf16.astype(np.uint32) << 16).view(np.float32))


def test_count_zero_is_a_no_op_after_the_checks(device):
    src, dst = upload_raw(device, np.ones(4, np.float32)), upload_raw(device, np.zeros(8, np.uint8))
    try:
        assert device.lib.aethercl_convert(device.index, src, ref.F32, dst, ref.F16, 0, None) == 1
        assert read_raw(device, dst, 8) == bytes(8)
        assert device.lib.aethercl_convert(device.index, src, 99, dst, ref.F16, 0, None) == 0
        assert device.lib.last_error_code() == 1 and "src_dtype = 99" in device.lib.last_error()
    finally:
        device.lib.free_gpu_memory(device.index, src)
        device.lib.free_gpu_memory(device.index, dst)


@pytest.mark.parametrize("case", ["unknown_src", "unknown_dst", "negative_dtype", "same_buffer",
                                  "src_too_small", "dst_too_small", "count_overflows",
                                  "stream_token", "src_null", "dst_freed"])
def test_refusals_name_the_argument_and_change_nothing(device, case):
    lib, index = device.lib, device.index
    src = upload_raw(device, np.arange(8, dtype=np.float32), guard=0)
    dst = upload_raw(device, np.full(16, 0x77, np.uint8), guard=0)
    args = dict(src=src, src_dtype=ref.F32, dst=dst, dst_dtype=ref.F16, count=8, stream=None)
    expect = {"unknown_src": ({"src_dtype": 8}, 1, "src_dtype = 8"),
              "unknown_dst": ({"dst_dtype": 1000}, 1, "dst_dtype = 1000"),
              "negative_dtype": ({"src_dtype": -1}, 1, "src_dtype = -1"),
              "same_buffer": ({"dst": src, "dst_dtype": ref.I32}, 1, "same buffer"),
              "src_too_small": ({"src_dtype": ref.F64}, 3, "src"),
              "dst_too_small": ({"dst_dtype": ref.F32}, 3, "dst"),
              "count_overflows": ({"count": SIZE_MAX // 2}, 1, "overflow"),
              "stream_token": ({"stream": 0x12345600 | 0xB1}, 2, "stream"),
              "src_null": ({"src": None}, 1, "src is NULL"),
              "dst_freed": ({}, 2, "freed")}[case]
    changes, code, words = expect
    if case == "dst_freed":
        freed = upload_raw(device, np.zeros(16, np.uint8), guard=0)
        lib.free_gpu_memory(index, freed)
        changes = {"dst": freed}
    args.update(changes)
    try:
        result = lib.aethercl_convert(index, args["src"], args["src_dtype"], args["dst"],
                                      args["dst_dtype"], args["count"], args["stream"])
        assert result == 0
        message = lib.last_error()
        assert message.startswith("aethercl_convert: ") and words in message, message
        assert lib.last_error_code() == code, message
        assert read_raw(device, dst, 16) == bytes([0x77]) * 16
    finally:
        lib.free_gpu_memory(index, src)
        lib.free_gpu_memory(index, dst)


def test_set_dtype_shows_in_memory_statistics(device):
    lib, index = device.lib, device.index
    handle = lib.check_handle("allocate_gpu_memory", index, 64)
    try:
        for code, name in ref.NAMES.items():
            lib.check("aethercl_buffer_set_dtype", index, handle, code)
            stats = json.loads(lib.json_call("aethercl_memory_stats", index))
            mine = [b for b in stats["labelled_buffers"] if int(b["handle"], 16) == handle]
            assert mine == [{"handle": hex(handle), "bytes": 64, "label": "", "dtype": name}]
        lib.check("aethercl_set_buffer_label", index, handle, b"weights")
        stats = json.loads(lib.json_call("aethercl_memory_stats", index))
        mine = [b for b in stats["labelled_buffers"] if int(b["handle"], 16) == handle]
        assert mine[0]["label"] == "weights" and mine[0]["dtype"] == "u8"
        for bad in (8, -1, 2**31 - 1):
            assert lib.aethercl_buffer_set_dtype(index, handle, bad) == 0
            assert lib.last_error_code() == 1 and f"dtype = {bad}" in lib.last_error()
        stats = json.loads(lib.json_call("aethercl_memory_stats", index))
        assert [b for b in stats["labelled_buffers"]
                if int(b["handle"], 16) == handle][0]["dtype"] == "u8", "a refusal changed it"
    finally:
        lib.free_gpu_memory(index, handle)
