"""The scalar fast paths of gpuarch.perf.num agree with NumPy's functions, for single values
and for arrays (which they hand to NumPy)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.perf import num

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


@given(finite, finite)
def test_single_values_match_numpy(a: float, b: float) -> None:
    assert num.maximum(a, b) == np.maximum(a, b)
    assert num.minimum(a, b) == np.minimum(a, b)
    assert num.ceil(a) == np.ceil(a) and isinstance(num.ceil(a), float)
    assert num.where(a > b, a, b) == np.where(a > b, a, b)
    assert num.where(np.bool_(a > b), 1.0, 2.0) == (1.0 if a > b else 2.0)
    assert num.any_of(a > b) is bool(np.any(a > b))
    assert num.to_float(int(a)) == float(int(a))


@given(st.lists(finite, min_size=1, max_size=8), finite)
def test_arrays_go_to_numpy(xs: list[float], b: float) -> None:
    a = np.asarray(xs)
    assert np.array_equal(num.maximum(a, b), np.maximum(a, b))
    assert np.array_equal(num.minimum(b, a), np.minimum(b, a))
    assert np.array_equal(num.ceil(a), np.ceil(a))
    assert np.array_equal(num.where(a > b, a, b), np.where(a > b, a, b))
    assert num.any_of(a > b) == bool(np.any(a > b))
    assert num.to_float(a).dtype == np.float64
