"""The prefill pools a disaggregated deployment can pair with a decode pool, and how many
prefill replicas carry a load within a time-to-first-token cap.

A pool's replica is ``tp`` x ``ep`` GPUs of the decode pool's GPU type and formats (the
pools of one deployment run the same checkpoint). Its curve is the time of a prefill pass
of 1, 2, ... prompts, up to what ``max_num_tokens`` and memory allow, from the estimate's
own operators (``evaluate_inference``), as ``estimate.disagg`` computes it for one
deployment; the sizing takes the same pass size and M/D/1 wait (``best_pass``) and the same
KV-cache hand-off (``kv_transfer``), so an option the advisor lists is the estimate's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.disagg import best_pass, prefill_pool_config
from gpuarch.estimate.inference import pass_times
from gpuarch.estimate.inference_config import MAX_PREFILL_LOAD, InferenceConfig
from gpuarch.estimate.inference_memory import max_batch_that_fits, memory_parts
from gpuarch.perf.efficiency import Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["PrefillCurve", "PrefillSizing", "prefill_curves", "size_prefill"]


@dataclass(frozen=True)
class PrefillCurve:
    """One prefill replica's passes: ``pass_s[i]`` seconds for ``sizes[i]`` prompts."""

    tp: int
    ep: int
    sizes: tuple[int, ...]
    pass_s: tuple[float, ...]
    memory_bytes: tuple[float, ...]  # per GPU, at each pass size

    @property
    def unit(self) -> int:
        """GPUs of one replica."""
        return max(self.tp, self.ep)

    @property
    def capacity(self) -> float:
        """Prompts per second one replica prefills at most."""
        return max(k / t for k, t in zip(self.sizes, self.pass_s, strict=True))


@dataclass(frozen=True)
class PrefillSizing:
    """The prefill replicas for a load, and the first token's time through them."""

    replicas: int
    ttft_s: float  # the pass, the wait for the one in progress, the KV hand-off
    busy: float  # utilization of a replica
    prompts_per_pass: int
    kv_transfer_s: float
    kv_link: str
    memory_bytes: float  # per GPU


def prefill_curves(catalog: Catalog, shape: TransformerShape, product: Product,
                   decode: InferenceConfig, splits: list[tuple[int, int]],
                   system: System | None, efficiency: Efficiency) -> list[PrefillCurve]:
    """A curve for each (TP, EP) split in ``splits`` that is valid for the model and holds
    its weights, in ``decode``'s formats and engine settings."""
    per_pass = decode.prompts_per_pass
    out = []
    for tp, ep in splits:
        cfg = prefill_pool_config(decode, gpus=max(tp, ep), tp=tp, ep=ep)
        try:
            cfg.validate(shape)
        except GpuarchError:
            continue
        held = max_batch_that_fits(shape, cfg, product)
        if held < 1:
            continue
        try:
            # a pass of k whole prompts (k up to what a pass takes and the replica holds),
            # as the aggregated model prices it
            seconds = np.asarray(pass_times(catalog, shape, product, cfg, system=system,
                                            efficiency=efficiency).prefill_s, dtype=float)
        except GpuarchError:
            continue
        sizes = np.arange(1, min(per_pass, held, seconds.size) + 1)
        seconds = seconds[:sizes.size]
        # what a replica holds for a pass of k prompts (their KV cache and activations)
        memory = np.zeros(sizes.shape)
        for part in memory_parts(shape, cfg, sizes, product).values():
            memory = memory + np.asarray(part, dtype=float)
        out.append(PrefillCurve(tp, ep, tuple(int(k) for k in sizes),
                                tuple(float(t) for t in seconds),
                                tuple(float(m) for m in memory)))
    return out


def size_prefill(curve: PrefillCurve, load: float, *, max_replicas: int,
                 ttft_cap_s: float | None,
                 transfer: Callable[[int], tuple[float, str] | None]) -> PrefillSizing | None:
    """The fewest replicas of ``curve`` that carry ``load`` prompts per second at most 95%
    busy (``MAX_PREFILL_LOAD``, as the aggregated prefill) and bring the first token within
    ``ttft_cap_s``; ``transfer(replicas)`` gives the KV hand-off's seconds and link for that
    pool size (None: the pools cannot reach each other). None when no count up to
    ``max_replicas`` does."""
    if load <= 0:
        return None
    first = max(1, math.ceil(load / (MAX_PREFILL_LOAD * curve.capacity) - 1e-12))
    if ttft_cap_s is not None and curve.pass_s[0] > ttft_cap_s:
        return None  # not even one prompt alone on an idle replica is fast enough
    for replicas in range(first, max_replicas + 1):
        chosen = best_pass(load / replicas, curve.sizes, curve.pass_s)
        moved = transfer(replicas)
        if chosen is None or moved is None:
            continue
        i, busy, wait = chosen
        seconds, link = moved
        ttft = curve.pass_s[i] + wait + seconds
        if ttft_cap_s is None or ttft <= ttft_cap_s:
            return PrefillSizing(replicas, ttft, busy, curve.sizes[i], seconds, link,
                                 curve.memory_bytes[i])
    return None
