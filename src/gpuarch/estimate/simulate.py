"""Serving under random arrivals: a request-level simulation of continuous batching.

The steady state (``estimate.load``) takes requests as evenly spread and gives one TTFT and
one TPOT. Real traffic comes in bursts, and what a service promises is a percentile: this
module replays requests arriving at random through one replica's engine, pass by pass,
and reports the distribution of what each request sees.

The engine follows the estimate's own schedule for continuous batching, so the two can be
compared: between decode steps, waiting prompts (first come, first served) are prefilled
in passes of up to ``max_num_tokens`` prompt tokens while a slot is free (the batch that
fits in memory, or the engine's ``max_batch_size``); otherwise every running sequence
decodes one step (with speculative decoding, the acceptance length in tokens). A prefill
pass of n prompts and a decode step of b sequences take what the estimate charges for them
(``inference.pass_times``; the decode step at the estimate's mean decode context). Requests
are spread over the replicas at random, which leaves each replica a Poisson stream at its
share of the rate; each replica is simulated alone. A request's first token comes at the
end of its prefill pass, its TPOT is the time from then to its last token over the tokens
after the first. The first tenth of the requests (in arrival order) warm the engine up and
are left out of the statistics.

Not modelled: requests preempted or swapped out when the KV cache runs short (the batch is
capped at what fits with every sequence at its full length, so none is), a long prompt's
chunks spread over iterations, and a pipeline's micro-batches (PP 1 only). ``SCHEDULES``
also offers prompts prefilled in the decode step's iteration (``mixed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.estimate.inference import (
    SCHEDULES,
    InferenceConfig,
    PassTimes,
    pass_times,
)
from gpuarch.estimate.load import check_rate, stream_config
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["ARRIVALS", "DEFAULT_REQUESTS", "MAX_REQUESTS", "SCHEDULES", "Percentiles",
           "Simulation", "replay", "simulate_serving"]

ARRIVALS = ("poisson", "uniform")
"""How requests arrive: a Poisson stream (exponential gaps), or evenly spaced (the steady
state's fluid view, against which the simulation can be checked)."""
DEFAULT_REQUESTS = 2_000
MAX_REQUESTS = 200_000
WARMUP_SHARE = 0.1
"""Share of the requests, the first to arrive, left out of the statistics."""


@dataclass(frozen=True)
class Percentiles:
    """The mean and the 50th, 90th and 99th percentiles of one figure over the requests."""

    mean: float
    p50: float
    p90: float
    p99: float

    @staticmethod
    def of(values: np.ndarray) -> Percentiles | None:
        """Over the finite values; None when there are none."""
        v = values[np.isfinite(values)]
        if not v.size:
            return None
        p50, p90, p99 = (float(x) for x in np.percentile(v, [50, 90, 99]))
        return Percentiles(float(v.mean()), p50, p90, p99)

    def as_json(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True)
class Replay:
    """One replica's simulated requests, one value per request in arrival order (seconds
    from the start): arrival, admission into a prefill pass, first token, last token, and
    output tokens; with the decode steps run and the sequences they held in all."""

    arrival: np.ndarray
    admitted: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    output: np.ndarray
    decode_steps: int
    decoded_sequences: int


def replay(times: PassTimes, rate_per_s: float, output: np.ndarray, *,
           arrivals: str = "poisson", seed: int = 0, schedule: str = "separate") -> Replay:
    """Run ``len(output)`` requests (each generating ``output[i]`` tokens) arriving at
    ``rate_per_s`` through one replica whose passes take ``times``, on ``schedule``
    (``inference.SCHEDULES``)."""
    n = len(output)
    rng = np.random.default_rng(seed)
    gaps = (rng.exponential(1.0 / rate_per_s, n) if arrivals == "poisson"
            else np.full(n, 1.0 / rate_per_s))
    arrival = np.cumsum(gaps)
    admitted, first, finish = (np.full(n, np.nan) for _ in range(3))
    per_step, slots, per_pass = times.tokens_per_step, times.max_batch, times.prompts_per_pass
    running = np.empty(0, dtype=np.int64)  # requests decoding, and the tokens each has left
    left = np.empty(0)
    t = 0.0
    arrived = queued = done = 0  # requests arrived by t; admitted; finished
    steps = held = 0
    while done < n:
        while arrived < n and arrival[arrived] <= t:
            arrived += 1
        free = slots - len(running)
        if arrived > queued and free > 0:
            # a prefill pass of the longest-waiting prompts
            take = min(arrived - queued, free, per_pass)
            new = np.arange(queued, queued + take)
            queued += take
            admitted[new] = t
            t += float(times.prefill_s[take - 1])
            if schedule == "mixed" and len(running):
                # the running sequences decode a step in the same iteration
                b = len(running)
                t += float(times.decode_s[b - 1])
                steps += 1
                held += b
                left = left - per_step
                ended = left <= 1e-9
                if ended.any():
                    finish[running[ended]] = t
                    done += int(np.count_nonzero(ended))
                    running, left = running[~ended], left[~ended]
            first[new] = t
            rest = output[new] - 1.0
            ended = rest <= 0
            finish[new[ended]] = t
            done += int(np.count_nonzero(ended))
            running = np.concatenate([running, new[~ended]])
            left = np.concatenate([left, rest[~ended]])
            continue
        if not len(running):
            t = max(t, float(arrival[arrived]))  # idle until the next request
            continue
        b = len(running)
        dt = float(times.decode_s[b - 1])
        # run the steps up to the next thing that changes the batch: a sequence's last
        # token, or (with a slot free) the first step boundary after the next arrival
        k = max(1, math.ceil(float(left.min()) / per_step - 1e-9))
        if free > 0 and arrived < n:
            k = min(k, max(1, math.ceil((float(arrival[arrived]) - t) / dt)))
        t += k * dt
        steps += k
        held += k * b
        left = left - k * per_step
        ended = left <= 1e-9
        if ended.any():
            finish[running[ended]] = t
            done += int(np.count_nonzero(ended))
            running, left = running[~ended], left[~ended]
    return Replay(arrival, admitted, first, finish, output.astype(float), steps, held)


@dataclass(frozen=True)
class Simulation:
    """What requests arriving at random saw on the deployment (one replica simulated at its
    share of the rate; the statistics after the warm-up)."""

    rate_per_s: float  # requests per second offered to the whole deployment
    arrivals: str
    schedule: str
    requests: int  # simulated per replica
    measured: int  # of them, counted in the statistics (after the warm-up)
    seed: int
    ttft_s: Percentiles
    tpot_s: Percentiles | None  # None when every answer is one token
    latency_s: Percentiles
    queue_s: Percentiles  # arrival to admission into a prefill pass
    mean_batch: float  # sequences a decode step held, on average over the steps
    max_batch: int  # the slots: what fits, or the engine's cap
    output_tokens_per_s: float  # the whole deployment, over the run

    def as_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "arrivals": self.arrivals,
                "schedule": self.schedule,
                "requests_per_replica": self.requests, "measured": self.measured,
                "seed": self.seed, "ttft_s": self.ttft_s.as_json(),
                "tpot_s": self.tpot_s.as_json() if self.tpot_s else None,
                "latency_s": self.latency_s.as_json(), "queue_s": self.queue_s.as_json(),
                "mean_batch": self.mean_batch, "max_batch": self.max_batch,
                "output_tokens_per_s": self.output_tokens_per_s}


def _outputs(cfg: InferenceConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """Each request's output tokens: ``output_len``, or with ``output_len_cv`` a gamma
    draw of that mean and spread (at least one token)."""
    if not cfg.output_len_cv:
        return np.full(n, float(cfg.output_len))
    k = 1.0 / cfg.output_len_cv ** 2
    return np.maximum(1.0, np.round(rng.gamma(k, cfg.output_len / k, n)))


def simulate_serving(catalog: Catalog, shape: TransformerShape, product: Product,
                     cfg: InferenceConfig, rate: float, *, requests: int = DEFAULT_REQUESTS,
                     seed: int = 0, arrivals: str = "poisson", schedule: str | None = None,
                     system: System | None = None,
                     efficiency: Efficiency = DEFAULT_EFFICIENCY) -> Simulation:
    """Simulate ``requests`` requests per replica arriving at ``rate`` per second at the
    whole deployment (continuous batching; ``cfg.batch`` is ignored) on ``schedule``
    (default: ``cfg.schedule``). Errors name the
    flag: ``--simulate`` for the request count and unsupported deployments, ``--seed``,
    ``--arrivals``, ``--schedule``, ``--rate``."""
    if isinstance(requests, bool) or not isinstance(requests, int) \
            or not 10 <= requests <= MAX_REQUESTS:
        raise GpuarchError(f"--simulate: expected a number of requests from 10 to "
                           f"{MAX_REQUESTS:,}, got {requests!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise GpuarchError(f"--seed: expected a whole number >= 0, got {seed!r}")
    check_choice("--arrivals", arrivals, ARRIVALS)
    schedule = cfg.schedule if schedule is None else schedule
    check_choice("--schedule", schedule, SCHEDULES)
    check_rate(rate)
    if cfg.pp > 1:
        raise GpuarchError(f"--simulate: a replica's pipeline stages are not simulated; "
                           f"give --pp 1 (got --pp {cfg.pp})")
    cfg = stream_config(cfg)
    times = pass_times(catalog, shape, product, cfg, system=system, efficiency=efficiency)
    if times.max_batch < 1:
        raise GpuarchError(f"--simulate: {shape.name} does not fit on {product.name} with "
                           "these formats and parallelism (not even one sequence)")
    share = rate / cfg.replicas
    output = _outputs(cfg, requests, np.random.default_rng([seed, 1]))
    run = replay(times, share, output, arrivals=arrivals, seed=seed, schedule=schedule)
    counted = slice(int(requests * WARMUP_SHARE), None)
    arrival, first, finish = run.arrival[counted], run.first[counted], run.finish[counted]
    out = run.output[counted]
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), np.nan)
    ttft = Percentiles.of(first - arrival)
    latency = Percentiles.of(finish - arrival)
    queue = Percentiles.of(run.admitted[counted] - arrival)
    assert ttft is not None and latency is not None and queue is not None  # every request ran
    return Simulation(
        rate_per_s=rate, arrivals=arrivals, schedule=schedule, requests=requests,
        measured=len(out), seed=seed,
        ttft_s=ttft, tpot_s=Percentiles.of(tpot), latency_s=latency, queue_s=queue,
        mean_batch=run.decoded_sequences / run.decode_steps if run.decode_steps else 0.0,
        max_batch=times.max_batch,
        output_tokens_per_s=float(run.output.sum() / run.finish.max()) * cfg.replicas)
