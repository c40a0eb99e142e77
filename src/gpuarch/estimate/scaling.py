"""One training layout at several GPU counts: how the step, the throughput per GPU and the
time to train change as data parallelism grows with the global batch held (strong
scaling).

Each count keeps TP, PP, CP and EP and the global batch; more GPUs give more data-parallel
ranks, each running fewer micro-batches a step, so the pipeline bubble's share, the exposed
gradient traffic and the network the ranks span decide how much of the added GPUs turns
into speed. A count the layout cannot take (the batch does not divide, the ranks do not
divide the GPUs) is listed with the reason instead of stopping the others.
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
from gpuarch.estimate.reliability import CheckpointPlan
from gpuarch.estimate.training import TrainingEstimate, estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["MAX_SCALING_POINTS", "GpuScaling", "ScalingPoint", "scale_gpus"]

MAX_SCALING_POINTS = 32
"""The most GPU counts one scaling table evaluates (a longer list is a usage error)."""


@dataclass(frozen=True)
class ScalingPoint:
    """One GPU count: its estimate, or why the layout cannot run on that many."""

    gpus: int
    estimate: TrainingEstimate | None
    error: str | None = None


@dataclass(frozen=True)
class GpuScaling:
    """The counts in ascending order; ``efficiency`` relates each to the smallest that ran."""

    points: tuple[ScalingPoint, ...]
    global_batch: int

    @property
    def base_point(self) -> ScalingPoint:
        """The smallest count that ran."""
        return next(p for p in self.points if p.estimate is not None)

    @property
    def base(self) -> TrainingEstimate:
        """The estimate at the smallest count that ran."""
        est = self.base_point.estimate
        assert est is not None
        return est

    def efficiency(self, point: ScalingPoint) -> float | None:
        """Tokens/s per GPU at this count over that at the smallest count that ran: 1 is
        perfect scaling, 0.8 means a fifth of the added GPUs' time is lost."""
        if point.estimate is None:
            return None
        return point.estimate.tokens_per_s_per_gpu / self.base.tokens_per_s_per_gpu

    def as_json(self) -> dict[str, Any]:
        base = self.base
        rows = []
        for p in self.points:
            if p.estimate is None:
                rows.append({"gpus": p.gpus, "error": p.error})
                continue
            doc = p.estimate.as_json()
            doc["gpus"] = p.gpus
            doc["scaling_efficiency"] = self.efficiency(p)
            rows.append(doc)
        return {"model": base.model, "gpu": base.gpu, "global_batch": self.global_batch,
                "scaling": rows}


def scale_gpus(
    catalog: Catalog,
    shape: TransformerShape,
    product: Product,
    cfg: TrainingConfig,
    counts: Sequence[int],
    *,
    system: System | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    tokens: float | None = None,
    price_per_gpu_hour: float | None = None,
    measured: dict[str, str] | None = None,
    checkpointing: CheckpointPlan | None = None,
    facility: Facility = DEFAULT_FACILITY,
) -> GpuScaling:
    """``cfg`` estimated at each GPU count of ``counts`` (the layout and global batch kept,
    data parallelism taking up the rest); counts the layout cannot take carry the error.
    Raises the first count's error when none can run."""
    ordered = sorted(set(counts))
    if not ordered:
        raise GpuarchError("--gpus: no GPU counts to scale over")
    if len(ordered) > MAX_SCALING_POINTS:
        raise GpuarchError(f"--gpus: {len(ordered)} GPU counts; a scaling table takes at "
                           f"most {MAX_SCALING_POINTS}")
    if system is None and ordered[-1] > cfg.gpus_per_node:
        system = catalog.system_for(product)  # its network, past one node
    points = []
    for n in ordered:
        try:
            est = estimate_training(catalog, shape, product, dataclasses.replace(cfg, gpus=n),
                                    system=system, efficiency=efficiency, tokens=tokens,
                                    price_per_gpu_hour=price_per_gpu_hour, measured=measured,
                                    checkpointing=checkpointing, facility=facility)
        except GpuarchError as exc:
            points.append(ScalingPoint(n, None, str(exc)))
            continue
        points.append(ScalingPoint(n, est))
    if all(p.estimate is None for p in points):
        raise GpuarchError(f"--gpus: no count can run this layout; at {points[0].gpus}: "
                           f"{points[0].error}")
    return GpuScaling(tuple(points), cfg.global_batch)
