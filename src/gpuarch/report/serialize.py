"""The one function that turns result records into JSON.

A dataclass field declared with a data-file key and unit (see ``catalog.model.spec``) is
written under that key, converted from SI to that unit, so JSON output uses the same names
and units as the data files and the tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from gpuarch.units import Unit, from_si

__all__ = ["to_json", "to_jsonable"]


def _number(x: float) -> float | int | None:
    if math.isnan(x) or math.isinf(x):
        return None
    rounded = float(f"{x:.6g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


def _key(k: Any) -> str:
    if isinstance(k, Enum):
        return str(getattr(k, "key", k.value))
    return str(k)


def to_jsonable(obj: Any, unit: Unit = Unit.NONE) -> Any:
    """Plain JSON types for ``obj`` (dataclasses, enums, mappings, sequences, numbers)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return _number(from_si(obj, unit))
    if isinstance(obj, Enum):
        return _key(obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in fields(obj):
            if f.name.startswith("_"):
                continue
            meta = f.metadata
            name = meta.get("key", f.name)
            out[name] = to_jsonable(getattr(obj, f.name), meta.get("unit", Unit.NONE))
        return out
    if isinstance(obj, Mapping):
        return {_key(k): to_jsonable(v, unit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, unit) for v in obj]
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def to_json(obj: Any) -> str:
    """One JSON document for ``obj``."""
    return json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False)
