"""Serving cost and energy per million output tokens: the estimate prices its deployment
as the advisor prices an option (the same formula, one source), and the arithmetic holds."""

from __future__ import annotations

import json

import pytest

from gpuarch.advise.infer import InferenceSearch, advise_inference, option_config
from gpuarch.advise.prices import load_prices
from gpuarch.catalog import load_catalog
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.workloads.presets import preset
from tests.test_cli import run

CATALOG = load_catalog()
LLAMA8 = preset("llama-3.1-8b").shape


def test_estimate_prices_as_the_advisor_does() -> None:
    """The advisor's best option (saturated replicas: at a --rate the advisor prices the
    load it carries, not what the replicas could), estimated on its own with the same price,
    costs the same per million output tokens and uses the same energy."""
    search = InferenceSearch(input_len=2048, output_len=256, gpus=("h100-sxm5-80gb",))
    advice = advise_inference(CATALOG, LLAMA8, search,
                              load_prices(overrides={"h100-sxm5-80gb": 2.5}))
    best = advice.top[0]
    est = estimate_inference(CATALOG, LLAMA8, CATALOG.product(best.gpu),
                             option_config(search, best), price_per_gpu_hour=2.5)
    assert est.output_tokens_per_s == pytest.approx(best.output_tokens_per_s, rel=1e-6)
    assert est.cost["usd_per_million_output_tokens"] == pytest.approx(
        best.usd_per_million_tokens, rel=1e-6)
    assert est.cost["kwh_per_million_output_tokens"] == pytest.approx(
        best.kwh_per_million_tokens, rel=1e-6)


def test_cost_arithmetic() -> None:
    """GPUs x price an hour, over the hours a million output tokens take; no price, no
    dollars (energy stays)."""
    h100 = CATALOG.product("h100")
    cfg = InferenceConfig(input_len=1000, output_len=500, batch=32, gpus=2,
                          batching=Batching.CONTINUOUS)
    est = estimate_inference(CATALOG, LLAMA8, h100, cfg, price_per_gpu_hour=3.0)
    hours = 1e6 / est.output_tokens_per_s / 3600
    assert est.cost["usd_per_hour"] == 6.0
    assert est.cost["usd_per_million_output_tokens"] == pytest.approx(6.0 * hours)
    assert est.cost["kwh_per_million_output_tokens"] > 0
    free = estimate_inference(CATALOG, LLAMA8, h100, cfg)
    assert "usd_per_million_output_tokens" not in free.cost
    assert free.cost["kwh_per_million_output_tokens"] == est.cost["kwh_per_million_output_tokens"]


def test_cli_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """--price-per-gpu-hour adds the dollars to the text line and to JSON 'cost'; the sweep
    gets a $/1M column."""
    base = ("estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "512", "--output-len", "128", "--batching", "continuous")
    status, out, _ = run(capsys, *base, "--batch", "16", "--price-per-gpu-hour", "2")
    assert status == 0 and "per million output tokens ($2/hour at $2/GPU-hour)" in out
    status, out, _ = run(capsys, *base, "--batch", "16", "--json")
    assert json.loads(out)["cost"]["kwh_per_million_output_tokens"] > 0
    status, out, _ = run(capsys, *base, "--batch", "1,16", "--price-per-gpu-hour", "2")
    assert status == 0 and "$/1M tok" in out
    status, _, err = run(capsys, *base, "--batch", "16", "--price-per-gpu-hour", "-1")
    assert status == 2 and "--price-per-gpu-hour" in err
