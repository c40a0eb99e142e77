"""advise infer --simulate N: the top serving deployments replayed under random arrivals
(``advise.simulated``), each at the search's rate through the same simulation as
``estimate infer --rate R --simulate N``, their 99th percentiles set against the caps."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

from gpuarch.advise import load_prices
from gpuarch.advise.infer import InferenceSearch, advise_inference, option_config
from gpuarch.advise.simulated import replay_option, simulate_options
from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.simulate import Traffic, read_lengths, simulate_serving
from gpuarch.units import Unit, from_si
from gpuarch.workloads import preset
from tests.test_cli import run

CATALOG = load_catalog()
SHAPE = preset("llama-3.1-8b").shape
SEARCH = InferenceSearch(input_len=2048, output_len=256, rate=10.0, tpot_ms=50.0,
                         ttft_ms=500.0, max_gpus=8, gpus=("h100", "l40s"), top=4)


@pytest.fixture(scope="module")
def advice() -> object:
    return advise_inference(CATALOG, SHAPE, SEARCH, load_prices())


def test_each_option_is_the_simulation_of_its_configuration(advice: object) -> None:
    """Every replayed option reads what simulate_serving gives its configuration at the
    search's rate, and its cap flags say whether the 99th percentiles keep the caps."""
    top = advice.top  # type: ignore[attr-defined]
    rows = simulate_options(CATALOG, SHAPE, SEARCH, top, requests=500, seed=3)
    assert [r.rank for r in rows] == list(range(1, len(top) + 1))
    for row, option in zip(rows, top, strict=True):
        product = CATALOG.product(option.gpu)
        sim = simulate_serving(CATALOG, SHAPE, product, option_config(SEARCH, option), 10.0,
                               requests=500, seed=3, system=CATALOG.system_for(product))
        assert sim.tpot_s is not None and row.skipped is None
        assert row.ttft_p99_ms == pytest.approx(from_si(sim.ttft_s.p99, Unit.MS))
        assert row.tpot_p50_ms == pytest.approx(from_si(sim.tpot_s.p50, Unit.MS))
        assert row.mean_batch == pytest.approx(sim.mean_batch)
        assert row.ttft_p99_within_cap == (row.ttft_p99_ms <= 500.0)
        assert row.tpot_p99_within_cap == (row.tpot_p99_ms <= 50.0)
        capped = simulate_serving(CATALOG, SHAPE, product, option_config(SEARCH, option),
                                  10.0, requests=500, seed=3,
                                  system=CATALOG.system_for(product), ttft_slo_s=0.5,
                                  tpot_slo_s=0.05)
        assert capped.slo is not None and row.attained == capped.slo["attained"]
        assert option.gpu in row.deployment and option.formats in row.deployment
    uncapped = dataclasses.replace(SEARCH, ttft_ms=None, tpot_ms=None)
    rows = simulate_options(CATALOG, SHAPE, uncapped, top[:1], requests=200)
    assert rows[0].ttft_p99_within_cap is None and rows[0].tpot_p99_within_cap is None
    assert rows[0].attained is None


def test_prompts_spread_reach_the_replay(advice: object) -> None:
    """--input-len-cv: each option replayed with prompts spread around --input-len, as
    estimate infer --simulate --input-len-cv replays it."""
    option = advice.top[0]  # type: ignore[attr-defined]
    (row,) = simulate_options(CATALOG, SHAPE, SEARCH, (option,), requests=500,
                              input_len_cv=1.0)
    product = CATALOG.product(option.gpu)
    sim = simulate_serving(CATALOG, SHAPE, product, option_config(SEARCH, option), 10.0,
                           requests=500, system=CATALOG.system_for(product), input_len_cv=1.0)
    assert row.ttft_p99_ms == pytest.approx(from_si(sim.ttft_s.p99, Unit.MS))
    (plain,) = simulate_options(CATALOG, SHAPE, SEARCH, (option,), requests=500)
    assert plain.ttft_p99_ms != row.ttft_p99_ms


def test_a_disaggregated_or_pipelined_option_is_not_replayed(advice: object) -> None:
    """The simulation runs one aggregated replica without pipeline stages: such options
    say why they were not replayed; a search by concurrency has no rate to replay."""
    option = advice.top[0]  # type: ignore[attr-defined]
    piped = dataclasses.replace(option, pp=2, gpus=2 * option.gpus)
    (row,) = simulate_options(CATALOG, SHAPE, SEARCH, (piped,), requests=200)
    assert row.skipped == "pipeline stages are not simulated" and row.ttft_p99_ms is None
    split = advise_inference(CATALOG, SHAPE, dataclasses.replace(
        SEARCH, gpus=("h100",), disaggregated=True, top=20), load_prices())
    pooled = [o for o in split.top if o.prefill is not None]
    assert pooled
    (row,) = simulate_options(CATALOG, SHAPE, SEARCH, pooled[:1], requests=200)
    assert row.skipped is not None and row.skipped.startswith("disaggregated")
    with pytest.raises(GpuarchError, match=r"--simulate: replays requests arriving at a rate"):
        simulate_options(CATALOG, SHAPE, dataclasses.replace(SEARCH, rate=None,
                                                             concurrency=64),
                         (option,), requests=200)


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("advise", "infer", "--gpu", "h100", "--rate", "10", "--tpot-ms", "50",
            "--top", "3")
    status, out, _ = run(capsys, *base, "--simulate", "300", "--json")
    assert status == 0
    doc = json.loads(out)
    assert [r["rank"] for r in doc["simulated"]] == [1, 2, 3]
    assert all(r["ttft_p99_ms"] >= r["ttft_p50_ms"] > 0 for r in doc["simulated"])
    assert all(0 <= r["attained"] <= 1 for r in doc["simulated"])
    status, out, _ = run(capsys, *base, "--simulate", "300", "--seed", "2")
    assert status == 0 and "the top options replayed under random arrivals" in out
    assert "TTFT p99" in out and "within caps" in out


@pytest.mark.parametrize(("extra", "message"), [
    (("--concurrency", "64", "--simulate", "300"), "--simulate: replays requests arriving"),
    (("--rate", "10", "--seed", "1"), "--seed/--input-len-cv/--arrivals/--lengths: they shape"),
    (("--rate", "10", "--input-len-cv", "1"), "they shape the replays of --simulate or"),
    (("--rate", "10", "--arrivals", "uniform"), "they shape the replays of --simulate or"),
    (("--concurrency", "64", "--ttft-p99-ms", "100"), "--ttft-p99-ms: a percentile is checked"),
    (("--rate", "10", "--tpot-p99-ms", "30", "--disaggregated"),
     "--tpot-p99-ms: the replay simulates aggregated deployments"),
    (("--rate", "10", "--ttft-p99-ms", "100", "--arrivals", "trace"),
     "--arrivals trace: replays the arrival_s column of --lengths"),
    (("--rate", "10", "--ttft-p99-ms", "100", "--arrivals", "burst"),
     "--arrivals: expected one of poisson, uniform, trace, got 'burst'"),
    (("--rate", "10", "--ttft-p99-ms", "-5"), "--ttft-p99-ms"),
    (("--rate", "10", "--simulate", "300", "--input-len-cv", "-1"), "--input-len-cv: expected"),
    (("--rate", "10", "--simulate", "5"), "--simulate: expected a number of requests from 10"),
])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], extra: tuple[str, ...],
                          message: str) -> None:
    status, out, err = run(capsys, "advise", "infer", "--gpu", "h100", *extra)
    assert status == 2 and out == "" and message in err and "Traceback" not in err


# --- caps on the 99th percentiles: the ranking walked and replayed -----------------------

TAILED = dataclasses.replace(SEARCH, ttft_ms=None, tpot_ms=None, ttft_p99_ms=150.0,
                             tpot_p99_ms=20.0, top=3, traffic=Traffic(requests=400, seed=1))


@pytest.fixture(scope="module")
def tailed() -> object:
    return advise_inference(CATALOG, SHAPE, TAILED, load_prices())


def test_percentile_caps_keep_the_first_ranked_whose_replays_keep_them(tailed: object
                                                                      ) -> None:
    """Under --ttft-p99-ms/--tpot-p99-ms the advice is the steady state's ranking (with the
    caps applied to its means) walked in order, each deployment replayed, keeping the first
    --top whose 99th percentiles are within the caps; those passed over missed one."""
    steady = advise_inference(CATALOG, SHAPE, dataclasses.replace(
        TAILED, ttft_p99_ms=None, tpot_p99_ms=None, ttft_ms=150.0, tpot_ms=20.0, top=40),
        load_prices())
    expected, missed = [], 0
    for option in steady.top:
        if len(expected) == TAILED.top:
            break
        row = replay_option(CATALOG, SHAPE, TAILED, option, len(expected) + 1, 10.0,
                            TAILED.traffic)  # type: ignore[arg-type]
        if row.ttft_p99_ms <= 150.0 and row.tpot_p99_ms <= 20.0:  # type: ignore[operator]
            expected.append((option.gpu, option.gpus, option.tp, option.formats, row))
        else:
            missed += 1
    top = tailed.top  # type: ignore[attr-defined]
    simulated = tailed.simulated  # type: ignore[attr-defined]
    assert len(top) == TAILED.top and len(simulated) == TAILED.top
    assert [(o.gpu, o.gpus, o.tp, o.formats) for o in top] == [e[:4] for e in expected]
    assert list(simulated) == [e[4] for e in expected]
    assert all(r.ttft_p99_ms <= 150.0 and r.tpot_p99_ms <= 20.0 and r.ttft_p99_within_cap
               and r.tpot_p99_within_cap for r in simulated)
    rejected = tailed.rejected  # type: ignore[attr-defined]
    assert rejected.get("ttft_p99", 0) + rejected.get("tpot_p99", 0) == missed
    tail = tailed.assumptions["tail"]  # type: ignore[attr-defined]
    assert tail["replayed"] == missed + TAILED.top and not tail["limit_reached"]
    # every option kept keeps the caps on its steady-state means too
    assert all(o.ttft_ms <= 150.0 and o.tpot_ms <= 20.0 for o in top)
    # the per-request share is held against the percentile caps
    option = top[0]
    product = CATALOG.product(option.gpu)
    sim = simulate_serving(CATALOG, SHAPE, product, option_config(TAILED, option), 10.0,
                           requests=400, seed=1, system=CATALOG.system_for(product),
                           ttft_slo_s=0.15, tpot_slo_s=0.02)
    assert sim.slo is not None and simulated[0].attained == sim.slo["attained"]


def test_the_walk_stops_at_the_replay_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Caps no replay keeps: the walk stops after MAX_TAIL_REPLAYS replays, the advice is
    empty and says how far the lowest replayed 99th percentile is from the cap."""
    from gpuarch.advise import simulated
    from gpuarch.report.advise_text import inference_empty

    monkeypatch.setattr(simulated, "MAX_TAIL_REPLAYS", 2)
    # a TTFT p99 cap just above the best steady state's mean, which its replay overshoots
    advice = advise_inference(CATALOG, SHAPE, dataclasses.replace(
        TAILED, ttft_p99_ms=60.0, tpot_p99_ms=None, gpus=("h100",)), load_prices())
    assert advice.top == () and advice.simulated == ()
    tail = advice.assumptions["tail"]
    assert tail["replayed"] == 2 and tail["limit_reached"]
    assert advice.rejected["ttft_p99"] == 2 and advice.best_fitting["ttft_p99_ms"] > 60.0
    text = inference_empty(advice)
    assert "the lowest TTFT p99 replayed is" in text and "(the limit)" in text


def test_a_lengths_file_reaches_the_replays(tmp_path: Any) -> None:
    """Traffic with a file of requests: each replay draws its prompts and answers from it,
    as simulate_serving does with the same file."""
    path = tmp_path / "requests.csv"
    rng = np.random.default_rng(0)
    rows = [(int(a), int(b)) for a, b in zip(rng.integers(1024, 3072, 300),
                                             rng.integers(128, 384, 300), strict=True)]
    path.write_text("input_len,output_len\n" + "".join(f"{a},{b}\n" for a, b in rows))
    lengths = read_lengths(path)
    search = dataclasses.replace(
        TAILED, input_len=round(float(lengths.input.mean())),  # type: ignore[union-attr]
        output_len=round(float(lengths.output.mean())),  # type: ignore[union-attr]
        traffic=Traffic(requests=400, lengths=lengths))
    advice = advise_inference(CATALOG, SHAPE, search, load_prices())
    option, row = advice.top[0], advice.simulated[0]
    product = CATALOG.product(option.gpu)
    sim = simulate_serving(CATALOG, SHAPE, product, option_config(search, option), 10.0,
                           requests=400, system=CATALOG.system_for(product), lengths=lengths)
    assert row.ttft_p99_ms == pytest.approx(from_si(sim.ttft_s.p99, Unit.MS))
    assert sim.prompts is not None


def test_cli_percentile_caps(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    base = ("advise", "infer", "--gpu", "h100", "--rate", "10", "--ttft-p99-ms", "200",
            "--tpot-p99-ms", "20", "--top", "2", "--simulate", "300")
    status, out, _ = run(capsys, *base, "--json")
    assert status == 0
    doc = json.loads(out)
    assert len(doc["top"]) == 2 and [r["rank"] for r in doc["simulated"]] == [1, 2]
    assert all(r["ttft_p99_ms"] <= 200 and r["tpot_p99_ms"] <= 20 for r in doc["simulated"])
    assert doc["assumptions"]["tail"]["traffic"].startswith("300 requests per replica")
    status, out, _ = run(capsys, *base)
    assert status == 0 and "kept where replays keep TTFT p99 <= 200 ms and TPOT p99 <= 20 ms" \
        in out
    assert "percentile caps:" in out and "deployments replayed in rank order" in out
    # a lengths file whose means do not match --input-len fails before the search
    path = tmp_path / "l.csv"
    path.write_text("input_len,output_len\n100,20\n120,30\n")
    status, out, err = run(capsys, *base, "--lengths", str(path))
    assert status == 2 and out == "" and "--input-len: expected the mean of --lengths'" in err


def test_a_percentile_cap_below_every_mean_replays_nothing() -> None:
    """A percentile cap under every steady-state mean rules each deployment out before any
    replay, and the empty answer names both caps the mean was held to."""
    from gpuarch.report.advise_text import inference_empty

    advice = advise_inference(CATALOG, SHAPE, dataclasses.replace(
        TAILED, ttft_p99_ms=5.0, tpot_p99_ms=None, gpus=("h100",)), load_prices())
    assert advice.top == () and advice.assumptions["tail"]["replayed"] == 0
    assert set(advice.rejected) <= {"ttft", "gpus", "memory"} and advice.rejected["ttft"]
    assert "(--ttft-ms or --ttft-p99-ms, whichever is lower)" in inference_empty(advice)
