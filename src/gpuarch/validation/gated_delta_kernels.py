"""The Gated DeltaNet block's forward scan against flash-linear-attention's measured kernels.

FlashInfer's GDN pull requests time flash-linear-attention's (FLA's) Triton chunked gated
delta rule, the prefill kernels vLLM, SGLang and Megatron-Core call, beside their own at
Qwen3.5's head shapes on H100 and B300 (``data/gated-delta-prefill-fla.csv``; its header
names the pull requests). Each row is set beside the roofline's time for the forward scan
operator the estimates build (``estimate.mamba.mamba_mixer_ops``) over the same tokens and
heads. ``Efficiency.gated_delta_scan`` and ``gated_delta_blackwell`` were set where the rows
with many parallel lanes (sequences x value heads, ``WIDE_LANES`` or more) fit best, and
``gated_delta_chunk_step_s`` where the narrow rows do (one or two sequences of 8 heads, a TP8
slice of Qwen3.5-397B, bound by each sequence's chain of chunks rather than by the GPU's
throughput): ``fit_gated_delta``, ``python scripts/fit_gated_delta.py``
(docs/performance-model.md, "Gated DeltaNet's scan measured").

The backward (``data/gated-delta-backward-fla.csv``: the same FLA kernels' whole backward as
QwenLM FlashQLA's benchmark tables time it on H200 and GB200) is set beside the backward of
that operator: ``compare_gated_delta_backward``. ``Efficiency.gated_delta_backward`` and
``gated_delta_backward_blackwell`` are set where its wide rows fit best.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.mamba import mamba_mixer_ops
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Device, Elementwise, op_time
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.measured import ModelOverMeasured, mean_abs_log_ratio, read_commented_csv
from gpuarch.workloads.shape import MambaShape

__all__ = ["BACKWARD_SOURCE", "GDN_BACKWARD_FILE", "GDN_PREFILL_FILE", "HEAD_WIDTH",
           "SOURCE", "WIDE_LANES", "GatedDeltaRow", "compare_gated_delta",
           "compare_gated_delta_backward", "fit_gated_delta", "load_gated_delta_rows",
           "narrow_rows", "parse_seqlens", "summarize", "wide_rows"]

GDN_PREFILL_FILE = Path(__file__).with_name("data") / "gated-delta-prefill-fla.csv"
GDN_BACKWARD_FILE = Path(__file__).with_name("data") / "gated-delta-backward-fla.csv"

SOURCE = ("flash-linear-attention's Triton chunk_gated_delta_rule, the FLA/Triton column of "
          "FlashInfer pull requests 3481 and 3866 (H100 80GB HBM3) and 4078 (B300 SXM6 AC), "
          "flashinfer-ai/flashinfer")
"""Where the rows come from (the file's header says more)."""

BACKWARD_SOURCE = ("flash-linear-attention's Triton chunk_gated_delta_rule backward, the FLA "
                   "[bwd] column of QwenLM FlashQLA's benchmark tables (NVIDIA H200, GB200)")
"""Where the backward rows come from (that file's header says more)."""

HEAD_WIDTH = 128
"""The key and value heads' width in every row (the tables' d=128, Qwen3.5's)."""

WIDE_LANES = 32
"""Parallel lanes (sequences x value heads) from which a row counts as wide: the fit's rows
(64 heads, one to 16 sequences); the narrow ones are one or two sequences of 8 heads."""


@dataclass(frozen=True)
class GatedDeltaRow(ModelOverMeasured):
    """One measured FLA forward pass and the model's time for it."""

    device: str
    pr: str
    key_heads: int
    value_heads: int
    seqlens: tuple[int, ...]
    measured_s: float
    model_s: float
    direction: str = "forward"  # or "backward"

    @property
    def tokens(self) -> int:
        return sum(self.seqlens)

    @property
    def lanes(self) -> int:
        """Sequences x value heads: the work the kernels can spread over SMs at once."""
        return len(self.seqlens) * self.value_heads


def parse_seqlens(text: str) -> tuple[int, ...]:
    """The tables' "Seqlens" cell: "6144+2048" (the lengths), "2048x4" (length x count: four
    of 2,048) and "1x65536" (one sequence of 65,536). That is how the tables' rows read: each
    group of rows holds the same tokens (1x8192, 6144+2048, 2048x4, 1024x8), FLA's time for
    "8192x8" at 64 heads is its time for "1x65536" (eight sequences of 8,192, not 8,192 of
    8, which would be eight times the chunks), and at 8 heads "1x65536" takes twice
    "1x32768", one sequence's chain of chunks."""
    try:
        if "x" in text:
            first, second = (int(part) for part in text.split("x"))
            return (second,) if first == 1 else (first,) * second
        return tuple(int(part) for part in text.split("+"))
    except ValueError:
        raise GpuarchError(f"seqlens: expected e.g. 1x65536, 2048x4 or 6144+2048, got {text!r}") \
            from None


@cache
def load_gated_delta_rows(path: Path = GDN_PREFILL_FILE) -> tuple[dict[str, str], ...]:
    """The measured passes as read."""
    return read_commented_csv(path)


def _scan_op(key_heads: int, value_heads: int, seqlens: Sequence[int]) -> Elementwise:
    """The forward scan operator the estimates build for one GPU's share of a Gated
    DeltaNet block over sequences of ``seqlens`` tokens (BF16)."""
    m = MambaShape(heads=value_heads, head_dim=HEAD_WIDTH, state=HEAD_WIDTH, groups=key_heads,
                   conv_bias=False, kind="gated_delta")
    op = next(o for o in mamba_mixer_ops(m, 1, sum(seqlens), 2.0, max(seqlens))
              if o.name == "mamba_scan")
    assert isinstance(op, Elementwise) and op.gated_delta
    return op


def _compare(catalog: Catalog, efficiency: Efficiency, path: Path, direction: str
             ) -> list[GatedDeltaRow]:
    rows = load_gated_delta_rows(path)
    products = {key: catalog.product(key) for key in dict.fromkeys(r["device"] for r in rows)}
    devices = {key: Device.of(p, Precision.BF16, catalog.chip_of(p).sm.tensor_core_generation)
               for key, p in products.items()}
    out = []
    for r in rows:
        device = devices[r["device"]]
        seqlens = parse_seqlens(r["seqlens"])
        kh, vh = int(r["key_heads"]), int(r["value_heads"])
        op = _scan_op(kh, vh, seqlens)
        if direction == "backward":
            assert op.backward is not None
            op = op.backward
        model = float(op_time(op, device, efficiency)[0])
        out.append(GatedDeltaRow(r["device"], r.get("pr", "flashqla"), kh, vh, seqlens,
                                 to_si(float(r["fla_ms"]), Unit.MS), model, direction))
    return out


def compare_gated_delta(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                        path: Path = GDN_PREFILL_FILE) -> list[GatedDeltaRow]:
    """Each measured pass beside the roofline's time for the same forward scan."""
    return _compare(catalog, efficiency, path, "forward")


def compare_gated_delta_backward(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                                 path: Path = GDN_BACKWARD_FILE) -> list[GatedDeltaRow]:
    """Each measured backward pass beside the roofline's time for the same scan's backward."""
    return _compare(catalog, efficiency, path, "backward")


def wide_rows(rows: Iterable[GatedDeltaRow], device: str | None = None
              ) -> list[GatedDeltaRow]:
    """The rows with ``WIDE_LANES`` or more lanes (on ``device`` if given)."""
    return [r for r in rows if r.lanes >= WIDE_LANES and device in (None, r.device)]


def narrow_rows(rows: Iterable[GatedDeltaRow]) -> list[GatedDeltaRow]:
    """The rows with fewer than ``WIDE_LANES`` lanes."""
    return [r for r in rows if r.lanes < WIDE_LANES]


def summarize(rows: Sequence[GatedDeltaRow]) -> list[dict[str, object]]:
    """Per GPU and regime (wide, narrow): how many passes, the measured time per token and
    value head (median, ns), the median model/measured ratio and the mean |ln ratio|."""
    out: list[dict[str, object]] = []
    for direction, device in dict.fromkeys((r.direction, r.device) for r in rows):
        for regime, pick in (("wide", wide_rows), ("narrow", narrow_rows)):
            members = [r for r in pick(rows) if r.device == device and r.direction == direction]
            if not members:
                continue
            out.append({
                "direction": direction, "device": device, "regime": regime,
                "passes": len(members),
                "measured_ns_per_token_head": from_si(statistics.median(
                    r.measured_s / (r.tokens * r.value_heads) for r in members), Unit.NS),
                "median_ratio": statistics.median(r.ratio for r in members),
                "mean_abs_log_ratio": mean_abs_log_ratio(members)})
    return out


SCAN_GRID = [round(0.03 + 0.001 * i, 3) for i in range(171)]  # 0.030-0.200
BLACKWELL_GRID = [round(0.30 + 0.01 * i, 2) for i in range(71)]  # 0.30-1.00
STEP_GRID = [round(0.5e-6 + 0.05e-6 * i, 9) for i in range(71)]  # 0.5-4.0 us
BACKWARD_BLACKWELL_GRID = [round(0.10 + 0.01 * i, 2) for i in range(91)]  # 0.10-1.00

Compare = Callable[[Catalog, Efficiency], list[GatedDeltaRow]]


def _best(catalog: Catalog, base: Efficiency, name: str, grid: Sequence[float],
          pick: Callable[[list[GatedDeltaRow]], list[GatedDeltaRow]],
          compare: Compare) -> float:
    scores = [(mean_abs_log_ratio(pick(compare(catalog, base.with_overrides({name: v})))), v)
              for v in grid]
    return min(scores)[1]


def fit_gated_delta(catalog: Catalog, base: Efficiency = DEFAULT_EFFICIENCY
                    ) -> dict[str, float]:
    """The five parameters where the rows fit best (mean |ln(model/measured)| on grids), in
    turn: ``gated_delta_scan`` on H100's wide forward rows, ``gated_delta_blackwell`` on
    B300's wide forward rows at that rate, ``gated_delta_chunk_step_s`` on the narrow forward
    rows of both; then ``gated_delta_backward`` on H200's wide backward rows and
    ``gated_delta_backward_blackwell`` on GB200's at that rate."""
    fitted: dict[str, float] = {}
    forward: Compare = compare_gated_delta
    backward: Compare = compare_gated_delta_backward
    steps: tuple[tuple[str, Sequence[float], Callable[[list[GatedDeltaRow]],
                                                      list[GatedDeltaRow]], Compare], ...] = (
        ("gated_delta_scan", SCAN_GRID, lambda rows: wide_rows(rows, "h100-sxm-80gb"),
         forward),
        ("gated_delta_blackwell", BLACKWELL_GRID, lambda rows: wide_rows(rows, "b300"),
         forward),
        ("gated_delta_chunk_step_s", STEP_GRID, narrow_rows, forward),
        ("gated_delta_backward", SCAN_GRID, lambda rows: wide_rows(rows, "h200-sxm-141gb"),
         backward),
        ("gated_delta_backward_blackwell", BACKWARD_BLACKWELL_GRID,
         lambda rows: wide_rows(rows, "gb200"), backward))
    for name, grid, pick, compare in steps:
        fitted[name] = _best(catalog, base.with_overrides(fitted), name, grid, pick, compare)
    return fitted
