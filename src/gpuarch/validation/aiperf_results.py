"""NVIDIA AIPerf's aggregated result, ``profile_export_aiperf.json``, read as a measured run
(``estimate infer ... --as-point --measured FILE``, beside vLLM's and SGLang's saved results
in ``validation/bench_results.py``).

AIPerf (github.com/ai-dynamo/aiperf) writes one JSON object a benchmark: a block per metric,
each with its ``unit`` and the statistics it has (``avg``, ``p50``, ``p90``, ``p99``, ``std``,
...), at the top level (the first releases nested them under ``records``), and the settings
it ran with under ``input_config``. How it sent its requests is read from either settings
layout AIPerf has written: the command-line era's ``loadgen`` (``request_rate`` with
``request_rate_mode`` or its later name ``arrival_pattern``, ``concurrency``) and the
benchmark-config era's ``phases`` (the profiling phase's ``type``, ``rate``,
``concurrency``; a table keyed by phase name, later a list). The default arrival pattern is
a Poisson stream, so a rate whose mode the file leaves out (AIPerf writes only what was set)
is one. ``inter_token_latency`` is AIPerf's (latency - TTFT) / (answer tokens - 1), vLLM's
TPOT.
"""

from __future__ import annotations

from typing import Any

from gpuarch.errors import GpuarchError, is_positive_number
from gpuarch.units import Unit, to_si
from gpuarch.validation.bench_results import BenchResult
from gpuarch.validation.saved_fields import held_in_flight, saved_count, saved_figure

__all__ = ["is_aiperf_result", "read_aiperf_result"]

TOOL = "AIPerf"

_LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot",
              "request_latency": "latency"}
"""AIPerf's latency metrics and a point's names for them."""

_STATISTICS = {"avg": "mean", "p50": "p50", "p90": "p90", "p99": "p99"}
"""The statistics a point takes, by AIPerf's names; the others have no simulated
counterpart."""

_TIME_UNITS = {"ms": Unit.MS, "us": Unit.US, "ns": Unit.NS, "s": Unit.S, "sec": Unit.S}

_ARRIVALS = {"poisson": "poisson", "constant": "uniform"}
"""AIPerf's rate modes the simulation replays, and its name for each."""


def is_aiperf_result(doc: dict[str, Any]) -> bool:
    """Whether a saved JSON object is AIPerf's aggregated export (its own keys: the
    settings under ``input_config`` beside metric blocks, or the version keys)."""
    return "aiperf_version" in doc or (
        isinstance(doc.get("input_config"), dict)
        and any(key in doc or key in (doc.get("records") or {})
                for key in ("request_latency", "time_to_first_token", "request_count")))


def is_aiperf_records(doc: dict[str, Any]) -> bool:
    """Whether a JSON line is one of AIPerf's per-request records
    (``profile_export.jsonl``), which hold no run's settings."""
    return isinstance(doc.get("metadata"), dict) and "metrics" in doc


def _metrics(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    records = doc.get("records")
    metrics = records if isinstance(records, dict) and "request_count" not in doc else doc
    if not isinstance(metrics.get("request_count"), dict):
        raise GpuarchError(f"--measured: {name}: no 'request_count' block: expected AIPerf's "
                           "profile_export_aiperf.json of a finished run")
    return metrics


def _stat(name: str, metrics: dict[str, Any], metric: str, stat: str) -> float | None:
    """A metric's statistic, or None where the file has no such block or statistic."""
    block = metrics.get(metric)
    if block is None:
        return None
    if not isinstance(block, dict):
        raise GpuarchError(f"--measured: {name}: {metric} = {block!r}: expected a block of "
                           "statistics")
    if stat not in block:
        return None
    return saved_figure(name, f"{metric}.{stat}", block[stat])


def _needed(name: str, metrics: dict[str, Any], metric: str) -> float:
    value = _stat(name, metrics, metric, "avg")
    if value is None:
        raise GpuarchError(f"--measured: {name}: no {metric}.avg: expected AIPerf's "
                           "profile_export_aiperf.json of a finished run")
    return value


def _seconds(name: str, metrics: dict[str, Any], metric: str, value: float) -> float:
    unit = (metrics.get(metric) or {}).get("unit")
    if not isinstance(unit, str) or unit not in _TIME_UNITS:
        raise GpuarchError(f"--measured: {name}: {metric}.unit = {unit!r}: expected one of "
                           f"{', '.join(_TIME_UNITS)}")
    return to_si(value, _TIME_UNITS[unit])


def _profiling_phase(name: str, phases: Any) -> dict[str, Any]:
    """The benchmark-config era's profiling phase (a table keyed by name, or a list)."""
    if isinstance(phases, dict):
        named = [dict(phase, name=key) for key, phase in phases.items()
                 if isinstance(phase, dict)]
    elif isinstance(phases, list):
        named = [phase for phase in phases if isinstance(phase, dict)]
    else:
        named = []
    measured = [p for p in named if "profiling" in (p.get("name"), p.get("kind"))] \
        or [p for p in named if "warmup" not in (p.get("name"), p.get("kind"))]
    if len(measured) != 1:
        raise GpuarchError(f"--measured: {name}: input_config.phases: expected one "
                           f"profiling phase, found {len(measured)}")
    return measured[0]


def _how_sent(name: str, config: dict[str, Any]) -> tuple[float | None, int | None, str]:
    """(rate per second or None, requests held in flight or None, arrivals) from either
    settings layout; what the simulation cannot replay is refused naming the setting."""
    if "phases" in config:
        phase = _profiling_phase(name, config["phases"])
        kind, where = str(phase.get("type", "")), "input_config.phases: profiling"
        rate, concurrency = phase.get("rate"), phase.get("concurrency")
        smooth = phase.get("smoothness", 1.0)
        if kind == "concurrency":
            kind, rate = "burst", None
    else:
        if "loadgen" not in config and ({"perf_analyzer", "concurrency", "request_rate"}
                                        & set(config)):
            raise GpuarchError(f"--measured: {name}: genai-perf's export (its input_config "
                               "holds perf_analyzer's settings) is not read; AIPerf's "
                               "profile_export_aiperf.json is")
        loadgen, inputs = (table if isinstance(table := config.get(key), dict) else {}
                           for key in ("loadgen", "input"))
        if inputs.get("fixed_schedule"):
            raise GpuarchError(f"--measured: {name}: input.fixed_schedule: a trace's own "
                               "timestamps are not simulated")
        if loadgen.get("user_centric_rate") is not None:
            raise GpuarchError(f"--measured: {name}: loadgen.user_centric_rate: users each "
                               "waiting for their last answer are not simulated")
        rate, concurrency = loadgen.get("request_rate"), loadgen.get("concurrency")
        mode = loadgen.get("arrival_pattern", loadgen.get("request_rate_mode"))
        smooth = loadgen.get("arrival_smoothness", 1.0)
        where = "input_config.loadgen"
        kind = ("burst" if rate is None else "poisson") if mode is None else str(mode)
        if kind == "concurrency_burst":
            kind = "burst"
    if kind == "gamma" and smooth == 1.0:
        kind = "poisson"  # a gamma stream of smoothness 1 is a Poisson stream
    if concurrency is not None:
        concurrency = saved_count(name, f"{where}: concurrency", concurrency)
    if kind == "burst":
        if concurrency is None:
            raise GpuarchError(f"--measured: {name}: {where}: neither a request rate nor a "
                               "concurrency: how the requests were sent is not in the file")
        return None, concurrency, "poisson"
    if kind not in _ARRIVALS:
        raise GpuarchError(f"--measured: {name}: {where}: {kind or 'no type'!s}: the "
                           "simulation replays a Poisson stream, evenly spaced requests "
                           "(constant) or so many in flight (concurrency); not a trace, "
                           "users or a gamma stream")
    if rate is None or not is_positive_number(rate):
        raise GpuarchError(f"--measured: {name}: {where}: request rate = {rate!r}: expected "
                           "requests per second above zero")
    if concurrency is not None:
        raise GpuarchError(f"--measured: {name}: {where}: request rate {rate:g}/s with "
                           f"concurrency {concurrency}: a stream capped in flight is not "
                           "simulated; compare a run with one of the two")
    return float(rate), None, _ARRIVALS[kind]


def read_aiperf_result(name: str, doc: dict[str, Any]) -> BenchResult:
    """One AIPerf run (``name`` says where it is, for messages and the point): how it sent
    its requests, how many completed with what mean lengths (and their spread), the output
    throughput and the mean, median, p90 and p99 of TTFT, TPOT and latency, in seconds.
    Requests held in flight at least as many as the run sent are every request at once (an
    offline run)."""
    config = doc.get("input_config")
    if not isinstance(config, dict):
        raise GpuarchError(f"--measured: {name}: no input_config: AIPerf saves how the run "
                           "sent its requests there")
    metrics = _metrics(name, doc)
    rate, concurrency, arrivals = _how_sent(name, config)
    count = _needed(name, metrics, "request_count")
    completed = round(count)
    if abs(completed - count) > 1e-6:
        raise GpuarchError(f"--measured: {name}: request_count.avg = {count!r}: expected a "
                           "whole number of requests")
    latencies = {}
    for metric, figure in _LATENCIES.items():
        for stat, point_stat in _STATISTICS.items():
            value = _stat(name, metrics, metric, stat)
            if value is not None:
                latencies[f"{figure}_{point_stat}_s"] = _seconds(name, metrics, metric, value)
    lengths = []  # (mean, spread) of the prompts, then the answers
    for metric in ("input_sequence_length", "output_sequence_length"):
        mean = _needed(name, metrics, metric)
        std = _stat(name, metrics, metric, "std") if metrics[metric].get("std") else None
        lengths.append((mean, None if std is None else std / mean))
    (input_len, input_cv), (output_len, output_cv) = lengths
    return BenchResult(
        tool=TOOL, where=name, rate_per_s=rate,
        max_concurrency=held_in_flight(concurrency, completed),
        completed=completed, input_len=input_len, output_len=output_len,
        input_len_cv=input_cv, output_len_cv=output_cv,
        output_tokens_per_s=_needed(name, metrics, "output_token_throughput"),
        latencies=latencies, arrivals=arrivals)
