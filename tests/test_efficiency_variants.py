"""``Efficiency.with_value``: the models' one-parameter variants of the efficiencies."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY

SCALARS = sorted(f.name for f in dataclasses.fields(DEFAULT_EFFICIENCY)
                 if isinstance(getattr(DEFAULT_EFFICIENCY, f.name), float))


@given(st.sampled_from(SCALARS), st.floats(min_value=0.0, max_value=1e3))
def test_a_variant_is_the_replaced_copy_and_is_built_once(name: str, value: float) -> None:
    """The variant equals ``dataclasses.replace``'s copy, leaves the original alone, and
    asking again hands back the same object (the estimate asks for the same few variants
    each time; building one costs about a twentieth of it)."""
    variant = DEFAULT_EFFICIENCY.with_value(name, value)
    assert variant == dataclasses.replace(DEFAULT_EFFICIENCY, **{name: value})
    assert getattr(variant, name) == value
    assert DEFAULT_EFFICIENCY.with_value(name, value) is variant
    others = [f.name for f in dataclasses.fields(variant) if f.name != name]
    assert all(getattr(variant, n) == getattr(DEFAULT_EFFICIENCY, n) for n in others)
