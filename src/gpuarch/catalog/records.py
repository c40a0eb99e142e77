"""Build typed records from parsed TOML tables, following the field specs in ``model``.

One generic builder checks every key (unknown keys get "did you mean"), every type and
every closed set, converts units to SI, and names the file, the table and the key on error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeVar

from gpuarch.catalog.model import FABRICS, MEMORY_TYPES, SMResources, SourceKind, Tier
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import CatalogError, suggestion
from gpuarch.units import Unit, to_si

__all__ = ["build_record", "data_keys"]

T = TypeVar("T")

_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")
_PEAK_KEYS = {p.value: p for p in PeakKey}
_NESTED: dict[str, type] = {"sm": SMResources}


def data_keys(cls: type) -> dict[str, Field[Any]]:
    """Map data-file key -> dataclass field for a record class (derived fields excluded)."""
    return {
        f.metadata["key"]: f for f in fields(cls)
        if "key" in f.metadata and not f.metadata.get("derived")
    }


def build_record(cls: type[T], raw: Mapping[str, Any], file: str, where: str) -> T:
    """Validate ``raw`` against ``cls``'s field specs and build the record (SI units)."""
    if not isinstance(raw, Mapping):
        raise CatalogError(file, where, f"expected a table, got {type(raw).__name__}")
    specs = data_keys(cls)
    for key in raw:
        if key not in specs:
            extra = suggestion(key, specs)
            raise CatalogError(file, where, f"unknown key {key!r}{extra}")
    values: dict[str, Any] = {}
    for key, f in specs.items():
        if key not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise CatalogError(file, where, f"missing required key {key!r}")
            continue
        values[f.name] = _convert(raw[key], f, file, f"{where}.{key}")
    return cls(**values)


def _convert(value: Any, f: Field[Any], file: str, where: str) -> Any:
    kind: str = f.metadata["kind"]
    unit: Unit = f.metadata["unit"]
    if kind in ("str", "date", "memory_type", "fabric"):
        _expect(isinstance(value, str) and value.strip() != "", value, "a non-empty string",
                file, where)
        if kind == "date":
            _expect(bool(_DATE.match(value)), value, "a date YYYY-MM or YYYY-MM-DD", file, where)
        elif kind == "memory_type":
            _closed(value, MEMORY_TYPES, file, where)
        elif kind == "fabric":
            _closed(value, FABRICS, file, where)
        return value
    if kind == "int":
        _expect(isinstance(value, int) and not isinstance(value, bool) and value >= 0, value,
                "a non-negative integer", file, where)
        return value
    if kind == "float":
        return to_si(_number(value, file, where), unit)
    if kind == "bool":
        _expect(isinstance(value, bool), value, "true or false", file, where)
        return value
    if kind == "str_list":
        _expect(isinstance(value, list) and all(isinstance(v, str) and v for v in value),
                value, "a list of non-empty strings", file, where)
        return tuple(value)
    if kind == "str_map":
        _expect(isinstance(value, Mapping), value, "a table", file, where)
        for k, v in value.items():
            _expect(isinstance(v, str), v, "a string", file, f"{where}.{k}")
        return MappingProxyType(dict(value))
    if kind == "peaks":
        _expect(isinstance(value, Mapping), value, "a table", file, where)
        peaks: dict[PeakKey, float] = {}
        for k, v in value.items():
            if k not in _PEAK_KEYS:
                extra = suggestion(k, _PEAK_KEYS)
                raise CatalogError(file, where, f"unknown peak key {k!r}{extra}")
            number = _number(v, file, f"{where}.{k}")
            _expect(number > 0, v, "a positive number", file, f"{where}.{k}")
            peaks[_PEAK_KEYS[k]] = to_si(number, unit)
        return MappingProxyType(peaks)
    if kind == "record":
        return build_record(_NESTED[f.metadata["key"]], value, file, where)
    if kind == "tier":
        return _enum(Tier, value, file, where)
    if kind == "source_kind":
        return _enum(SourceKind, value, file, where)
    raise AssertionError(f"unhandled field kind {kind!r}")  # a bug in model.py, not input


def _number(value: Any, file: str, where: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    _expect(ok, value, "a non-negative number", file, where)
    return float(value)


def _expect(ok: bool, value: Any, what: str, file: str, where: str) -> None:
    if not ok:
        raise CatalogError(file, where, f"expected {what}, got {value!r}")


def _closed(value: str, allowed: frozenset[str], file: str, where: str) -> None:
    if value not in allowed:
        extra = suggestion(value, allowed)
        raise CatalogError(
            file, where, f"{value!r} is not one of {', '.join(sorted(allowed))}{extra}"
        )


E = TypeVar("E", bound=Enum)


def _enum(cls: type[E], value: Any, file: str, where: str) -> E:
    allowed = frozenset(str(m.value) for m in cls)
    _expect(isinstance(value, str), value, "a string", file, where)
    _closed(value, allowed, file, where)
    return cls(value)
