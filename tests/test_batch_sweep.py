"""Serving estimates over several batch sizes (``estimate infer --batch LIST``): each point
is the estimate at that batch, the frontier of output per GPU against speed per user is
marked by its definition, and bad lists are usage errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.sweep import MAX_SWEEP_POINTS, on_frontier, sweep_batches, sweep_values
from gpuarch.workloads.presets import preset
from tests.test_cli import run

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
LLAMA8 = preset("llama-3.1-8b").shape



def test_frontier_by_definition() -> None:
    """A point is on the frontier when it fits and nothing that fits gives as much of both
    rates and more of one; equal rates go to the lower TTFT (no queue)."""
    # (per GPU, per user, TTFT, fits)
    points = [(100.0, 50.0, 0.1, True),   # the fastest per user
              (300.0, 30.0, 0.2, True),   # more per GPU, slower per user: both kept
              (250.0, 25.0, 0.2, True),   # beaten by the one above on both
              (300.0, 30.0, 0.9, True),   # the same rates, later (queued): beaten
              (900.0, 60.0, 0.1, False)]  # beats all, but does not fit
    assert on_frontier(points) == [True, True, False, False, False]
    assert on_frontier([(1.0, 1.0, 1.0, True)]) == [True]
    assert on_frontier([(1.0, 1.0, 1.0, False)]) == [False]


def test_sweep_values_expand_and_deduplicate() -> None:
    """'sweep' (0) is the powers of two below the largest batch that fits, then 'max'
    (None); repeats are dropped, order kept; too many is a usage error naming --batch."""
    assert sweep_values([0], 100) == [1, 2, 4, 8, 16, 32, 64, None]
    assert sweep_values([0], 64) == [1, 2, 4, 8, 16, 32, None]
    assert sweep_values([0], 1) == [None]
    assert sweep_values([8, 1, 8, None, 0], 5) == [8, 1, None, 2, 4]
    with pytest.raises(GpuarchError, match="--batch: 65 batch sizes"):
        sweep_values(list(range(1, MAX_SWEEP_POINTS + 2)), 10)


def test_each_point_is_the_single_estimate() -> None:
    """Every point of a sweep is estimate_inference at its batch (nothing recomputed
    differently), sorted by requests in flight, and 'max' is the largest batch that fits,
    listed once even when that number is also asked for."""
    cfg = InferenceConfig(input_len=1000, output_len=500, batch=None,
                          batching=Batching.CONTINUOUS)
    largest = estimate_inference(CATALOG, LLAMA8, H100, cfg)
    sweep = sweep_batches(CATALOG, LLAMA8, H100, cfg, [64, None, 1, largest.max_batch, 4])
    assert [p.in_flight for p in sweep.points] == [1, 4, 64, largest.max_batch]
    for p in sweep.points:
        single = estimate_inference(CATALOG, LLAMA8, H100,
                                    dataclasses.replace(cfg, batch=p.asked))
        assert p.estimate.as_json() == single.as_json()
    # continuous batching on a memory-bound decode: each larger batch gives more per GPU
    # and less per user, so every batch is on the frontier
    assert all(p.on_frontier for p in sweep.points)
    assert sweep.as_json()["frontier_batches"] == [1, 4, 64, "max"]


@settings(max_examples=15, deadline=None)
@given(input_len=st.integers(16, 8192), output_len=st.integers(2, 4096),
       batches=st.lists(st.integers(1, 4096), min_size=1, max_size=6),
       continuous=st.booleans())
def test_sweep_invariants(input_len: int, output_len: int, batches: list[int],
                          continuous: bool) -> None:
    """For any lengths and batches: speed per user is 1 / TPOT; a frontier point fits and
    no fitting point beats it on both rates; every fitting point off the frontier is beaten
    by one that fits; under continuous batching no batch exceeds what fits."""
    cfg = InferenceConfig(input_len=input_len, output_len=output_len, batch=None,
                          batching=Batching.CONTINUOUS if continuous else Batching.STATIC)
    sweep = sweep_batches(CATALOG, LLAMA8, H100, cfg, batches)
    rates = [(p.estimate.output_tokens_per_s / p.estimate.gpus,
              p.estimate.output_tokens_per_s_per_user, p.estimate.ttft_s,
              p.estimate.fits_in_memory) for p in sweep.points]
    for i, p in enumerate(sweep.points):
        per_gpu, per_user, ttft, fits = rates[i]
        assert per_user == pytest.approx(1.0 / p.estimate.tpot_s)
        if continuous:
            assert p.estimate.batch <= max(1, p.estimate.max_batch)
        others = [o for j, o in enumerate(rates) if j != i and o[3]]
        beaten = any(o[0] >= per_gpu and o[1] >= per_user
                     and (o[0] > per_gpu or o[1] > per_user) for o in others)
        sooner = any(o[:2] == (per_gpu, per_user) and o[2] < ttft for o in others)
        if p.on_frontier:
            assert fits and not beaten and not sooner
        elif fits:
            assert beaten or sooner


def test_cli_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The text sweep: one row per batch under one header, the frontier marked, the queue
    and the memory explained when they occur, the error band once."""
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-70b", "--gpu",
                         "h100", "--gpus", "4", "--tp", "4", "--input-len", "2048",
                         "--output-len", "256", "--batch", "1,8,max,1024")
    assert status == 0
    assert "4 batch sizes" in out
    assert "tok/s/user" in out and "tok/s/GPU" in out
    assert "* on the frontier" in out
    assert "Fits NO" in out  # static batching: 1,024 sequences do not fit
    assert "error band" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("In flight"))
    rows = lines[header + 2:lines.index("", header)]
    assert [r.split()[0] for r in rows] == ["*", "*", "*", "1,024"]  # by requests in flight
    assert [r.split()[1] for r in rows[:3]] == ["1", "8", rows[2].split()[1]]
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "1000", "--output-len", "1000",
                         "--batching", "continuous", "--batch", "16,4096")
    assert status == 0
    assert "In flight above Batch" in out  # 4,096 in flight, fewer fit: the rest queue


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--json: one document with the sweep's points (each the single estimate's keys plus
    what was asked, the requests in flight, whether on the frontier and its error band)."""
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128",
                         "--batching", "continuous", "--batch", "sweep", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["input_len"] == 512 and doc["batching"] == "continuous"
    points = doc["sweep"]
    assert points[0]["batch_asked"] == 1 and points[-1]["batch_asked"] == "max"
    assert [p["requests_in_flight"] for p in points] == sorted(
        p["requests_in_flight"] for p in points)
    for p in points:
        assert {"ttft_s", "tpot_s", "output_tokens_per_s_per_gpu",
                "output_tokens_per_s_per_user", "on_frontier", "validation"} <= set(p)
        assert p["output_tokens_per_s_per_user"] == pytest.approx(1.0 / p["tpot_s"], rel=1e-5)
    assert doc["frontier_batches"] == [p["batch_asked"] for p in points if p["on_frontier"]]


def test_single_estimate_reports_speed_per_user(capsys: pytest.CaptureFixture[str]) -> None:
    """A single serving estimate gives tokens/s per user (1 / TPOT) in JSON and text."""
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch",
                         "8", "--json")
    doc = json.loads(out)
    assert doc["output_tokens_per_s_per_user"] == pytest.approx(1.0 / doc["tpot_s"], rel=1e-5)
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch", "8")
    assert status == 0 and "per user (1 / TPOT)" in out


@pytest.mark.parametrize(("extra", "message"), [
    (["--batch", "1,,4"], "--batch: expected a number, 'max', 'sweep'"),
    (["--batch", "0,4"], "--batch: expected >= 1, got 0"),
    (["--batch", "1,two"], "got 'two'"),
    (["--batch", ",".join(str(b) for b in range(1, 70))], "--batch: 69 batch sizes"),
    (["--batch", "1,2", "--prefill-gpus", "2", "--batching", "continuous"],
     "the disaggregated estimate (--prefill-gpus) takes one batch"),
    (["--batch", "4", "--plot", "sweep.png"], "--plot: draws a batch sweep"),
    (["--batch", "1,2", "--plot", "sweep.txt"], "must end in .png or .svg"),
])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch, extra: list[str],
                          message: str) -> None:
    """Bad batch lists and flags that do not go with a sweep: exit 2, the flag and value
    named, no traceback, no file written."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                           "h100", "--input-len", "100", "--output-len", "100", *extra)
    assert status == 2
    assert message in err and "Traceback" not in err
    assert out == "" and not list(tmp_path.iterdir())


def test_cli_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--plot with a sweep writes the chart (and still prints the table)."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "sweep.svg"
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "256", "--output-len", "256",
                         "--batch", "1,16,256", "--plot", str(target))
    assert status == 0 and "tok/s/user" in out
    text = target.read_text()
    assert text.startswith("<?xml") and "requests in flight" in text
