"""Number formats: limits from ml_dtypes, casts bit for bit with ml_dtypes (every
representable value of the 8-bit-and-smaller formats, the midpoints between them, edges)."""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.numerics import NumberFormat as F

REFERENCE = {
    F.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    F.FP8_E5M2: ml_dtypes.float8_e5m2,
    F.FP6_E2M3: ml_dtypes.float6_e2m3fn,
    F.FP6_E3M2: ml_dtypes.float6_e3m2fn,
    F.FP4_E2M1: ml_dtypes.float4_e2m1fn,
    F.E8M0: ml_dtypes.float8_e8m0fnu,
    F.BF16: ml_dtypes.bfloat16,
    F.FP16: np.float16,
    F.FP32: np.float32,
}
SMALL = [F.FP8_E4M3, F.FP8_E5M2, F.FP6_E2M3, F.FP6_E3M2, F.FP4_E2M1, F.E8M0]


def _same(ours: np.ndarray, ref: np.ndarray) -> None:
    """Equal values, NaN where NaN, and the same sign of zero."""
    ref = ref.astype(np.float64)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    finite = ~np.isnan(ref)
    assert np.array_equal(ours[finite], ref[finite])
    assert np.array_equal(np.signbit(ours[finite]), np.signbit(ref[finite]))


@pytest.mark.parametrize("fmt", list(REFERENCE))
def test_limits_match_ml_dtypes(fmt: F) -> None:
    """Max, smallest normal and subnormal, epsilon: computed, then checked."""
    info = ml_dtypes.finfo(REFERENCE[fmt])
    spec = fmt.spec
    assert spec.max == float(info.max)
    assert spec.smallest_normal == float(info.smallest_normal)
    assert spec.smallest_subnormal == float(info.smallest_subnormal)
    assert spec.epsilon == float(info.eps)
    assert spec.bits == info.bits


def _all_values(fmt: F) -> np.ndarray:
    """Every bit pattern of a small format, as float64 (NaNs included)."""
    dtype = REFERENCE[fmt]
    bits = np.dtype(dtype).itemsize * 8
    patterns = np.arange(2 ** min(bits, 8), dtype=np.uint8)
    return patterns.view(dtype).astype(np.float64)


@pytest.mark.parametrize("fmt", SMALL)
def test_every_value_and_midpoint_casts_like_ml_dtypes(fmt: F) -> None:
    """Representable values cast to themselves; midpoints (ties) and points around them
    round exactly as ml_dtypes does; so do zeros, infinities, NaN and far-out values."""
    values = np.unique(_all_values(fmt)[~np.isnan(_all_values(fmt))])
    mids = (values[:-1] + values[1:]) / 2
    nudged = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30, -1e-30,
                      fmt.spec.max * 1.0625, fmt.spec.max * 1.5, fmt.spec.max * 2])
    with np.errstate(over="ignore"):
        x = np.concatenate([values, nudged, edges]).astype(np.float32)  # ml_dtypes: f32
    _same(fmt.cast(x.astype(np.float64)), x.astype(REFERENCE[fmt]))


@pytest.mark.parametrize("fmt", [F.BF16, F.FP16, *SMALL])
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=64))
def test_random_floats_cast_like_ml_dtypes(fmt: F, xs: list[float]) -> None:
    """Any float32 input, bit for bit; for E8M0 not the float32 subnormals between its two
    smallest values (see the next test)."""
    x = np.array(xs, dtype=np.float32)
    if fmt is F.E8M0:
        tiny = np.float32(np.finfo(np.float32).tiny)
        x = x[~((np.abs(x) > 2.0 ** -127) & (np.abs(x) < tiny))]
    with np.errstate(over="ignore"):
        _same(fmt.cast(x.astype(np.float64)), x.astype(REFERENCE[fmt]))


def test_e8m0_rounds_float32_subnormals_to_the_nearest_power_of_two() -> None:
    """Between E8M0's two smallest values, 2^-127 and 2^-126 (both below float32's smallest
    normal), a value rounds to the nearer one. ml_dtypes 0.6 rounds 1.125 x 2^-127 (a
    float32 subnormal) up to 2^-126, found by the random test above; everywhere else the
    two agree bit for bit."""
    assert F.E8M0.cast(1.125 * 2.0 ** -127) == 2.0 ** -127
    assert F.E8M0.cast(1.75 * 2.0 ** -127) == 2.0 ** -126


def test_e4m3_overflow_is_nan_not_max() -> None:
    """A plain cast of 500 to E4M3 gives NaN (no infinity), 464 rounds to 448 (a tie to
    even), E5M2 overflows to infinity, FP4 saturates."""
    assert np.isnan(F.FP8_E4M3.cast(500.0))
    assert F.FP8_E4M3.cast(464.0) == 448.0
    assert np.isinf(F.FP8_E5M2.cast(1e6))
    assert F.FP4_E2M1.cast(100.0) == 6.0


def _tf32_reference(x: np.ndarray) -> np.ndarray:
    """TF32 by bit manipulation: round FP32's 23-bit mantissa to 10 bits, ties to even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) >> 13) << 13
    special = ~np.isfinite(x)
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(special, x.astype(np.float64), out)


@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1,
                max_size=64))
def test_tf32_matches_a_bitwise_reference(xs: list[float]) -> None:
    """TF32 = FP32 rounded to 10 mantissa bits, round-to-nearest-even."""
    x = np.array(xs, dtype=np.float32)
    assert np.array_equal(F.TF32.cast(x.astype(np.float64)), _tf32_reference(x))


@given(st.sampled_from([f for f in F if not f.is_integer and f is not F.E8M0]),
       st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=32))
def test_cast_is_idempotent(fmt: F, xs: list[float]) -> None:
    """Casting a cast value changes nothing."""
    once = fmt.cast(np.array(xs))
    assert np.array_equal(fmt.cast(once), once, equal_nan=True)


def test_integer_formats() -> None:
    """INT8/INT4: symmetric limits 127/7 (ml_dtypes' int4 range is -8..7), RNE, clipped."""
    assert F.INT8.max == 127 and F.INT4.max == 7
    assert ml_dtypes.iinfo(ml_dtypes.int4).max == 7
    assert list(F.INT8.cast(np.array([2.5, 3.5, -200.0, 126.6]))) == [2, 4, -127, 127]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch is not installed (pip install torch==2.13.0)")
def test_fp8_casts_match_torch() -> None:
    """Where torch is installed, its float8 casts agree with ours bit for bit: E5M2 with
    the plain cast; E4M3 with the saturating one, because torch clamps finite overflow to
    +-448 where ml_dtypes (and the plain cast) give NaN."""
    import torch

    x = np.concatenate([np.linspace(-600, 600, 20001),
                        F.FP8_E4M3.cast(np.linspace(-448, 448, 4001))]).astype(np.float32)
    for fmt, dtype, saturate in ((F.FP8_E4M3, torch.float8_e4m3fn, True),
                                 (F.FP8_E5M2, torch.float8_e5m2, False)):
        ref = torch.from_numpy(x).to(dtype).to(torch.float64).numpy()
        ours = fmt.cast(x.astype(np.float64), saturate=saturate)
        assert np.array_equal(np.isnan(ours), np.isnan(ref))
        assert np.array_equal(ours[~np.isnan(ref)], ref[~np.isnan(ref)])
    assert np.isnan(F.FP8_E4M3.cast(500.0)) and F.FP8_E4M3.cast(500.0, saturate=True) == 448
