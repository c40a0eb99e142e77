"""The advisor's top serving deployments replayed under random arrivals.

``advise infer`` ranks deployments by the steady state, whose TTFT and TPOT are means; a
service's promise is a percentile. ``simulate_options`` replays each ranked aggregated
deployment through the request-level simulation (``estimate.simulate``) at the search's
rate and reports the median and 99th percentile of its TTFT and TPOT beside the caps
and the share of requests that met every cap (``advise infer --simulate N``). Nothing is
re-ranked: the simulation checks the ranking's
latencies at the tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuarch.advise.infer import InferenceSearch, option_config
from gpuarch.advise.serving_options import InferenceOption
from gpuarch.catalog.loader import Catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.simulate import simulate_serving
from gpuarch.units import Unit, from_si, optional_to_si
from gpuarch.workloads.shape import TransformerShape

__all__ = ["SimulatedOption", "require_rate", "simulate_options"]


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
                     seed: int = 0, input_len_cv: float = 0.0
                     ) -> tuple[SimulatedOption, ...]:
    """Replay each of ``options`` (the advice's top, in rank order) at ``search.rate``
    with ``requests`` requests per replica (``estimate.simulate.simulate_serving``; errors
    name ``--simulate``, ``--seed`` and ``--input-len-cv``), prompts of the search's length
    or spread ``input_len_cv`` around it. A disaggregated deployment or a pipeline is not
    replayed (the simulation runs one aggregated replica without pipeline stages)."""
    rate = require_rate(search.rate)
    out = []
    for rank, option in enumerate(options, start=1):
        name = _deployment(option)
        if option.prefill is not None:
            out.append(SimulatedOption(rank, name, skipped="disaggregated: the simulation "
                                                           "runs one aggregated pool"))
            continue
        if option.pp > 1:
            out.append(SimulatedOption(rank, name, skipped="pipeline stages are not "
                                                           "simulated"))
            continue
        product = catalog.product(option.gpu)
        sim = simulate_serving(catalog, shape, product, option_config(search, option),
                               rate, requests=requests, seed=seed,
                               system=catalog.system_for(product), input_len_cv=input_len_cv,
                               ttft_slo_s=optional_to_si(search.ttft_ms, Unit.MS),
                               tpot_slo_s=optional_to_si(search.tpot_ms, Unit.MS))
        tpot = sim.tpot_s
        out.append(SimulatedOption(
            rank, name,
            ttft_p50_ms=from_si(sim.ttft_s.p50, Unit.MS),
            ttft_p99_ms=from_si(sim.ttft_s.p99, Unit.MS),
            tpot_p50_ms=None if tpot is None else from_si(tpot.p50, Unit.MS),
            tpot_p99_ms=None if tpot is None else from_si(tpot.p99, Unit.MS),
            mean_batch=sim.mean_batch,
            ttft_p99_within_cap=_within(from_si(sim.ttft_s.p99, Unit.MS), search.ttft_ms),
            tpot_p99_within_cap=None if tpot is None
            else _within(from_si(tpot.p99, Unit.MS), search.tpot_ms),
            attained=None if sim.slo is None else sim.slo["attained"]))
    return tuple(out)


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
