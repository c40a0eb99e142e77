"""Error statistics shared by the training and inference validations."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

__all__ = ["DURATION_METRICS", "ErrorSummary", "HasError", "MemoryFit", "rate_error",
           "summarize"]


class HasError(Protocol):
    """A comparison row: anything with a signed relative ``error``."""

    @property
    def error(self) -> float: ...


DURATION_METRICS = ("ttft_s", "tpot_s", "request_latency_s")
"""Serving figures that are durations (the others are rates, whose names end in
``_per_s``); training figures are all read as tokens/s per GPU."""


def rate_error(row: Any) -> float:
    """A row's signed error on the rate it describes, positive where the model is faster
    than the measurement: a duration's error read as the rate it implies
    (published / predicted - 1), a rate's as it is."""
    if getattr(row, "metric", "") in DURATION_METRICS:
        # from the figures themselves: through the error, a published duration many orders
        # above the model's rounds 1 + error to zero
        return float(row.published / row.predicted - 1.0) if row.predicted > 0 else math.inf
    return float(row.error)


_MATCHED = ("source", "model", "gpu", "engine", "framework")
"""The row attributes besides its id that --match looks in (engine: serving rows';
framework: training rows'; a row without one has none)."""

@dataclass(frozen=True)
class MemoryFit:
    """A published run's memory per GPU as the model sees it. The run ran, so it should fit;
    where the model says it does not, the data file's ``memory_exception`` says why."""

    gib: float = 0.0
    gpu_gib: float = 0.0
    fits: bool = True  # the estimate's own verdict (in bytes, not the rounded GiB above)
    exception: str = ""


@dataclass(frozen=True)
class ErrorSummary:
    """Comparisons, the points that could not be modelled, and statistics over them.

    ``bound`` is the issue's per-point limit (20% for training, 35% for inference).
    """

    rows: Sequence[Any]
    skipped: tuple[tuple[str, str], ...]
    bound: float

    @property
    def mean_abs_error(self) -> float:
        return statistics.fmean(abs(r.error) for r in self.rows) if self.rows else 0.0

    @property
    def median_abs_error(self) -> float:
        return statistics.median(abs(r.error) for r in self.rows) if self.rows else 0.0

    @property
    def median_rate_error(self) -> float:
        """The median signed error on rates (``rate_error``): positive where the model is
        faster than the measurements, its bias over these rows."""
        return statistics.median(rate_error(r) for r in self.rows) if self.rows else 0.0

    @property
    def max_abs_error(self) -> float:
        return max((abs(r.error) for r in self.rows), default=0.0)

    @property
    def share_within(self) -> float:
        """Fraction of rows within ``bound``."""
        return (sum(abs(r.error) <= self.bound for r in self.rows) / len(self.rows)
                if self.rows else 0.0)

    @property
    def beyond(self) -> int:
        """How many rows are beyond ``bound``."""
        return sum(abs(r.error) > self.bound for r in self.rows)

    def by(self, attr: str) -> dict[str, float]:
        """Mean absolute error grouped by a row attribute (``gpu``, ``source``...)."""
        groups: dict[str, list[float]] = {}
        for r in self.rows:
            groups.setdefault(str(getattr(r, attr)), []).append(abs(r.error))
        return {k: statistics.fmean(v) for k, v in groups.items()}

    def select(self, match: Sequence[str] = (), worst: int | None = None) -> ErrorSummary:
        """The rows whose id, source, model, GPU, engine (serving rows') or framework
        (training rows') contain every text of ``match`` (case ignored), then the
        ``worst`` of them by absolute error (largest first); the skipped points whose id
        contains every text. Raises
        GpuarchError (naming ``--match``) when nothing is left, with the closest model, GPU,
        source or engine as a suggestion."""
        from gpuarch.errors import GpuarchError, suggestion

        texts = [t.lower() for t in match]

        def fields(r: Any) -> str:
            return " ".join(str(getattr(r, a, ""))
                            for a in ("id", *_MATCHED))

        rows = [r for r in self.rows if all(t in fields(r).lower() for t in texts)]
        if not rows:
            names = sorted({part for r in self.rows
                            for a in _MATCHED
                            for name in [str(getattr(r, a, ""))]
                            for part in (name, *name.split("-"))})
            alone = [t for t in match
                     if not any(t.lower() in fields(r).lower() for r in self.rows)]
            if alone:
                raise GpuarchError(f"--match: no compared point has {alone[0]!r} in its "
                                   f"id, source, model, GPU, engine or framework"
                                   f"{suggestion(alone[0], names)}")
            raise GpuarchError(f"--match: no compared point matches all of "
                               f"{', '.join(repr(t) for t in match)}")
        if worst is not None:
            rows = sorted(rows, key=lambda r: abs(r.error), reverse=True)[:worst]
        skipped = tuple((i, why) for i, why in self.skipped
                        if all(t in i.lower() for t in texts))
        return ErrorSummary(tuple(rows), skipped, self.bound)

    def as_json(self, rows_key: str, groups: Sequence[str],
                explain: bool = False) -> dict[str, Any]:
        """The document ``gpuarch validate ... --json`` prints (each row's ``explain``, the
        prediction's breakdown, only if asked)."""
        def row(r: Any) -> dict[str, Any]:
            d = {**asdict(r), "error": r.error}
            if not explain:
                d.pop("explain", None)
            return d

        return {
            rows_key: [row(r) for r in self.rows],
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
            "mean_abs_error": self.mean_abs_error,
            "median_abs_error": self.median_abs_error,
            "max_abs_error": self.max_abs_error,
            "median_rate_error": self.median_rate_error,
            f"share_within_{round(self.bound * 100)}_percent": self.share_within,
            f"beyond_{round(self.bound * 100)}_percent": self.beyond,
            **{f"mean_abs_error_by_{g}": self.by(g) for g in groups},
        }


def summarize(points: Iterable[Any], compare: Callable[[Any], Iterable[HasError]],
              bound: float) -> ErrorSummary:
    """Compare every point that can be modelled; the rest are listed with the reason (the
    message of the GpuarchError ``compare`` raised)."""
    from gpuarch.errors import GpuarchError

    rows: list[HasError] = []
    skipped: list[tuple[str, str]] = []
    for point in points:
        try:
            rows.extend(compare(point))
        except GpuarchError as exc:
            skipped.append((point.id, str(exc)))
    return ErrorSummary(tuple(rows), tuple(skipped), bound=bound)
