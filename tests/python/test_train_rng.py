"""Philox4x32-10 fills and dropout against an independent NumPy implementation of the same
generator (train_reference.philox4x32_10), itself checked against Random123's known-answer
vectors.

Tolerances: BITS and UNIFORM must match bit for bit (integer arithmetic; float expressions
evaluated without contraction on both sides). NORMAL goes through the device's log, sqrt, cos
and sin (OpenCL allows 3-4 ulp each) and the float angle 2*pi*u2 (error up to ~4e-7 rad), so it
is compared with the float64 Box-Muller at 2e-5 * (1 + |z|). Dropout values are exact products
x * (1 / (1 - p)) in float32."""
import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support import train_reference as R
from support.train_helpers import close, no_poison

KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_numpy_philox_matches_random123_known_answers(counter, key, expected):
    out = R.philox4x32_10(np.array([counter], np.uint32), key)
    assert tuple(int(v) for v in out[0]) == expected


def test_device_block_zero_is_the_known_answer(scope, device):
    out = scope.out((4,), np.uint32)
    ops.rng_fill(device.index, out.handle, 4, T.RNG_BITS, seed=0, offset=0)
    assert tuple(int(v) for v in out.numpy()) == KAT[0][2]


@pytest.mark.parametrize("seed,offset,count", [(0, 0, 1), (1, 1, 7), (0xDEADBEEFCAFEF00D, 3, 1029),
                                               (42, 2**40 + 1, 66), (7, 2**64 - 9, 9)])
def test_bits_match_numpy_bit_for_bit(scope, device, seed, offset, count):
    out = scope.out((count,), np.uint32)
    ops.rng_fill(device.index, out.handle, count, T.RNG_BITS, seed=seed, offset=offset)
    assert np.array_equal(out.numpy(), R.philox_words(seed, offset, count))


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-2.5, 3.25), (1e-3, 1e-3), (-1e4, 7.0)])
def test_uniform_matches_numpy_bit_for_bit(scope, device, low, high):
    count, seed, offset = 1001, 0x1234_5678_9ABC, 6
    out = scope.out((count,), np.float32)
    ops.rng_fill(device.index, out.handle, count, T.RNG_UNIFORM, low, high, seed, offset)
    got = out.numpy()
    expected = R.rng_uniform(seed, offset, count, low, high)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert (got >= low).all() and (got <= high).all()


@pytest.mark.parametrize("offset,count", [(0, 1), (1, 2), (3, 1001), (2**33 + 2, 17)])
def test_normal_matches_float64_box_muller(scope, device, offset, count):
    out = scope.out((count,), np.float32)
    ops.rng_fill(device.index, out.handle, count, T.RNG_NORMAL, 0.5, 2.0, 99, offset)
    got = out.numpy()
    no_poison(got)
    expected = R.rng_normal(99, offset, count, 0.5, 2.0)
    assert np.all(np.abs(got - expected) <= 2e-5 * (1 + np.abs(expected)))


@pytest.mark.parametrize("distribution", [T.RNG_BITS, T.RNG_UNIFORM, T.RNG_NORMAL])
def test_consecutive_fills_continue_one_stream(scope, device, distribution):
    n = 13
    whole, first, second = scope.out((2 * n,), np.float32), scope.out((n,)), scope.out((n,))
    ops.rng_fill(device.index, whole.handle, 2 * n, distribution, 0.0, 1.0, 5, 11)
    ops.rng_fill(device.index, first.handle, n, distribution, 0.0, 1.0, 5, 11)
    ops.rng_fill(device.index, second.handle, n, distribution, 0.0, 1.0, 5, 11 + n)
    joined = np.concatenate([first.numpy(), second.numpy()])
    assert np.array_equal(whole.numpy().view(np.uint32), joined.view(np.uint32))


def test_distributions_have_the_right_moments(scope, device):
    n = 200_000
    out = scope.out((n,))
    ops.rng_fill(device.index, out.handle, n, T.RNG_UNIFORM, 0.0, 1.0, 2024, 0)
    u = out.numpy().astype(np.float64)
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    ops.rng_fill(device.index, out.handle, n, T.RNG_NORMAL, 0.0, 1.0, 2024, 0)
    z = out.numpy().astype(np.float64)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert 0.30 < np.mean(np.abs(z) > 1) < 0.335  # P(|z| > 1) = 0.317


def test_different_seeds_give_different_streams(scope, device):
    a, b = scope.out((64,), np.uint32), scope.out((64,), np.uint32)
    ops.rng_fill(device.index, a.handle, 64, T.RNG_BITS, seed=1)
    ops.rng_fill(device.index, b.handle, 64, T.RNG_BITS, seed=2)
    assert (a.numpy() != b.numpy()).mean() > 0.99


def test_fill_refusals(scope, device, lib):
    out = scope.out((8,))
    checks = [((T.RNG_UNIFORM, 2.0, 1.0), "a = 2 > b = 1"),
              ((T.RNG_NORMAL, 0.0, -1.0), "negative"), ((T.RNG_UNIFORM, float("nan"), 1.0), "finite"),
              ((7, 0.0, 1.0), "distribution = 7")]
    for (dist, a, b), words in checks:
        assert lib.aethercl_rng_fill(device.index, out.handle, 8, dist, a, b, 0, 0, None) == 0
        assert words in lib.last_error()
    assert lib.aethercl_rng_fill(device.index, out.handle, 9, T.RNG_BITS, 0, 0, 0, 2**64 - 8,
                                 None) == 0
    assert "past the end" in lib.last_error()
    assert lib.aethercl_rng_fill(device.index, out.handle, 0, T.RNG_BITS, 0, 0, 0, 0, None) == 1


# Offsets that are multiples of 4 write whole blocks as one vector each (kernels/rng.cl): the same
# stream, bit for bit, with tails before (none) and after the whole blocks.
WHOLE_BLOCKS = [(0, 4), (0, 7), (8, 1029), (2**40, 66), (2**64 - 12, 12)]


@pytest.mark.parametrize("offset,count", WHOLE_BLOCKS)
def test_whole_blocks_match_numpy(scope, device, offset, count):
    seed = 0xC0FFEE_1234
    bits = scope.out((count,), np.uint32)
    ops.rng_fill(device.index, bits.handle, count, T.RNG_BITS, seed=seed, offset=offset)
    assert np.array_equal(bits.numpy(), R.philox_words(seed, offset, count))
    uniform = scope.out((count,), np.float32)
    ops.rng_fill(device.index, uniform.handle, count, T.RNG_UNIFORM, -1.5, 2.0, seed, offset)
    expected = R.rng_uniform(seed, offset, count, -1.5, 2.0)
    assert np.array_equal(uniform.numpy().view(np.uint32), expected.view(np.uint32))
    normal = scope.out((count,), np.float32)
    ops.rng_fill(device.index, normal.handle, count, T.RNG_NORMAL, 0.5, 2.0, seed, offset)
    expected = R.rng_normal(seed, offset, count, 0.5, 2.0)
    got = normal.numpy()
    no_poison(got)
    assert np.all(np.abs(got - expected) <= 2e-5 * (1 + np.abs(expected)))


@pytest.mark.parametrize("offset,count", [(0, 6), (12, 1030), (2**33, 4)])
def test_dropout_whole_blocks_match_the_generator(scope, device, rng, offset, count):
    """Vector loads of x, stores of y and uchar4 mask stores; NaN inputs stay NaN when kept and
    become 0 when dropped, as element by element."""
    seed, p = 77, 0.3
    x = rng.standard_normal(count).astype(np.float32)
    x[::3] = np.nan
    dy = rng.standard_normal(count).astype(np.float32)
    tx, ty, tmask = scope.in_(x), scope.out((count,)), scope.out((count,), np.uint8)
    ops.dropout(device.index, tx.handle, ty.handle, tmask.handle, count, p, seed, offset)
    keep = R.rng_uniform(seed, offset, count, 0.0, 1.0) >= np.float32(p)
    scale = np.float32(1) / (np.float32(1) - np.float32(p))
    assert np.array_equal(tmask.numpy(), keep.astype(np.uint8))
    expected = np.where(keep, x * scale, np.float32(0)).astype(np.float32)
    # NaN payloads may differ by device (NVIDIA returns its canonical NaN): NaN positions match.
    np.testing.assert_array_equal(ty.numpy(), expected)
    tdy, tdx = scope.in_(dy), scope.out((count,))
    ops.dropout_backward(device.index, tdy.handle, tmask.handle, tdx.handle, count, p)
    assert np.array_equal(tdx.numpy(), np.where(keep, dy * scale, np.float32(0)))


# ---- dropout --------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("count", [1, 5, 1023])
def test_dropout_forward_and_backward_match_the_generator(scope, device, rng, p, count):
    seed, offset = 31337, 5
    x = rng.standard_normal(count).astype(np.float32)
    dy = rng.standard_normal(count).astype(np.float32)
    tx, ty, tmask = scope.in_(x), scope.out((count,)), scope.out((count,), np.uint8)
    ops.dropout(device.index, tx.handle, ty.handle, tmask.handle, count, p, seed, offset)
    keep = R.rng_uniform(seed, offset, count, 0.0, 1.0) >= np.float32(p)
    scale = np.float32(1) / (np.float32(1) - np.float32(p)) if p < 1 else np.float32(0)
    assert np.array_equal(tmask.numpy(), keep.astype(np.uint8))
    expected = np.where(keep, x * scale, np.float32(0)).astype(np.float32)
    assert np.array_equal(ty.numpy(), expected)
    tdy, tdx = scope.in_(dy), scope.out((count,))
    ops.dropout_backward(device.index, tdy.handle, tmask.handle, tdx.handle, count, p)
    assert np.array_equal(tdx.numpy(), np.where(keep, dy * scale, np.float32(0)))
    # The backward is the derivative of the forward: finite differences of x -> y (linear).
    if count <= 5 and p < 1:
        fd = R.numeric_gradient(lambda v: np.where(keep, v * float(scale), 0.0), x, dy)
        close(tdx.numpy(), fd, 1e-6, 1e-6)


def test_dropout_in_place_without_mask_and_drop_rate(scope, device, rng):
    n = 100_000
    x = rng.standard_normal(n).astype(np.float32)
    t = scope.in_(x)
    ops.dropout(device.index, t.handle, t.handle, None, n, 0.25, 8, 0)
    keep = R.rng_uniform(8, 0, n, 0, 1) >= np.float32(0.25)
    assert np.array_equal(t.numpy(), np.where(keep, x * np.float32(1 / np.float32(0.75)), 0))
    assert abs(keep.mean() - 0.75) < 0.01


def test_dropout_refusals(scope, device, lib):
    x, mask = scope.out((4,)), scope.out((4,), np.uint8)
    for p in (-0.1, 1.5, float("nan")):
        assert lib.aethercl_dropout(device.index, x.handle, x.handle, mask.handle, 4, p, 0, 0,
                                    None) == 0
        assert "p = " in lib.last_error()
    assert lib.aethercl_dropout(device.index, x.handle, x.handle, x.handle, 4, 0.5, 0, 0,
                                None) == 0
    assert "same buffer" in lib.last_error()
    assert lib.aethercl_dropout_backward(device.index, x.handle, mask.handle, mask.handle, 1,
                                         0.5, None) == 0
