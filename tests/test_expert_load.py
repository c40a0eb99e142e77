"""The busiest rank of an expert-parallel group: how many of its experts a pass's tokens
touch there (estimate/expert_load.py), and the serving model's decode step waiting for it."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuarch.estimate.inference_passes as inference
from gpuarch.catalog import load_catalog
from gpuarch.estimate.expert_load import busiest_rank_experts
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()


@given(st.integers(1, 256), st.floats(0.0, 1.0), st.integers(1, 64))
def test_the_busiest_rank_lies_between_the_mean_and_all_its_experts(local: int, share: float,
                                                                   ranks: int) -> None:
    busiest = busiest_rank_experts(local, share, ranks)
    assert local * share - 1e-9 <= busiest <= local + 1e-9
    # more ranks to wait for never lowers the busiest one's count
    assert busiest_rank_experts(local, share, ranks + 1) >= busiest - 1e-9


@given(st.integers(1, 128), st.floats(0.0, 1.0), st.integers(1, 16))
def test_arrays_give_what_single_values_give(local: int, share: float, ranks: int) -> None:
    """The advisor's search passes arrays through the same formula."""
    many = busiest_rank_experts(local, np.array([share, share / 2]), ranks)
    assert many[0] == pytest.approx(busiest_rank_experts(local, share, ranks), abs=1e-9)
    assert many[1] == pytest.approx(busiest_rank_experts(local, share / 2, ranks), abs=1e-9)


def test_one_rank_is_the_mean_and_a_touched_layer_is_every_expert() -> None:
    assert busiest_rank_experts(32, 0.4, 1) == pytest.approx(12.8)
    assert busiest_rank_experts(32, 1.0, 8) == 32.0
    assert busiest_rank_experts(32, 0.0, 8) == 0.0


@pytest.mark.parametrize("tokens", [1, 16, 64])
def test_it_matches_routing_drawn_at_random(tokens: int) -> None:
    """Against top-8-of-256 routing drawn token by token (8 ranks of 32 experts): the mean
    of the busiest rank's distinct experts over 3,000 draws (seeded) agrees within 3%; the
    average rank's is well below it at small batches (1.0 against about 2.5 at one
    token)."""
    rng = random.Random(7)
    draws, busiest = 3000, 0
    for _ in range(draws):
        touched: set[int] = set()
        for _ in range(tokens):
            touched.update(rng.sample(range(256), 8))
        counts = [0] * 8
        for expert in touched:
            counts[expert // 32] += 1
        busiest += max(counts)
    share = 1 - (1 - 8 / 256) ** tokens
    assert busiest_rank_experts(32, share, 8) == pytest.approx(busiest / draws, rel=0.03)
    if tokens == 1:
        assert busiest / draws > 2.3 * 32 * share


def _expert_gemms(batch: int) -> float:
    shape = preset("qwen3-235b-a22b").shape
    cfg = InferenceConfig(input_len=1024, output_len=256, batch=batch, gpus=8, tp=8, ep=8,
                          quant=QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8))
    est = estimate_inference(CATALOG, shape, CATALOG.product("h100-sxm5-80gb"), cfg)
    return float(est.decode_step_parts_s["expert_gemms"])


def test_a_decode_step_waits_for_the_busiest_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen3-235B-A22B (128 experts, top 8) over 8 H100s, EP 8: at one sequence the average
    rank runs one of its 16 experts but the busiest runs 2.5 on average, 3 GEMM groups, and
    the step's expert GEMMs are those of three local experts (2.3 times the average rank's,
    the router and permutation being the same); at 256 sequences nearly every expert is
    touched everywhere and the busiest rank is the average one."""
    busiest = {b: _expert_gemms(b) for b in (1, 256)}
    assert math.ceil(busiest_rank_experts(16, 8 / 128, 8)) == 3

    def fixed(count: float) -> float:
        monkeypatch.setattr(inference, "busiest_rank_experts", lambda *_: count)
        return _expert_gemms(1)

    assert busiest[1] == pytest.approx(fixed(3.0), rel=1e-9)
    assert busiest[1] > 2.0 * fixed(1.0)
    monkeypatch.setattr(inference, "busiest_rank_experts",
                        lambda local, share, ranks: local * share)
    assert _expert_gemms(1) == pytest.approx(fixed(1.0), rel=1e-9)
    monkeypatch.setattr(inference, "busiest_rank_experts",
                        lambda local, share, ranks: local * share)
    assert busiest[256] == pytest.approx(_expert_gemms(256), rel=0.01)
