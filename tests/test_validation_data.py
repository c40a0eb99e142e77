"""The published validation rows agree with themselves: a row that prints both tokens/s and
TFLOP/s per GPU implies a FLOP count per token, which must match the other rows of the same
source, model and sequence length (same model, same count), unless the data file excludes
the row and says why."""

from __future__ import annotations

import statistics
from collections import defaultdict

from gpuarch.validation.training import TrainingPoint, load_training_points

TOLERANCE = 0.15


def _implied_flops_per_token(point: TrainingPoint) -> float | None:
    tflops, tokens = point.get("tflops_per_gpu"), point.get("tokens_per_s_per_gpu")
    return tflops * 1e12 / tokens if tflops and tokens else None


def _groups() -> dict[tuple[str, str, int], list[tuple[TrainingPoint, float]]]:
    groups: dict[tuple[str, str, int], list[tuple[TrainingPoint, float]]] = defaultdict(list)
    for p in load_training_points():
        implied = _implied_flops_per_token(p)
        if implied is not None:
            groups[(p.source, p.get("preset") or p.id, p.get("seq_len"))].append((p, implied))
    return groups


def test_rows_printing_both_figures_agree_with_their_siblings() -> None:
    """Every row's implied FLOPs per token is within 15% of the median of its source, model
    and sequence length; the ones that are not carry ``excluded`` with the reason."""
    checked = 0
    for key, rows in _groups().items():
        if len(rows) < 3:
            continue
        median = statistics.median(v for _, v in rows)
        for p, implied in rows:
            checked += 1
            off = abs(implied / median - 1) > TOLERANCE
            assert off == bool(p.get("excluded")), (
                f"{p.id}: {implied / 1e9:.1f} GFLOP/token against {median / 1e9:.1f} for "
                f"{key}; excluded = {p.get('excluded')!r}")
    assert checked >= 50


def test_an_excluded_row_names_both_figures() -> None:
    """An exclusion is for disagreeing figures, and its reason quotes them."""
    excluded = [p for p in load_training_points() if p.get("excluded")]
    assert excluded
    for p in excluded:
        reason = p.get("excluded")
        assert f"{p.get('tokens_per_s_per_gpu'):,}" in reason
        assert f"{p.get('tflops_per_gpu')} TFLOP/s" in reason
