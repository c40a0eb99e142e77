"""A serving benchmark's saved result read as a measured run: vLLM's ``vllm bench serve
--save-result`` JSON (also ``benchmarks/benchmark_serving.py``'s), SGLang's
``python -m sglang.bench_serving --output-file`` JSON lines, AIPerf's
``profile_export_aiperf.json`` (``validation/aiperf_results.py``), trtllm-bench's
``--report_json`` (``validation/trtllm_bench_results.py``) and GuideLLM's report
(``validation/guidellm_results.py``).

The tools send requests to a running server and save what they saw: how the requests were
sent (a Poisson rate, every request at once, and at most so many in flight), how many
completed with how many prompt and generated tokens, the output throughput, and the mean,
median and percentiles of the time to first token (TTFT), the time per output token after it
(TPOT) and the whole request, in milliseconds. ``estimate infer ... --as-point --measured
FILE`` writes such a run as a point of a measured-runs file (docs/your-measurements.md):
a run at a rate as a load run (``validate load --data``), a run of so many requests in
flight as a serving point with that concurrency, and every request at once as an offline
run (``validate inference --data``). A file of several runs (SGLang appends a line a run; a
sweep of rates saved file by file) gives a point for each.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError, is_positive_number
from gpuarch.files import read_input_text
from gpuarch.units import Unit, to_si
from gpuarch.validation.saved_fields import saved_figure
from gpuarch.validation.server_settings import (
    ServerFlags,
    TrtllmEngine,
    check_sglang_server,
    check_trtllm_engine,
)

__all__ = ["LENGTH_TOLERANCE", "RUN_KINDS", "BenchResult", "read_bench_results"]

RUN_KINDS = ("rate", "concurrency", "offline")
"""How a measured run sent its requests (``BenchResult.kind``): at a rate, so many in
flight, or every one at once."""

LENGTH_TOLERANCE = 0.05
"""How far a run's mean prompt or answer may be from the lengths the estimate is given."""

_LATENCY = {"ttft": "ttft", "tpot": "tpot", "e2el": "latency", "e2e_latency": "latency"}
"""The tools' names for a latency (vLLM's end-to-end ``e2el``, SGLang's ``e2e_latency``)
and a point's."""

_STATISTICS = {"mean": "mean", "median": "p50", "p50": "p50", "p90": "p90", "p99": "p99"}
"""The statistics a point takes, by the tools' prefixes; others (std, p95, p99.9) have no
simulated counterpart and are left out."""


@dataclass(frozen=True)
class BenchResult:
    """One saved benchmark run, its times in seconds."""

    tool: str
    where: str  # the file, and the line where it holds several runs
    rate_per_s: float | None  # None: every request sent at once (rate inf)
    max_concurrency: int | None  # requests in flight at most; None: no cap
    completed: int
    input_len: float  # mean prompt tokens
    output_len: float  # mean generated tokens
    input_len_cv: float | None  # the spreads, where the file saved each request's lengths
    output_len_cv: float | None
    output_tokens_per_s: float
    latencies: dict[str, float]  # a load run's figures: ttft_mean_s, tpot_p99_s, ...
    # the server's settings where the tool saved them (SGLang's server_info: its server
    # arguments), else empty
    server: dict[str, Any] = field(default_factory=dict)
    arrivals: str = "poisson"  # a rate's requests: a Poisson stream or evenly spaced (uniform)
    engine: TrtllmEngine | None = None  # the engine a trtllm-bench report describes

    def check_server(self, flags: ServerFlags) -> None:
        """Raise GpuarchError where the server the run measured, as the tool saved its
        settings (SGLang's server_info, trtllm-bench's engine), had settings the estimate's
        ``flags`` contradict (``validation/server_settings.py``)."""
        if self.server:
            check_sglang_server(self.server, self.where, flags)
        if self.engine is not None:
            check_trtllm_engine(self.engine, self.where, flags)

    @property
    def kind(self) -> str:
        """``rate`` (a Poisson stream), ``concurrency`` (so many in flight, each replaced
        as it finishes) or ``offline`` (every request at once)."""
        if self.rate_per_s is not None:
            return "rate"
        return "offline" if self.max_concurrency is None else "concurrency"

    def how_sent(self) -> str:
        """How the run sent its requests, in words."""
        if self.rate_per_s is not None:
            spacing = " evenly spaced" if self.arrivals == "uniform" else ""
            return f"at {self.rate_per_s:g} requests/s{spacing}"
        if self.max_concurrency is not None:
            return f"with {self.max_concurrency} requests in flight"
        return f"all {self.completed} requests at once"

    def figures(self) -> dict[str, float]:
        """The point's measured figures: a load run's latency statistics; the mean TTFT,
        TPOT and latency and the throughput of a run at a concurrency; the throughput of
        an offline run (whose first tokens wait behind the whole queue)."""
        if self.kind == "rate":
            return dict(self.latencies)
        figures = {"output_tokens_per_s": self.output_tokens_per_s}
        if self.kind == "concurrency":
            for point_key, key in (("ttft_s", "ttft_mean_s"), ("tpot_s", "tpot_mean_s"),
                                   ("request_latency_s", "latency_mean_s")):
                if key in self.latencies:
                    figures[point_key] = self.latencies[key]
        return figures


def _lines(path: Path, label: str) -> list[tuple[int, dict[str, Any]]]:
    """The file's result objects with their line (0 for a file that is one object): one
    JSON object, or JSON lines (SGLang appends a line per run); ``label`` names the file in
    messages."""
    text = read_input_text(path, "--measured")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [(0, whole)]
    results = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            result = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GpuarchError(f"--measured: {label}: line {n} is not JSON ({exc.msg}): "
                               "expected vLLM's --save-result file, SGLang's --output-file "
                               "lines, AIPerf's profile_export_aiperf.json, trtllm-bench's "
                               "--report_json or GuideLLM's benchmarks.json") from None
        if not isinstance(result, dict):
            raise GpuarchError(f"--measured: {label}: line {n} is not a JSON object")
        results.append((n, result))
    if not results:
        raise GpuarchError(f"--measured: {label} holds no result")
    return results


def _number(name: str, result: dict[str, Any], key: str) -> float:
    if key not in result:
        raise GpuarchError(f"--measured: {name}: no {key!r}: expected a result of vllm bench "
                           "serve --save-result or sglang.bench_serving --output-file")
    return saved_figure(name, key, result[key])


def _spread(name: str, result: dict[str, Any], key: str) -> float | None:
    """The standard deviation over the mean of a saved list of lengths, or None."""
    lengths = result.get(key)
    if lengths is None:
        return None
    if not isinstance(lengths, list) or not lengths \
            or not all(is_positive_number(v) for v in lengths):
        raise GpuarchError(f"--measured: {name}: {key}: expected a list of token counts")
    counts = [float(v) for v in lengths]
    return statistics.pstdev(counts) / statistics.fmean(counts)


def _rate(name: str, result: dict[str, Any]) -> float | None:
    raw = result.get("request_rate", "inf")
    if raw in ("inf", "Infinity") or (isinstance(raw, float) and math.isinf(raw) and raw > 0):
        return None
    if not is_positive_number(raw):
        raise GpuarchError(f"--measured: {name}: request_rate = {raw!r}: expected requests "
                           "per second (or inf); a trace's own timestamps are not simulated")
    return float(raw)


def read_bench_results(path: Path, concurrency: int | None = None, label: str | None = None
                       ) -> tuple[BenchResult, ...]:
    """Every run a saved benchmark result holds, in the file's order. Refused, naming the
    file (and line) and the key: a result without the counts and figures both tools save, a
    stream that is not Poisson (vLLM's burstiness other than 1), and a rate with a cap on the
    requests in flight (neither the steady state nor the simulation models both).
    ``concurrency`` (the --batch given) is a trtllm-bench run's, which its report does not
    keep; ``label`` names the file in messages and points (default: its name; the path
    where several files share a name, as AIPerf's runs do)."""
    from gpuarch.validation.aiperf_results import (
        is_aiperf_records,
        is_aiperf_result,
        read_aiperf_result,
    )
    from gpuarch.validation.guidellm_results import is_guidellm_report, read_guidellm_report
    from gpuarch.validation.trtllm_bench_results import is_trtllm_report, read_trtllm_report

    label = label or path.name
    lines = _lines(path, label)
    runs = []
    for n, result in lines:
        name = label if n == 0 or len(lines) == 1 else f"{label} line {n}"
        if is_aiperf_records(result):
            raise GpuarchError(f"--measured: {name}: one of AIPerf's per-request records "
                               "(profile_export.jsonl); give the run's "
                               "profile_export_aiperf.json")
        if is_trtllm_report(result):
            runs.append(read_trtllm_report(name, result, concurrency))
        elif is_guidellm_report(result):
            runs += read_guidellm_report(name, result)
        else:
            runs.append(read_aiperf_result(name, result) if is_aiperf_result(result)
                        else _result(name, result))
    return tuple(runs)


def _result(name: str, result: dict[str, Any]) -> BenchResult:
    """One run's saved object (``name`` says where it is, for messages and the point)."""
    tool = "SGLang bench_serving" if "mean_e2e_latency_ms" in result else "vLLM bench serve"
    completed = result.get("completed")
    if not isinstance(completed, int) or isinstance(completed, bool) or completed < 1:
        raise GpuarchError(f"--measured: {name}: completed = {completed!r}: expected the "
                           "requests that completed, at least 1")
    rate = _rate(name, result)
    concurrency = result.get("max_concurrency")
    if concurrency is not None and (not isinstance(concurrency, int)
                                    or isinstance(concurrency, bool) or concurrency < 1):
        raise GpuarchError(f"--measured: {name}: max_concurrency = {concurrency!r}: expected "
                           "a whole number >= 1 or null")
    burstiness = result.get("burstiness", 1.0)
    if rate is not None and burstiness != 1.0:
        raise GpuarchError(f"--measured: {name}: burstiness = {burstiness!r}: the simulation "
                           "sends a Poisson stream (burstiness 1)")
    if rate is not None and concurrency is not None:
        raise GpuarchError(f"--measured: {name}: request_rate {rate:g}/s with max_concurrency "
                           f"{concurrency}: a stream capped in flight is not simulated; "
                           "compare a run with one of the two")
    latencies = {}
    for key, value in result.items():
        stat, _, rest = key.partition("_")
        figure = rest.removesuffix("_ms")
        # (a TPOT of one-token answers is saved as 0: nothing to compare)
        if stat in _STATISTICS and figure in _LATENCY and rest.endswith("_ms") \
                and value != 0:
            latencies[f"{_LATENCY[figure]}_{_STATISTICS[stat]}_s"] = \
                to_si(_number(name, result, key), Unit.MS)
    return BenchResult(
        tool=tool, where=name, rate_per_s=rate, max_concurrency=concurrency,
        completed=completed,
        input_len=_number(name, result, "total_input_tokens") / completed,
        output_len=_number(name, result, "total_output_tokens") / completed,
        input_len_cv=_spread(name, result, "input_lens"),
        output_len_cv=_spread(name, result, "output_lens"),
        output_tokens_per_s=_number(name, result, "output_throughput"),
        latencies=latencies,
        server=server if isinstance(server := result.get("server_info"), dict) else {})
