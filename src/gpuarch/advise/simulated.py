"""The advisor's top serving deployments replayed under random arrivals.

``advise infer`` ranks deployments by the steady state, whose TTFT and TPOT are means; a
service's promise is a percentile. ``simulate_options`` replays each ranked aggregated
deployment through the request-level simulation (``estimate.simulate``) at the search's
rate and reports the median and 99th percentile of its TTFT and TPOT beside the caps
and the share of requests that met every cap (``advise infer --simulate N``): nothing is
re-ranked, the simulation checks the ranking's latencies at the tail. With caps on the
99th percentiles (``--ttft-p99-ms``, ``--tpot-p99-ms``) the ranking itself is walked
(``tail_checked``): each deployment in order is replayed, and only those whose 99th
percentiles keep the caps are advised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuarch.advise.infer import InferenceSearch, option_config
from gpuarch.advise.serving_options import InferenceOption
from gpuarch.catalog.loader import Catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.simulate import Traffic, simulate_serving
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, from_si, optional_to_si
from gpuarch.workloads.shape import TransformerShape

__all__ = ["MAX_TAIL_REPLAYS", "SimulatedOption", "TailCheck", "replay_option",
           "request_caps_ms", "require_rate", "simulate_options", "tail_assumptions",
           "tail_checked"]


@dataclass(frozen=True)
class SimulatedOption:
    """One ranked deployment replayed at the search's rate: its rank among the top
    options, the median and 99th percentile of TTFT and TPOT (ms; TPOT None for one-token
    answers), the mean batch a decode step held, and whether the 99th percentiles keep the
    search's caps (None without a cap), and the share of requests that met every cap
    (``attained``; None without caps); or why it was not replayed (``skipped``)."""

    rank: int
    deployment: str
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p99_ms: float | None = None
    mean_batch: float | None = None
    ttft_p99_within_cap: bool | None = None
    tpot_p99_within_cap: bool | None = None
    attained: float | None = None
    skipped: str | None = None


def simulate_options(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                     options: tuple[InferenceOption, ...], *, requests: int,
                     seed: int = 0, input_len_cv: float = 0.0,
                     traffic: Traffic | None = None,
                     efficiency: Efficiency = DEFAULT_EFFICIENCY
                     ) -> tuple[SimulatedOption, ...]:
    """Replay each of ``options`` (the advice's top, in rank order) at ``search.rate``
    under ``traffic`` (default: ``requests`` requests per replica of a Poisson stream with
    ``seed``, prompts of the search's length or spread ``input_len_cv`` around it;
    ``estimate.simulate.simulate_serving``, whose errors name ``--simulate``, ``--seed``,
    ``--input-len-cv``, ``--arrivals`` and ``--lengths``). A disaggregated deployment or a
    pipeline is not replayed (the simulation runs one aggregated replica without pipeline
    stages)."""
    rate = require_rate(search.rate)
    traffic = traffic or Traffic(requests=requests, seed=seed, input_len_cv=input_len_cv)
    return tuple(replay_option(catalog, shape, search, option, rank, rate, traffic, efficiency)
                 for rank, option in enumerate(options, start=1))


def replay_option(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                  option: InferenceOption, rank: int, rate: float, traffic: Traffic,
                  efficiency: Efficiency = DEFAULT_EFFICIENCY) -> SimulatedOption:
    """One ranked deployment replayed at ``rate`` under ``traffic``; its 99th percentiles
    held against the percentile caps where given, else the mean caps, and each request
    against the same caps for the share within them."""
    name = _deployment(option)
    if option.prefill is not None:
        return SimulatedOption(rank, name, skipped="disaggregated: the simulation runs one "
                                                   "aggregated pool")
    if option.pp > 1:
        return SimulatedOption(rank, name, skipped="pipeline stages are not simulated")
    product = catalog.product(option.gpu)
    ttft_cap, tpot_cap = request_caps_ms(search)
    sim = simulate_serving(catalog, shape, product, option_config(search, option), rate,
                           system=catalog.system_for(product), efficiency=efficiency,
                           ttft_slo_s=optional_to_si(ttft_cap, Unit.MS),
                           tpot_slo_s=optional_to_si(tpot_cap, Unit.MS),
                           **traffic.simulate_kwargs())
    tpot = sim.tpot_s
    ttft_p99 = from_si(sim.ttft_s.p99, Unit.MS)
    tpot_p99 = None if tpot is None else from_si(tpot.p99, Unit.MS)
    return SimulatedOption(
        rank, name,
        ttft_p50_ms=from_si(sim.ttft_s.p50, Unit.MS), ttft_p99_ms=ttft_p99,
        tpot_p50_ms=None if tpot is None else from_si(tpot.p50, Unit.MS),
        tpot_p99_ms=tpot_p99, mean_batch=sim.mean_batch,
        ttft_p99_within_cap=_within(ttft_p99, ttft_cap),
        tpot_p99_within_cap=None if tpot_p99 is None else _within(tpot_p99, tpot_cap),
        attained=None if sim.slo is None else sim.slo["attained"])


def request_caps_ms(search: InferenceSearch) -> tuple[float | None, float | None]:
    """The caps a replayed request's TTFT and TPOT are held to (ms): the percentile caps
    where given, else the mean caps."""
    return (search.ttft_ms if search.ttft_p99_ms is None else search.ttft_p99_ms,
            search.tpot_ms if search.tpot_p99_ms is None else search.tpot_p99_ms)


MAX_TAIL_REPLAYS = 40
"""Deployments replayed at most, in rank order, to find ``top`` that keep the percentile
caps; the rest of the ranking is left unchecked (the advice says so)."""


@dataclass(frozen=True)
class TailCheck:
    """The ranking under percentile caps: the positions (in ``rows``) of the deployments
    that kept them, best first, with their replays; how many were replayed, how many each
    cap ruled out (the first missed: "ttft_p99", "tpot_p99"; "pipeline" for a deployment
    the simulation cannot replay), the lowest 99th percentiles seen (ms), and whether the
    replay limit stopped the walk before ``top`` were found."""

    kept: tuple[int, ...]
    replays: tuple[SimulatedOption, ...]
    replayed: int
    rejected: dict[str, int]
    lowest_p99_ms: dict[str, float]
    limit_reached: bool

    def describe(self, search: InferenceSearch) -> dict[str, Any]:
        return tail_assumptions(search, self.replayed, self.limit_reached)


def tail_assumptions(search: InferenceSearch, replayed: int = 0,
                     limit_reached: bool = False) -> dict[str, Any]:
    """The advice's ``assumptions.tail``: the percentile caps, the replays' requests, how
    many were replayed (none where the steady state ruled every deployment out)."""
    traffic = search.traffic or Traffic()
    return {"percentile": 99, "ttft_p99_ms": search.ttft_p99_ms,
            "tpot_p99_ms": search.tpot_p99_ms,
            "traffic": traffic.describe(require_rate(search.rate)),
            "replayed": replayed, "replay_limit": MAX_TAIL_REPLAYS,
            "limit_reached": limit_reached,
            "method": "the steady state's ranking walked in order; each deployment "
                      "replayed under random arrivals (estimate.simulate) and kept "
                      "where its 99th percentiles are within the caps"}


def tail_checked(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                 rows: list[InferenceOption], order: list[int], *,
                 efficiency: Efficiency = DEFAULT_EFFICIENCY) -> TailCheck:
    """Walk ``order`` (positions in ``rows``, best first), replaying each deployment at the
    search's rate under its traffic, until ``search.top`` keep the 99th-percentile caps
    or ``MAX_TAIL_REPLAYS`` have run."""
    rate = require_rate(search.rate)
    traffic = search.traffic or Traffic()
    kept: list[int] = []
    replays: list[SimulatedOption] = []
    missed: list[str] = []
    lowest = {"ttft_p99_ms": math.inf, "tpot_p99_ms": math.inf}
    replayed = 0
    for i in order:
        if len(kept) >= search.top or replayed >= MAX_TAIL_REPLAYS:
            break
        row = replay_option(catalog, shape, search, rows[i], len(kept) + 1, rate, traffic,
                            efficiency)
        if row.skipped:
            missed.append("pipeline")
            continue
        replayed += 1
        for key in lowest:
            value = getattr(row, key)
            if value is not None:
                lowest[key] = min(lowest[key], value)
        if search.ttft_p99_ms is not None and not row.ttft_p99_within_cap:
            missed.append("ttft_p99")
        elif search.tpot_p99_ms is not None and row.tpot_p99_within_cap is False:
            missed.append("tpot_p99")
        else:
            kept.append(i)
            replays.append(row)
    return TailCheck(tuple(kept), tuple(replays), replayed,
                     {name: missed.count(name) for name in dict.fromkeys(missed)},
                     {k: v for k, v in lowest.items() if math.isfinite(v)},
                     len(kept) < search.top and replayed >= MAX_TAIL_REPLAYS)


def require_rate(rate: float | None) -> float:
    """The search's arrival rate, which the replay needs (a search by concurrency has
    none)."""
    if rate is None:
        raise GpuarchError("--simulate: replays requests arriving at a rate; give --rate "
                           "(not --concurrency)")
    return rate


def _deployment(option: InferenceOption) -> str:
    """'4 x h100-sxm5-80gb, 2x TP2, Wfp8/KV fp8': the GPUs, the split of its replicas and
    the formats."""
    split = f"EP{option.ep}" if option.ep > 1 else f"TP{option.tp}"
    if option.pp > 1:
        split += f" PP{option.pp}"
    return f"{option.gpus} x {option.gpu}, {option.replicas}x {split}, {option.formats}"


def _within(value: float, cap: Any) -> bool | None:
    return None if cap is None else value <= cap
