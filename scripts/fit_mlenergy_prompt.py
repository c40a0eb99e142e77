"""Fit the one figure ML.ENERGY's v3 serving runs do not publish: the LM Arena prompts' mean
length in tokens (validation/data/inference.toml, the mlenergy-v3-lm-arena-chat source's
``input_len``).

Every configuration serves the same 1,024 conversations (each turn sent with the
conversation so far), so the prompts' mean length is one figure for all of them, up to the
models' tokenizers. It is chosen on a grid of 25 tokens to minimise the mean |predicted /
published - 1| of the output rates of the dense transformers' H100 runs (the table's
``fit_gpu`` and ``fit_presets``: the runs whose serving the model was fitted and checked on
most), with nothing else changed. Printed: the error of each length on those runs, the best,
and at the best the error on every group of runs it was not fitted on (MoE, hybrid, B200).

    python scripts/fit_mlenergy_prompt.py
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Sequence

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import compare_point, load_inference_points
from gpuarch.validation.training import TrainingPoint

SOURCE = "mlenergy-v3-lm-arena-chat"
GRID = range(100, 1501, 25)


def rows_at(points: Sequence[TrainingPoint], input_len: int) -> list[TrainingPoint]:
    """The points with their prompts' mean length set to ``input_len``."""
    return [dataclasses.replace(p, raw={**p.raw, "input_len": input_len}) for p in points]


def errors(catalog: Catalog, points: Sequence[TrainingPoint]) -> list[float]:
    return [c.error for p in points for c in compare_point(catalog, p, DEFAULT_EFFICIENCY)]


def mean_abs(values: Sequence[float]) -> float:
    return statistics.fmean(abs(v) for v in values)


def fit(catalog: Catalog) -> int:
    """The grid's prompt length that fits the in-sample runs best."""
    fitted = [p for p in load_inference_points()
              if p.source == SOURCE and not p.get("out_of_sample")]
    return min(GRID, key=lambda n: mean_abs(errors(catalog, rows_at(fitted, n))))


def main() -> None:
    catalog = load_catalog()
    points = [p for p in load_inference_points() if p.source == SOURCE]
    fitted = [p for p in points if not p.get("out_of_sample")]
    for n in GRID:
        e = errors(catalog, rows_at(fitted, n))
        print(f"input_len {n:5}: {len(e)} runs fitted on, mean |error| {mean_abs(e):6.1%}, "
              f"median signed {statistics.median(e):+6.1%}")
    best = fit(catalog)
    shipped = int(points[0].get("input_len"))
    print(f"best: {best} tokens (shipped: {shipped})")
    groups: dict[str, list[float]] = defaultdict(list)
    for p in rows_at(points, best):
        label = ("fitted on" if not p.get("out_of_sample") else "out of sample") + \
            f", {p.get('gpu')}"
        groups[label].extend(errors(catalog, [p]))
    for label, e in sorted(groups.items()):
        print(f"  {label:40} n={len(e):3}  mean |error| {mean_abs(e):6.1%}  median signed "
              f"{statistics.median(e):+6.1%}  beyond 35%: {sum(abs(v) > 0.35 for v in e)}")


if __name__ == "__main__":
    main()
