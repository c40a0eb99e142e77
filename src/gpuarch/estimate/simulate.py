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

Prompts can vary in length (``input_len_cv``, a gamma spread; ``input_quantiles``, a
dataset's distribution): a prefill pass then takes the longest-waiting prompts while their
tokens fit its budget and lasts what that many tokens take (``inference.pass_times`` by
tokens: the GEMMs over the pass's rows, attention's quadratic part at the mean prompt,
linear between grid points a few percent apart, where a pass's time has the teeth of wave
quantization). A prompt longer than the budget runs in one pass of its own. A file of
requests (``read_lengths``: a service's log) can give each request's prompt and answer
(rows drawn at random) and, replayed as a trace (``arrivals="trace"``), their arrival
times, scaled to the rate so that the bursts keep their shape.

Not modelled: requests preempted or swapped out when the KV cache runs short (the batch is
capped at what fits with every sequence at its full length, so none is; under the
``max_utilization`` scheduler policy at what the running sequences' mean context fills, and
a moment above the mean, which a real engine meets by pausing a sequence, is not), a long
prompt's
chunks spread over iterations, and a pipeline's micro-batches (PP 1 only). ``SCHEDULES``
also offers prompts prefilled in the decode step's iteration (``mixed``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError, check_choice, check_number, suggestion
from gpuarch.estimate.inference import PassTimes, pass_times
from gpuarch.estimate.inference_batching import gamma_lengths
from gpuarch.estimate.inference_config import SCHEDULES, InferenceConfig
from gpuarch.estimate.load import check_rate, stream_config
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import TransformerShape

__all__ = ["ARRIVALS", "DEFAULT_REQUESTS", "LENGTH_COLUMNS", "MAX_REQUESTS", "SCHEDULES",
           "Percentiles", "RequestLengths", "Simulation", "Traffic", "check_input_len_cv",
           "check_requests", "check_traffic",
           "quantile_mean", "read_lengths", "replay", "simulate_serving"]

ARRIVALS = ("poisson", "uniform", "trace")
"""How requests arrive: a Poisson stream (exponential gaps), evenly spaced (the steady
state's fluid view, against which the simulation can be checked), or at the times a lengths
file records (its ``arrival_s`` column, scaled to the rate: ``trace``)."""
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
           arrivals: str = "poisson", seed: int = 0, schedule: str = "separate",
           prompts: np.ndarray | None = None, arrival: np.ndarray | None = None) -> Replay:
    """Run ``len(output)`` requests (each generating ``output[i]`` tokens) arriving at
    ``rate_per_s`` through one replica whose passes take ``times``, on ``schedule``
    (``inference.SCHEDULES``). With ``prompts`` (each request's new prompt tokens; ``times``
    then holds a pass's seconds by its tokens), a prefill pass takes the longest-waiting
    prompts while their tokens fit the pass's budget (at least one prompt) and lasts what
    that many tokens take; without, every prompt has the configured length. ``arrival``
    (seconds from the start, not falling) replaces the stream ``arrivals`` and the rate
    would make."""
    n = len(output)
    if arrival is None:
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
            if prompts is None:
                take = min(arrived - queued, free, per_pass)
                new = np.arange(queued, queued + take)
                pass_s = float(times.prefill_s[take - 1])
            else:
                waiting = np.cumsum(prompts[queued:queued + min(arrived - queued, free)])
                take = max(1, int(np.searchsorted(waiting, times.token_budget, "right")))
                new = np.arange(queued, queued + take)
                pass_s = times.prefill_for_tokens(float(waiting[take - 1]))
            queued += take
            admitted[new] = t
            t += pass_s
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
    # the prompts' lengths when they vary (what was drawn, and how); None when every prompt
    # has the configured length
    prompts: dict[str, Any] | None = None
    # the lengths file the requests were drawn from (RequestLengths.as_json); None without
    lengths: dict[str, Any] | None = None
    # with objectives: each (seconds, None where not given), the share of the counted
    # requests that met all of them ("attained") and that share of the rate
    # ("goodput_requests_per_s"); None without
    slo: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "arrivals": self.arrivals,
                "schedule": self.schedule, "prompts": self.prompts, "lengths": self.lengths,
                "slo": self.slo,
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
    return np.maximum(1.0, np.round(gamma_lengths(rng, cfg.output_len, cfg.output_len_cv, n)))


LENGTH_COLUMNS = ("input_len", "output_len", "arrival_s")
"""The columns of a lengths file (``read_lengths``): each request's prompt tokens,
generated tokens and arrival (seconds from any start, never falling from row to row); any
of them may be missing, not all."""


@dataclass(frozen=True)
class RequestLengths:
    """Requests' prompt and answer lengths to draw from, one row a request (a service's log,
    a dataset): each simulated request takes a row at random, its prompt and answer
    together. A column the file lacks is None."""

    input: np.ndarray | None
    output: np.ndarray | None
    source: str  # where the rows came from (the file's name)
    arrival: np.ndarray | None = None  # seconds, not falling (a trace of arrivals)

    @property
    def rows(self) -> int:
        column = next(c for c in (self.input, self.output, self.arrival) if c is not None)
        return len(column)

    @property
    def arrival_rate(self) -> float:
        """Requests a second over the trace's span (rows - 1 over the last arrival less the
        first); 0 without arrivals or a span."""
        if self.arrival is None or self.rows < 2:
            return 0.0
        span = float(self.arrival[-1] - self.arrival[0])
        return (self.rows - 1) / span if span > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        def stats(x: np.ndarray | None) -> dict[str, float] | None:
            if x is None:
                return None
            return {**_length_stats(x), "cv": float(x.std() / x.mean())}
        return {"source": self.source, "rows": self.rows, "input_len": stats(self.input),
                "output_len": stats(self.output),
                "arrival_rate_per_s": self.arrival_rate or None}


@dataclass(frozen=True)
class Traffic:
    """How a replay's requests come: how many per replica, the random stream's seed, how
    they arrive (``ARRIVALS``), and their lengths (one each, spread ``input_len_cv`` around
    the configured prompt, or rows of a file). ``simulate_serving`` checks them."""

    requests: int = DEFAULT_REQUESTS
    seed: int = 0
    arrivals: str = "poisson"
    input_len_cv: float = 0.0
    lengths: RequestLengths | None = None

    def check(self, input_len: int, output_len: int, cached_prefix: int = 0) -> None:
        """``check_traffic`` against the configured lengths, before any replay."""
        check_traffic(self.requests, self.seed, self.arrivals, self.input_len_cv,
                      self.lengths, input_len, output_len, cached_prefix)

    def simulate_kwargs(self) -> dict[str, Any]:
        """``simulate_serving``'s keyword arguments for this traffic."""
        return {"requests": self.requests, "seed": self.seed, "arrivals": self.arrivals,
                "input_len_cv": self.input_len_cv, "lengths": self.lengths}

    def describe(self, rate: float) -> str:
        """'2,000 requests per replica, a Poisson stream at 10/s in all, ...'."""
        stream = {"poisson": f"a Poisson stream at {rate:g}/s in all",
                  "uniform": f"evenly spaced at {rate:g}/s in all",
                  "trace": f"{self.lengths.source if self.lengths else 'a'} trace's arrivals "
                           f"scaled to {rate:g}/s"}[self.arrivals]
        parts = [f"{self.requests:,} requests per replica", stream]
        if self.input_len_cv:
            parts.append(f"prompts spread {self.input_len_cv:g} sd / mean")
        if self.lengths is not None:
            parts.append(f"lengths drawn from {self.lengths.source}")
        if self.seed:
            parts.append(f"seed {self.seed}")
        return ", ".join(parts)


def read_lengths(path: str | Path) -> RequestLengths:
    """A CSV file of requests for ``--lengths``: a header naming ``input_len``,
    ``output_len`` and/or ``arrival_s`` (other columns are ignored), then one request a
    row: whole numbers of tokens from 1, arrivals in seconds from any start, never falling.
    Errors name the flag, the file and, for a bad value, its row and column."""
    flag = "--lengths"
    name = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            table = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise GpuarchError(f"{flag}: cannot read {name!r}: {reason}") from None
    except csv.Error as exc:
        raise GpuarchError(f"{flag}: {name!r} is not a CSV file: {exc}") from None
    if not table:
        raise GpuarchError(f"{flag}: {name!r} is empty; expected a header naming "
                           f"{', '.join(LENGTH_COLUMNS)} (any of them), then one request a "
                           "row")
    header = [h.strip().lower() for h in table[0]]
    columns = {c: header.index(c) for c in LENGTH_COLUMNS if c in header}
    if not columns:
        hints = [h for h in (suggestion(cell, LENGTH_COLUMNS) for cell in header) if h]
        raise GpuarchError(f"{flag}: {name!r} has no column {' or '.join(LENGTH_COLUMNS)} "
                           f"in its header {table[0]!r}" + (hints[0] if hints else ""))
    # (the file's row number, the header being row 1; blank rows skipped)
    rows = [(n, r) for n, r in enumerate(table[1:], start=2) if any(c.strip() for c in r)]
    if not rows:
        raise GpuarchError(f"{flag}: {name!r} has a header but no request rows")
    values: dict[str, np.ndarray] = {}
    for column, at in columns.items():
        out = np.empty(len(rows))
        for i, (n, row) in enumerate(rows):
            cell = row[at].strip() if at < len(row) else ""
            out[i] = _cell(cell, column, out[i - 1] if i else None,
                           f"{flag}: {name!r} row {n}, {column}")
        values[column] = out
    return RequestLengths(values.get("input_len"), values.get("output_len"), name,
                          values.get("arrival_s"))


def _cell(cell: str, column: str, before: float | None, where: str) -> float:
    """One value of a lengths file: tokens a whole number from 1, an arrival a finite
    number of seconds no earlier than the row before's."""
    if column != "arrival_s":
        try:
            number = int(cell)
        except ValueError:
            number = 0
        if number < 1:
            raise GpuarchError(f"{where}: expected a whole number of tokens >= 1, got {cell!r}")
        return float(number)
    try:
        seconds = float(cell)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise GpuarchError(f"{where}: expected seconds (a number), got {cell!r}")
    if before is not None and seconds < before:
        raise GpuarchError(f"{where}: {seconds:g} s is earlier than the row before's "
                           f"{before:g} s (rows in order of arrival)")
    return seconds


def check_requests(requests: Any, flag: str = "--simulate") -> None:
    """A simulation's requests per replica: a whole number from 10 to ``MAX_REQUESTS``."""
    if isinstance(requests, bool) or not isinstance(requests, int) \
            or not 10 <= requests <= MAX_REQUESTS:
        raise GpuarchError(f"{flag}: expected a number of requests from 10 to "
                           f"{MAX_REQUESTS:,}, got {requests!r}")


def check_input_len_cv(cv: Any) -> None:
    """The spread of prompt lengths is a number from 0 (one length) to 10."""
    check_number("--input-len-cv", cv, 0, maximum=10,
                 note="standard deviation over mean of the prompt lengths")


def _check_quantiles(quantiles: Any) -> np.ndarray:
    """Evenly spaced quantiles of prompt lengths (the 0th to the 100th percentile, at least
    two values, none below one token, none falling)."""
    try:
        q = np.asarray(quantiles, dtype=float)
    except (TypeError, ValueError):
        q = np.empty(0)
    if q.ndim != 1 or q.size < 2 or not np.all(np.isfinite(q)) or q[0] < 1 \
            or np.any(np.diff(q) < 0):
        raise GpuarchError("input_quantiles: expected two or more prompt lengths in tokens, "
                           "the 0th to the 100th percentile evenly spaced, at least 1 and "
                           f"never falling, got {quantiles!r}")
    return q


def quantile_mean(quantiles: Any) -> float:
    """The mean of the distribution whose evenly spaced quantiles these are (linear
    between them, as ``_prompts`` draws from it)."""
    q = _check_quantiles(quantiles)
    return float((q[:-1] + q[1:]).sum() / (2 * (q.size - 1)))


def _prompts(cfg: InferenceConfig, n: int, rng: np.random.Generator, cv: float,
             quantiles: np.ndarray | None) -> np.ndarray | None:
    """Each request's new prompt tokens when prompt lengths vary: whole prompts drawn from
    the quantiles (linear between them), less the cached prefix; or with ``cv`` a gamma
    draw of the configured new tokens' mean and spread; at least one token. None when
    every prompt has the configured length."""
    if quantiles is not None:
        drawn = np.interp(rng.random(n), np.linspace(0, 1, quantiles.size), quantiles)
        whole: np.ndarray = np.maximum(1.0, np.round(drawn) - cfg.cached_prefix)
        return whole
    if not cv:
        return None
    return np.maximum(1.0, np.round(gamma_lengths(rng, cfg.new_prompt_tokens, cv, n)))


def simulate_serving(catalog: Catalog, shape: TransformerShape, product: Product,
                     cfg: InferenceConfig, rate: float, *, requests: int = DEFAULT_REQUESTS,
                     seed: int = 0, arrivals: str = "poisson", schedule: str | None = None,
                     system: System | None = None,
                     efficiency: Efficiency = DEFAULT_EFFICIENCY,
                     input_len_cv: float = 0.0,
                     input_quantiles: Any = None,
                     lengths: RequestLengths | None = None,
                     ttft_slo_s: float | None = None,
                     tpot_slo_s: float | None = None) -> Simulation:
    """Simulate ``requests`` requests per replica arriving at ``rate`` per second at the
    whole deployment (continuous batching; ``cfg.batch`` is ignored) on ``schedule``
    (default: ``cfg.schedule``). Prompts have ``cfg.input_len`` tokens, or vary: with
    ``input_len_cv`` (a gamma spread of the uncached tokens around their mean) or drawn from
    ``input_quantiles`` (evenly spaced quantiles of whole prompts' lengths, whose mean
    ``cfg.input_len`` must be within 5% of). With ``lengths`` each request takes a row of
    the file at random: its prompt and, where the file has them, its answer (their means
    within 5% of ``cfg.input_len`` and ``cfg.output_len``; answers from the file leave
    ``cfg.output_len_cv`` to describe their spread); with ``arrivals`` "trace" the rows in
    order, at the file's arrival times scaled to ``rate`` (``_file_rows``). With a TTFT
    and/or TPOT objective (``ttft_slo_s``, ``tpot_slo_s``) the result also says what share
    of the counted requests met every one given, and the goodput: that share of the rate
    (``Simulation.slo``). The decode step stays at the estimate's mean context and the
    batch at what fits with every sequence at the configured lengths. Errors name the flag:
    ``--simulate`` for the request count and unsupported deployments, ``--seed``,
    ``--arrivals``, ``--schedule``, ``--rate``, ``--slo-ttft-ms``, ``--slo-tpot-ms``,
    ``--input-len-cv``, ``--lengths``, ``--input-len`` and ``--output-len`` against the
    means they must match."""
    schedule = cfg.schedule if schedule is None else schedule
    check_choice("--schedule", schedule, SCHEDULES)
    check_rate(rate)
    if cfg.pp > 1:
        raise GpuarchError(f"--simulate: a replica's pipeline stages are not simulated; "
                           f"give --pp 1 (got --pp {cfg.pp})")
    quantiles = check_traffic(requests, seed, arrivals, input_len_cv, lengths, cfg.input_len,
                              cfg.output_len, cfg.cached_prefix, input_quantiles)
    for flag, objective in (("--slo-ttft-ms", ttft_slo_s), ("--slo-tpot-ms", tpot_slo_s)):
        if objective is not None and (isinstance(objective, bool)
                                      or not isinstance(objective, int | float)
                                      or not 0 < objective < math.inf):
            raise GpuarchError(f"{flag}: expected a time over 0, got {objective!r}")
    cfg = stream_config(cfg)
    prompts = _prompts(cfg, requests, np.random.default_rng([seed, 2]), input_len_cv,
                       quantiles)
    rows, arrival = _file_rows(lengths, requests, cfg.replicas, rate, seed,
                               arrivals == "trace")
    if lengths is not None and lengths.input is not None:
        prompts = np.maximum(1.0, lengths.input[rows] - cfg.cached_prefix)
    times = pass_times(catalog, shape, product, cfg, system=system, efficiency=efficiency,
                       max_prompt_tokens=0 if prompts is None else int(prompts.max()))
    if times.max_batch < 1:
        raise GpuarchError(f"--simulate: {shape.name} does not fit on {product.name} with "
                           "these formats and parallelism (not even one sequence)")
    share = rate / cfg.replicas
    output = _outputs(cfg, requests, np.random.default_rng([seed, 1]))
    if lengths is not None and lengths.output is not None:
        output = lengths.output[rows]
    run = replay(times, share, output, arrivals=arrivals, seed=seed, schedule=schedule,
                 prompts=prompts, arrival=arrival)
    counted = slice(int(requests * WARMUP_SHARE), None)
    arrival, first, finish = run.arrival[counted], run.first[counted], run.finish[counted]
    out = run.output[counted]
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), np.nan)
    slo = _attainment(first - arrival, tpot, ttft_slo_s, tpot_slo_s, rate)
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
        output_tokens_per_s=float(run.output.sum() / run.finish.max()) * cfg.replicas,
        prompts=None if prompts is None else _prompt_summary(
            prompts + cfg.cached_prefix, input_len_cv,
            "lengths" if lengths is not None and lengths.input is not None else
            "quantiles" if quantiles is not None else "gamma"),
        lengths=None if lengths is None else lengths.as_json(), slo=slo)


def check_traffic(requests: Any, seed: Any, arrivals: Any, input_len_cv: Any,
                  lengths: RequestLengths | None, input_len: int, output_len: int,
                  cached_prefix: int = 0, input_quantiles: Any = None) -> np.ndarray | None:
    """Check a replay's requests against the configured lengths (``simulate_serving``'s
    rules; errors name ``--simulate``, ``--seed``, ``--arrivals``, ``--input-len-cv``,
    ``--lengths``, ``--input-len``, ``--output-len`` and ``--cached-prefix``); returns the
    prompt quantiles checked, or None."""
    check_requests(requests)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise GpuarchError(f"--seed: expected a whole number >= 0, got {seed!r}")
    check_choice("--arrivals", arrivals, ARRIVALS)
    check_input_len_cv(input_len_cv)
    quantiles = None
    if input_quantiles is not None:
        if input_len_cv:
            raise GpuarchError("--input-len-cv: the prompts' lengths are drawn from the "
                               "given quantiles; give one or the other")
        quantiles = _check_quantiles(input_quantiles)
        mean = quantile_mean(quantiles)
        if abs(input_len - mean) > 0.05 * mean:
            raise GpuarchError(f"--input-len: expected the prompts' mean, {mean:,.1f} tokens "
                               f"from the quantiles (within 5%), got {input_len}")
        if cached_prefix >= quantiles[0]:
            raise GpuarchError(f"--cached-prefix: the shortest prompt, {quantiles[0]:g} "
                               f"tokens, must be longer than it (got {cached_prefix})")
    if lengths is not None:
        if lengths.input is not None and (input_len_cv or quantiles is not None):
            raise GpuarchError("--lengths: the file gives the prompts' lengths; leave out "
                               "--input-len-cv (and the quantiles)")
        for flag, column, configured in (("--input-len", lengths.input, input_len),
                                         ("--output-len", lengths.output, output_len)):
            if column is not None and abs(configured - column.mean()) > 0.05 * column.mean():
                raise GpuarchError(f"{flag}: expected the mean of --lengths' column, "
                                   f"{column.mean():,.1f} tokens (within 5%), got {configured}")
        if lengths.input is not None and cached_prefix >= lengths.input.min():
            raise GpuarchError(f"--cached-prefix: the shortest prompt in --lengths, "
                               f"{lengths.input.min():g} tokens, must be longer than it "
                               f"(got {cached_prefix})")
    if arrivals == "trace" and (lengths is None or lengths.arrival_rate <= 0):
        raise GpuarchError("--arrivals trace: replays the arrival_s column of --lengths; "
                           "give --lengths FILE with two or more arrivals over a span of time")
    return quantiles


def _attainment(ttft: np.ndarray, tpot: np.ndarray, ttft_slo: float | None,
                tpot_slo: float | None, rate: float) -> dict[str, Any] | None:
    """The share of requests that met every objective given (a one-token answer has no
    TPOT and meets that one), and the goodput: that share of the offered rate; None
    without an objective."""
    if ttft_slo is None and tpot_slo is None:
        return None
    met = np.ones(len(ttft), dtype=bool)
    if ttft_slo is not None:
        met &= ttft <= ttft_slo
    if tpot_slo is not None:
        met &= ~(tpot > tpot_slo)  # NaN (one token) meets it
    share = float(met.mean())
    return {"ttft_s": ttft_slo, "tpot_s": tpot_slo, "attained": share,
            "goodput_requests_per_s": share * rate}


def _file_rows(lengths: RequestLengths | None, requests: int, replicas: int, rate: float,
               seed: int, trace: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The rows of a lengths file one replica's requests take, and with ``trace`` their
    arrivals: rows drawn at random, or, replaying the trace, the rows in order that a random
    spread over ``replicas`` gives the simulated one (each with chance 1 / replicas), the
    first ``requests`` of them, at the trace's times scaled so that the whole trace arrives
    at ``rate`` (the burst pattern kept, its pace set)."""
    if lengths is None:
        return None, None
    if not trace:
        return np.random.default_rng([seed, 3]).integers(0, lengths.rows, requests), None
    assert lengths.arrival is not None
    mine = np.flatnonzero(np.random.default_rng([seed, 4]).random(lengths.rows)
                          < 1.0 / replicas)
    if len(mine) < requests:
        raise GpuarchError(f"--simulate: --lengths holds {lengths.rows:,} arrivals, "
                           f"{len(mine):,} of them for one replica of {replicas}; give "
                           f"--simulate {len(mine)} or fewer")
    rows = mine[:requests]
    scale = lengths.arrival_rate / rate
    return rows, (lengths.arrival[rows] - lengths.arrival[0]) * scale


def _prompt_summary(lengths: np.ndarray, cv: float, drawn_from: str) -> dict[str, Any]:
    """What the simulation drew: how (gamma, quantiles or a lengths file), and the drawn
    whole prompts' mean, median and longest."""
    return {"drawn_from": drawn_from,
            "input_len_cv": cv if drawn_from == "gamma" else None, **_length_stats(lengths)}


def _length_stats(lengths: np.ndarray) -> dict[str, float]:
    """Token counts' mean, median (``p50``) and longest (``max``)."""
    return {"mean": float(lengths.mean()), "p50": float(np.median(lengths)),
            "max": float(lengths.max())}
