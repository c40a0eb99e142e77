"""Fit the one figure ML.ENERGY's v3 serving runs do not publish: each task's prompts' mean
length in tokens (validation/data/inference.toml, the ``input_len`` of every source with an
``mlenergy`` table).

Every configuration of a task serves the same requests (the task's conversations or
questions), so the prompts' mean length is one figure per task, up to the models'
tokenizers. It is chosen on a grid of 25 tokens to minimise the mean |predicted /
published - 1| of the output rates of the task's dense transformers on H100 (the table's
``fit_gpu`` and ``fit_presets``: the runs whose serving the model was fitted and checked on
most), with nothing else changed. Printed, for each task: the error of each length on those
runs, the best, and at the best the error on every group of runs it was not fitted on (MoE,
hybrid, B200).

    python scripts/fit_mlenergy_prompt.py
"""

from __future__ import annotations

import dataclasses
import statistics
import tomllib
from collections import defaultdict
from collections.abc import Sequence

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import INFERENCE_FILE, compare_point, load_inference_points
from gpuarch.validation.training import TrainingPoint

GRID = range(100, 1501, 25)


def sources() -> dict[str, list[TrainingPoint]]:
    """The points of every source built from ML.ENERGY rows (a source with an ``mlenergy``
    table in the inference data file), by source."""
    with INFERENCE_FILE.open("rb") as fh:
        built = {s["id"] for s in tomllib.load(fh).get("source", []) if "mlenergy" in s}
    by_source: dict[str, list[TrainingPoint]] = defaultdict(list)
    for p in load_inference_points():
        if p.source in built:
            by_source[p.source].append(p)
    return dict(by_source)


def rows_at(points: Sequence[TrainingPoint], input_len: int) -> list[TrainingPoint]:
    """The points with their prompts' mean length set to ``input_len``."""
    return [dataclasses.replace(p, raw={**p.raw, "input_len": input_len}) for p in points]


def errors(catalog: Catalog, points: Sequence[TrainingPoint]) -> list[float]:
    return [c.error for p in points for c in compare_point(catalog, p, DEFAULT_EFFICIENCY)]


def mean_abs(values: Sequence[float]) -> float:
    return statistics.fmean(abs(v) for v in values)


def fit(catalog: Catalog, points: Sequence[TrainingPoint]) -> int:
    """The grid's prompt length that fits a source's in-sample runs best."""
    fitted = [p for p in points if not p.get("out_of_sample")]
    return min(GRID, key=lambda n: mean_abs(errors(catalog, rows_at(fitted, n))))


def main() -> None:
    catalog = load_catalog()
    for source, points in sources().items():
        fitted = [p for p in points if not p.get("out_of_sample")]
        print(f"{source}:")
        for n in GRID:
            e = errors(catalog, rows_at(fitted, n))
            print(f"  input_len {n:5}: {len(e)} runs fitted on, mean |error| "
                  f"{mean_abs(e):6.1%}, median signed {statistics.median(e):+6.1%}")
        best = fit(catalog, points)
        print(f"  best: {best} tokens (shipped: {points[0].get('input_len')})")
        groups: dict[str, list[float]] = defaultdict(list)
        for p in rows_at(points, best):
            label = ("fitted on" if not p.get("out_of_sample") else "out of sample") + \
                f", {p.get('gpu')}"
            groups[label].extend(errors(catalog, [p]))
        for label, e in sorted(groups.items()):
            print(f"    {label:40} n={len(e):3}  mean |error| {mean_abs(e):6.1%}  median "
                  f"signed {statistics.median(e):+6.1%}  beyond 35%: "
                  f"{sum(abs(v) > 0.35 for v in e)}")


if __name__ == "__main__":
    main()
