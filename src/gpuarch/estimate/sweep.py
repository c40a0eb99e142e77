"""One serving setup at several batch sizes: the output each GPU gives against the speed
each user sees, and which batches lie on the frontier of that trade-off.

A larger batch reads the weights once for more sequences, so each GPU gives more tokens a
second, while every decode step grows, so each user gets fewer. Serving benchmarks draw
that curve (throughput per GPU against tokens a second per user, one point per batch or
concurrency); the batches worth running are those no other batch beats on both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import DEFAULT_FACILITY, Facility
from gpuarch.estimate.inference import InferenceEstimate, estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["MAX_SWEEP_POINTS", "BatchSweep", "SweepPoint", "on_frontier", "sweep_batches",
           "sweep_values"]

MAX_SWEEP_POINTS = 64
"""The most batch sizes one sweep evaluates (a longer list is a usage error)."""


@dataclass(frozen=True)
class SweepPoint:
    """One batch of the sweep: what was asked (None: the largest that fits) and its
    estimate."""

    asked: int | None
    estimate: InferenceEstimate
    on_frontier: bool

    @property
    def in_flight(self) -> int:
        """Requests the replica holds: the batch asked, or the one that fits for 'max'
        (under continuous batching more than fit wait in a queue for a slot)."""
        return self.asked if self.asked is not None else self.estimate.batch

    def as_json(self) -> dict[str, Any]:
        doc = self.estimate.as_json()
        doc["batch_asked"] = "max" if self.asked is None else self.asked  # as --batch spells it
        doc["requests_in_flight"] = self.in_flight
        doc["on_frontier"] = self.on_frontier
        return doc


@dataclass(frozen=True)
class BatchSweep:
    """The sweep's points by requests in flight (each count once)."""

    points: tuple[SweepPoint, ...]
    input_len: int
    output_len: int

    @property
    def frontier(self) -> tuple[SweepPoint, ...]:
        return tuple(p for p in self.points if p.on_frontier)

    def as_json(self) -> dict[str, Any]:
        first = self.points[0].estimate
        return {"model": first.model, "gpu": first.gpu, "gpus": first.gpus,
                "input_len": self.input_len, "output_len": self.output_len,
                "batching": first.assumptions["batching"],
                "sweep": [p.as_json() for p in self.points],
                "frontier_batches": ["max" if p.asked is None else p.asked
                                     for p in self.frontier]}


def on_frontier(points: Sequence[tuple[float, float, float, bool]]) -> list[bool]:
    """For each (tokens/s per GPU, tokens/s per user, TTFT, fits) whether it lies on the
    frontier: it fits, and no other point that fits gives at least as much of both rates
    and more of one, or the same of both sooner (a lower TTFT, e.g. no queue)."""

    def beats(o: tuple[float, float, float, bool], p: tuple[float, float, float, bool]
              ) -> bool:
        if not o[3] or o[0] < p[0] or o[1] < p[1]:
            return False
        return o[0] > p[0] or o[1] > p[1] or o[2] < p[2]

    return [p[3] and not any(beats(o, p) for o in points if o is not p) for p in points]


def sweep_values(asked: Sequence[int | None], largest: int) -> list[int | None]:
    """The batches to evaluate: ``asked`` in order without repeats, where ``0`` stands for
    "sweep" (powers of two below ``largest``, the batch that fits, and then 'max')."""
    out: list[int | None] = []
    for value in asked:
        expanded: list[int | None] = [value]
        if value == 0:
            expanded = [1 << k for k in range(largest.bit_length()) if 1 << k < largest]
            expanded.append(None)
        for v in expanded:
            if v not in out:
                out.append(v)
    if len(out) > MAX_SWEEP_POINTS:
        raise GpuarchError(f"--batch: {len(out)} batch sizes; a sweep takes at most "
                           f"{MAX_SWEEP_POINTS}")
    return out


def sweep_batches(
    catalog: Catalog,
    shape: TransformerShape,
    product: Product,
    cfg: InferenceConfig,
    asked: Sequence[int | None],
    *,
    system: System | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    measured: dict[str, str] | None = None,
    formats_origin: str | None = None,
    price_per_gpu_hour: float | None = None,
    facility: Facility = DEFAULT_FACILITY,
) -> BatchSweep:
    """``cfg`` estimated at each batch of ``asked`` (a number, None for the largest that
    fits, 0 for powers of two up to it; ``sweep_values``), with the frontier marked."""
    if not asked:
        raise GpuarchError("--batch: no batch sizes to sweep")

    def at(batch: int | None) -> InferenceEstimate:
        return estimate_inference(catalog, shape, product, dataclasses.replace(cfg, batch=batch),
                                  system=system, efficiency=efficiency, measured=measured,
                                  formats_origin=formats_origin,
                                  price_per_gpu_hour=price_per_gpu_hour, facility=facility)

    largest = at(None)
    estimates: list[tuple[int | None, InferenceEstimate]] = []
    for v in sweep_values(asked, max(1, largest.max_batch)):
        e = largest if v is None else at(v)
        in_flight = v if v is not None else e.batch
        if all((u if u is not None else f.batch) != in_flight for u, f in estimates):
            estimates.append((v, e))  # 'max' and the number it comes to are one point
    estimates.sort(key=lambda ve: ve[0] if ve[0] is not None else ve[1].batch)
    flags = on_frontier([(e.output_tokens_per_s / e.gpus, e.output_tokens_per_s_per_user,
                          e.ttft_s, e.fits_in_memory) for _, e in estimates])
    return BatchSweep(tuple(SweepPoint(v, e, f) for (v, e), f in zip(estimates, flags,
                                                                          strict=True)),
                      cfg.input_len, cfg.output_len)
