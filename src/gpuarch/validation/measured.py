"""What the validations that set measured times beside the model's own share: a commented
CSV file's rows, a row's model/measured ratio and the mean |ln| of those ratios
(``validation.moe_kernels``, ``validation.collectives``)."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from gpuarch.errors import GpuarchError, suggestion

__all__ = ["AICONFIGURATOR_SYSTEMS", "HasRatio", "ModelOverMeasured", "NamedRun",
           "aiconfigurator_devices", "band_cells", "band_named", "mean_abs_log_ratio",
           "read_commented_csv", "runs_matching", "select_runs"]


AICONFIGURATOR_SYSTEMS = {"h100_sxm": "h100-sxm5-80gb", "h200_sxm": "h200-sxm-141gb",
                          "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
                          "gb300": "gb300", "a100_sxm": "a100-sxm4-80gb", "l40s": "l40s"}
"""NVIDIA aiconfigurator's system names (its ``systems/data/<name>`` folders) and the
catalog's keys, for the kernel tables taken from it."""


def aiconfigurator_devices(*names: str) -> dict[str, str]:
    """The catalog keys of these aiconfigurator systems, by system name."""
    return {name: AICONFIGURATOR_SYSTEMS[name] for name in names}


class HasRatio(Protocol):
    @property
    def ratio(self) -> float: ...


class NamedRun(Protocol):
    """A measured run as ``select_runs`` reads it: its id, its source and its fields."""

    @property
    def id(self) -> str: ...

    @property
    def source(self) -> str: ...

    def get(self, key: str, default: Any = None) -> Any: ...


Run = TypeVar("Run", bound=NamedRun)


def runs_matching(runs: Sequence[Run], match: Sequence[str]) -> list[Run]:
    """The runs whose id, source or GPU contains every text of ``match`` (case ignored)."""
    def fields(run: Run) -> str:
        return f"{run.id} {run.source} {run.get('gpu')}".lower()

    return [r for r in runs if all(t.lower() in fields(r) for t in match)]


def select_runs(runs: Sequence[Run], match: Sequence[str]) -> list[Run]:
    """``runs_matching``; none left is an error naming ``--match`` (with the nearest GPU or
    source)."""
    chosen = runs_matching(runs, match)
    if not chosen:
        names = sorted({part for r in runs for v in (r.source, r.get("gpu"))
                        for part in (str(v), *str(v).split("-"))})
        raise GpuarchError(f"--match: no run has all of {', '.join(map(repr, match))} in its "
                           f"id, source or GPU{suggestion(match[0], names)}")
    return chosen


class ModelOverMeasured:
    """A row with a measured time and the model's time for the same thing (seconds); the
    dataclasses that use it declare the two fields."""

    measured_s: float
    model_s: float

    @property
    def ratio(self) -> float:
        """Model over measured: above 1 the model is slower than the measurement."""
        return self.model_s / self.measured_s


def read_commented_csv(path: Path) -> tuple[dict[str, str], ...]:
    """A CSV file's rows as read, its leading ``#`` comment lines (the source) skipped."""
    with path.open(encoding="utf-8") as f:
        return tuple(csv.DictReader(line for line in f if not line.startswith("#")))


def mean_abs_log_ratio(rows: Iterable[HasRatio]) -> float:
    """Mean |ln(model / measured)| (0.2: about 20% either way)."""
    logs = [abs(math.log(r.ratio)) for r in rows]
    return sum(logs) / len(logs)


Row = TypeVar("Row", bound=HasRatio)


def band_named(bands: Iterable[tuple[str, float, float, str]], value: float) -> str:
    """The name of the band of ``bands`` (name, from, below, label) that ``value`` falls in."""
    return next(name for name, lo, hi, _ in bands if lo <= value < hi)


def band_cells(members: Sequence[Row], bands: Iterable[str], band_of: Callable[[Row], str],
               count: str) -> dict[str, object]:
    """For each band a group's rows fall in (``band_of``): how many (``{band}_{count}``),
    their median model/measured ratio and their mean |ln ratio| (None where there are
    none), as the measured-kernel summaries print them."""
    doc: dict[str, object] = {}
    for name in bands:
        part = [r for r in members if band_of(r) == name]
        doc[f"{name}_{count}"] = len(part)
        doc[f"{name}_median_ratio"] = statistics.median(r.ratio for r in part) \
            if part else None
        doc[f"{name}_mean_abs_log_ratio"] = mean_abs_log_ratio(part) if part else None
    return doc
