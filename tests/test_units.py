"""The one unit-conversion module: factors and round trips."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.units import Unit, from_si, to_si


def test_decimal_and_binary_are_not_mixed() -> None:
    """GB/s is decimal, GiB and MiB are binary."""
    assert to_si(1, Unit.GB_S) == 1e9
    assert to_si(1, Unit.GIB) == 2**30
    assert to_si(1, Unit.MIB) == 2**20
    assert to_si(400, Unit.GBIT_S) == pytest.approx(50e9)  # 400 Gb/s NIC = 50 GB/s
    assert to_si(1410, Unit.MHZ) == 1.41e9


@given(value=st.floats(min_value=0, max_value=1e9, allow_nan=False), unit=st.sampled_from(Unit))
def test_round_trip(value: float, unit: Unit) -> None:
    """from_si(to_si(x)) == x."""
    assert math.isclose(from_si(to_si(value, unit), unit), value, rel_tol=1e-12, abs_tol=1e-12)
