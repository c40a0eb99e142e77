"""Serving at an arrival rate: the batch a steady stream of requests settles at.

With continuous batching, requests arriving at ``rate`` per second spread over the replicas
and each replica holds as many in flight as it needs to complete them as fast as they
arrive. The model's request throughput at ``b`` sequences in flight is ``b`` over the
request latency at ``b`` (Little's law); it rises with ``b`` until memory or the engine's
cap stops it. The load settles at the smallest batch whose throughput carries the rate: the
estimate at that batch is what each request sees. A rate beyond the largest batch's
throughput has no steady state (the queue grows without bound) and is refused, with the
rate that the deployment can carry.

This is the deterministic (fluid) view: arrivals are taken as evenly spread. Bursts of a
Poisson stream queue further at the prefill (the estimate's M/D/1 wait covers the prefill
pass in progress, not a burst of new arrivals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import evaluate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.inference_memory import engine_slots
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["Load", "batch_for_rate", "check_rate", "stream_config"]


@dataclass(frozen=True)
class Load:
    """Where a request rate settles: per replica, and against the deployment's capacity."""

    rate_per_s: float  # requests per second offered to the whole deployment
    batch: int  # sequences in flight per replica at the steady state (the estimate's batch)
    in_flight_per_replica: float  # mean requests in flight (rate x latency / replicas)
    capacity_per_s: float  # requests per second at the largest batch, all replicas
    utilization: float  # rate over capacity

    def as_json(self) -> dict[str, float | int]:
        return {"rate_per_s": self.rate_per_s, "batch": self.batch,
                "in_flight_per_replica": self.in_flight_per_replica,
                "capacity_per_s": self.capacity_per_s, "utilization": self.utilization}


def check_rate(rate: object) -> None:
    """Refuse a request rate that is not a positive finite number, naming ``--rate``."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) \
            or not (rate > 0 and math.isfinite(rate)):
        raise GpuarchError(f"--rate: expected a positive number of requests per second, "
                           f"got {rate!r}")


def stream_config(cfg: InferenceConfig) -> InferenceConfig:
    """``cfg`` serving a stream of requests: continuous batching at whatever batch the load
    settles at (no fixed batch, no offline run)."""
    return replace(cfg, batch=None, batching=Batching.CONTINUOUS, num_requests=0,
                   max_output_len=0)


def batch_for_rate(catalog: Catalog, shape: TransformerShape, product: Product,
                   cfg: InferenceConfig, rate: float, *, system: System | None = None,
                   efficiency: Efficiency = DEFAULT_EFFICIENCY) -> Load:
    """The steady state of ``rate`` requests per second on ``cfg``'s deployment (continuous
    batching; ``cfg.batch`` is ignored). Raises :class:`GpuarchError` naming ``--rate``
    when nothing fits or the rate exceeds the deployment's capacity."""
    check_rate(rate)
    cfg = stream_config(cfg)
    cfg.validate(shape)
    limit = engine_slots(shape, cfg, product)
    if limit < 1:
        raise GpuarchError(f"--rate: {shape.name} does not fit on {product.name} with these "
                           "formats and parallelism (not even one sequence)")
    batches = np.arange(1, limit + 1)
    core = evaluate_inference(catalog, shape, product, cfg, batches, system=system,
                              efficiency=efficiency)
    per_replica = np.asarray(core.per_replica, dtype=float) / cfg.output_len  # requests/s
    capacity = float(per_replica.max()) * cfg.replicas
    enough = np.nonzero(per_replica * cfg.replicas >= rate)[0]
    if enough.size == 0:
        best = int(batches[int(per_replica.argmax())])
        needed = math.ceil(rate / capacity * cfg.replicas)
        raise GpuarchError(
            f"--rate: {rate:g} requests/s is more than {cfg.replicas} replica(s) can serve: "
            f"at most {capacity:.3g} requests/s (batch {best} per replica at "
            f"{cfg.input_len}+{cfg.output_len} tokens); about {needed} replicas would carry "
            "it (more --gpus, or 'gpuarch advise infer --rate')")
    i = int(enough[0])
    latency = float(np.asarray(core.latency, dtype=float)[i])
    return Load(rate_per_s=rate, batch=int(batches[i]),
                in_flight_per_replica=rate / cfg.replicas * latency,
                capacity_per_s=capacity, utilization=rate / capacity)
