"""JSON output uses the data files' keys and units, so --json and the tables never disagree."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import Product, load_catalog
from gpuarch.report.serialize import to_json, to_jsonable
from gpuarch.report.text import fmt, fmt_seconds
from gpuarch.units import Unit

CATALOG = load_catalog()


@given(st.sampled_from(CATALOG.products))
def test_product_json_converts_back_to_si(product: Product) -> None:
    """Every numeric field in JSON, times its unit's factor, is the SI attribute."""
    doc = json.loads(to_json(product))
    for f in fields(Product):
        key = f.metadata.get("key")
        if key is None:
            continue
        value = getattr(product, f.name)
        unit: Unit = f.metadata["unit"]
        if isinstance(value, float):
            assert doc[key] * unit.factor == pytest.approx(value, rel=1e-5)
        elif f.metadata["kind"] == "peaks":
            assert set(doc[key]) == {k.value for k in value}
            for k, v in value.items():
                assert doc[key][k.value] * unit.factor == pytest.approx(v, rel=1e-5)


def test_non_finite_numbers_become_null() -> None:
    """NaN and infinity are not valid JSON; they serialise as null."""
    assert to_jsonable({"a": float("nan"), "b": float("inf")}) == {"a": None, "b": None}


def test_fmt() -> None:
    """About three significant digits, integers without decimals, '-' for missing."""
    assert [fmt(None), fmt(989.4), fmt(19.5), fmt(0.518), fmt(64.0), fmt(2039.0)] == \
        ["-", "989", "19.5", "0.518", "64", "2,039"]
    assert fmt(3.1622, ratio=True) == "3.16x"


def test_fmt_seconds_picks_a_readable_unit() -> None:
    """Durations read in seconds from 1 s, milliseconds from 1 ms, microseconds below, with
    fmt's digits and never an exponent (the training text's traffic and host-time details)."""
    assert [fmt_seconds(x) for x in (0.0, 12.8, 1.0, 0.0692, 5.14e-3, 3.2e-5)] == \
        ["0 s", "12.8 s", "1 s", "69.2 ms", "5.14 ms", "32 us"]
    assert fmt_seconds(2.5e-9) == "2.5 ns"
    assert all("e-" not in fmt_seconds(10.0 ** -k) for k in range(12))

