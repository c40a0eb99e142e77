"""Number formats and round-to-nearest-even casts, vectorised with NumPy.

Each floating-point format is described by its exponent and mantissa widths, its bias and
what it does with overflow, infinity and NaN (the OCP 8-bit FP and MX specifications and
IEEE 754). Limits are computed from that description and tested against ``ml_dtypes``;
casts agree bit for bit with ``ml_dtypes`` (tests cover every representable value of the
8-bit-and-smaller formats and the midpoints between them).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import NDArray

__all__ = ["Fmt", "FormatSpec", "NumberFormat", "Overflow", "cast"]

F64 = NDArray[np.float64]


class Overflow(Enum):
    """What a cast does with a finite value beyond the largest one (and with inf/NaN)."""

    IEEE = "ieee"  # overflow -> +-inf; inf and NaN kept (FP32, FP16, BF16, TF32, E5M2)
    NAN = "nan"  # no infinity: overflow and inf -> NaN (E4M3FN, E8M0)
    SATURATE = "saturate"  # no inf, no NaN: overflow and inf -> +-max; NaN -> zero of the
    # opposite sign (FP6, FP4), as ml_dtypes converts them


@dataclass(frozen=True)
class FormatSpec:
    """A binary floating-point format."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    overflow: Overflow
    top_mantissa_reserved: bool = False  # E4M3FN: all-ones exponent and mantissa is NaN
    signed: bool = True
    has_zero: bool = True  # E8M0 has none (its smallest value is 2^-127)

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits


    @property
    def emax(self) -> int:
        """Exponent of the largest binade holding finite values."""
        top = (1 << self.exponent_bits) - 1
        reserved = self.overflow is Overflow.IEEE  # all-ones exponent is inf/NaN
        return top - self.bias - (1 if reserved else 0)

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade."""
        return 1 - self.bias if self.mantissa_bits else -self.bias

    @property
    def max(self) -> float:
        m = self.mantissa_bits
        top = 2.0**m - 1 - (1 if self.top_mantissa_reserved else 0)
        if self.overflow is Overflow.NAN and not self.top_mantissa_reserved and m == 0:
            return 2.0 ** (self.emax - 1)  # E8M0: all-ones is NaN, one binade less
        return (1 + top / 2.0**m) * 2.0**self.emax

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.mantissa_bits) if self.mantissa_bits else \
            self.smallest_normal

    @property
    def epsilon(self) -> float:
        """Distance from 1 to the next larger value."""
        return 2.0 ** -self.mantissa_bits

    def cast(self, x: NDArray[np.floating] | float, *, saturate: bool = False) -> F64:
        """Round ``x`` to this format (nearest, ties to even) and return it as float64.

        ``saturate=True`` clamps finite values beyond the range to +-max first (the
        saturating conversion of the OCP FP8 spec, and what torch's float8 casts do);
        otherwise the format's own overflow rule applies (ml_dtypes' behaviour).
        """
        arr = np.asarray(x, dtype=np.float64)
        if saturate:
            arr = np.where(np.isfinite(arr), np.clip(arr, -self.max, self.max), arr)
        return _cast_float(arr, self)


def _cast_float(x: F64, f: FormatSpec) -> F64:
    nan = np.isnan(x)
    neg = np.signbit(x)
    a = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        _, e2 = np.frexp(a)  # a = m * 2**e2, m in [0.5, 1)
        e = np.maximum(e2.astype(np.int64) - 1, f.emin)
        spacing = np.ldexp(1.0, (e - f.mantissa_bits).astype(np.int32))
        if f.mantissa_bits == 0:
            # no mantissa: E8M0 rounds half up between powers of two (as ml_dtypes does)
            q = np.where(a / spacing >= 1.5, 2 * spacing, spacing)
        else:
            q = np.rint(a / spacing) * spacing
    finite_max = f.max
    over = (q > finite_max) | np.isinf(a)
    if f.overflow is Overflow.IEEE:
        q = np.where(over, np.inf, q)
    elif f.overflow is Overflow.NAN:
        q = np.where(over, np.nan, q)
    else:
        q = np.where(over, finite_max, q)
    if not f.has_zero:
        q = np.where((a < f.smallest_normal) & ~over, f.smallest_normal, q)
    out = np.where(neg, -q, q)
    if not f.signed:  # E8M0: no sign and no zero; negatives and zeros are NaN
        out = np.where(neg | (a == 0), np.nan, out)
    if f.overflow is Overflow.SATURATE:
        # no NaN encoding: ml_dtypes turns a NaN into a zero of the opposite sign
        out = np.where(nan, np.where(neg, 0.0, -0.0), out)
    else:
        out = np.where(nan, np.nan, out)
    return np.asarray(out, dtype=np.float64)


class NumberFormat(Enum):
    """Formats the numerics lab knows. The value is the name used on the command line."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    FP6_E2M3 = "fp6_e2m3"
    FP6_E3M2 = "fp6_e3m2"
    FP4_E2M1 = "fp4_e2m1"
    E8M0 = "e8m0"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def is_integer(self) -> bool:
        return self in (NumberFormat.INT8, NumberFormat.INT4)

    @property
    def spec(self) -> FormatSpec:
        """The float description (integer formats have none)."""
        if self.is_integer:
            raise ValueError(f"{self.value} is an integer format")
        return _SPECS[self]

    @property
    def bits(self) -> int:
        integer_bits = {NumberFormat.INT8: 8, NumberFormat.INT4: 4}
        # not .get(): self.spec raises for the integer formats
        return integer_bits[self] if self in integer_bits else self.spec.bits  # noqa: SIM401

    @property
    def max(self) -> float:
        """Largest finite value (integer formats: the symmetric limit 127 or 7)."""
        if self.is_integer:
            return float(2 ** (self.bits - 1) - 1)
        return self.spec.max

    def cast(self, x: NDArray[np.floating] | float, *, saturate: bool = False) -> F64:
        """Round-to-nearest-even cast with this format's overflow rule (or clamped to the
        range with ``saturate``), as float64.

        Integer formats round half to even and clip to the symmetric range [-max, max].
        """
        if self.is_integer:
            arr = np.asarray(x, dtype=np.float64)
            return np.clip(np.rint(arr), -self.max, self.max)
        return self.spec.cast(x, saturate=saturate)


Fmt = NumberFormat

_SPECS: dict[NumberFormat, FormatSpec] = {
    Fmt.FP32: FormatSpec("fp32", 8, 23, 127, Overflow.IEEE),
    Fmt.TF32: FormatSpec("tf32", 8, 10, 127, Overflow.IEEE),
    Fmt.BF16: FormatSpec("bf16", 8, 7, 127, Overflow.IEEE),
    Fmt.FP16: FormatSpec("fp16", 5, 10, 15, Overflow.IEEE),
    Fmt.FP8_E4M3: FormatSpec("fp8_e4m3", 4, 3, 7, Overflow.NAN, top_mantissa_reserved=True),
    Fmt.FP8_E5M2: FormatSpec("fp8_e5m2", 5, 2, 15, Overflow.IEEE),
    Fmt.FP6_E2M3: FormatSpec("fp6_e2m3", 2, 3, 1, Overflow.SATURATE),
    Fmt.FP6_E3M2: FormatSpec("fp6_e3m2", 3, 2, 3, Overflow.SATURATE),
    Fmt.FP4_E2M1: FormatSpec("fp4_e2m1", 2, 1, 1, Overflow.SATURATE),
    Fmt.E8M0: FormatSpec("e8m0", 8, 0, 127, Overflow.NAN, signed=False, has_zero=False),
}


def cast(x: NDArray[np.floating] | float, fmt: NumberFormat) -> F64:
    """``fmt.cast(x)``."""
    return fmt.cast(x)
