"""GuideLLM's saved report (``guidellm benchmark ... --output-path benchmarks.json``) read
as measured runs (``estimate infer ... --as-point --measured FILE``, beside the other tools'
results in ``validation/bench_results.py``).

One report holds a benchmark per strategy a run went through (a sweep: synchronous,
throughput, then rates between). Each benchmark says how it sent its requests
(``config.strategy`` from GuideLLM 0.4, ``scheduler.strategy`` in the autumn-2025 main
branch, ``args.strategy`` in 0.2 and 0.3: ``type_`` ``synchronous`` one at a time,
``concurrent`` so many ``streams``, ``throughput`` every request at once up to an optional
``max_concurrency``, ``constant`` evenly spaced at ``rate``, ``poisson`` a Poisson stream)
and what its successful requests saw (``metrics``: ``time_to_first_token_ms``,
``inter_token_latency_ms`` (the gaps between a request's tokens after its first, vLLM's
TPOT), ``request_latency`` in seconds, each with ``mean``, ``median`` and ``percentiles``;
``prompt_token_count`` and ``output_token_count``; ``output_tokens_per_second``; the request
counts in ``request_totals``). GuideLLM's ``time_per_output_token_ms`` changed meaning between
releases (with or without the first token's wait) and is not read. GuideLLM 0.1's nested
report is a layout of its own and is refused.
"""

from __future__ import annotations

from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.units import Unit, to_si
from gpuarch.validation.bench_results import BenchResult
from gpuarch.validation.saved_fields import held_in_flight, saved_count, saved_figure

__all__ = ["is_guidellm_report", "read_guidellm_report"]

TOOL = "GuideLLM"

_LATENCIES = {"time_to_first_token_ms": ("ttft", Unit.MS),
              "inter_token_latency_ms": ("tpot", Unit.MS),
              "request_latency": ("latency", Unit.S)}
"""GuideLLM's latency metrics, a point's name for each and the unit it is saved in."""

_STRATEGY_PLACES = ("config", "scheduler", "args")
"""Where a benchmark's strategy is, newest layout first."""


def is_guidellm_report(doc: dict[str, Any]) -> bool:
    """Whether a saved JSON object is GuideLLM's report: a list of benchmarks, each with
    its metrics (or GuideLLM 0.1's nested one, refused when read)."""
    benchmarks = doc.get("benchmarks")
    return isinstance(benchmarks, list) and bool(benchmarks) and isinstance(
        benchmarks[0], dict) and ("metrics" in benchmarks[0] or "benchmarks" in benchmarks[0])


def _table(where: str, node: Any, key: str, path: str) -> dict[str, Any]:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, dict):
        raise GpuarchError(f"--measured: {where}: {path}{key} = {value!r}: expected "
                           "GuideLLM's benchmark report")
    return value


def _successful(where: str, metrics: dict[str, Any], key: str) -> dict[str, Any]:
    return _table(where, _table(where, metrics, key, "metrics."), "successful",
                  f"metrics.{key}.")


def _strategy(where: str, benchmark: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    for place in _STRATEGY_PLACES:
        node = benchmark.get(place)
        if isinstance(node, dict) and isinstance(node.get("strategy"), dict):
            return f"{place}.strategy", node["strategy"]
    raise GpuarchError(f"--measured: {where}: no strategy (config.strategy, "
                       "scheduler.strategy or args.strategy): how the requests were sent "
                       "is not in the report")


def _how_sent(where: str, benchmark: dict[str, Any]
              ) -> tuple[float | None, int | None, str]:
    """(rate per second or None, requests in flight or None, arrivals)."""
    path, strategy = _strategy(where, benchmark)
    kind = strategy.get("type_")
    cap = strategy.get("max_concurrency")
    if cap is not None:
        cap = saved_count(where, f"{path}.max_concurrency", cap)
    if kind == "synchronous":
        return None, 1, "poisson"
    if kind == "concurrent":
        streams = strategy.get("streams")
        if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
            raise GpuarchError(f"--measured: {where}: {path}.streams = {streams!r}: expected "
                               "the requests held in flight, a whole number >= 1")
        return None, streams, "poisson"
    if kind == "throughput":
        return None, cap, "poisson"
    if kind in ("constant", "poisson"):
        rate = saved_figure(where, f"{path}.rate", strategy.get("rate"))
        if cap is not None:
            raise GpuarchError(f"--measured: {where}: {path}: a rate of {rate:g}/s capped at "
                               f"{cap} in flight: a stream capped in flight is not simulated")
        return rate, None, "uniform" if kind == "constant" else "poisson"
    raise GpuarchError(f"--measured: {where}: {path}.type_ = {kind!r}: expected synchronous, "
                       "concurrent, throughput, constant or poisson")


def _completed(where: str, benchmark: dict[str, Any], metrics: dict[str, Any]) -> int:
    totals = benchmark.get("request_totals", metrics.get("request_totals"))
    count = totals.get("successful") if isinstance(totals, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise GpuarchError(f"--measured: {where}: request_totals.successful = {count!r}: "
                           "expected the requests that completed, at least 1")
    return count


def _benchmark(where: str, benchmark: Any) -> BenchResult:
    if not isinstance(benchmark, dict):
        raise GpuarchError(f"--measured: {where}: {benchmark!r}: expected a benchmark")
    metrics = _table(where, benchmark, "metrics", "")
    rate, concurrency, arrivals = _how_sent(where, benchmark)
    completed = _completed(where, benchmark, metrics)
    latencies: dict[str, float] = {}
    for key, (figure, unit) in _LATENCIES.items():
        if key not in metrics:
            continue
        summary = _successful(where, metrics, key)
        percentiles = summary.get("percentiles")
        values = {"mean": summary.get("mean"), "p50": summary.get("median"),
                  **({"p90": percentiles.get("p90"), "p99": percentiles.get("p99")}
                     if isinstance(percentiles, dict) else {})}
        for stat, value in values.items():
            if value is not None:
                latencies[f"{figure}_{stat}_s"] = to_si(
                    saved_figure(where, f"metrics.{key}.successful.{stat}", value), unit)
    lengths = []  # (mean, spread) of the prompts, then the answers
    for key in ("prompt_token_count", "output_token_count"):
        summary = _successful(where, metrics, key)
        mean = saved_figure(where, f"metrics.{key}.successful.mean", summary.get("mean"))
        std = summary.get("std_dev")
        spread = saved_figure(where, f"metrics.{key}.successful.std_dev", std) / mean \
            if std else None
        lengths.append((mean, spread))
    (input_len, input_cv), (output_len, output_cv) = lengths
    throughput = _table(where, _table(where, metrics, "output_tokens_per_second", "metrics."),
                        "total", "metrics.output_tokens_per_second.")
    return BenchResult(
        tool=TOOL, where=where, rate_per_s=rate,
        max_concurrency=held_in_flight(concurrency, completed),
        completed=completed, input_len=input_len, output_len=output_len,
        input_len_cv=input_cv, output_len_cv=output_cv,
        output_tokens_per_s=saved_figure(where, "metrics.output_tokens_per_second.total.mean",
                                         throughput.get("mean")),
        latencies=latencies, arrivals=arrivals)


def read_guidellm_report(name: str, doc: dict[str, Any]) -> list[BenchResult]:
    """Every benchmark of a GuideLLM report (``name`` the file's, for messages and the
    points: each benchmark is ``NAME benchmark N``) as a measured run."""
    benchmarks = doc["benchmarks"]
    if "metrics" not in benchmarks[0]:
        raise GpuarchError(f"--measured: {name}: GuideLLM 0.1's nested report is not read; "
                           "save it with GuideLLM 0.2 or later")
    return [_benchmark(name if len(benchmarks) == 1 else f"{name} benchmark {n}", benchmark)
            for n, benchmark in enumerate(benchmarks, 1)]
