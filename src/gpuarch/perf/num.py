"""NumPy's elementwise helpers with a fast path for single values.

The models take either one configuration (Python or NumPy scalars) or the advisor's whole
search space (arrays) through the same formulas. NumPy charges about two microseconds to
wrap a single value in a 0-d array for each call, which adds up over the few hundred
operations of one estimate; these keep single values out of NumPy and hand arrays to it
unchanged, with the same arithmetic either way."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["any_of", "ceil", "floor", "maximum", "minimum", "to_float", "where"]

Num = Any  # a float, or a NumPy array of floats


def to_float(x: Num) -> Num:
    """``x`` as a float, or as a float array if it is an array."""
    return np.asarray(x, dtype=np.float64) if isinstance(x, np.ndarray) else float(x)


def where(cond: Num, yes: Num, no: Num) -> Num:
    """``np.where``; one condition picks one of the two values as they are."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, yes, no)
    return yes if cond else no


def minimum(a: Num, b: Num) -> Num:
    """``np.minimum``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def maximum(a: Num, b: Num) -> Num:
    """``np.maximum``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


def ceil(x: Num) -> Num:
    """``np.ceil`` (a float for one value)."""
    return np.ceil(x) if isinstance(x, np.ndarray) else float(math.ceil(x))


def floor(x: Num) -> Num:
    """``np.floor`` (a float for one value)."""
    return np.floor(x) if isinstance(x, np.ndarray) else float(math.floor(x))


def any_of(x: Num) -> bool:
    """``np.any``."""
    return bool(np.any(x)) if isinstance(x, np.ndarray) else bool(x)
