"""Activations a pipeline rank holds at its peak under Megatron's 1F1B schedules
(``estimate.pipeline_layout.held_layer_passes``): the closed form against an enumeration of
the schedule's warm-up, Korthikanti et al.'s interleaving factor, uneven edge stages and
explicit layouts, and what it changes in an estimate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.pipeline_layout import (
    held_layer_passes,
    layout_held_layer_passes,
    parse_pp_layout,
)
from gpuarch.workloads import preset

CATALOG = load_catalog()
LLAMA_8B = preset("llama-3.1-8b").shape


def _enumerated(chunks: list[list[int]], m: int) -> int:
    """Walk each rank's warm-up forwards one by one: rank r of PP runs PP - r forwards
    before its first backward, or interleaved (PP - r - 1) x 2 + (VPP - 1) x PP and one more;
    forward k goes through chunk (k // PP) mod VPP (Megatron-LM's
    get_model_chunk_id); a step has m x VPP chunk forwards in all."""
    pp, vpp = len(chunks), len(chunks[0])
    best = 0
    for rank, own in enumerate(chunks):
        warm = (pp - rank - 1) * 2 + (vpp - 1) * pp + 1 if vpp > 1 else pp - rank
        best = max(best, sum(own[(k // pp) % vpp] for k in range(min(warm, m * vpp))))
    return best


@settings(max_examples=300, deadline=None)
@given(pp=st.integers(1, 12), vpp=st.integers(1, 6), c=st.integers(1, 8),
       m_over=st.integers(0, 40), fewer=st.integers(0, 1), more=st.integers(-1, 2))
def test_the_closed_form_counts_what_the_schedule_holds(pp: int, vpp: int, c: int,
                                                        m_over: int, fewer: int,
                                                        more: int) -> None:
    """The vectorised count equals the enumeration for every PP, VPP, chunk size, count of
    micro-batches (at least PP, as Megatron's interleaving needs) and edge adjustment."""
    if pp == 1:
        vpp, fewer = 1, 0  # no interleaving and no edge slots on one stage
    m = pp + m_over
    chunks = [[c] * vpp for _ in range(pp)]
    chunks[0][0] -= fewer
    chunks[-1][-1] += more
    got = held_layer_passes(c, pp, vpp, m, first_chunk_fewer=fewer, last_chunk_more=more)
    assert got == _enumerated(chunks, m)
    # the same through arrays, as the advisor evaluates many layouts at once
    arr = held_layer_passes(np.array([c, c]), np.array([pp, pp]), np.array([vpp, vpp]),
                            np.array([m, m]), first_chunk_fewer=fewer, last_chunk_more=more)
    assert list(arr) == [got, got]


@pytest.mark.parametrize(("pp", "vpp"), [(4, 2), (8, 4), (16, 8), (8, 1)])
def test_even_stages_hold_korthikantis_interleaving_factor(pp: int, vpp: int) -> None:
    """Korthikanti et al. 2022 (section 4.2.3): the first stage of the interleaved schedule
    holds PP x (1 + (PP - 1) / (PP x VPP)) micro-batches of its layers; 1F1B's holds PP."""
    layers = 4 * vpp
    held = held_layer_passes(layers / vpp, pp, vpp, 4 * pp)
    assert held == pytest.approx(layers * pp * (1 + (pp - 1) / (pp * vpp) if vpp > 1 else 1))


def test_fewer_micro_batches_than_stages_hold_all_of_them() -> None:
    assert held_layer_passes(4, 8, 1, 3) == 12
    # interleaved with m = PP: all m x VPP chunk forwards run before the first backward
    assert held_layer_passes(2, 4, 2, 4) == 2 * 8


def test_an_edge_stage_moves_the_peak_to_the_next_rank() -> None:
    """The zero-bubble paper's 1.5B model (22 layers + embedding and loss slots over PP 8,
    three slots a stage): the first rank holds 8 micro-batches of 2 layers, the second 7 of
    3, which is the peak (the estimate took 8 x 3 before)."""
    assert held_layer_passes(3, 8, 1, 24, first_chunk_fewer=1, last_chunk_more=-1) == 21


def test_a_layout_counts_each_virtual_stage() -> None:
    """Two ranks split 32 layers at 12: the first holds two micro-batches of 12, the second
    one of 20; interleaved, rank 0's first chunk runs PP forwards, its second one more."""
    layout = parse_pp_layout("Et*12|t*20L", pp=2, vpp=1, layers=32)
    assert layout_held_layer_passes(layout, 2, 1, 8) == 24
    layout = parse_pp_layout("Et*2|t*6|t*10|t*14L", pp=2, vpp=2, layers=32)
    # rank 0 runs (2-0-1) x 2 + (2-1) x 2 + 1 = 5 forwards: chunks 0, 0, 1, 1, 0
    assert layout_held_layer_passes(layout, 2, 2, 8) == max(2 + 2 + 10 + 10 + 2,
                                                          6 + 6 + 14)


def test_an_estimate_holds_the_peak_ranks_activations() -> None:
    """Llama-3.1-8B at PP 8 with the embedding and loss each taking a layer's slot (34 slots,
    five a stage): the second rank's 7 micro-batches of 5 layers outweigh the first's 8 of 4,
    35 layer-passes, where the even split without edge slots holds 8 of 4, 32 (the estimate
    took a full stage of 5 at 8, 40, before)."""
    def act(**kw):  # type: ignore[no-untyped-def]
        cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=32, pp=8, **kw)
        return estimate_training(CATALOG, LLAMA_8B, CATALOG.product("h100"), cfg).memory
    assert act(pp_edge_layers=True).activations == pytest.approx(
        act().activations * 35 / 32, rel=1e-9)


def test_the_estimate_says_what_it_holds() -> None:
    """JSON ``assumptions.activations_held``: the layer-passes and the size of one, whose
    product is the activation memory. Llama-3.1-70B, 80 layers over PP 4 x VPP 2 (chunks of
    10): the first rank runs (4 - 1) x 2 + (2 - 1) x 4 + 1 = 11 chunk forwards, 110."""
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=128, tp=8, pp=4, vpp=2)
    est = estimate_training(CATALOG, preset("llama-3.1-70b").shape, CATALOG.product("h100"),
                            cfg, system=CATALOG.system("dgx h100"))
    doc = est.as_json()
    held = doc["assumptions"]["activations_held"]
    assert held["layer_passes"] == 110
    assert held["layer_passes"] * held["gib_per_layer_pass"] == pytest.approx(
        doc["memory_per_gpu_gib"]["activations"], rel=1e-3)
    assert "warm-up" in held["how"]
    dual = dataclasses.replace(cfg, vpp=1, pp_schedule="dualpipe")
    how = estimate_training(CATALOG, preset("llama-3.1-70b").shape, CATALOG.product("h100"),
                            dual, system=CATALOG.system("dgx h100")
                            ).as_json()["assumptions"]["activations_held"]
    assert how["layer_passes"] == 20 * 5 and "PP + 1" in how["how"]


def test_the_text_report_says_it_too(capsys: pytest.CaptureFixture[str]) -> None:
    """80 layers over PP 8, not interleaved: the first rank holds 8 micro-batches of 10."""
    assert main(["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus",
                 "64", "--tp", "8", "--pp", "8", "--seq-len", "4096",
                 "--global-batch", "128"]) == 0
    assert "activations: 80 layer-passes of" in capsys.readouterr().out
