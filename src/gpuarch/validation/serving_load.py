"""Serving under load against published latency percentiles: MLPerf Inference's Server runs.

A Server run offers requests as a Poisson stream at a scheduled rate and logs what they saw:
the mean and percentiles of the time to first token, of the time per output token and of
the whole request. ``data/serving-load.toml`` holds such runs with their setup (GPU, count,
tensor parallelism, formats, the engine's batch cap, the dataset's mean lengths); each is
replayed through the serving simulation (``estimate.simulate.simulate_serving``) at its
scheduled rate, its prompts drawn from the dataset's lengths (``PROMPTS_FILE``), and the
simulated figures are set beside the logged ones
(``gpuarch validate load``; tests/test_serving_load.py). Nothing is fitted to them. A file
of your own load tests in the same format (``gpuarch validate load --data FILE``) is
replayed the same way at each run's rate (``compare_user_runs``).
"""

from __future__ import annotations

import dataclasses
import statistics
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.estimate.inference_config import SCHEDULES
from gpuarch.estimate.simulate import Simulation, quantile_mean, simulate_serving
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.inference import (
    POINT_KEYS,
    compare_point,
    load_inference_points,
    point_config,
)
from gpuarch.validation.measured import select_runs
from gpuarch.validation.training import TrainingPoint, point_shape, point_system, read_points

__all__ = ["ARRIVALS", "LOADGEN_FIGURES", "LOADS", "LOAD_FILE", "LOAD_REQUESTS", "METRICS",
           "PROMPTS_FILE", "PROMPT_LENGTHS", "LoadComparison", "PromptLengths", "compare_run",
           "compare_user_runs", "load_prompt_lengths", "load_runs", "offline_ratio",
           "select_runs", "simulate_run", "summarize_load", "validate_load"]

LOAD_FILE = Path(__file__).with_name("data") / "serving-load.toml"

METRICS = {f"{figure.removesuffix('_s')}_{stat}_s": (figure, stat)
           for figure in ("ttft_s", "tpot_s", "latency_s")
           for stat in ("mean", "p50", "p90", "p99")}
"""The figures a run may carry (``ttft_mean_s``, ``tpot_p99_s``, ``latency_p50_s``, ...: the
mean or the 50th, 90th or 99th percentile of the time to first token, the time per output
token or the whole request) and the simulation's figure and statistic for each."""

LOADGEN_FIGURES = ("ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "latency_mean_s")
"""The figures every shipped MLPerf Server run carries (LoadGen's summary lines)."""

LOAD_REQUESTS = 20_000
"""Requests per replica each run is replayed with (the first tenth warm up): enough that a
run's 99th percentiles move by a few percent from seed to seed."""

RUN_KEYS = POINT_KEYS | frozenset({"rate_per_s", "input_len_cv", "arrivals", "offline",
                                    *METRICS})
"""Every key a run may carry; another is a typo the loader names. ``input_len_cv``: the
prompts vary in length around ``input_len`` (a gamma spread, as ``--input-len-cv``);
``arrivals``: how the requests were spaced (``ARRIVALS``)."""

ARRIVALS = ("poisson", "uniform")
"""How a run's requests arrived at its rate, and are replayed: a Poisson stream (the
default; MLPerf's Server scenario, vLLM's and SGLang's benchmarks at burstiness 1, AIPerf's
default) or evenly spaced (AIPerf's constant rate mode), as ``--arrivals`` simulates them. A
trace's own times are not a point's to hold."""

LOADS = ("scheduled", "measured")
"""The two rates a run is replayed at: its scheduled rate, and the load it had on the
measured engine (the scheduled rate times the model's Offline figure over the published
one for the same system, where the run names its Offline point: ``offline``)."""

PROMPTS_FILE = Path(__file__).with_name("data") / "mlperf-llama2-70b-prompts.toml"

PROMPT_LENGTHS = ("dataset", "mean")
"""What a replayed request's prompt is: drawn from the dataset's prompt lengths
(``PROMPTS_FILE``, as LoadGen draws a Server run's queries from it), or every one the
dataset's mean (the run's ``input_len``)."""


@dataclass(frozen=True)
class PromptLengths:
    """The benchmark dataset's prompt lengths as evenly spaced quantiles, with their
    source."""

    quantiles: tuple[float, ...]
    samples: int
    source: str  # title and address


@cache
def load_prompt_lengths(path: Path = PROMPTS_FILE) -> PromptLengths:
    """The dataset's prompt lengths (``PROMPTS_FILE``); a file without its source or with
    quantiles the simulation refuses is an error naming it."""
    with path.open("rb") as f:
        raw = tomllib.load(f)
    try:
        source = raw["source"]
        prompts = raw["prompts"]
        quantiles = tuple(float(q) for q in prompts["quantiles"])
        lengths = PromptLengths(quantiles, int(prompts["samples"]),
                                f"{source['title']} ({source['url']})")
    except (KeyError, TypeError, ValueError) as exc:
        raise GpuarchError(f"{path.name}: expected [source] title and url and [prompts] "
                           f"samples and quantiles ({exc})") from None
    mean = quantile_mean(quantiles)
    if abs(mean - float(prompts.get("mean", mean))) > 0.01 * mean:
        raise GpuarchError(f"{path.name}: the quantiles' mean, {mean:.2f}, is not the "
                           f"recorded mean {prompts.get('mean')}")
    return lengths


@dataclass(frozen=True)
class LoadComparison:
    """One logged figure of one run beside the simulation's."""

    id: str
    source: str
    gpu: str
    gpus: int
    rate_per_s: float  # the rate replayed
    load: str  # LOADS
    schedule: str
    metric: str
    published: float
    predicted: float
    mean_batch: float
    arrivals: str = ARRIVALS[0]  # how the replayed requests arrived (ARRIVALS)

    @property
    def error(self) -> float:
        """Predicted over published, minus 1."""
        return self.predicted / self.published - 1.0


@cache
def load_runs(path: Path = LOAD_FILE) -> tuple[TrainingPoint, ...]:
    """The published Server runs with their sources; a key no reader knows is an error
    naming it (with the nearest known key)."""
    return read_points(path, RUN_KEYS)


def offline_ratio(catalog: Catalog, run: TrainingPoint,
                  efficiency: Efficiency = DEFAULT_EFFICIENCY) -> float | None:
    """The model's Offline throughput over the published one for the run's system (its
    ``offline`` point in inference.toml), or None where the run names none."""
    name = run.get("offline")
    if not name:
        return None
    points = {p.id: p for p in load_inference_points()}
    if name not in points:
        raise GpuarchError(f"run {run.id}: offline: no inference point {name!r}")
    rows = [r for r in compare_point(catalog, points[name], efficiency)
            if r.metric == "output_tokens_per_s"]
    if len(rows) != 1:
        raise GpuarchError(f"run {run.id}: offline: {name!r} has no output_tokens_per_s")
    return rows[0].predicted / rows[0].published


def simulate_run(catalog: Catalog, run: TrainingPoint, *, requests: int = LOAD_REQUESTS,
                 schedule: str | None = None, seed: int = 0, rate_scale: float = 1.0,
                 prompts: str = PROMPT_LENGTHS[0],
                 efficiency: Efficiency = DEFAULT_EFFICIENCY) -> Simulation:
    """One run replayed at its scheduled rate times ``rate_scale`` on its schedule (or
    ``schedule``), its requests arriving as its ``arrivals`` say (``ARRIVALS``), its prompts
    as ``prompts`` says (``PROMPT_LENGTHS``)."""
    product = catalog.product(run.get("gpu"))
    system = point_system(catalog, run, product)
    cfg = point_config(run, system.gpus_per_node if system else 8, product)
    if schedule is not None:
        cfg = dataclasses.replace(cfg, schedule=schedule)
    return simulate_serving(catalog, point_shape(run), product, cfg,
                            float(run.get("rate_per_s")) * rate_scale, requests=requests,
                            seed=seed, arrivals=str(run.get("arrivals") or ARRIVALS[0]),
                            system=system, efficiency=efficiency,
                            input_len_cv=float(run.get("input_len_cv") or 0.0),
                            input_quantiles=load_prompt_lengths().quantiles
                            if prompts == "dataset" else None)


def compare_run(catalog: Catalog, run: TrainingPoint, *, requests: int = LOAD_REQUESTS,
                schedule: str | None = None, load: str = "scheduled",
                prompts: str = PROMPT_LENGTHS[0],
                efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[LoadComparison]:
    """Every logged figure of one run beside the simulation's at ``load`` (``LOADS``; none
    at the measured load where the run names no Offline point)."""
    scale = 1.0
    if load == "measured":
        ratio = offline_ratio(catalog, run, efficiency)
        if ratio is None:
            return []
        scale = ratio
    sim = simulate_run(catalog, run, requests=requests, schedule=schedule, rate_scale=scale,
                       prompts=prompts, efficiency=efficiency)
    rows = []
    for key, (figure, stat) in METRICS.items():
        published = run.get(key)
        percentiles = getattr(sim, figure)
        if published is None or percentiles is None:
            continue
        rows.append(LoadComparison(run.id, run.source, str(run.get("gpu")),
                                   int(run.get("gpus")), sim.rate_per_s, load, sim.schedule,
                                   key,
                                   float(published), float(getattr(percentiles, stat)),
                                   sim.mean_batch, sim.arrivals))
    if not rows:
        raise GpuarchError(f"run {run.id}: no logged figure to compare")
    return rows


def compare_user_runs(catalog: Catalog, runs: Sequence[TrainingPoint], file_name: str, *,
                      requests: int = LOAD_REQUESTS, schedule: str | None = None,
                      efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[LoadComparison]:
    """Every figure of a user's measured runs (``user_data.load_user_points(path, "load")``)
    beside the simulation's at the run's own rate, each prompt the run's ``input_len`` (or
    spread around it by its ``input_len_cv``). A run the simulation cannot replay is an
    error naming the file and the run: a user asked about every run of the file."""
    rows = []
    for run in runs:
        try:
            rows += compare_run(catalog, run, requests=requests, schedule=schedule,
                                prompts="mean", efficiency=efficiency)
        except GpuarchError as exc:
            raise GpuarchError(f"{file_name}: point {run.id!r}: "
                               f"{str(exc).removeprefix(f'run {run.id}: ')}") from None
    return rows


def validate_load(catalog: Catalog, *, requests: int = LOAD_REQUESTS,
                  schedule: str | None = None, prompts: str = PROMPT_LENGTHS[0],
                  runs: Sequence[TrainingPoint] | None = None,
                  efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[LoadComparison]:
    """Every run's figures (``runs``, default every shipped one; ``select_runs`` picks some)
    beside the simulation's, at both loads (``LOADS``), the prompts as ``prompts`` says
    (``PROMPT_LENGTHS``)."""
    if schedule is not None and schedule not in SCHEDULES:
        raise GpuarchError(f"--schedule: expected one of {', '.join(SCHEDULES)}, "
                           f"got {schedule!r}")
    check_choice("--prompts", prompts, PROMPT_LENGTHS)
    return [row for load in LOADS for run in (load_runs() if runs is None else runs)
            for row in compare_run(catalog, run, requests=requests, schedule=schedule,
                                   load=load, prompts=prompts, efficiency=efficiency)]


def summarize_load(rows: Sequence[LoadComparison]) -> dict[str, Any]:
    """Per load and metric: how many figures, the mean signed and the median absolute error
    and how many within 25% (a run past the model's capacity has a first token minutes
    late, so means are for reading beside the medians)."""
    out: dict[str, Any] = {}
    for load in LOADS:
        per: dict[str, Any] = {}
        for key in METRICS:
            errors = [r.error for r in rows if r.metric == key and r.load == load]
            if errors:
                per[key] = {"figures": len(errors), "mean_error": sum(errors) / len(errors),
                            "median_abs_error": statistics.median(map(abs, errors)),
                            "within_25_percent": sum(abs(e) <= 0.25 for e in errors)}
        out[load] = per
    return out
