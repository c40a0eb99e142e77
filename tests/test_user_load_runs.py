"""Your own load tests against the serving simulation: ``gpuarch validate load --data FILE``
and ``estimate infer --rate R --as-point`` (validation/user_data.py,
validation/serving_load.py, docs/your-measurements.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.validation.serving_load import LOAD_FILE, RUN_KEYS
from gpuarch.validation.training import read_points
from gpuarch.validation.user_data import _check_fields, field_types
from tests.test_cli import run

REQUESTS = "2000"

LOAD_RUNS = """
[[source]]
id = "lab"
title = "Our vLLM load tests"

[[point]]
id = "8b-rate12"
source = "lab"
preset = "llama-3.1-8b"
gpu = "h100"
gpus = 1
input_len = 1024
output_len = 256
input_len_cv = 0.3
schedule = "mixed"
rate_per_s = 12
ttft_mean_s = 0.06
ttft_p99_s = 0.2
tpot_p50_s = 0.015
latency_p90_s = 4.5

[[point]]
id = "70b-tp2-rate3"
preset = "llama-3.1-70b"
gpu = "h200"
gpus = 2
tp = 2
weight_precision = "fp8"
kv_precision = "fp8"
input_len = 2048
output_len = 512
rate_per_s = 3
arrivals = "uniform"
tpot_mean_s = 0.02
latency_mean_s = 12.0
"""

# each run's estimate infer flags, as the file gives it
RUN_FLAGS = {
    "8b-rate12": ("--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
                  "--output-len", "256", "--input-len-cv", "0.3", "--schedule", "mixed",
                  "--rate", "12"),
    "70b-tp2-rate3": ("--model", "llama-3.1-70b", "--gpu", "h200", "--gpus", "2", "--tp", "2",
                      "--weight-precision", "fp8", "--kv-precision", "fp8", "--input-len",
                      "2048", "--output-len", "512", "--rate", "3", "--arrivals", "uniform"),
}


def _file(tmp_path: Path, text: str, name: str = "runs.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _simulated(capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]) -> dict[str, float]:
    """The figures estimate infer --simulate gives for ``flags``, by the file's names."""
    status, out, err = run(capsys, "estimate", "infer", *flags, "--simulate", REQUESTS,
                           "--json")
    assert status == 0, err
    sim = json.loads(out)["simulation"]
    return {f"{figure.removesuffix('_s')}_{stat}_s": sim[figure][stat]
            for figure in ("ttft_s", "tpot_s", "latency_s")
            for stat in ("mean", "p50", "p90", "p99")}


def test_a_load_run_takes_the_serving_fields_and_its_own() -> None:
    """The types file covers every key a load run may carry, and the shipped Server runs
    pass the checks a user's file gets."""
    assert set(field_types("load")) == set(RUN_KEYS)
    for run_ in read_points(LOAD_FILE, RUN_KEYS):
        _check_fields(run_.id, run_.raw, "load")


def test_own_load_runs_are_replayed_at_their_own_rate(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """Each run of the file is simulated as estimate infer --rate --simulate simulates the
    same deployment (its prompts spread by input_len_cv, its schedule), figure by figure,
    and only at its own rate: a file has no Offline reference for a measured load."""
    data = _file(tmp_path, LOAD_RUNS)
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--json")
    assert status == 0 and err == "", err
    doc = json.loads(out)
    assert doc["data"] == data and doc["runs"] == 2
    assert doc["prompts"] == {"drawn_from": "file", "source": None}
    assert {r["load"] for r in doc["rows"]} == {"scheduled"}
    assert set(doc["summary"]["scheduled"]) == {"ttft_mean_s", "ttft_p99_s", "tpot_p50_s",
                                                "latency_p90_s", "tpot_mean_s",
                                                "latency_mean_s"}
    for run_id, flags in RUN_FLAGS.items():
        expected = _simulated(capsys, flags)
        rows = [r for r in doc["rows"] if r["id"] == run_id]
        assert len(rows) == 4 if run_id == "8b-rate12" else len(rows) == 2
        for row in rows:
            assert row["predicted"] == pytest.approx(expected[row["metric"]], rel=1e-6)
            # (the JSON's figures carry six significant digits)
            assert row["error"] == pytest.approx(row["predicted"] / row["published"] - 1,
                                                 abs=1e-5)
    # evenly spaced arrivals queue less than a Poisson stream of the same rate: the run's
    # arrivals field is what was replayed
    poisson = _simulated(capsys, RUN_FLAGS["70b-tp2-rate3"][:-2])
    uniform = {r["metric"]: r["predicted"] for r in doc["rows"] if r["id"] == "70b-tp2-rate3"}
    assert uniform["latency_mean_s"] < poisson["latency_mean_s"]
    status, text, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS)
    assert status == 0 and "Your measured runs (runs.toml)" in text
    assert "TPOT p50 (pub., err.)" in text and "At the measured load" not in text
    # the evenly spaced run is marked, the Poisson one not
    assert "3 even" in text and "12 even" not in text
    assert {r["arrivals"] for r in doc["rows"]} == {"poisson", "uniform"}


def _bad(extra: str, drop: str = "") -> str:
    point = LOAD_RUNS.split("[[point]]")[2]
    if drop:
        point = point.replace(drop, "")
    return "[[point]]" + point + extra + "\n"


@pytest.mark.parametrize(("text", "expected"), [
    (_bad("batch = 8"), "batch: a run at a rate holds what its requests leave in flight"),
    (_bad("concurrency = 8"), "concurrency: a run at a rate"),
    (_bad("ttft_s = 0.05"), "ttft_s: a load run gives the latencies its requests saw "
     "(ttft_mean_s, ttft_p50_s, ttft_p90_s, ttft_p99_s, ...); did you mean 'ttft_mean_s'?"),
    (_bad("output_tokens_per_s = 900"), "its throughput follows from rate_per_s"),
    (_bad('mode = "static-batch"'), "mode = 'static-batch': a run at a rate batches "
     "continuously"),
    (_bad('schedule = "mixd"'), "schedule: expected one of separate, mixed, got 'mixd'; "
     "did you mean 'mixed'?"),
    (_bad("ttft_p50_s = 0.5\nttft_p99_s = 0.05"), "ttft_p50_s = 0.5 is above ttft_p99_s = "
     "0.05: a percentile cannot fall"),
    (_bad("", drop="rate_per_s = 3\n"), "point '70b-tp2-rate3': give rate_per_s"),
    (_bad("", drop="tpot_mean_s = 0.02\nlatency_mean_s = 12.0\n"),
     "give a measured figure: ttft_mean_s"),
    (_bad("").replace("rate_per_s = 3", "rate_per_s = 0"),
     "rate_per_s = 0: expected requests per second > 0"),
    (_bad("").replace("tpot_mean_s = 0.02", "tpot_mean_s = -0.02"),
     "tpot_mean_s = -0.02: expected a measured figure > 0"),
    (_bad("input_len_cv = -0.1"), "input_len_cv = -0.1: expected a spread >= 0"),
    (_bad("", drop='arrivals = "uniform"\n') + 'arrivals = "unifrom"\n',
     "arrivals: expected one of poisson, uniform, got 'unifrom'; did you mean 'uniform'?"),
    (_bad("", drop='arrivals = "uniform"\n') + 'arrivals = "trace"\n',
     "arrivals: expected one of poisson, uniform, got 'trace'"),
    (_bad('offline = "mlperf-inf40-h100-sxm5-80gb-llama-2-70b-fp8"'),
     "offline names a shipped Offline point"),
    (_bad("tpot_p95_s = 0.03"), "unknown key 'tpot_p95_s'; did you mean"),
    # the simulation's own refusal, with the point named
    (_bad("pp = 2"), "point '70b-tp2-rate3': --simulate: a replica's pipeline stages are "
     "not simulated"),
])
def test_a_bad_load_file_is_refused_naming_what_is_wrong(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str) -> None:
    """A load run the simulation cannot replay, or whose fields contradict a run at a rate,
    is a usage error (status 2) naming the file, the point and the field; nothing on
    stdout."""
    status, out, err = run(capsys, "validate", "load", "--data", _file(tmp_path, text),
                           "--requests", REQUESTS)
    assert status == 2 and out == "" and "Traceback" not in err
    assert expected in err and "runs.toml" in err, err


def test_prompts_drawn_from_mlperfs_dataset_are_not_for_a_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = run(capsys, "validate", "load", "--data", _file(tmp_path, LOAD_RUNS),
                           "--prompts", "dataset")
    assert status == 2 and out == "" and "--prompts: draws the shipped runs' prompts" in err


@pytest.mark.parametrize("run_id", list(RUN_FLAGS))
def test_a_run_at_a_rate_written_as_a_point_is_replayed_as_simulated(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, run_id: str) -> None:
    """estimate infer --rate --as-point writes a load run (no mode: the rate decides the
    batch) that validate load --data replays exactly as estimate infer --simulate did."""
    flags = RUN_FLAGS[run_id]
    # --input-len-cv and --arrivals shape a --simulate replay, so they are written with one
    sim = ("--simulate", REQUESTS) if {"--input-len-cv", "--arrivals"} & set(flags) else ()
    status, text, err = run(capsys, "estimate", "infer", *flags, *sim, "--as-point", run_id)
    assert status == 0 and err == "", err
    assert "rate_per_s = " in text and "mode = " not in text
    assert ("input_len_cv = 0.3" in text) == ("--input-len-cv" in flags)
    assert ('arrivals = "uniform"' in text) == ("--arrivals" in flags)
    data = _file(tmp_path, text + "ttft_mean_s = 0.1\ntpot_p99_s = 0.03\n")
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--json")
    assert status == 0 and err == "", err
    expected = _simulated(capsys, flags)
    rows = json.loads(out)["rows"]
    assert {r["metric"] for r in rows} == {"ttft_mean_s", "tpot_p99_s"}
    for row in rows:
        assert row["predicted"] == pytest.approx(expected[row["metric"]], rel=1e-6)


@pytest.mark.parametrize(("extra", "message"), [
    (("--simulate", "100", "--arrivals", "trace"), "not with --arrivals trace"),
    (("--model", "llama-3.1-70b"), "does not fit on H100 SXM5 80GB with these formats and "
     "parallelism (not even one sequence), so a stream of its requests cannot be replayed"),
    (("--simulate", "100", "--slo-ttft-ms", "200"), "not with --slo-ttft-ms/--slo-tpot-ms"),
])
def test_what_a_load_run_cannot_hold_is_refused(capsys: pytest.CaptureFixture[str],
                                               extra: tuple[str, ...], message: str) -> None:
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                           "h100", "--input-len", "1024", "--output-len", "256", "--rate",
                           "12", *extra, "--as-point")
    assert status == 2 and out == "" and message in err, err


def test_the_documents_load_example_runs(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    """docs/your-measurements.md's load-test example (its third TOML block) is read and
    replayed as it stands."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "your-measurements.md").read_text()
    text = doc.split("```toml\n")[3].split("```")[0]
    assert "rate_per_s" in text
    status, out, err = run(capsys, "validate", "load", "--data", _file(tmp_path, text),
                           "--requests", REQUESTS, "--json")
    assert status == 0 and err == "", err
    assert {r["metric"] for r in json.loads(out)["rows"]} == {
        "ttft_mean_s", "ttft_p99_s", "tpot_p50_s", "latency_p90_s"}


def test_match_keeps_the_runs_it_names(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    """--match selects runs by id, source or GPU before any is simulated; a text no run
    has is a usage error with the nearest GPU or source."""
    data = _file(tmp_path, LOAD_RUNS)
    status, out, err = run(capsys, "validate", "load", "--data", data, "--match", "h200",
                           "--requests", REQUESTS, "--json")
    assert status == 0 and err == "", err
    assert {r["id"] for r in json.loads(out)["rows"]} == {"70b-tp2-rate3"}
    assert json.loads(out)["runs"] == 1
    status, out, err = run(capsys, "validate", "load", "--data", data, "--match", "h2000",
                           "--requests", REQUESTS)
    assert status == 2 and out == ""
    assert "--match: no run has all of 'h2000' in its id, source or GPU; did you mean" in err


def test_plot_draws_the_runs_against_their_rate(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """--plot writes the chart (and still prints the table); a path it cannot write is a
    usage error before any run is simulated."""
    pytest.importorskip("matplotlib")
    data, target = _file(tmp_path, LOAD_RUNS), tmp_path / "load.png"
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--plot", str(target))
    assert status == 0 and "Your measured runs" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, out, err = run(capsys, "validate", "load", "--data", data, "--plot",
                           str(tmp_path / "load.txt"))
    assert status == 2 and out == "" and "--plot" in err and "must end in .png or .svg" in err
