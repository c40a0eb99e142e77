"""Disaggregated deployments in the serving search: for a decode pool at one batch, the
prefill pools (``prefill_pools``, on the decode GPU's type or another) and the fewest
prefill replicas that carry the load within the TTFT cap, as an option
(``disaggregated_option``). The numbers are ``estimate.disagg``'s for the same pools and
load."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gpuarch.advise.prefill_pools import PrefillCurve, PrefillSizing, prefill_curves, size_prefill
from gpuarch.advise.prices import PriceBook
from gpuarch.advise.serving_options import (
    CHECKPOINT_SCHEME,
    Candidate,
    InferenceOption,
    Point,
    PrefillPlan,
    deployment,
    native,
)
from gpuarch.advise.train import Objective
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.disagg import PrefillPool, kv_transfer
from gpuarch.estimate.energy import seconds_per_token_at_peak
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.quant import gemm_peak
from gpuarch.units import Unit, from_si, to_si
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

if TYPE_CHECKING:
    from gpuarch.advise.infer import InferenceSearch

__all__ = ["DecodeUnit", "PoolSet", "disaggregated_option", "prefill_pools"]

@dataclass
class PoolSet:
    """The prefill pools of one GPU and format, and the KV hand-offs (by prefill GPUs, TP
    and decode GPUs) and sizings (by pool, load, GPUs left, decode GPUs) worked out so far."""

    where: Candidate  # the prefill GPU, its price and formats
    curves: list[PrefillCurve]
    transfers: dict[tuple[int, int, int], tuple[float, str] | None] = field(
        default_factory=dict)
    sizings: dict[tuple[int, float, int, int], PrefillSizing | None] = field(
        default_factory=dict)


def prefill_pools(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                   cfg: InferenceConfig, where: Candidate, product: Product,
                   system: System | None, prices: PriceBook,
                   efficiency: Efficiency) -> PoolSet:
    """The prefill pools on ``product`` for decode pools searched at ``where`` (its formats):
    TP 1-8 within ``product``'s node, and EP 2-8 for an MoE model. None (no curves) where the
    GPU lacks the formats natively or, ranking by cost, has no price."""
    if product.key == where.product.key:
        pool_where = where
    else:
        price = prices.price(product.key)
        if (where.label != CHECKPOINT_SCHEME and not native(product, where.scheme)) or (
                price is None and search.objective is Objective.COST):
            return PoolSet(where, [])
        per_token = seconds_per_token_at_peak(count_params(shape).active(shape),
                                              gemm_peak(product, where.scheme).peak.flops)
        pool_where = replace(where, product=product, system=system, price=price,
                             seconds_per_token_at_peak=per_token)
    gpn = system.gpus_per_node if system else 8
    splits = [(tp, 1) for tp in (1, 2, 4, 8)
              if tp <= gpn and tp <= search.max_gpus and shape.splits_heads(tp)]
    splits += [(1, ep) for ep in (2, 4, 8) if shape.is_moe and ep <= gpn
               and ep <= search.max_gpus and shape.experts % ep == 0]
    curves = prefill_curves(catalog, shape, product, replace(cfg, gpus_per_node=gpn), splits,
                            system, efficiency)
    return PoolSet(pool_where, curves)


@dataclass(frozen=True)
class DecodeUnit:
    """A decode pool's unit at one batch: its split, sequences per attention replica, the
    attention replicas in it, and its decode step alone (no prefills between steps)."""

    split: tuple[int, int, int]
    batch: int
    width: int
    step_s: float
    point: Point  # the aggregated estimate at this batch (memory, decode limiter)

    @property
    def gpus(self) -> int:
        tp, pp, ep = self.split
        return max(tp * pp, ep)


def disaggregated_option(catalog: Catalog, shape: TransformerShape, where: Candidate,
                   search: InferenceSearch, cfg: InferenceConfig, decode: DecodeUnit,
                   pools: PoolSet, n_curve: int,
                   efficiency: Efficiency) -> InferenceOption | None:
    """The disaggregated deployment of ``decode`` units fed by replicas of the prefill pool
    ``pools.curves[n_curve]``: as many decode units as the load needs (one, flat out,
    without a load), and the fewest prefill replicas that carry its prompts within the TTFT
    cap (``size_prefill``); None when none do or a constraint fails. The numbers are
    ``estimate_disaggregated``'s for the same pools and load."""
    curve = pools.curves[n_curve]
    other = pools.where.product.key != where.product.key  # prefill on another GPU type
    out = search.output_len
    per_unit = decode.width * decode.batch / ((out - 1) * decode.step_s)  # requests/s
    if search.rate is not None:
        units = max(1, math.ceil(search.rate / per_unit - 1e-9))
        load = search.rate
    elif search.concurrency is not None:
        units = max(1, math.ceil(search.concurrency / (decode.width * decode.batch)))
        # the prompts' rate if the first token came at once: an upper bound on the load,
        # so the prefill pool is sized (and its TTFT taken) on the safe side
        load = min(units * per_unit, search.concurrency / ((out - 1) * decode.step_s))
    else:
        units, load = 1, per_unit
    decode_gpus = units * decode.gpus
    room = (search.max_gpus - decode_gpus) // curve.unit
    if room < 1:
        return None

    def transfer(replicas: int) -> tuple[float, str] | None:
        key = (replicas * curve.unit, curve.tp, decode_gpus)
        transfers = pools.transfers
        if key not in transfers:
            try:
                seconds, _, link = kv_transfer(
                    catalog, shape, where.product, replace(cfg, gpus=decode_gpus),
                    PrefillPool(replicas * curve.unit, curve.tp, curve.ep,
                                product=pools.where.product if other else None,
                                system=pools.where.system if other else None),
                    where.system, efficiency)
                transfers[key] = (seconds, link)
            except GpuarchError:
                transfers[key] = None  # across nodes without a network
        return transfers[key]

    cap = to_si(search.ttft_ms, Unit.MS) if search.ttft_ms is not None else None
    key = (n_curve, load, room, decode_gpus)  # under a rate, the same for every batch
    if key not in pools.sizings:
        pools.sizings[key] = size_prefill(curve, load, max_replicas=room, ttft_cap_s=cap,
                                          transfer=transfer)
    sized = pools.sizings[key]
    if sized is None:
        return None
    latency = sized.ttft_s + (out - 1) * decode.step_s
    if search.concurrency is not None:
        load = min(load, search.concurrency / latency)  # Little's law
    est = replace(decode.point, ttft_s=sized.ttft_s, tpot_s=decode.step_s, latency_s=latency,
                  memory_bytes=max(decode.point.memory_bytes, sized.memory_bytes))
    plan = PrefillPlan(gpus=sized.replicas * curve.unit, replicas=sized.replicas,
                       tp=curve.tp, ep=curve.ep, busy=sized.busy,
                       prompts_per_pass=sized.prompts_per_pass,
                       kv_transfer_ms=from_si(sized.kv_transfer_s, Unit.MS),
                       kv_link=sized.kv_link,
                       gpu=pools.where.product.key if other else "",
                       gpu_name=pools.where.product.name if other else "",
                       usd_per_gpu_hour=pools.where.price if other else None)
    return deployment(where, search, decode.split, decode.batch, est,
                       decode_gpus + plan.gpus, units, load * out, plan, pools.where)
