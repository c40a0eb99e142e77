"""advise infer --simulate N: the top serving deployments replayed under random arrivals
(``advise.simulated``), each at the search's rate through the same simulation as
``estimate infer --rate R --simulate N``, their 99th percentiles set against the caps."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpuarch.advise import load_prices
from gpuarch.advise.infer import InferenceSearch, advise_inference, option_config
from gpuarch.advise.simulated import simulate_options
from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.simulate import simulate_serving
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
    (("--rate", "10", "--seed", "1"), "--seed/--input-len-cv: they shape --simulate, which"),
    (("--rate", "10", "--input-len-cv", "1"), "--seed/--input-len-cv: they shape --simulate"),
    (("--rate", "10", "--simulate", "300", "--input-len-cv", "-1"), "--input-len-cv: expected"),
    (("--rate", "10", "--simulate", "5"), "--simulate: expected a number of requests from 10"),
])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], extra: tuple[str, ...],
                          message: str) -> None:
    status, out, err = run(capsys, "advise", "infer", "--gpu", "h100", *extra)
    assert status == 2 and out == "" and message in err and "Traceback" not in err
