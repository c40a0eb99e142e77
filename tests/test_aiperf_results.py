"""AIPerf's aggregated result (``profile_export_aiperf.json``) as a measured run:
``estimate infer ... --as-point --measured FILE`` (validation/aiperf_results.py,
docs/your-measurements.md). The files are written in AIPerf's layouts (metric blocks with a
unit and statistics; the run's settings under ``input_config``, in the command-line era's
``loadgen`` and the benchmark-config era's ``phases``, a table and later a list); their
figures are made up for the test, not measurements."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.validation.bench_results import read_bench_results
from tests.test_bench_results import _point
from tests.test_cli import run

REQUESTS = "2000"
LLAMA_8B = ("--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
            "--output-len", "256")


def _block(unit: str, avg: float, **stats: float) -> dict[str, Any]:
    return {"unit": unit, "avg": avg, **stats}


METRICS: dict[str, Any] = {
    "request_throughput": _block("requests/sec", 7.9),
    "request_latency": _block("ms", 3061.0, p50=3050.2, p90=3300.0, p99=3420.7, p95=3390.0,
                              std=120.0, min=2800.0, max=3500.0),
    "time_to_first_token": _block("ms", 48.2, p50=44.9, p90=80.0, p99=101.5, p25=40.0),
    "inter_token_latency": _block("ms", 11.8, p50=11.7, p90=12.9, p99=14.2),
    "inter_chunk_latency": _block("ms", 11.8, p50=11.2, p99=30.1),
    "output_token_throughput": _block("tokens/sec", 2029.1),
    "output_token_throughput_per_user": _block("tokens/sec/user", 84.7, p50=85.4),
    "input_sequence_length": _block("tokens", 1024.0, std=0.0, p50=1024.0),
    "output_sequence_length": _block("tokens", 255.9, std=64.0, p50=256.0),
    "request_count": _block("requests", 1000.0),
    "benchmark_duration": _block("sec", 126.1),
}

LOADGEN_RATE: dict[str, Any] = {
    **METRICS,
    "was_cancelled": False,
    "error_summary": [],
    "input_config": {
        "endpoint": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"], "type": "chat",
                     "streaming": True, "url": "localhost:8000"},
        # (AIPerf writes only what was set: --request-rate alone leaves the mode out)
        "loadgen": {"request_rate": 8.0, "request_count": 1000},
    },
}

PHASES_CONCURRENCY: dict[str, Any] = {
    "schema_version": "1.2",
    "aiperf_version": "0.7.0",
    **METRICS,
    "input_config": {
        "models": {"items": [{"name": "meta-llama/Llama-3.1-8B-Instruct"}]},
        "endpoint": {"urls": ["http://localhost:8000"]},
        "phases": [{"name": "warmup", "kind": "warmup", "type": "concurrency",
                    "concurrency": 8, "requests": 20},
                   {"name": "profiling", "kind": "profiling", "type": "concurrency",
                    "concurrency": 64, "requests": 1000}],
    },
}


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``base`` with the value at a dotted ``path`` replaced (None: removed)."""
    doc = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        node.pop(last)
    else:
        node[last] = value
    return doc


def _write(tmp_path: Path, content: dict[str, Any] | str,
           name: str = "profile_export_aiperf.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_a_rate_without_a_mode_is_a_poisson_load_run(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """AIPerf's default arrival pattern is a Poisson stream: a rate whose mode the file
    leaves out is a load run at that rate with no arrivals field, its means (avg), medians,
    90th and 99th percentiles of TTFT, ITL (the TPOT) and request latency in seconds; the
    other statistics and metrics have no simulated counterpart. Replayed, it is estimate
    infer --rate 8 --simulate."""
    data = _point(capsys, tmp_path, (*LLAMA_8B, "--schedule", "mixed"),
                  _write(tmp_path, LOADGEN_RATE))
    text = Path(data).read_text()
    assert 'framework = "AIPerf"' in text and "rate_per_s = 8.0" in text
    assert "ttft_mean_s = 0.0482" in text and "tpot_p90_s = 0.0129" in text
    assert "latency_p99_s = 3.4207" in text and "arrivals" not in text
    assert "p95" not in text and "p25" not in text and "mode" not in text
    # the answers' spread from output_sequence_length's std over its mean
    assert "output_len_cv = 0.25" in text
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--json")
    assert status == 0 and err == "", err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {f"{f}_{s}_s" for f in ("ttft", "tpot", "latency")
                         for s in ("mean", "p50", "p90", "p99")}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--schedule", "mixed",
                         "--rate", "8", "--output-len-cv", "0.25", "--simulate", REQUESTS,
                         "--json")
    sim = json.loads(out)["simulation"]
    assert rows["tpot_p99_s"]["predicted"] == pytest.approx(sim["tpot_s"]["p99"], rel=1e-5)


@pytest.mark.parametrize(("mode_key", "mode", "arrivals"), [
    ("request_rate_mode", "constant", "uniform"),
    ("request_rate_mode", "poisson", "poisson"),
    ("arrival_pattern", "constant", "uniform"),
    ("arrival_pattern", "gamma", "poisson"),  # smoothness 1 (the default): a Poisson stream
])
def test_the_rate_mode_decides_the_arrivals(tmp_path: Path, mode_key: str, mode: str,
                                            arrivals: str) -> None:
    (bench,) = read_bench_results(Path(_write(
        tmp_path, _with(LOADGEN_RATE, f"input_config.loadgen.{mode_key}", mode))))
    assert bench.kind == "rate" and bench.arrivals == arrivals and bench.rate_per_s == 8.0


def test_an_evenly_spaced_run_is_replayed_evenly_spaced(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """A constant-rate run's point says arrivals = "uniform" and is replayed with the
    simulation's evenly spaced arrivals, as estimate infer --simulate --arrivals uniform."""
    doc = _with(LOADGEN_RATE, "input_config.loadgen.request_rate_mode", "constant")
    data = _point(capsys, tmp_path, LLAMA_8B, _write(tmp_path, doc))
    assert 'arrivals = "uniform"' in Path(data).read_text()
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--json")
    assert status == 0 and err == "", err
    rows = {r["metric"]: r["predicted"] for r in json.loads(out)["rows"]}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--rate", "8",
                         "--output-len-cv", "0.25", "--simulate", REQUESTS, "--arrivals",
                         "uniform", "--json")
    sim = json.loads(out)["simulation"]
    assert rows["ttft_p99_s"] == pytest.approx(sim["ttft_s"]["p99"], rel=1e-5)
    # a flag against the file's arrivals is refused
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--simulate", "100",
                           "--arrivals", "poisson", "--as-point", "mine", "--measured",
                           _write(tmp_path, doc))
    assert status == 2 and out == ""
    assert "--arrivals poisson: profile_export_aiperf.json sent its requests at 8 " \
           "requests/s evenly spaced (uniform arrivals)" in err


def test_a_concurrency_phase_is_a_serving_point(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """The benchmark-config era's profiling phase (the warm-up phase beside it ignored) at
    64 in flight is a serving point with concurrency 64, compared as estimate infer --batch
    64 --batching continuous."""
    data = _point(capsys, tmp_path, LLAMA_8B, _write(tmp_path, PHASES_CONCURRENCY))
    text = Path(data).read_text()
    assert 'mode = "serving"' in text and "concurrency = 64" in text
    assert "output_tokens_per_s = 2029.1" in text and "ttft_s = 0.0482" in text
    assert "tpot_s = 0.0118" in text and "request_latency_s = 3.061" in text
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == "", err
    figures = {f["metric"]: f["predicted"] for f in json.loads(out)["figures"]}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--batch", "64",
                         "--batching", "continuous", "--output-len-cv", "0.25", "--json")
    estimated = json.loads(out)
    for key in ("output_tokens_per_s", "tpot_s", "ttft_s"):
        assert figures[key] == pytest.approx(estimated[key], rel=1e-5)


def test_the_layouts_aiperf_has_written_read_alike(tmp_path: Path) -> None:
    """Phases as a table keyed by name (the first benchmark-config releases) and as a list;
    metric blocks under ``records`` (the first releases), in nanoseconds; all the requests
    in flight at once is an offline run of those that completed."""
    table = _with(PHASES_CONCURRENCY, "input_config.phases",
                  {"warmup": {"type": "concurrency", "concurrency": 8, "requests": 20},
                   "profiling": {"type": "poisson", "rate": 12.5, "requests": 1000}})
    (bench,) = read_bench_results(Path(_write(tmp_path, table)))
    assert (bench.kind, bench.rate_per_s, bench.arrivals) == ("rate", 12.5, "poisson")
    nested = {"input_config": LOADGEN_RATE["input_config"],
              "records": {**METRICS, "time_to_first_token": _block("ns", 48.2e6, p99=1.015e8)}}
    (bench,) = read_bench_results(Path(_write(tmp_path, nested)))
    assert bench.latencies["ttft_mean_s"] == pytest.approx(0.0482)
    assert bench.latencies["ttft_p99_s"] == pytest.approx(0.1015)
    everything = _with(PHASES_CONCURRENCY, "input_config.phases.1.concurrency", 1000)
    (bench,) = read_bench_results(Path(_write(tmp_path, everything)))
    assert bench.kind == "offline" and bench.completed == 1000


@pytest.mark.parametrize(("doc", "message"), [
    (_with(LOADGEN_RATE, "input_config.loadgen.concurrency", 16),
     "request rate 8/s with concurrency 16: a stream capped in flight is not simulated"),
    (_with(LOADGEN_RATE, "input_config.loadgen.request_rate_mode", "sine"),
     "input_config.loadgen: sine: the simulation replays a Poisson stream"),
    (_with(_with(LOADGEN_RATE, "input_config.loadgen.arrival_pattern", "gamma"),
           "input_config.loadgen.arrival_smoothness", 2.0), "gamma: the simulation replays"),
    (_with(LOADGEN_RATE, "input_config.loadgen.user_centric_rate", 1.0),
     "loadgen.user_centric_rate: users each waiting"),
    (_with(LOADGEN_RATE, "input_config.input", {"fixed_schedule": True}),
     "input.fixed_schedule: a trace's own timestamps are not simulated"),
    (_with(PHASES_CONCURRENCY, "input_config.phases.1.type", "fixed_schedule"),
     "input_config.phases: profiling: fixed_schedule: the simulation replays"),
    (_with(PHASES_CONCURRENCY, "input_config.phases", [{"type": "concurrency"}] * 2),
     "input_config.phases: expected one profiling phase, found 2"),
    (_with(PHASES_CONCURRENCY, "input_config.phases.1.concurrency", 0),
     "concurrency = 0: expected a whole number >= 1"),
    (_with(LOADGEN_RATE, "input_config.loadgen.request_rate", -2),
     "request rate = -2: expected requests per second above zero"),
    (_with(LOADGEN_RATE, "input_config.loadgen", {"request_count": 10}),
     "neither a request rate nor a concurrency"),
    (_with(LOADGEN_RATE, "time_to_first_token.unit", "minutes"),
     "time_to_first_token.unit = 'minutes': expected one of ms, us, ns, s, sec"),
    (_with(LOADGEN_RATE, "time_to_first_token.p99", -1.0),
     "time_to_first_token.p99 = -1.0: expected a number above zero"),
    (_with(LOADGEN_RATE, "request_count.avg", 999.5),
     "request_count.avg = 999.5: expected a whole number of requests"),
    (_with(LOADGEN_RATE, "output_token_throughput", None), "no output_token_throughput.avg"),
    (_with(LOADGEN_RATE, "request_count", None), "no 'request_count' block"),
    (_with(LOADGEN_RATE, "request_latency", 3.0), "request_latency = 3.0: expected a block"),
    (_with(LOADGEN_RATE, "input_sequence_length.avg", 2048.0),
     "--input-len 1024: the requests of profile_export_aiperf.json averaged 2,048.0 tokens"),
    ({**METRICS, "input_config": {"concurrency": 64, "model": ["llama"]}},
     "genai-perf's export (its input_config holds perf_analyzer's settings) is not read"),
    ('{"metadata": {"session_num": 0}, "metrics": {}, "error": null}\n',
     "one of AIPerf's per-request records (profile_export.jsonl); give the run's "
     "profile_export_aiperf.json"),
])
def test_an_aiperf_run_the_model_cannot_compare_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any] | str,
        message: str) -> None:
    """Each refusal is a usage error naming the file, the setting or metric and what is
    wrong; nothing on stdout."""
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--as-point",
                           "--measured", _write(tmp_path, doc))
    assert status == 2 and out == "" and message in err, err
    assert "profile_export_aiperf.json" in err and "Traceback" not in err


def test_a_sweep_of_runs_saved_under_one_name_is_told_apart_by_path(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """AIPerf names every run's file profile_export_aiperf.json (in its own artifact folder):
    a sweep of them gives a point a run, each named by its rate and its where by its path."""
    files = []
    for rate in (4.0, 8.0):
        folder = tmp_path / f"rate{rate:g}"
        folder.mkdir()
        files.append(_write(folder, _with(LOADGEN_RATE, "input_config.loadgen.request_rate",
                                          rate)))
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--as-point", "h100",
                           "--measured", *files)
    assert status == 0 and err == "", err
    assert 'id = "h100-r4"' in out and 'id = "h100-r8"' in out
    assert f'where = "{files[0]}"' in out and f'where = "{files[1]}"' in out
