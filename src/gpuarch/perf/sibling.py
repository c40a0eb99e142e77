"""How much more of the same peak a GPU sustains than the sibling its efficiencies come from.

The efficiencies are fitted per Tensor Core generation; a GPU with the same datasheet peaks
as a fitted sibling (GB300 beside GB200) can still run the same kernels faster. NVIDIA
publishes timings of identical kernels, shapes and software on such pairs;
``data/sibling_rates.toml`` holds them with their sources. For each (GPU, operator,
precision) the factor is the median over every published pair of the sibling's time over the
GPU's, and the roofline multiplies that operator's efficiency on the GPU by it (GEMMs in
``_gemm_efficiency``, fused attention forward and backward in ``op_time``). A calibration
measured on the GPU itself replaces the efficiencies and switches these factors off
(``Efficiency.sibling_rates``).
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError

__all__ = [
    "OPS",
    "PRECISION_PEAKS",
    "SIBLING_FILE",
    "BoardRate",
    "SiblingRate",
    "board_rates",
    "sibling_factor",
    "sibling_notes",
    "sibling_rates",
]

SIBLING_FILE = Path(__file__).with_name("data") / "sibling_rates.toml"

OPS = ("gemm", "attention_forward", "attention_backward")
"""Operators a comparison can time."""

PRECISION_PEAKS = {"fp8": PeakKey.TENSOR_FP8, "bf16": PeakKey.TENSOR_BF16}
"""The Tensor Core peak each comparison precision ran at."""


@dataclass(frozen=True)
class SiblingRate:
    """One GPU's sustained rate on one operator and precision over its sibling's."""

    gpu: str
    sibling: str
    op: str
    precision: str
    factor: float
    pairs: int
    sources: tuple[str, ...]

    def note(self) -> str:
        """One line saying what the factor is and where it comes from."""
        return (f"{self.op} at {self.precision}: {self.factor:.3f}x {self.sibling}'s "
                f"fraction of the same peak (median of {self.pairs} published same-kernel "
                f"timings: {'; '.join(self.sources)})")


def _comparisons(raw: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    rows = raw.get("comparison")
    if not isinstance(rows, list) or not rows:
        raise GpuarchError(f"{path}: no [[comparison]] tables")
    for i, row in enumerate(rows):
        where = f"{path}: comparison[{i}]"
        for key in ("gpu", "sibling", "op", "precision", "source_title", "source_url"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise GpuarchError(f"{where}: {key!r} must be a non-empty string")
        if row["op"] not in OPS:
            raise GpuarchError(f"{where}: op {row['op']!r} is not one of {', '.join(OPS)}")
        if row["precision"] not in PRECISION_PEAKS:
            raise GpuarchError(f"{where}: precision {row['precision']!r} is not one of "
                               f"{', '.join(PRECISION_PEAKS)}")
        times = (row.get("sibling_ms"), row.get("gpu_ms"))
        if not all(isinstance(t, list) and t for t in times) or len(times[0]) != len(times[1]):
            raise GpuarchError(f"{where}: sibling_ms and gpu_ms must be lists of equal length")
        if any(not isinstance(x, (int, float)) or x <= 0 for t in times for x in t):
            raise GpuarchError(f"{where}: times must be positive numbers")
    return rows


@lru_cache(maxsize=4)
def sibling_rates(path: Path = SIBLING_FILE) -> dict[tuple[str, str, PeakKey], SiblingRate]:
    """Every (GPU key, operator, peak key) with published sibling timings, and its factor."""
    with path.open("rb") as fh:
        rows = _comparisons(tomllib.load(fh), path)
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["gpu"], row["op"], row["precision"]), []).append(row)
    out: dict[tuple[str, str, PeakKey], SiblingRate] = {}
    for (gpu, op, precision), group in grouped.items():
        siblings = {row["sibling"] for row in group}
        if len(siblings) != 1:
            raise GpuarchError(f"{path}: {gpu} {op} {precision} is compared with several "
                               f"siblings ({', '.join(sorted(siblings))})")
        ratios = [s / g for row in group for s, g in zip(row["sibling_ms"], row["gpu_ms"],
                                                          strict=True)]
        out[(gpu, op, PRECISION_PEAKS[precision])] = SiblingRate(
            gpu, siblings.pop(), op, precision, statistics.median(ratios), len(ratios),
            tuple(dict.fromkeys(row["source_url"] for row in group)))
    return out


@dataclass(frozen=True)
class BoardRate:
    """How much of its own peak a power-limited board sustains under Tensor Core work
    against its sibling's fraction of theirs (the file's ``[[board]]`` tables)."""

    gpu: str
    sibling: str
    precision: str
    factor: float
    pairs: int
    sources: tuple[str, ...]

    def note(self) -> str:
        """One line saying what the factor is and where it comes from."""
        return (f"every Tensor Core operator: {self.factor:.3f}x {self.sibling}'s fraction of "
                f"its own peak (a board held to a lower power limit; the median of {self.pairs} "
                f"published same-round throughputs over the ratio of the two {self.precision} "
                f"peaks: {'; '.join(self.sources)})")


def _per_gpu(row: dict[str, Any], rates: str, count: str, where: str) -> list[float]:
    values, gpus = row.get(rates), row.get(count, 1)
    if not isinstance(values, list) or not values or any(
            not isinstance(x, (int, float)) or x <= 0 for x in values):
        raise GpuarchError(f"{where}: {rates} must be a list of positive numbers")
    if not isinstance(gpus, int) or gpus < 1:
        raise GpuarchError(f"{where}: {count} must be an integer >= 1")
    return [x / gpus for x in values]


@lru_cache(maxsize=4)
def board_rates(path: Path = SIBLING_FILE) -> dict[str, BoardRate]:
    """Every board with published same-round throughputs beside its sibling's, and its
    factor: the median ratio of the two boards' throughputs per GPU over the ratio of their
    catalog peaks at the row's precision."""
    with path.open("rb") as fh:
        rows = tomllib.load(fh).get("board", [])
    catalog = load_catalog()
    grouped: dict[str, list[tuple[str, str, float, str]]] = {}
    for i, row in enumerate(rows):
        where = f"{path}: board[{i}]"
        for key in ("gpu", "sibling", "precision", "source_url", "sibling_source_url"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise GpuarchError(f"{where}: {key!r} must be a non-empty string")
        if row["precision"] not in PRECISION_PEAKS:
            raise GpuarchError(f"{where}: precision {row['precision']!r} is not one of "
                               f"{', '.join(PRECISION_PEAKS)}")
        own_rates = _per_gpu(row, "gpu_per_s", "gpus", where)
        their_rates = _per_gpu(row, "sibling_per_s", "sibling_gpus", where)
        if len(own_rates) != len(their_rates):
            raise GpuarchError(f"{where}: gpu_per_s and sibling_per_s must be of equal length")
        peak = PRECISION_PEAKS[row["precision"]]
        own, theirs = (catalog.product(row[k]).peak(peak) for k in ("gpu", "sibling"))
        if not own or not theirs:
            raise GpuarchError(f"{where}: the catalog has no {row['precision']} peak for "
                               f"{row['gpu']} or {row['sibling']}")
        for mine, sib in zip(own_rates, their_rates, strict=True):
            grouped.setdefault(row["gpu"], []).append(
                (row["sibling"], row["precision"], mine / sib * theirs / own, row["source_url"]))
    out: dict[str, BoardRate] = {}
    for gpu, group in grouped.items():
        siblings = {(sib, prec) for sib, prec, _, _ in group}
        if len(siblings) != 1:
            raise GpuarchError(f"{path}: board {gpu} is compared with several siblings or "
                               "precisions")
        sibling, precision = siblings.pop()
        out[gpu] = BoardRate(gpu, sibling, precision,
                             statistics.median(f for _, _, f, _ in group), len(group),
                             tuple(dict.fromkeys(src for *_, src in group)))
    return out


@lru_cache(maxsize=1024)
def sibling_factor(gpu: str, op: str, peak: PeakKey | None) -> float:
    """The factor on ``op``'s efficiency for ``gpu`` at ``peak``: its published same-kernel
    timings against its sibling's at that peak, times its board's sustained fraction
    (``board_rates``) for any Tensor Core peak; 1 without either."""
    if peak is None:
        return 1.0
    rate = sibling_rates().get((gpu, op, peak))
    board = board_rates().get(gpu)
    return (rate.factor if rate else 1.0) * (board.factor if board else 1.0)


def sibling_notes(gpu: str, uses: Iterable[tuple[str, PeakKey | None]] | None = None
                  ) -> list[str]:
    """The factors ``gpu`` has, one line each (empty: none); with ``uses``, only those of the
    (operator, peak) pairs an estimate runs: an operator's factor at another peak is not
    one it used."""
    wanted = None if uses is None else set(uses)
    notes = [rate.note() for (key, op, peak), rate in sorted(
        sibling_rates().items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2].value))
        if key == gpu and (wanted is None or (op, peak) in wanted)]
    board = board_rates().get(gpu)
    if board and (wanted is None or any(peak is not None for _, peak in wanted)):
        notes.append(board.note())
    return notes
