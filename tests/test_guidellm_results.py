"""GuideLLM's report (``guidellm benchmark --output-path benchmarks.json``) as measured runs:
``estimate infer ... --as-point --measured FILE [--measured-kind KIND]``
(validation/guidellm_results.py, docs/your-measurements.md). The reports are written in
GuideLLM's layouts (0.4 and later: each benchmark's ``config.strategy`` and
``metrics.request_totals``; 0.2 and 0.3: ``args.strategy`` and ``request_totals`` beside the
metrics); their figures are made up for the test, not measurements."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.validation.bench_results import read_bench_results
from tests.test_aiperf_results import _with
from tests.test_cli import run

LLAMA_8B = ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
            "--output-len", "256", "--as-point", "h100"]


def _summary(mean: float, spread: float = 0.0) -> dict[str, Any]:
    """A StatusDistributionSummary: its successful requests' statistics (and a total)."""
    stats = {"mean": mean, "median": mean * 0.98, "mode": mean, "variance": spread ** 2,
             "std_dev": spread, "min": mean * 0.5, "max": mean * 2, "count": 100,
             "total_sum": mean * 100,
             "percentiles": {"p001": mean * 0.5, "p01": mean * 0.6, "p05": mean * 0.7,
                             "p10": mean * 0.8, "p25": mean * 0.9, "p50": mean * 0.98,
                             "p75": mean * 1.1, "p90": mean * 1.2, "p95": mean * 1.3,
                             "p99": mean * 1.5, "p999": mean * 1.8}}
    return {"successful": stats, "incomplete": None, "errored": None, "total": stats}


def _benchmark(strategy: dict[str, Any], ttft_ms: float, itl_ms: float, latency_s: float,
               tokens_per_s: float) -> dict[str, Any]:
    """A GuideLLM 0.4+ benchmark."""
    return {
        "type_": "generative_benchmark",
        "config": {"id_": "b", "run_id": "r", "run_index": 0, "strategy": strategy,
                   "profile": {"type_": "sweep"}},
        "metrics": {
            "request_totals": {"successful": 200, "incomplete": 0, "errored": 0,
                               "total": 200},
            "time_to_first_token_ms": _summary(ttft_ms),
            "inter_token_latency_ms": _summary(itl_ms),
            "time_per_output_token_ms": _summary(itl_ms * 2),
            "request_latency": _summary(latency_s),
            "prompt_token_count": _summary(1024.0),
            "output_token_count": _summary(256.0, 64.0),
            "output_tokens_per_second": _summary(tokens_per_s),
        },
    }


SWEEP: dict[str, Any] = {
    "args": {"profile": "sweep", "rate": [4]},
    "benchmarks": [
        _benchmark({"type_": "synchronous"}, 30.0, 9.0, 2.33, 110.0),
        _benchmark({"type_": "throughput", "max_concurrency": None}, 9000.0, 40.0, 19.2,
                   9500.0),
        _benchmark({"type_": "constant", "rate": 2.5}, 45.0, 11.0, 2.85, 640.0),
        _benchmark({"type_": "constant", "rate": 5.0}, 70.0, 13.5, 3.5, 1280.0),
    ],
}


def _write(tmp_path: Path, doc: dict[str, Any] | str, name: str = "benchmarks.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_a_sweep_is_kept_a_kind_at_a_time(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """A sweep saves runs of three kinds in one file: without --measured-kind they are
    refused naming the flag; with it, the constant rates are load runs of evenly spaced
    requests (the means, medians, p90 and p99 of TTFT, ITL as the TPOT, latency in
    seconds), the synchronous run a serving point at concurrency 1, the throughput run an
    offline run of its 200 requests."""
    data = _write(tmp_path, SWEEP)
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured", data)
    assert status == 2 and out == ""
    assert "the runs mix benchmarks.json benchmark 1 with 1 requests in flight" in err
    assert "--measured-kind rate|concurrency|offline" in err
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured", data,
                           "--measured-kind", "rate")
    assert status == 0 and err == "", err
    assert 'id = "h100-r2.5"' in out and 'id = "h100-r5"' in out
    assert out.count('arrivals = "uniform"') == 2 and 'framework = "GuideLLM"' in out
    assert "ttft_mean_s = 0.045" in out and "tpot_p99_s = 0.0165" in out
    assert "latency_p50_s = 2.793" in out and "output_len_cv = 0.25" in out
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured", data,
                           "--measured-kind", "concurrency")
    assert status == 0 and 'mode = "serving"' in out and "concurrency = 1" in out, err
    assert "tpot_s = 0.009" in out and "request_latency_s = 2.33" in out
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured", data,
                           "--measured-kind", "offline")
    assert status == 0 and 'mode = "max-throughput"' in out, err
    assert "num_requests = 200" in out and "output_tokens_per_s = 9500.0" in out


def test_a_rate_run_is_replayed_as_the_simulation_of_its_arrivals(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The 2.5/s constant-rate point replays as estimate infer --rate 2.5 --simulate
    --arrivals uniform."""
    one = {"benchmarks": [SWEEP["benchmarks"][2]]}
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured",
                           _write(tmp_path, one))
    assert status == 0 and err == "", err
    data = tmp_path / "runs.toml"
    data.write_text(out)
    status, out, err = run(capsys, "validate", "load", "--data", str(data), "--requests",
                           "2000", "--json")
    assert status == 0 and err == "", err
    rows = {r["metric"]: r["predicted"] for r in json.loads(out)["rows"]}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B[:-2], "--rate", "2.5",
                         "--output-len-cv", "0.25", "--simulate", "2000", "--arrivals",
                         "uniform", "--json")
    assert rows["tpot_p90_s"] == pytest.approx(json.loads(out)["simulation"]["tpot_s"]["p90"],
                                               rel=1e-5)


def test_guidellm_02s_layout_is_read_alike(tmp_path: Path) -> None:
    """GuideLLM 0.2 and 0.3 keep the strategy under args and the request counts beside the
    metrics; a Poisson strategy is a Poisson stream, concurrent streams a concurrency."""
    old = copy.deepcopy(SWEEP["benchmarks"][3])
    old["args"] = {"strategy": {"type_": "poisson", "rate": 5.0}, "strategy_index": 3}
    old["request_totals"] = old["metrics"].pop("request_totals")
    del old["config"]
    streams = copy.deepcopy(old)
    streams["args"]["strategy"] = {"type_": "concurrent", "streams": 16}
    poisson, concurrent = read_bench_results(Path(_write(tmp_path, {"benchmarks": [old,
                                                                                   streams]})))
    assert (poisson.kind, poisson.rate_per_s, poisson.arrivals) == ("rate", 5.0, "poisson")
    assert (concurrent.kind, concurrent.max_concurrency) == ("concurrency", 16)
    assert poisson.completed == 200 and poisson.where == "benchmarks.json benchmark 1"


def _broken(path: str, value: Any, index: int = 2) -> dict[str, Any]:
    """SWEEP's benchmark ``index`` alone, the value at a dotted ``path`` in it replaced."""
    return _with({"benchmarks": [SWEEP["benchmarks"][index]]}, f"benchmarks.0.{path}", value)


@pytest.mark.parametrize(("doc", "message"), [
    ({"benchmarks": [{"args": {}, "benchmarks": [{"mode": "synchronous"}]}]},
     "GuideLLM 0.1's nested report is not read"),
    (_broken("config.strategy.type_", "sine"), "config.strategy.type_ = 'sine': expected "
     "synchronous, concurrent, throughput, constant or poisson"),
    (_broken("config.strategy.max_concurrency", 8), "a rate of 2.5/s capped at 8 in flight"),
    (_broken("config.strategy.rate", 0), "config.strategy.rate = 0: expected a number above "
     "zero"),
    (_broken("config", None), "no strategy (config.strategy, scheduler.strategy or "
     "args.strategy)"),
    (_broken("metrics.request_totals.successful", 0), "request_totals.successful = 0"),
    (_broken("metrics.time_to_first_token_ms.successful.mean", -4.0),
     "metrics.time_to_first_token_ms.successful.mean = -4.0: expected a number above zero"),
    (_broken("metrics.request_latency", 3), "metrics.request_latency = 3: expected GuideLLM's"),
    (_broken("metrics.output_tokens_per_second", None), "metrics.output_tokens_per_second = "
     "None"),
    (_broken("metrics.prompt_token_count.successful.mean", 2048.0),
     "--input-len 1024: the requests of benchmarks.json averaged 2,048.0 tokens"),
])
def test_a_report_that_is_not_runs_the_model_can_compare_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any],
        message: str) -> None:
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured",
                           _write(tmp_path, doc))
    assert status == 2 and out == "" and message in err, err
    assert "Traceback" not in err


def test_measured_kind_needs_measured_runs_of_that_kind(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--batch", "8",
                           "--measured-kind", "rate")
    assert status == 2 and out == "" and "--measured-kind: keeps some runs of --measured" in err
    one = {"benchmarks": [SWEEP["benchmarks"][2]]}
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured",
                           _write(tmp_path, one), "--measured-kind", "offline")
    assert status == 2 and out == "" and \
        "--measured-kind offline: no run of the files was sent so" in err
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured",
                           _write(tmp_path, one), "--measured-kind", "rates")
    assert status == 2 and out == "" and "--measured-kind: expected one of rate, " \
                                         "concurrency, offline, got 'rates'; did you mean " \
                                         "'rate'?" in err
