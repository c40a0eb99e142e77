"""Serving at an arrival rate (``estimate infer --rate``): the batch a steady stream settles
at is the smallest whose throughput carries the rate, and a rate beyond the deployment's
capacity is refused with that capacity."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog.loader import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.load import batch_for_rate
from gpuarch.workloads.presets import preset
from tests.test_cli import run

CATALOG = load_catalog()
SHAPE = preset("llama-3.1-8b").shape
H100 = CATALOG.product("h100")
CFG = InferenceConfig(input_len=2048, output_len=256, batching=Batching.CONTINUOUS)


def _requests_per_s(batch: int, cfg: InferenceConfig = CFG) -> float:
    est = estimate_inference(CATALOG, SHAPE, H100, replace(cfg, batch=batch))
    return est.output_tokens_per_s / cfg.output_len


CAPACITY = batch_for_rate(CATALOG, SHAPE, H100, CFG, 0.1).capacity_per_s


@settings(max_examples=15, deadline=None)
@given(share=st.floats(min_value=0.001, max_value=0.999))
def test_the_batch_is_the_smallest_that_carries_the_rate(share: float) -> None:
    rate = share * CAPACITY
    load = batch_for_rate(CATALOG, SHAPE, H100, CFG, rate)
    assert _requests_per_s(load.batch) >= rate
    if load.batch > 1:
        assert _requests_per_s(load.batch - 1) < rate
    assert load.utilization == pytest.approx(share)
    latency = estimate_inference(CATALOG, SHAPE, H100,
                                 replace(CFG, batch=load.batch)).request_latency_s
    assert load.in_flight_per_replica == pytest.approx(rate * latency)  # Little's law


def test_more_load_never_shortens_a_token() -> None:
    tpots, batches = [], []
    for share in (0.05, 0.3, 0.6, 0.9, 0.99):
        load = batch_for_rate(CATALOG, SHAPE, H100, CFG, share * CAPACITY)
        batches.append(load.batch)
        tpots.append(estimate_inference(CATALOG, SHAPE, H100,
                                        replace(CFG, batch=load.batch)).tpot_s)
    assert batches == sorted(batches) and tpots == sorted(tpots)


def test_replicas_share_the_rate_and_overload_is_refused() -> None:
    four = replace(CFG, gpus=4)
    load = batch_for_rate(CATALOG, SHAPE, H100, four, 0.5 * CAPACITY)
    assert load.capacity_per_s == pytest.approx(4 * CAPACITY)
    assert load.batch == batch_for_rate(CATALOG, SHAPE, H100, CFG, 0.5 * CAPACITY / 4).batch
    with pytest.raises(GpuarchError, match=r"--rate: .* at most .* requests/s"):
        batch_for_rate(CATALOG, SHAPE, H100, CFG, 1.01 * CAPACITY)
    with pytest.raises(GpuarchError, match="--rate: expected a positive number"):
        batch_for_rate(CATALOG, SHAPE, H100, CFG, -1.0)


def _infer(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100",
               "--input-len", "2048", "--output-len", "256", *argv)


def test_cli_rate(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _infer(capsys, "--rate", "5", "--json")
    assert status == 0
    doc = json.loads(out)
    load = doc["assumptions"]["load"]
    assert doc["batch"] == load["batch"] and doc["assumptions"]["batching"] == "continuous"
    assert load["rate_per_s"] == 5
    assert doc["output_tokens_per_s"] >= 5 * 256
    status, out, _ = _infer(capsys, "--rate", "5")
    assert status == 0 and "load          5 requests/s" in out
    for argv, message in (
            ((), "--batch or --rate: give one"),
            (("--rate", "5", "--batch", "8"), "--batch or --rate: give one"),
            (("--rate", "5", "--batching", "static"), "--rate: a stream of requests"),
            (("--rate", "5", "--batching", "continuous", "--num-requests", "100"),
             "--rate and --num-requests"),
            (("--rate", "1e6"), "--rate: 1e+06 requests/s is more than 1 replica(s)")):
        status, out, err = _infer(capsys, *argv)
        assert status == 2 and out == "" and message in err, (argv, err)
        assert "Traceback" not in err
