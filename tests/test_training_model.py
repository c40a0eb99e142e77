"""The training model: invariants (property tests), errors, and validation against
published measurements."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.training import COMMUNICATION_PARTS, COMPUTE_PARTS
from gpuarch.estimate.training_config import EP_DISPATCHERS
from gpuarch.estimate.training_layers import (
    PERMUTATION_PASSES,
    dispatch_permutation,
    unbalanced_routing_load,
)
from gpuarch.estimate.training_step import fixed_costs
from gpuarch.perf import Precision
from gpuarch.perf.collectives import link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.roofline import Device
from gpuarch.validation import load_training_points, validate_training
from gpuarch.validation.training import (
    TrainingPoint,
    compare_point,
    point_config,
    point_shape,
    point_system,
)
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
DGX_H100 = CATALOG.system("dgx h100")
LLAMA_8B = preset("llama-3.1-8b").shape
LLAMA_70B = preset("llama-3.1-70b").shape


def _est(shape=LLAMA_70B, **kw):  # type: ignore[no-untyped-def]
    base = {"gpus": 64, "seq_len": 4096, "global_batch": 256, "tp": 4, "pp": 2}
    return estimate_training(CATALOG, shape, H100, TrainingConfig(**{**base, **kw}),
                             system=DGX_H100)


layouts = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 4, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "micro_batch": st.sampled_from([1, 2]),
    "sequence_parallel": st.booleans(),
    "precision": st.sampled_from([Precision.BF16, Precision.FP8, Precision.FP16]),
    "zero": st.sampled_from([0, 1, 2, 3]),
})


def _valid(kw: dict) -> dict:  # type: ignore[type-arg]
    if kw["tp"] == 1:
        kw = {**kw, "sequence_parallel": False}
    return kw


@settings(max_examples=40, deadline=None)
@given(layouts)
def test_mfu_never_exceeds_one(kw: dict) -> None:  # type: ignore[type-arg]
    """Utilisation is a fraction of the peak, whatever the layout."""
    e = _est(**_valid(kw))
    assert 0 < e.mfu <= e.hfu <= 1
    assert e.step_time_s > 0 and e.memory.total > 0


@settings(max_examples=30, deadline=None)
@given(layouts)
def test_more_recompute_saves_memory_and_costs_time(kw: dict) -> None:  # type: ignore[type-arg]
    """none -> selective -> full never raises activation memory and never shortens a step."""
    kw = _valid(kw)
    runs = [_est(**kw, recompute=r) for r in (Recompute.NONE, Recompute.SELECTIVE,
                                              Recompute.FULL)]
    for a, b in itertools.pairwise(runs):
        assert b.memory.activations <= a.memory.activations
        assert b.step_time_s >= a.step_time_s


@settings(max_examples=30, deadline=None)
@given(layouts)
def test_higher_zero_never_raises_memory(kw: dict) -> None:  # type: ignore[type-arg]
    """ZeRO 0 -> 3 only ever shards more."""
    kw = _valid({k: v for k, v in kw.items() if k != "zero"})
    totals = [_est(**kw, zero=z).memory.total for z in range(4)]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"gpus": 60}, r"--gpus: 60 is not divisible by TP x PP x CP = 4 x 2 x 1 = 8"),
        ({"global_batch": 100}, r"--global-batch: 100 is not divisible by DP x micro-batch"),
        ({"tp": 3, "gpus": 48}, r"--tp: 3 does not divide the 64 heads"),
        ({"pp": 128, "tp": 1, "gpus": 128}, r"--pp/--vpp: 80 layers cannot fill"),
        ({"cp": 3, "gpus": 24}, r"--cp: 3 does not divide --seq-len 4096"),
        ({"ep": 2}, r"--ep: expert parallelism needs a mixture-of-experts model"),
        ({"vpp": 2, "pp": 1}, r"--vpp: interleaved stages need --pp > 1"),
        ({"zero": 4}, r"--zero: expected 0, 1, 2 or 3"),
        ({"tp": 1, "sequence_parallel": True}, r"--sequence-parallel needs --tp > 1"),
        # Megatron-LM's arguments.py: "Tensor parallel communication/GEMM overlap can happen
        # only when sequence parallelism is enabled"
        ({"tp_comm_overlap": True}, r"--tp-comm-overlap: .* add --sequence-parallel"),
    ],
)
def test_invalid_layouts_fail_clearly(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    """Combinations that do not divide are errors naming the flag, not guesses."""
    with pytest.raises(GpuarchError, match=message):
        _est(**kw)


def test_tp_must_divide_the_mlp_and_a_small_vocabulary_is_padded() -> None:
    """A TP size that does not divide the MLP's hidden units is refused naming the flag
    (Megatron-Core's column-parallel layers refuse it too), where a rank's share of a narrow
    MLP used to round down to nothing and the roofline divided by zero; a vocabulary split
    over more ranks than it has columns is padded to one a rank, as Megatron pads it."""
    with pytest.raises(GpuarchError, match=r"--tp: 4 does not divide the MLP's 28,?670 "
                                           r"hidden units \(--ffn-hidden\)"):
        _est(dataclasses.replace(LLAMA_70B, ffn_hidden=28670))
    tiny_vocab = _est(dataclasses.replace(LLAMA_70B, vocab=3))
    assert 0 < tiny_vocab.step_time_s < _est().step_time_s


def test_multi_node_needs_a_network() -> None:
    """Without a system the job cannot span nodes."""
    cfg = TrainingConfig(gpus=16, seq_len=2048, global_batch=16, tp=8)
    with pytest.raises(GpuarchError, match="give --system"):
        estimate_training(CATALOG, LLAMA_8B, H100, cfg)


def test_fp8_falls_back_with_a_reason_on_a100() -> None:
    """A100 has no FP8 Tensor Cores: FP8 runs at the 16-bit rate and the result says so."""
    cfg = TrainingConfig(gpus=8, seq_len=2048, global_batch=64, precision=Precision.FP8)
    e = estimate_training(CATALOG, LLAMA_8B, CATALOG.product("a100"), cfg)
    assert "publishes no FP8 Tensor peak" in e.assumptions["precision_fallback"]
    assert e.matmul_peak_flops == pytest.approx(312e12)


def test_fp8_is_faster_than_bf16_on_h100() -> None:
    """Same job, FP8 vs BF16 on H100: shorter step."""
    assert _est(precision=Precision.FP8).step_time_s < _est().step_time_s


def test_result_keys_are_the_documented_ones() -> None:
    """The JSON other tools script against (issue #3)."""
    doc = _est(recompute=Recompute.SELECTIVE).as_json()
    for key in ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_flops_per_token",
                "model_tflops_per_gpu", "mfu", "hfu", "memory_per_gpu_gib", "fits_in_memory",
                "time_breakdown_s", "bottleneck", "parallelism", "assumptions"):
        assert key in doc
    assert set(doc["memory_per_gpu_gib"]) == {"weights", "gradients", "optimizer",
                                               "activations", "other", "total"}
    assert set(doc["time_breakdown_s"]) == {"compute", "exposed_communication",
                                            "pipeline_bubble", "other"}
    parts = doc["time_breakdown_s"]
    assert sum(parts.values()) == pytest.approx(doc["step_time_s"])


def test_model_flops_per_token_matches_workloads() -> None:
    """The estimate's model FLOPs per token are 3 x forward from workloads (no recompute)."""
    from gpuarch.workloads import training_flops_per_token

    e = _est(shape=LLAMA_8B, tp=1, pp=1)
    assert e.model_flops_per_token == pytest.approx(training_flops_per_token(LLAMA_8B, 4096))


def test_tokens_cost_and_energy() -> None:
    """--tokens gives total time, GPU-hours and cost consistent with throughput."""
    e = estimate_training(CATALOG, LLAMA_8B, H100,
                          TrainingConfig(gpus=8, seq_len=4096, global_batch=64),
                          tokens=1e12, price_per_gpu_hour=2.0)
    assert e.total is not None
    assert e.total["time_s"] == pytest.approx(1e12 / e.tokens_per_s)
    assert e.total["gpu_hours"] == pytest.approx(e.total["time_s"] / 3600 * 8)
    assert e.total["cost_usd"] == pytest.approx(e.total["gpu_hours"] * 2.0)
    assert e.total["energy_kwh"] > 0


def test_validation_data_is_cited() -> None:
    """Every published point names its source document and where in it."""
    points = load_training_points()
    assert len(points) >= 20
    assert len({p.get("gpu") for p in points}) >= 2
    for p in points:
        assert p.source_url.startswith("https://") and p.where


def test_an_unknown_point_key_is_named(tmp_path: Path) -> None:
    """A misspelt key in the data file would be ignored and the run modelled without it:
    the loader names it instead, with the key meant."""
    data = tmp_path / "training.toml"
    data.write_text('[[source]]\nid = "s"\ntitle = "t"\nauthors = "a"\nyear = 2024\n'
                    'url = "https://example.org"\n\n[[point]]\nid = "p"\nsource = "s"\n'
                    'recompute_layer = 16\n')
    with pytest.raises(GpuarchError, match="point 'p': unknown key 'recompute_layer'; "
                                           "did you mean 'recompute_layers'"):
        load_training_points(data)


def test_a_row_can_give_its_clusters_network() -> None:
    """BLOOM's Jean Zay nodes have 4 x 100 Gb/s Omni-Path for 8 GPUs (the BLOOM paper,
    section 3.4.1): the row's network_bandwidth_per_gpu_gbit_s replaces the DGX A100's 200
    Gb/s per GPU for that row, and its slower data-parallel and pipeline traffic lengthens
    the step (-0.7% against the published step, +5.9% on the DGX A100's network)."""
    point = next(p for p in load_training_points() if p.id == "bloom-176b-a100-384")
    assert point.get("network_bandwidth_per_gpu_gbit_s") == 50
    on_jean_zay = compare_point(CATALOG, point, DEFAULT_EFFICIENCY)
    raw = dict(point.raw)
    del raw["network_bandwidth_per_gpu_gbit_s"]
    on_dgx = compare_point(CATALOG, dataclasses.replace(point, raw=raw), DEFAULT_EFFICIENCY)
    assert on_jean_zay.error == pytest.approx(-0.007, abs=0.005)
    assert on_dgx.error == pytest.approx(0.059, abs=0.005)


def test_llm_foundry_rows_count_their_printed_parameters() -> None:
    """llm-foundry's benchmark tables print each run's NumParams, which grows with the
    sequence length (a learned position table of that many rows): every row that carries it
    (194 of them) counts exactly that with its entered shape, which pins the transcription
    of the layers, width, vocabulary and position table."""
    import re

    from gpuarch.workloads import count_params
    rows = [p for p in load_training_points() if p.source == "llm-foundry-bench"
            and "NumParams" in p.get("notes", "")]
    assert len(rows) >= 194
    for p in rows:
        printed = int(re.search(r"NumParams ([\d,]+)", p.get("notes")).group(1)
                      .replace(",", ""))
        assert count_params(point_shape(p)).total == printed, p.id


def test_llm_foundry_rows_agree_with_their_own_columns() -> None:
    """Each llm-foundry row's columns agree with each other as the README prints them: the
    global batch is the GPUs x micro-batch x GradAccum (data parallel over every GPU), and
    the run's tokens/s is its tokens/s per GPU times the GPUs to the printed digit (the
    2026-12-05 audit matched all 201 rows to the README at 061f2c7c)."""
    import re

    rows = [p for p in load_training_points() if p.source == "llm-foundry-bench"]
    assert len(rows) == 201
    for p in rows:
        accumulate = int(re.search(r"GradAccum (\d+)", p.get("notes")).group(1))  # type: ignore[union-attr]
        assert p.get("dp") == p.get("gpus"), p.id
        assert p.get("global_batch") == p.get("gpus") * p.get("micro_batch") * accumulate, p.id
        assert abs(p.get("tokens_per_s") / p.get("gpus") - p.get("tokens_per_s_per_gpu")) <= 1, \
            p.id


def test_validation_error_does_not_regress() -> None:
    """Predicted vs published throughput (gpuarch validate training). These bounds pin the
    current fit so a change that worsens it fails; the goal (issue #3) is 8% mean and no
    point beyond 20%, which the model does not reach yet (see docs/performance-model.md).
    (Recording each run's published memory settings, sequence parallelism and the rest,
    moved them from 9.6% / 6.8% / 15.2% / 87.5% with the parameters as fitted before; the
    shared GEMM and attention efficiencies, refitted on both validations' fitted points
    together, then took them from 11.0% / 7.5% / 17.8% / 85.8% to 10.2% / 5.9% / 18.4% /
    85.0%; six MoE runs of NVIDIA's Megatron Core MoE report were then added out of sample;
    the experts' launch floor took 9.9% / 5.9% / 16.5% / 85.7% to 9.4% / 5.5% / 15.9% /
    87.3%, and the shared refit after it to 9.2% / 5.5% / 15.5% / 89.7%; DeepSeek-V3's MTP
    block and the recipes' pipeline layouts on the rows that ran them, with the MoE and
    shared fits rerun after them, to 9.5% / 5.5% / 16.1% / 88.9%; the shared refit after the
    serving model's NVLink SHARP all-reduces, with the MoE grid rerun, to 8.8% / 5.2% /
    14.9% / 88.9%; the recomputed modules the published runs name (recompute_modules, a
    little more work for 21 MoE rows), nothing refitted, to 8.9% / 5.2% / 15.0% / 88.9%; NeMo
    AutoModel's own measured dispatcher wait on its four rows to 8.6% / 5.2% / 14.4% /
    88.9%; then, with nothing refitted, 60 published runs added out of sample (Megatron
    Bridge's 26.04 and 26.06 tables, and the GB300 rows beyond one NVL72 rack once the catalog
    gave GB300 NVL72 its cited scale-out rate) to 11.4% / 5.2% / 16.0% / 79.6% over 186: the
    model reads NVIDIA's newest releases and GB300 slow, docs/performance-model.md; then
    GB300's FP8 GEMMs and attention at the rates NVIDIA's published same-kernel timings give
    it over GB200 (perf/data/sibling_rates.toml, nothing fitted) to 10.1% / 5.2% / 13.8% /
    84.4%; then 19 MLPerf Training v5.1 and v6.0 step times (Llama 3.1 405B and 8B on GB300,
    GB200, B300, B200), nothing refitted, to 11.1% / 5.2% / 14.8% / 83.4% over 205; the
    expert layer's token permutation passes by dispatcher, nothing refitted, to 10.6% / 5.1%
    / 14.0% / 84.4%; the fused grouped MLP of the 26.06 rows, nothing refitted, to 10.5% /
    5.1% / 13.9% / 84.9%; then the grouped-GEMM multiplier refitted on every MoE row (the 68
    MoE rows added since its fit become in sample; two-fold cross-validated 9.2% over the
    147) to 9.7% / 9.2% over 147 / 10.9% over 58 / 90.2%; GPT-OSS's unfused clamped-GLU and
    expert-bias passes, with the multiplier refitted (0.55 -> 0.60), to 9.5% / 8.9% / 10.9% /
    89.8%; then MLPerf Training v6.0's 21 MoE runs (DeepSeek-V3, GPT-OSS-20B), nothing
    refitted, to 10.7% / 8.9% / 14.0% over 79 / 88.1% over 226; their GPT-OSS rows without
    the recomputation first read into them, and six Llama 3.1 runs of other submitters, to
    10.9% / 8.9% / 14.3% over 85 / 87.5% over 232; six more on Hopper and B200 to 10.8% /
    8.9% / 13.8% over 91 / 87.8% over 238; the five B300 runs beyond one node, once the
    catalog had an HGX B300 system, to 10.9% / 8.9% / 14.0% over 96 / 87.2% over 243; 18 more
    MLPerf v6.0 runs of other submitters (nine B300, eight GB300, one B200), nothing refitted,
    to 11.5% / 8.9% / 14.7% over 114 / 85.4% over 261: the six B300 NVFP4 ones at -28..-34%,
    for the empty dense FP4 peak, and two GPT-OSS EP 4 ones at +53/+54%; then HGX B300's FP4
    at GB300's dense FP4 rate scaled by their FP8 peaks (13.5 PFLOPS, not its FP8 rate), the
    nine B300 NVFP4 runs from -28..-35% to -0.4..-13%: 10.5% / 8.9% / 12.5% over 114 /
    88.9% over 261; eleven more MLPerf v6.0 GB300 runs of HPE, Quanta, GigaComputing and
    Supermicro, nothing refitted, to 10.8% / 8.9% / 13.0% over 125 / 88.2% over 272: eight
    within 8%, the three GPT-OSS ones at CP 2 / EP 4 at +50..+56%, as the four before them;
    NVLink's bus share measured per group size (nvlink_bus 0.81 x (1 - 0.86 / ranks), fitted
    on NCCL's measured collectives, not on these points; 0.80 for any group before), nothing
    else refitted, to 11.0% / 8.9% / 13.4% over 125 / 87.9% over 272: the runs with TP or CP
    of 2 and 4 on one node a little slower; NCCL's latencies scaled as measured per
    architecture (Ampere 1.5, Hopper 0.9, Blackwell 1.4) and the pair refitted with them
    (0.82, 0.84) to 10.9% / 8.9% / 13.3% / 87.9%; the MLPerf GPT-OSS-20B runs' context
    parallelism priced as the all-to-all their reference runs (cp_comm_type a2a), and the
    Llama 3 128K run's as the all-gather its report describes, nothing refitted, to 10.7% /
    8.9% / 12.9% / 87.9%; the short-K penalty scaled by the format's peak over the 16-bit
    one (FP8 2x, NVFP4 4-6x; checked on the H200's FP8 GEMMs), nothing refitted, to 10.7% /
    8.7% / 12.9% / 87.9%; GB300's BF16 GEMMs at 1.139x GB200's fraction of the peak and its FP8
    GEMMs at 1.122x (from 1.138x), NVIDIA aiconfigurator's same-release TensorRT-LLM GEMM
    tables added to the sibling timings, nothing refitted, to 10.8% / 8.8% / 13.0% / 88.2%:
    the BF16 MoE runs on GB300 closer, GPT-OSS-120B's BF16 runs, already fast, faster; B300's
    GEMMs at 1.053x (BF16) and 1.041x (FP8) and its attention forward at 1.148x HGX B200's
    fraction of the peak, from the same release's tables, nothing refitted, to 10.6% / 8.8% /
    12.7% / 88.2%: every B300 run but GPT-OSS-120B's closer; GB300's attention factors over
    Llama's and DeepSeek-V3's heads in cuDNN's benchmark, not Llama's alone (forward 1.290 ->
    1.202), to 10.6% / 8.8% / 12.8% / 88.2%; a floor on a layer pass's time
    (layer_pass_floor_s, 0.57 ms forward, twice that backward), fitted on the four Llama 3.1
    8B MLPerf runs on 512-1,024 GB200/GB300, which become in sample, and binding on no other
    point but one GPT-OSS-20B run, to 9.8% / 8.7% over 151 / 11.1% over 121 / 89.7%; the eight
    MoE rows of Megatron Bridge's 26.08 table, the 26.06 layouts and recipe settings run again
    (GPT-OSS-120B +29% and +40%, the others -16% to +7%), nothing refitted, to 9.9% / 8.7% /
    11.2% over 129 / 89.3%; sliding-window attention no faster than cuDNN's measured time per
    query row and head (window_attention_row_s, 2.0e-10 s forward, 4.3e-10 s backward, from
    its GPT-OSS benchmark on GB200, not fitted), moving only the GPT-OSS rows (1-3 points
    slower), to 9.8% / 8.6% / 11.2% / 89.3%; 34 MLPerf Training step times of earlier rounds
    (GPT-3 175B in v3.0-v4.1 on 256-11,616 H100 and 64 B200, Llama 3.1 405B in v5.0 on H100,
    H200 and GB200), nothing refitted, reading 4.8% among themselves, to 9.3% / 8.6% / 9.9%
    over 163 / 90.4% over 314; sequence parallelism without userbuffers overlap priced as it
    runs (FP8 and NVFP4 gathers quantized, the backward's asynchronous gather and
    reduce-scatter behind the column-parallel GEMMs; sequence_parallel_tp_comm), nothing
    refitted, the NVFP4 MLPerf 405B runs 4-7 points closer, to 9.1% / 8.6% / 9.5% / 91.1%;
    20 more MLPerf Training v5.1 runs of other submitters (Llama 3.1 8B and 405B on B200,
    B300, GB300, H100 and H200), nothing refitted, 12.5% among themselves (the multi-node
    HGX runs at one micro-batch per rank 14-25% slow), to 9.3% / 8.6% / 9.8% over 183 /
    89.8% over 334; data-parallel traffic hidden by its physics (what outlasts one
    micro-batch's compute, plus dp_comm_exposed of one layer's bucket) with a fixed time per
    step (step_overhead_s), both fitted on the in-sample points (28.1 ms, 0.594;
    scripts/fit_training_efficiency.py --only step_overhead_s,dp_comm_exposed,
    layer_pass_floor_s), to 8.3% / 8.7% (cross-validated 8.8%) / 8.0% / 91.6%; that window
    taking in the layer-pass floor's wait, so that a busier expert rank never shortens a step,
    8.31% -> 8.34%, out of sample 7.97% -> 8.03%; routing that nothing balances
    (moe_routing = "unbalanced": the MLPerf v6.0 GPT-OSS-20B runs of NVIDIA's reference)
    charged at moe_unbalanced_load 1.89 on the busiest expert rank, fitted on NVIDIA's three
    runs with expert parallelism, which become in sample, to 7.7% / 8.7% over 154
    (cross-validated 8.7%) / 6.8% over 180 / 93.7%, 21 beyond 20%; 22 fine-tuning runs,
    nothing refitted (LoRA on Megatron Bridge 26.06, NeMo 24.07 and MLPerf's
    llama2_70b_lora, full fine-tuning on Megatron Bridge 26.06 and NeMo 24.07), 9.8% among
    themselves, none beyond 20%, to 7.8% / 8.7% / 7.1% over 202 / 94.1% over 356; the 36
    A100 runs of the zero-bubble paper, nothing refitted, 20.1% among themselves (every one
    fast), to 8.9% over 392 / 9.1% over 238 out of sample / 90.3% within 20%, 38 beyond;
    those 36 run as the fork's script of the time ran them (FP16, attention unfused, the
    32,000-token vocabulary Table 3's parameter counts give), 12.1%, to 8.1% / 7.8% over 238 /
    93.9%, 24 beyond; pipeline sends charged where a schedule waits on them (non-interleaved
    1F1B, and the zero-bubble fork's interleaving) and split over TP ranks in Megatron-LM
    before Megatron-Core, 8.0% / 7.7% / 94.1%, 23 beyond; a pipeline across nodes paced by
    its network sends, 7.7% / 7.2% / 94.9%, 20 beyond; a tied embedding's gradient
    all-reduce between first and last stage, 7.72% / 7.18%; fused attention's rate rising
    with the span of a kernel call (attention_half_span 1,100 positions, from cuDNN's
    timings) with its long-sequence rate refitted (0.329 -> 0.457) and MPT's 2023 Triton
    kernel at 1 / 1.3 of FlashAttention-2's speed, 7.50% -> 6.66% over 605 (MPT's 201 runs
    7.3% -> 4.5%, the rest 7.8% -> 7.9%), out of sample 7.38% -> 6.13%.)
    The earlier 356 points are held to their own figures below: no schedule change moved
    them, and the pipeline sends moved their mean by under 0.01 points (7.68%)."""
    summary = validate_training(CATALOG)
    # Megatron Bridge's MoE hardware-configs card (the Megatron-Core MoE trackers' best
    # configurations), five runs entered out of sample on 2026-12-06 with nothing refitted
    # (DeepSeek-V3 MXFP8 on 256 B200 +4.0%, Qwen3-235B-A22B on 128 B200 -7.7% and 128 GB200
    # +3.7%, Qwen3-30B-A3B on 32 H100 -9.3%, Qwen3-Next-80B-A3B on 64 GB200 +37.3%: "The
    # Megatron-Core MoE trackers' best configurations" in docs/performance-model.md), are held
    # to their own bound
    card = [r.error for r in summary.rows if r.id.startswith("mcore-card-")]
    assert len(card) == 5 and max(abs(e) for e in card if e < 0.2) <= 0.10
    assert max(card) <= 0.38
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if not r.id.startswith("mcore-card-")))
    # the hybrid Mamba-2 rows (Nemotron 3 Nano's 19 runs of Megatron Bridge's tables and
    # Nemotron 3 Super's 13 MXFP8 runs and its two GB200 NVFP4 runs of the 26.06 period,
    # each entered out of sample when its blocks or its BF16 layers were first costed, and
    # Super's three tuned runs of the model-verification card, entered out of sample on
    # 2026-12-04: H100 BF16 +0.1%, GB200 BF16 at TP 2 +15.3%, GB300 NVFP4 +11.3%) are held
    # to their own bound: the model reads Super's GB200 TP2 runs the fastest
    # (docs/performance-model.md, "Hybrid Mamba-2 models"); the bounds below are the rest's.
    # Nemotron-H 56B's seven FP8 runs on 32-2,048 H100 of NVIDIA's DGX Cloud recipe (NeMo
    # 25.04), the first dense hybrid, entered out of sample on 2026-12-04 with nothing
    # refitted, read 12-18% fast (15.2%), taking the hybrids to 10.4% over 44; the 37 before
    # them are held to their own figure
    shapes = {p.id: point_shape(p) for p in load_training_points()}
    # the Gated DeltaNet hybrids (Qwen3.5-35B-A3B's verification-card run -0.3%, Qwen3-Next's
    # untuned Megatron-MoE ModelZoo run +18.3%, entered out of sample when they came,
    # 2026-12-05) are held to theirs; since their scan's backward runs at FLA's measured rate
    # (FlashQLA's H200/GB200 tables, 2026-12-06) and Megatron-Core's copies around it are
    # priced they read +6.1% and +23.6%, the old Mamba-2 backward rate having stood in for
    # costs of theirs not yet found (docs/performance-model.md, "The backward measured");
    # the Mamba-2 hybrids' bounds below are as before
    gated = [abs(r.error) for r in summary.rows
             if (m := shapes[r.id].mamba) is not None and m.gated_delta]
    assert len(gated) == 2 and max(gated) <= 0.24
    hybrid_ids = {i for i, shape in shapes.items() if shape.is_hybrid
                  and not (shape.mamba is not None and shape.mamba.gated_delta)}
    # the 26.08 table's Nemotron rows (Nano on GB300 +1.0%; Super +9.0% and +7.4% on GB300,
    # +17.8% and +26.7% at TP 2 on GB200, as the earlier releases' GB200 rows read), entered
    # out of sample on 2026-12-05 with nothing refitted, are held to their own bound; the
    # hybrids' bounds below are the 46 before them. (0.125 and 0.27 until 2026-12-06, when
    # the router was priced as Megatron-Core runs it, on each TP rank's sequence-parallel
    # shard and uncast: the GB200 TP 2 rows read 0.6-0.7 points faster, +18.7% and +27.4%)
    rows2608 = [abs(r.error) for r in summary.rows
                if r.id in hybrid_ids and r.id.startswith("mbridge2608-")
                and "nemotron-3.5-lightning" not in r.id and "nemotron-3-ultra" not in r.id]
    assert len(rows2608) == 5 and sum(rows2608) / 5 <= 0.13 and max(rows2608) <= 0.275
    hybrid_ids = {i for i in hybrid_ids if not i.startswith("mbridge2608-")}
    # Nemotron 3.5 Lightning's two card runs (BF16: GB200 -4.5%, H100 -7.2%) and the 26.08
    # table's MXFP8 row (GB200 +4.1%), entered out of sample on 2026-12-06 with the preset,
    # nothing refitted, are held to their own bound
    lightning = [r.error for r in summary.rows if "nemotron-3.5-lightning" in r.id]
    assert len(lightning) == 3 and max(abs(e) for e in lightning) <= 0.08
    hybrid_ids = {i for i in hybrid_ids if "nemotron-3.5-lightning" not in i}
    # Nemotron 3 Ultra's two 256-GPU rows of the 26.08 table (GB300 -5.5%, GB200 at TP 2
    # +13.7%), entered out of sample on 2026-12-06 with the preset, nothing refitted, are
    # held to their own bound
    ultra = [r.error for r in summary.rows if "nemotron-3-ultra" in r.id]
    assert len(ultra) == 2 and max(abs(e) for e in ultra) <= 0.15
    hybrid = [abs(r.error) for r in summary.rows if r.id in hybrid_ids]
    # 9.7% since a low-precision run's LM head is priced in BF16; 10.5% over 46 with NeMo
    # AutoModel's Nemotron 3 Nano and Super runs on nemo:26.02 (out of sample, nothing
    # refitted: -23% and -34%, as the framework's other runs read slow), the 44 before them
    # held to their own figure; 10.6% since the router's shard (2026-12-06)
    assert len(hybrid) == 46 and sum(hybrid) / len(hybrid) <= 0.107  # 10.6%
    before_automodel = [abs(r.error) for r in summary.rows
                        if r.id in hybrid_ids and r.source != "automodel-perf-2026"]
    assert len(before_automodel) == 44 and sum(before_automodel) / 44 <= 0.099  # 9.8% (router)
    earlier = [abs(r.error) for r in summary.rows
               if r.id in hybrid_ids and "nemotron-h-56b" not in r.id
               and r.source != "automodel-perf-2026"]
    assert len(earlier) == 37 and sum(earlier) / len(earlier) <= 0.09  # 8.8% (9.5% before)
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if not shapes[r.id].is_hybrid))
    # three B300 rows beyond one node of the 26.02 and 26.06 tables, entered out of sample on
    # 2026-12-05 with nothing refitted (DeepSeek-V3 -9.0% and -4.7%; GPT-OSS-120B at EP 64
    # across eight nodes +43.1%, -0.1% at 400 Gb/s a GPU: docs/performance-model.md, "The two
    # newest releases"), are held to their own bound; the bounds below are the rest's
    b300 = {"mbridge2602-b300-deepseek-v3-fp8mx", "mbridge2602-b300-gpt-oss-120b-bf16",
            "mbridge2606-b300-deepseek-v3-fp8mx"}
    late = [r.error for r in summary.rows if r.id in b300]
    assert len(late) == 3 and max(abs(e) for e in late) <= 0.44 and min(late) >= -0.1
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if r.id not in b300))
    # DeepSeek-V4 Flash's two 128-GPU rows of the 26.08 table, entered out of sample on
    # 2026-12-06 with nothing refitted (GB200 +17.9%, GB300 +19.0%: "Compressed attention:
    # DeepSeek-V4" in docs/performance-model.md), are held to their own bound
    v4 = {"mbridge2608-gb200-deepseek-v4-flash-fp8mx", "mbridge2608-gb300-deepseek-v4-flash-fp8mx"}
    flash = [r.error for r in summary.rows if r.id in v4]
    assert len(flash) == 2 and min(flash) >= 0.15 and max(flash) <= 0.20
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if r.id not in v4))
    # the Megatron-MoE ModelZoo's nine Qwen3-235B-A22B runs on 256 H100, entered out of
    # sample on 2026-12-06 with nothing refitted ("The Megatron-MoE ModelZoo's Qwen3-235B
    # runs" in docs/performance-model.md: the model slower than measured, by 20-23% on the
    # four long-context runs), are held to their own bound
    zoo = [r.error for r in summary.rows if r.id.startswith("mcore-zoo-h100-qwen3-235b")]
    assert len(zoo) == 9 and sum(abs(e) for e in zoo) / 9 <= 0.19  # 18.9%
    assert min(zoo) >= -0.35 and max(zoo) <= 0.10
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if not r.id.startswith("mcore-zoo-h100-qwen3-235b")))
    assert len(summary.rows) >= 605
    # 7.69% over 605 since llm-foundry's A100 40GB table (76 rows out of sample, 7.1% among
    # themselves, two beyond 20%); 7.77% over 529 since the rest of llm-foundry's MPT tables
    # (112 rows out of sample, 8.0% among themselves, five beyond 20%); 7.70% over 417
    # since four Megatron-DeepSpeed runs (out of sample: BLOOM -0.7%, MT-NLG +28% to
    # +33%); 7.56% over 413
    # since MaxText's six DGX H100 runs (out of sample, 8.1%); 7.55% over 407
    # since TorchTitan's ten FSDP2 runs (out of sample, 5.0%); 7.66% over 397
    # since the 26.08 model-verification cards' five runs; 7.65% over 392
    # 6.66% since fused attention's rate follows the span of a kernel call (7.50% before)
    # 6.83% since 54 runs are entered with the FP8 attention their configs turn on, at
    # cuDNN's measured speedups and with its input casts (6.65% before); 6.96% over 630
    # since NVIDIA DGX Cloud's NeMo 25.04 Llama 4 Maverick and Grok-1 rows (GB200 13-29%
    # fast, as that release's other GB200 runs read); 7.07% over 684 since NeMo's 25.04
    # (GB200) and 25.02 (B200, one H100) performance-summary tables, 16 FP8 runs entered
    # out of sample with nothing refitted (12.9% among themselves, four beyond 20%: the
    # 65,536-token Mixtral-8x22B runs +26% and +37%, and B200's 25.02 Mixtral-8x7B and
    # Nemotron-4 15B +25% and +24%), and DGX Cloud's Nemotron-4 15B H100 pair (BF16 +12.7%,
    # FP8 +3.7%) once the model had a preset; 6.95% over 706 with DGX Cloud's NeMo 24.09
    # Llama 3.1 8B and 70B runs on 8-2,048 H100 (22, nothing refitted) and a dense 16-bit
    # run's TP overlap taken to hide none of its traffic (tp_comm_exposed_16_bit_dense, set
    # on the ten dense BF16 runs with the overlap on, which become in sample: 16.0% -> 2.9%
    # among them); the 666 before the day's rows are held to their own figure (6.92% before
    # the overlap rule, 6.88% with it)
    # 6.73% since a low-precision run's LM head is priced in BF16 (Megatron-Core's output
    # layer runs outside Transformer Engine's FP8 autocast), nothing refitted: the FP8 and
    # NVFP4 rows 7.95% -> 7.50%; 6.77% over 716 with DGX Cloud's GPT-3 175B runs on
    # nemo:24.05 (ten, out of sample: BF16 +14%, reading +28% were the TP traffic hidden);
    # 6.80% over 718 with NeMo AutoModel's own DeepEP/HybridEP pair (Qwen3-30B-A3B on 8
    # H100, out of sample: -17% and -21%, as its other runs read slow), the 716 before them
    # held to their own figure; 6.90% since the 2026-12-05 settings audit corrected the
    # settings some rows took from their recipes (BF16 gradient reduction, TP overlap off,
    # a GB300 preset without recompute, the NVFP4 Llama rows' TP overlap off as their
    # recipes set it): corrections of the data, several moving rows away (6.93%)
    assert summary.mean_abs_error <= 0.0694
    pair = "automodel-deepep-hybridep-2026-07"
    assert sum(abs(r.error) for r in summary.rows if r.source != pair) / (
        len(summary.rows) - 2) <= 0.0691  # 6.71%; 6.90% since the settings audit (and the router)
    days_rows = ("nemo-perf-25.04", "nemo-perf-25.02", "dgxc-nemo-llama31-8b-24.09",
                 "dgxc-nemo-llama31-70b-24.09", "dgxc-nemo-gpt3-175b-24.05", pair)
    # 6.81% over 720 with MLPerf v5.1's two LoRA rack runs (GB200 -7.5%, GB300 -12.4%) and
    # the LoRA rows' FP8 attention and all-to-all context parallelism (2026-12-05), which
    # the 666 below take too (6.68%)
    lora_v51 = ("mlperf51-gb200-llama2-70b-lora-72", "mlperf51-gb300-llama2-70b-lora-72")
    before = [abs(r.error) for r in summary.rows
              if r.source not in days_rows and "nemotron4-15b" not in r.id
              and r.id not in lora_v51]
    # 6.68% (6.88%); 6.83% since the settings audit
    assert len(before) == 666 and sum(before) / len(before) <= 0.0684
    # Qwen3-235B H100 row takes its recipe's EP overlap (7.72% before; 7.73% before the tied
    # embedding's all-reduce; 8.007% while every
    # pipeline inside a node was charged NVLink's sends; 8.08% while no
    # pipeline send was charged; 8.82% while the zero-bubble rows took fused attention and
    # GPT-2's vocabulary; 8.94% before the overlapped all-to-alls of the unpaired passes
    # were charged)
    everything = summary
    summary = dataclasses.replace(summary, rows=tuple(
        r for r in summary.rows if r.source != "zero-bubble-iclr2024"))
    assert len(summary.rows) == len(everything.rows) - 36
    # 6.62% over 569 points with the attention span (7.52% before); 7.68% over 356 points
    # (7.82% before the unpaired passes; 8.34% before routing); 6.80% since the runs with
    # FP8 attention carry it; 6.85% since DGX Cloud's Llama 4 Maverick rows (NeMo 25.04,
    # out of sample, nothing refitted: 512 H100 +5%, 128-512 GB200 +23% to +29%); 6.94%
    # over 594 with the Grok-1 rows (in sample: they prompted moe_grouped_gemm_coarse);
    # 7.06% over 648 with NeMo's 25.04 and 25.02 performance-summary rows and DGX Cloud's
    # Nemotron-4 15B pair; 6.93% over 670 with DGX Cloud's NeMo 24.09 Llama 3.1 rows and
    # the dense 16-bit overlap rule
    # 6.71% since a low-precision run's LM head is priced in BF16; 6.88% since the
    # 2026-12-05 settings audit's corrections of the data; 6.921% since the router's GEMM
    # runs at the 16-bit rate in low-precision runs
    assert summary.mean_abs_error <= 0.0693  # 6.92% with the NVFP4 rows' overlap off
    in_sample = [abs(r.error) for r in summary.rows if not r.out_of_sample]
    # 7.92% over 154 (7.89% before the attention span; 8.57% before the unpaired passes;
    # 8.73% over 151 before); 7.87% over 162 with DGX Cloud's eight Grok-1 rows; 7.58% over
    # 172 with the ten dense 16-bit runs that set tp_comm_exposed_16_bit_dense
    # 7.52% since a low-precision run's LM head is priced in BF16
    # 7.61% with the two in-sample NVFP4 rows' overlap off; 7.63% since the router's
    # shard (2026-12-06), nothing refitted
    assert sum(in_sample) / len(in_sample) <= 0.0764
    out = [abs(r.error) for r in summary.rows if r.out_of_sample]
    # 7.42% over 415 with llm-foundry's A100 40GB rows; 7.48% over 339 since its other 112
    # rows; 7.21% over 227 since the four
    # Megatron-DeepSpeed runs (MT-NLG's three +28% to +33%; 6.93% over 223 before); 7.00%
    # over 202 (7.14% before the unpaired passes) with the fine-tuning runs; 6.82% over 180
    # (8.03% over 183 before the unbalanced routing, whose three fitted runs left the
    # out-of-sample set; 9.84% before the overlap)
    # 6.13% over 415 with the attention span (7.38% before); 6.42% since the runs with FP8
    # attention carry it; 6.59% over 432 since DGX Cloud's eight Llama 4 Maverick rows;
    # 6.79% over 486 since NeMo's 25.04 and 25.02 performance-summary rows and DGX Cloud's
    # Nemotron-4 15B pair; 6.70% over 498 with DGX Cloud's NeMo 24.09 Llama 3.1 rows (the
    # 70B BF16 six among them moved in sample by the dense 16-bit overlap rule)
    # 6.43% since a low-precision run's LM head is priced in BF16; 6.53% over 510 with
    # NeMo AutoModel's DeepEP/HybridEP pair (-17% and -21%), the 508 before held to theirs;
    # 6.65% over 512 since the 2026-12-05 settings audit's corrections of the data (the two
    # Cisco GPT-OSS-20B runs' BF16 gradient reduction +16%/+8% -> +50%/+47% among them)
    assert sum(out) / len(out) <= 0.0669  # 6.68% with the NVFP4 rows' overlap off
    held = [abs(r.error) for r in summary.rows
            if r.out_of_sample and r.source != pair
            and r.id not in ("mlperf51-gb200-llama2-70b-lora-72",
                             "mlperf51-gb300-llama2-70b-lora-72")]
    assert len(held) == 508 and sum(held) / len(held) <= 0.0663  # 6.62% since the settings audit
    assert summary.by("gpu")["a100-sxm4-80gb"] <= 0.062  # 5.8% (6.7% before the span)
    within_20 = sum(abs(r.error) <= 0.20 for r in summary.rows) / len(summary.rows)
    # 93.96% since the Megatron-DeepSpeed runs (94.7% before); 94.1% (93.7% before the
    # fine-tuning runs, all within 20%)
    # 95.6% with the attention span (95.3% before), and since the runs with FP8 attention
    # carry it; 94.7% with NeMo's 25.04 and 25.02 performance-summary rows (four of the 16
    # beyond 20%); 95.07% with DGX Cloud's Nemotron-4 15B pair and NeMo 24.09 Llama 3.1
    # rows and the dense 16-bit overlap rule
    # 95.7% since a low-precision run's LM head is priced in BF16; 95.47% since the
    # 2026-12-05 settings audit (the two Cisco GPT-OSS-20B runs beyond 20% with their BF16
    # gradient reduction); 95.32% since the router's shard (2026-12-06) took Grok-1 in BF16 on
    # 256 GB200 from +19.7% to +20.1%
    assert within_20 >= 0.953
    # dense runs: 5.4% with one beyond 20% (inside the issue's goal) until the v5.1 partners'
    # runs, 6.1% with seven beyond since (the six HGX runs below and Nemotron 22B); MoE 14.2%;
    # with the overlap by its physics 5.2% and three beyond (Cisco's v5.1 H100 run without
    # CUDA graphs +41%, Nemotron 22B +23%, the 1,024-GB200 8B run -21%); MoE 13.0%; with the
    # 22 fine-tuning runs (9.8% among themselves, the LoRA ones of Megatron Bridge 7-18%
    # fast) 5.7% over 224; with the four Megatron-DeepSpeed runs 5.91% over 244 and five
    # beyond (MT-NLG's three, +28% to +33%: docs/performance-model.md, "Megatron-DeepSpeed");
    # with llm-foundry's other 112 rows 6.57% over 356 and ten beyond (five of them MPT
    # 760M at 512-2,048 tokens and MPT-30B at 8,192: "llm-foundry's MPT tables"); with its
    # A100 40GB table 6.67% over 432 and twelve beyond
    moe_ids = {p.id for p in load_training_points() if point_shape(p).is_moe}
    dense = [abs(r.error) for r in summary.rows if r.id not in moe_ids]
    # ... with the attention span 5.49% over 432 and ten beyond (6.65% and twelve before);
    # 5.84% over 454 with NeMo's 25.04 and 25.02 performance-summary rows (their 12 dense
    # runs 8.8% among themselves, B200's 25.02 Nemotron-4 15B +23.5% beyond 20%); 5.85%
    # over 456 with DGX Cloud's Nemotron-4 15B pair; 5.73% over 478 with its NeMo 24.09
    # Llama 3.1 runs and the dense 16-bit overlap rule
    # 5.40% over 478 and nine beyond since a low-precision run's LM head is priced in BF16
    # 5.51% with the NVFP4 rows' overlap off
    assert len(dense) >= 478 and sum(dense) / len(dense) <= 0.0551
    # 11 since NVIDIA's DGX Cloud Llama 3.1 405B rows (NeMo 25.04): BF16 on 128 GB200 +24.5%,
    # out of sample, nothing refitted (docs/performance-model.md, "NVIDIA's DGX Cloud
    # recipes: Llama 3.1 405B in BF16 and FP8"); 12 since NeMo 25.02's Nemotron-4 15B run
    # on 64 B200 (+23.5%, out of sample); 11 since the dense 16-bit overlap rule (DGX
    # Cloud's 405B BF16 run on 128 GB200 +24.5% -> +12.3%)
    assert sum(e > 0.20 for e in dense) <= 9
    # the v5.1 partners' Llama 3.1 8B runs across four to 32 HGX nodes at one micro-batch per
    # rank read 14-25% slow while their InfiniBand gradient traffic was charged at a share
    # fitted on steps dozens of times longer (docs/performance-model.md, "MLPerf Training
    # v5.1: the other submitters"); with the traffic hidden behind the micro-batch's compute
    # as Megatron overlaps it, and the fixed time per step, -2% to +10%
    hgx = [r.error for r in summary.rows if r.id.startswith("mlperf51-") and r.gpus >= 32
           and r.gpu in ("b200", "h200-sxm-141gb") and "405b" not in r.id]
    assert len(hgx) == 7 and all(-0.05 < e < 0.12 for e in hgx)
    earlier_rounds = [abs(r.error) for r in summary.rows if r.source in (
        "mlperf-training-v3.0", "mlperf-training-v3.1", "mlperf-training-v4.0",
        "mlperf-training-v4.1", "mlperf-training-v5.0")]
    assert len(earlier_rounds) == 34
    # 4.8% and 11.8% at most; 5.7% and 11.6% with the overlap by its physics (the GPT-3 175B
    # runs of v3.1 and v4.0 two to seven points slower: their stage's traffic outlasts one
    # micro-batch's compute); 5.8% with the tied embedding's gradient all-reduce between the
    # first and last stage (GPT-3 175B is tied; the runs, already slow, 0.1-0.7 points more);
    # 5.9% and 12.0% with the attention span (GPT-3 175B's 2,048 positions run its attention
    # slower, the runs 0.2-0.4 points slower; Llama 3.1 405B's 8,192 faster); 6.4% and 13.2%
    # since an FP8 GEMM input's cast writes the transposed copy Hopper's FP8 GEMMs need
    # (quantized_copies: the GPT-3 175B runs on H100, already slow, slower); 6.6% and 14.2%
    # since a low-precision run's LM head is priced in BF16 (Megatron-Core's output layer
    # runs outside Transformer Engine's FP8 autocast; the same runs 0.1-1 point slower)
    assert sum(earlier_rounds) / 34 <= 0.066 and max(earlier_rounds) <= 0.142
    b300_fp4 = [abs(r.error) for r in summary.rows
                if r.gpu == "b300" and r.precision == "nvfp4"]
    assert len(b300_fp4) == 9 and max(b300_fp4) <= 0.15  # -0.4% to -13%


@pytest.mark.parametrize(("gpu", "applies"), [
    ("h100", True), ("b200", True),  # wgmma (sm_90) and tcgen05 (sm_100) Tensor Cores
    ("a100", False), ("l40s", False), ("rtx-pro-6000-blackwell", False)])  # synchronous mma
def test_an_ampere_attention_kernel_is_slower_only_where_tensor_cores_run_async(
        gpu: str, applies: bool) -> None:
    """FlashAttention-2 (35% of H100's peak) against FlashAttention-3 (75%): with the
    Ampere-style kernel the attention time grows by 0.75 / 0.35 on Hopper and datacenter
    Blackwell and nowhere else; 2023's Triton kernel takes 1.3 times that everywhere;
    nothing else in the step changes."""
    product = CATALOG.product(gpu)

    def parts(kernel: str) -> dict[str, float]:
        cfg = TrainingConfig(gpus=1, seq_len=8192, global_batch=8, attention_kernel=kernel)
        e = estimate_training(CATALOG, LLAMA_8B, product, cfg)
        return e.time_breakdown.compute_parts

    native, ampere, triton = parts("native"), parts("ampere"), parts("triton")
    factor = 0.75 / 0.35 if applies else 1.0
    assert ampere["attention"] == pytest.approx(native["attention"] * factor, rel=1e-9)
    assert ampere["dense_gemms"] == pytest.approx(native["dense_gemms"], rel=1e-12)
    # 2023's Triton flash attention: FlashAttention-2 is 1.3-2.5x faster (FlashAttention-2
    # paper, section 4.1), everywhere; the model takes 1.3x
    assert triton["attention"] == pytest.approx(ampere["attention"] * 1.3, rel=1e-9)
    assert triton["dense_gemms"] == pytest.approx(native["dense_gemms"], rel=1e-12)
    with pytest.raises(GpuarchError, match="--attention-kernel: expected one of native, "
                                            "ampere, triton, got 'fa3'"):
        _est(attention_kernel="fa3")


def test_efficiency_overrides_are_checked() -> None:
    """Unknown efficiency names get 'did you mean'; values must be numbers."""
    from gpuarch.perf import DEFAULT_EFFICIENCY

    with pytest.raises(GpuarchError, match="did you mean 'attention'"):
        DEFAULT_EFFICIENCY.with_overrides({"atention": 0.5})
    with pytest.raises(GpuarchError, match="expected numbers >= 0"):
        DEFAULT_EFFICIENCY.with_overrides({"gemm": "fast"})
    changed = DEFAULT_EFFICIENCY.with_overrides({"gemm_by_generation": [0.5] * 5})
    assert dataclasses.asdict(changed)["gemm_by_generation"] == (0.5,) * 5


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-2-70b", "qwen3-30b-a3b",
                                  "deepseek-v3"])
def test_attention_projections_hold_the_attention_weights(name: str) -> None:
    """The attention GEMMs the models cost per token multiply exactly the attention block's
    weight matrices (MLA's two low-rank norms are its only other parameters)."""
    from gpuarch.workloads.flops import attention_projections
    from gpuarch.workloads.params import attention_params

    shape = preset(name).shape
    norms = shape.mla.q_lora_rank + shape.mla.kv_lora_rank if shape.mla else 0
    weights = sum(n * k for _, n, k in attention_projections(shape))
    assert weights == attention_params(shape) - norms


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                  "deepseek-v3", "gpt-oss-120b", "mistral-7b",
                                  "qwen2-57b-a14b"])
def test_layer_flops_add_up_to_the_model_forward(name: str) -> None:
    """The operators costed per layer (dense and MoE layers, sliding-window and full
    attention, weighted by count; MLA with its own projections and head dims) execute
    exactly the forward FLOPs the workloads count for the layers (causal attention, no LM
    head), on one GPU, with balanced expert routing."""
    from gpuarch.workloads import count_params, forward_flops_per_token

    shape = preset(name).shape
    seq = 4096
    e = estimate_training(CATALOG, shape, CATALOG.product("b200"),
                          TrainingConfig(gpus=1, seq_len=seq, global_batch=1,
                                         precision=Precision.BF16, zero=0),
                          efficiency=_no_overheads())
    from gpuarch.workloads.flops import attention_projections
    from gpuarch.workloads.params import attention_params, attention_sink_params, mlp_params

    forward = forward_flops_per_token(shape, seq, causal=True)
    # the workloads count 2 FLOPs for every parameter a token uses, vectors too (biases,
    # MLA's two norms), which the costed operators leave out as negligible; attention sinks
    # (GPT-OSS's) are in neither
    attn_vectors = attention_params(shape) - attention_sink_params(shape) \
        - sum(n * k for _, n, k in attention_projections(shape))
    width = shape.d_expert if shape.is_moe else shape.d_ffn
    mlp_bias = mlp_params(shape, width) - shape.ffn_kind.matrices * shape.hidden * width
    used = shape.experts_per_token + shape.shared_experts if shape.is_moe else 1
    # the routers' biases and the shared experts' gates, vectors beside the router GEMM
    router_vectors = count_params(shape).router - shape.moe_layers * shape.hidden * shape.experts
    vectors = (attn_vectors + mlp_bias * used) * shape.layers + router_vectors
    expected = (forward.total - forward.lm_head - 2 * vectors) * seq
    costed = e.assumptions["layer_forward_flops_per_gpu"] * shape.layers
    assert costed == pytest.approx(expected, rel=1e-9)


def _no_overheads():  # type: ignore[no-untyped-def]
    from gpuarch.perf import DEFAULT_EFFICIENCY

    return DEFAULT_EFFICIENCY.with_overrides({"moe_layer_overhead_s": 0.0})


def test_moe_layer_overhead_is_charged_per_expert_layer_and_pass() -> None:
    """The dispatcher's fixed host time: the forward of every expert layer of every
    micro-batch on the slowest stage (the backward reuses the split sizes the forward copied
    to the host: Megatron-Core's dispatcher syncs before the forward all-to-all only), again
    for a recomputed forward, nothing for dense layers or dense models."""
    from gpuarch.perf import DEFAULT_EFFICIENCY

    qwen = preset("qwen3-30b-a3b").shape
    deepseek = preset("deepseek-v3").shape
    b200, dgx = CATALOG.product("b200"), CATALOG.system("dgx b200")
    extra = 1e-3
    for shape, cfg in (
        (qwen, TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8)),
        (deepseek, TrainingConfig(gpus=256, seq_len=4096, global_batch=256, pp=16, ep=8)),
        (LLAMA_8B, TrainingConfig(gpus=8, seq_len=4096, global_batch=64)),
    ):
        base = DEFAULT_EFFICIENCY.with_overrides({"moe_layer_overhead_s": 0.0})
        more = DEFAULT_EFFICIENCY.with_overrides({"moe_layer_overhead_s": extra})
        a = estimate_training(CATALOG, shape, b200, cfg, system=dgx, efficiency=base)
        b = estimate_training(CATALOG, shape, b200, cfg, system=dgx, efficiency=more)
        layers_per_stage = -(-shape.layers // cfg.pp)
        moe_share = shape.moe_layers / shape.layers
        micro = cfg.global_batch // (cfg.dp * cfg.micro_batch)
        stages = micro + cfg.pp - 1  # micro-batches plus the 1F1B bubble
        expected = extra * moe_share * layers_per_stage * stages
        assert b.step_time_s - a.step_time_s == pytest.approx(expected, rel=1e-6)
    # full recomputation runs each forward, and so its wait, twice
    full = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8,
                          recompute=Recompute.FULL)
    a = estimate_training(CATALOG, qwen, b200, full, system=dgx, efficiency=base)
    b = estimate_training(CATALOG, qwen, b200, full, system=dgx, efficiency=more)
    assert b.step_time_s - a.step_time_s == pytest.approx(2 * extra * qwen.layers * 8,
                                                          rel=1e-6)


def test_moe_validation_points() -> None:
    """The in-sample Qwen3 and DeepSeek-V3 points off Hopper (Megatron Bridge 25.09 to 26.06,
    NVIDIA's Megatron Core MoE report; Blackwell, token-drop and dropless; the grouped-GEMM
    multiplier is fitted on them) are predicted within 35% each and 10.5% on average (the
    farthest: Qwen3-235B-A22B at 128k tokens on GB300, -30%, and the 25.09 GB200
    Qwen3-30B-A3B token-drop row, +26%); the H100 rows are known misses (see
    docs/performance-model.md)."""
    summary = validate_training(CATALOG)
    moe = {r.id: r.error for r in summary.rows
           if any(k in r.id for k in ("qwen3", "deepseek")) and "h100" not in r.id
           and not r.out_of_sample}
    assert len(moe) >= 51
    assert all(abs(err) <= 0.35 for err in moe.values()), moe
    assert sum(abs(err) for err in moe.values()) / len(moe) <= 0.105


def test_token_drop_and_grace_host_shorten_the_dispatcher_wait() -> None:
    """A dropless dispatcher waits on its host per expert layer and pass: longer over PCIe
    than over NVLink-C2C to a Grace CPU, not at all with token-drop routing; dense models
    never."""
    from gpuarch.estimate.training_layers import dispatcher_host_time
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as eff

    qwen = preset("qwen3-30b-a3b").shape
    base = {"gpus": 8, "seq_len": 4096, "global_batch": 512, "ep": 8,
            "precision": Precision.FP8}
    dropless = TrainingConfig(**base)
    dropping = TrainingConfig(**base, moe_token_drop=True)
    b200, gb200 = CATALOG.product("b200"), CATALOG.product("gb200")
    assert dispatcher_host_time(b200, dropless, eff) == eff.moe_layer_overhead_s
    assert dispatcher_host_time(gb200, dropless, eff) == eff.moe_layer_overhead_c2c_s
    # every Grace superchip, whether or not its C2C link rate is in the catalog (GB300's
    # is not), and no x86-hosted board
    for key in ("gb300", "gh200-144gb"):
        assert dispatcher_host_time(CATALOG.product(key), dropless, eff) == \
            eff.moe_layer_overhead_c2c_s, key
    assert CATALOG.product("gb300").c2c_bandwidth_bytes_s is None
    for key in ("b300", "h100-sxm5-80gb", "h200-nvl"):
        assert not CATALOG.product(key).grace_host, key
    assert eff.moe_layer_overhead_c2c_s < eff.moe_layer_overhead_s
    assert dispatcher_host_time(b200, dropping, eff) == 0.0
    system = CATALOG.system("dgx b200")
    slow = estimate_training(CATALOG, qwen, b200, dropless, system=system)
    fast = estimate_training(CATALOG, qwen, b200, dropping, system=system)
    host = slow.assumptions["other_breakdown_s"]["host_overhead"]
    launches = fast.assumptions["other_breakdown_s"]["host_overhead"]
    assert 0 < launches < host  # token-drop keeps only the experts' launch floor
    assert slow.step_time_s - fast.step_time_s == pytest.approx(host - launches, rel=1e-9)
    without = eff.with_overrides({"moe_expert_launch_s": 0.0})
    assert estimate_training(CATALOG, qwen, b200, dropping, system=system, efficiency=without
                             ).assumptions["other_breakdown_s"]["host_overhead"] == 0
    assert slow.parallelism["moe_token_drop"] is False
    dense = _est(shape=LLAMA_8B, tp=1, pp=1, moe_token_drop=True)
    assert dense.step_time_s == _est(shape=LLAMA_8B, tp=1, pp=1).step_time_s


def test_partial_cuda_graphs_gain_what_nvidia_measured() -> None:
    """Partial CUDA graphs (attention, MoE router and preprocessing) take the dropless
    dispatcher's host wait away. NVIDIA measured them to give "10% end-to-end speedup" on
    DeepSeek-V3 GB200 training (Scalable Training of MoE Models with Megatron Core,
    arXiv:2603.07685, section 4.3.6); on that paper's GB200 layout (Table 20: TP 1, PP 4,
    VPP 4, EP 64, MBS 1, GBS 8192, MXFP8, HybridEP) the model gains 10% +- 3%, a check on
    the fitted C2C host wait, which was fitted on other runs. Dense models gain nothing."""
    from gpuarch.estimate.training_layers import dispatcher_host_time
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as eff

    dsv3 = preset("deepseek-v3").shape
    gb200, system = CATALOG.product("gb200"), CATALOG.system("gb200 nvl72")
    base = {"gpus": 256, "seq_len": 4096, "global_batch": 8192, "pp": 4, "vpp": 4,
            "ep": 64, "precision": Precision.FP8, "ep_dispatcher": "deepep",
            "gpus_per_node": 72}
    graphs = TrainingConfig(**base, cuda_graphs=True)
    assert dispatcher_host_time(gb200, graphs, eff) == 0.0
    plain = estimate_training(CATALOG, dsv3, gb200, TrainingConfig(**base), system=system)
    fast = estimate_training(CATALOG, dsv3, gb200, graphs, system=system)
    assert fast.parallelism["cuda_graphs"] is True
    assert plain.step_time_s / fast.step_time_s == pytest.approx(1.10, abs=0.03)
    assert fast.time_breakdown.compute == pytest.approx(plain.time_breakdown.compute)
    dense = _est(shape=LLAMA_8B, tp=1, pp=1, cuda_graphs=True)
    assert dense.step_time_s == _est(shape=LLAMA_8B, tp=1, pp=1).step_time_s


def test_deepseek_v3_gb200_ablation_steps_nvidia_measured() -> None:
    """NVIDIA's "Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72"
    (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization, section 3 table) changes one
    thing at a time on one layout (256 GB200, MXFP8, TP 1, PP 8, VPP 4, EP 32, MBS 1, GBS
    2048, pipeline layout Et|(tt|)*30L, BF16 optimizer states, the MLA up projections
    recomputed): "Enable DeepEP" took 540.00 to 566.07 TFLOP/s per GPU (+4.8%), and CUDA
    graphs, after the recomputation was dropped, 610.71 to 663.27 (+8.6%). The model's gain
    from each switch on that layout is within 2.5 points of the measured one. (Dropping the
    recomputation itself, +7.9% there, is +1% in the model: the recomputed GEMMs' FLOPs
    alone; its other costs are not modelled.)"""
    dsv3 = preset("deepseek-v3").shape
    gb200, system = CATALOG.product("gb200"), CATALOG.system("gb200 nvl72")
    base = {"gpus": 256, "seq_len": 4096, "global_batch": 2048, "pp": 8, "vpp": 4,
            "ep": 32, "precision": Precision.FP8, "fp8_params": True,
            "bf16_optimizer": True, "gpus_per_node": 72, "pp_layout": "Et|(tt|)*30L"}
    recompute = {"recompute": Recompute.SELECTIVE, "recompute_modules": ("mla_up_proj",)}

    def tokens(**kw: Any) -> float:
        return estimate_training(CATALOG, dsv3, gb200, TrainingConfig(**{**base, **kw}),
                                 system=system).tokens_per_s
    deepep = tokens(**recompute, ep_dispatcher="deepep") / tokens(**recompute)
    assert deepep == pytest.approx(566.07 / 540.00, abs=0.025)
    graphs = tokens(ep_dispatcher="deepep", cuda_graphs=True) / tokens(ep_dispatcher="deepep")
    assert graphs == pytest.approx(663.27 / 610.71, abs=0.025)


def test_fp16_training_reduces_half_the_gradient_bytes() -> None:
    """FP16 keeps and reduces FP16 gradients (Megatron-LM's default), BF16 FP32 ones: with
    everything else equal, FP16's gradient memory is half BF16's, and FP32 training holds
    4-byte weights with no separate master copy."""
    fp16 = _est(shape=LLAMA_8B, tp=1, pp=1, zero=0, precision=Precision.FP16)
    bf16 = _est(shape=LLAMA_8B, tp=1, pp=1, zero=0, precision=Precision.BF16)
    fp32 = _est(shape=LLAMA_8B, tp=1, pp=1, zero=0, precision=Precision.FP32)
    assert fp16.memory.gradients == pytest.approx(bf16.memory.gradients / 2)
    assert fp16.memory.weights == pytest.approx(bf16.memory.weights)
    assert fp32.memory.weights == pytest.approx(2 * bf16.memory.weights)
    assert fp32.memory.optimizer == pytest.approx(bf16.memory.optimizer * 8 / 12)
    assert fp16.assumptions["bytes_per_param"] == {"weights": 2.0, "gradients": 2.0,
                                                   "optimizer": 12.0}


def test_host_time_is_reported_apart_from_compute() -> None:
    """The MoE dispatcher's fixed host time is part of 'other' (with the optimizer step),
    not of compute, and is named as the bottleneck when it dominates (small micro-batches
    of a small-expert model)."""
    qwen = preset("qwen3-30b-a3b").shape
    e = estimate_training(CATALOG, qwen, CATALOG.product("b200"),
                          TrainingConfig(gpus=8, seq_len=4096, global_batch=512, ep=8,
                                         precision=Precision.FP8),
                          system=CATALOG.system("dgx b200"))
    parts = e.assumptions["other_breakdown_s"]
    assert e.time_breakdown.other == pytest.approx(
        parts["optimizer"] + parts["host_overhead"] + parts["step_overhead"])
    assert parts["step_overhead"] == DEFAULT_EFFICIENCY.step_overhead_s
    layers, micro = qwen.layers, 512 // 8
    overhead = DEFAULT_EFFICIENCY.moe_layer_overhead_s
    # the dispatcher's wait per layer and micro-batch, and (16 small experts per GPU at one
    # sequence per micro-batch) the host's per-expert launches on top
    assert parts["host_overhead"] > overhead * layers * micro
    without = DEFAULT_EFFICIENCY.with_overrides({"moe_expert_launch_s": 0.0})
    e0 = estimate_training(CATALOG, qwen, CATALOG.product("b200"),
                           TrainingConfig(gpus=8, seq_len=4096, global_batch=512, ep=8,
                                          precision=Precision.FP8),
                           system=CATALOG.system("dgx b200"), efficiency=without)
    assert e0.assumptions["other_breakdown_s"]["host_overhead"] == pytest.approx(
        overhead * layers * micro)
    assert e.bottleneck == "host_overhead" and "--moe-token-drop" in e.bottleneck_reason
    dense = _est(shape=LLAMA_8B, tp=1, pp=1)
    assert dense.assumptions["other_breakdown_s"]["host_overhead"] == 0


def test_many_small_experts_wait_on_their_launches() -> None:
    """Each local expert's GEMMs (and, in FP8, its quantizations) are launched one by one
    from the host, so the expert section takes at least those launches: a GPU holding many
    small experts at small micro-batches runs at the host's pace (NVIDIA's Megatron Core
    MoE report, arXiv:2603.07685, 4.3.1); a few large experts, or enough tokens per expert,
    hide the launches behind the GEMMs."""
    from gpuarch.estimate.training_layers import EXPERT_LAUNCHES_PER_EXPERT, expert_host_floor

    eff = DEFAULT_EFFICIENCY
    assert EXPERT_LAUNCHES_PER_EXPERT == {"forward": (2, 2), "backward": (4, 2)}
    assert expert_host_floor(16, True, eff) == pytest.approx(
        (16 * 4 * eff.moe_expert_launch_s, 16 * 6 * eff.moe_expert_launch_s))
    assert expert_host_floor(16, False, eff) == pytest.approx(
        (16 * 2 * eff.moe_expert_launch_s, 16 * 4 * eff.moe_expert_launch_s))
    qwen = preset("qwen3-30b-a3b").shape  # 128 experts of width 768
    b200, system = CATALOG.product("b200"), CATALOG.system("dgx b200")

    def host(ep: int, micro: int, shape: Any = qwen) -> float:
        cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=512, ep=ep,
                             micro_batch=micro, precision=Precision.FP8,
                             moe_token_drop=True)  # no dispatcher wait: launches only
        e = estimate_training(CATALOG, shape, b200, cfg, system=system)
        return float(e.assumptions["other_breakdown_s"]["host_overhead"] / cfg.micro_batches)

    assert host(2, 1) > host(8, 1) > 0  # 64 local experts wait longer than 16
    assert host(8, 8) < host(8, 1)  # more tokens per expert cover more of the launches
    mixtral = preset("mixtral-8x7b").shape  # one large expert per GPU: never host-bound
    assert host(8, 1, mixtral) == 0
    # one grouped kernel for all of a GPU's experts launches as if it held one
    grouped = TrainingConfig(gpus=8, seq_len=4096, global_batch=512, ep=8,
                             precision=Precision.FP8, moe_token_drop=True,
                             expert_launches="grouped")
    e = estimate_training(CATALOG, qwen, b200, grouped, system=system)
    assert e.assumptions["other_breakdown_s"]["host_overhead"] == 0
    assert e.parallelism["expert_launches"] == "grouped"
    with pytest.raises(GpuarchError, match="--expert-launches"):
        TrainingConfig(gpus=8, seq_len=4096, global_batch=512, ep=8,
                       expert_launches="fused").validate(qwen)


@pytest.mark.parametrize("precision", [Precision.FP8, Precision.BF16])
def test_fused_grouped_mlp_saves_the_activation_and_quantization_passes(
        precision: Precision) -> None:
    """A fused grouped MLP (cuDNN's CuTe DSL kernels, Megatron Bridge's
    cutedsl_fused_grouped_mlp) applies the routed experts' activation, and in FP8 quantizes
    the down projection's input, in the up projection's epilogue: exactly those passes leave
    the expert layer's memory-bound work; its GEMMs and launches are the grouped kernel's."""
    qwen = preset("qwen3-30b-a3b").shape
    b200, system = CATALOG.product("b200"), CATALOG.system("dgx b200")
    base = {"gpus": 8, "seq_len": 4096, "global_batch": 512, "ep": 8,
            "precision": precision, "moe_token_drop": True}

    def est(launches: str) -> Any:
        return estimate_training(CATALOG, qwen, b200,
                                 TrainingConfig(**base, expert_launches=launches),
                                 system=system)

    grouped, fused = est("grouped"), est("fused-mlp")
    f_parts, g_parts = fused.time_breakdown.compute_parts, grouped.time_breakdown.compute_parts
    parts = {k: f_parts[k] / g_parts[k] for k in ("dense_gemms", "expert_gemms", "attention")}
    assert parts == {k: pytest.approx(1.0) for k in parts}
    assert f_parts["memory_bound"] < g_parts["memory_bound"]
    assert fused.step_time_s < grouped.step_time_s
    assert fused.parallelism["expert_launches"] == "fused-mlp"
    # the activation goes in both precisions; only FP8 also drops a quantization, so it
    # saves more there than the activation alone
    cfg = TrainingConfig(**base, expert_launches="fused-mlp")
    routed = cfg.micro_batch * cfg.seq_len * qwen.experts_per_token
    act = 3.0 * routed * qwen.d_expert * precision.activation_bytes
    saved = g_parts["memory_bound"] - f_parts["memory_bound"]
    per_pass = act / (b200.memory_bandwidth_bytes_s * DEFAULT_EFFICIENCY.memory)
    # forward and backward (2x) of every expert layer of every micro-batch
    activation = 3 * per_pass * qwen.moe_layers * cfg.micro_batches
    if precision is Precision.BF16:
        assert saved == pytest.approx(activation, rel=1e-6)
    else:
        assert saved > activation * (1 + 1e-6)


def test_gpt_oss_unfused_expert_layer_pays_its_clamp_and_bias_passes() -> None:
    """GPT-OSS's experts in Megatron-Core's unfused path: the clamped GLU (glu_limit) reads
    and writes the up projection's output once more, the per-expert down-projection bias
    three times over the output rows, forward and backward (2x) of every expert layer;
    a fused grouped MLP does both in its kernels, so neither is charged there."""
    oss = preset("gpt-oss-120b").shape
    b200, system = CATALOG.product("b200"), CATALOG.system("dgx b200")
    base = {"gpus": 8, "seq_len": 4096, "global_batch": 64, "ep": 8,
            "precision": Precision.BF16, "moe_token_drop": True}

    def memory_bound(shape: Any, launches: str = "grouped") -> float:
        cfg = TrainingConfig(**base, expert_launches=launches)
        est = estimate_training(CATALOG, shape, b200, cfg, system=system)
        return est.time_breakdown.compute_parts["memory_bound"]

    cfg = TrainingConfig(**base)
    routed = cfg.micro_batch * cfg.seq_len * oss.experts_per_token
    rate = b200.memory_bandwidth_bytes_s * DEFAULT_EFFICIENCY.memory
    per_layers = 3 * oss.moe_layers * cfg.micro_batches / rate  # forward + backward
    clamp = 2.0 * routed * 2 * oss.d_expert * 2 * per_layers
    bias = 3 * 2.0 * routed * oss.hidden * 2 * per_layers
    plain = dataclasses.replace(oss, glu_limit=0.0)
    assert memory_bound(oss) - memory_bound(plain) == pytest.approx(clamp, rel=1e-6)
    no_bias = dataclasses.replace(plain, bias=False)
    assert memory_bound(plain) - memory_bound(no_bias) == pytest.approx(bias, rel=1e-6)
    assert memory_bound(oss, "fused-mlp") == pytest.approx(memory_bound(no_bias, "fused-mlp"))


def test_unbalanced_routing_is_the_fitted_load_within_what_a_rank_can_receive() -> None:
    """--moe-imbalance unbalanced charges Efficiency.moe_unbalanced_load on the busiest
    expert-parallel rank: 1 without expert parallelism, and never more than one rank can
    receive. With every expert of each token's eight on two ranks of four experts each,
    every rank receives every token (1x); with 12 of 16 experts per token over two ranks
    of eight, a rank holds at most eight of a token's twelve copies (4/3 of the mean)."""
    oss = preset("gpt-oss-20b").shape  # 32 experts, 4 per token
    eff = DEFAULT_EFFICIENCY
    assert unbalanced_routing_load(oss, 1, eff) == 1.0
    assert unbalanced_routing_load(oss, 4, eff) == eff.moe_unbalanced_load == 1.89
    every = dataclasses.replace(oss, experts=8, experts_per_token=8)
    assert unbalanced_routing_load(every, 2, eff) == 1.0
    most = dataclasses.replace(oss, experts=16, experts_per_token=12)
    assert unbalanced_routing_load(most, 2, eff) == pytest.approx(4 / 3)
    # UltraEP (arXiv:2606.04101, abstract) measured real routing without system-level
    # balancing at 1.30-4.01x the mean on the busiest rank; the fit lands inside
    assert 1.30 <= eff.moe_unbalanced_load <= 4.01


UNBALANCED_EP_RUNS = {
    "mlperf60-gb300-gpt-oss-20b-72": (-0.05, 0.05), "mlperf60-gb200-gpt-oss-20b-72":
    (-0.07, 0.03), "mlperf60-gb300-gpt-oss-20b-512": (0.11, 0.21),
    "mlperf60-lambda-gb300-gpt-oss-20b-72": (-0.05, 0.05),
    "mlperf60-nebius-gb300-gpt-oss-20b-72": (-0.05, 0.05),
    "mlperf60-hpe-gb300-gpt-oss-20b-72": (-0.06, 0.04),
    "mlperf60-quanta-gb300-gpt-oss-20b-64": (-0.04, 0.06),
    "mlperf60-supermicro-gb300-gpt-oss-20b-72": (-0.05, 0.05),
    "mlperf60-nebius-b300-gpt-oss-20b-64": (-0.09, -0.02),
}
"""The MLPerf v6.0 GPT-OSS-20B runs with expert parallelism whose routing nothing balances,
and the signed error each reads (MLPerf Training v6.0 result logs; the 512-GPU run at EP 8
stays fast: its passes are at the layer-pass floor, where the imbalance changes little;
+16% since its TP 2 runs without userbuffers overlap, as the benchmark's pretrain.py builds
it)."""


def test_unbalanced_routing_rows_are_the_reference_gpt_oss_runs() -> None:
    """moe_routing = "unbalanced" marks exactly the MLPerf v6.0 GPT-OSS-20B runs of NVIDIA's
    reference implementation (no load-balancing loss, no expert bias, dropless: the
    configuration printed in Supermicro's, HPE's and Lambda's logs), not Cisco's H100 runs,
    which drop tokens at a capacity factor of 1.25. Those with expert parallelism read
    within a few percent at the fitted load, and +30% to +35% on the racks evenly loaded
    (moe_unbalanced_load 1). A misspelt value is refused naming the point and the field."""
    rows = [p for p in load_training_points() if p.get("moe_routing") == "unbalanced"]
    assert len(rows) == 27
    assert all(p.id.startswith("mlperf60-") and "gpt-oss-20b" in p.id for p in rows)
    assert all("nvidia nemo / megatron-bridge" in p.get("framework").lower() for p in rows)
    others = [p for p in load_training_points() if p.id.startswith("mlperf60-")
              and "gpt-oss-20b" in p.id and p.get("moe_routing") is None]
    assert {p.id for p in others} == {"mlperf60-cisco-h100-gpt-oss-20b-64",
                                      "mlperf60-cisco-h100-gpt-oss-20b-128"}
    with_ep = [p for p in rows if int(p.get("ep") or 1) > 1]
    assert {p.id for p in with_ep} == set(UNBALANCED_EP_RUNS)
    fitted = {r.id: r.error for r in validate_training(CATALOG, points=with_ep).rows}
    for pid, (low, high) in UNBALANCED_EP_RUNS.items():
        assert low < fitted[pid] < high, pid
    even = DEFAULT_EFFICIENCY.with_overrides({"moe_unbalanced_load": 1.0})
    racks = [p for p in with_ep if p.id.endswith(("-72", "-64")) and "b300" not in p.id]
    assert all(0.28 < r.error < 0.37 for r in validate_training(CATALOG, even, racks).rows)
    bad = TrainingPoint(rows[0].id, rows[0].source, "", "", "",
                        {**rows[0].raw, "moe_routing": "unbalancd"})
    with pytest.raises(GpuarchError, match="moe_routing: expected one of balanced, "
                                           "unbalanced, got 'unbalancd'; did you mean"):
        compare_point(CATALOG, bad, DEFAULT_EFFICIENCY)


def test_moe_imbalance_slows_only_the_routed_work() -> None:
    """--moe-imbalance X: the busiest expert-parallel rank routes X times the mean, so its
    grouped GEMMs (all but the router, which every token passes once), routed memory-bound
    passes and all-to-alls take X times as long; the model's FLOPs per token do not change,
    a dense model is untouched, and a value below 1 is refused naming the flag."""
    qwen = preset("qwen3-30b-a3b").shape
    b200, system = CATALOG.product("b200"), CATALOG.system("dgx b200")
    base = {"gpus": 16, "seq_len": 4096, "global_batch": 64, "ep": 16, "gpus_per_node": 8,
            "precision": Precision.BF16, "moe_token_drop": True}

    def est(shape: Any, x: float) -> Any:
        kw = base if shape.is_moe else {**base, "ep": 1, "moe_token_drop": False}
        return estimate_training(CATALOG, shape, b200,
                                 TrainingConfig(**kw, moe_imbalance=x), system=system)

    even, uneven = est(qwen, 1.0), est(qwen, 2.0)
    g_even = even.time_breakdown.compute_parts["expert_gemms"]
    g_uneven = uneven.time_breakdown.compute_parts["expert_gemms"]
    assert 1.9 * g_even < g_uneven < 2.0 * g_even
    a2a = "expert_parallel"
    assert uneven.time_breakdown.communication_parts[a2a] == pytest.approx(
        2.0 * even.time_breakdown.communication_parts[a2a])
    assert uneven.step_time_s > even.step_time_s and uneven.mfu < even.mfu
    assert uneven.model_flops_per_token == even.model_flops_per_token
    assert uneven.parallelism["moe_imbalance"] == 2.0
    llama = preset("llama-3.1-8b").shape
    assert est(llama, 2.0).step_time_s == est(llama, 1.0).step_time_s
    for bad in (0.5, "x", True):
        with pytest.raises(GpuarchError, match="--moe-imbalance: expected"):
            TrainingConfig(**base, moe_imbalance=bad).validate(qwen)  # type: ignore[arg-type]


def test_one_gpu_trains_without_interconnect_in_the_catalog() -> None:
    rtx = CATALOG.product("rtx-4090")
    e = estimate_training(CATALOG, preset("llama-3.2-1b").shape, rtx,
                          TrainingConfig(gpus=1, seq_len=2048, global_batch=8))
    assert e.time_breakdown.exposed_communication == 0 and e.step_time_s > 0
    with pytest.raises(GpuarchError, match="no NVLink or PCIe bandwidth"):
        estimate_training(CATALOG, preset("llama-3.2-1b").shape, rtx,
                          TrainingConfig(gpus=2, seq_len=2048, global_batch=8))


def test_expert_tensor_parallelism() -> None:
    """ETP = TP is the default and changes nothing; ETP 1 with TP 2 lays EP over the TP
    ranks (EP 16 on 16 GPUs at TP 2, DP 8), keeps each expert whole (twice the expert
    weights per GPU as ETP 2 at the same EP) and leaves the model FLOPs alone; bad values
    name the flag."""
    qwen = preset("qwen3-30b-a3b").shape
    b200, system = CATALOG.product("b200"), CATALOG.system("dgx b200")
    base = {"gpus": 16, "seq_len": 4096, "global_batch": 256, "tp": 2, "ep": 8,
            "sequence_parallel": True, "precision": Precision.FP8}

    def est(**kw):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, qwen, b200, TrainingConfig(**{**base, **kw}),
                                 system=system)

    default, same = est(), est(etp=2)
    assert default.step_time_s == same.step_time_s
    assert default.parallelism["etp"] == 2
    whole = est(etp=1)
    assert whole.model_flops_per_token == default.model_flops_per_token
    assert whole.memory.weights > default.memory.weights
    wide = est(etp=1, ep=16)  # EP 16 > DP 8: only with ETP 1
    assert wide.parallelism["etp"] == 1 and wide.memory.weights < whole.memory.weights
    with pytest.raises(GpuarchError, match="--etp 1"):
        est(ep=16)
    with pytest.raises(GpuarchError, match="--etp: expected a divisor of --tp 2"):
        est(etp=3)
    with pytest.raises(GpuarchError, match="EP x ETP = 32 must divide"):
        est(etp=1, ep=32, gpus=16)


def test_pipeline_edge_layers() -> None:
    """--pp-edge-layers counts the embedding and the loss as a layer each: 126 layers fill
    PP 16 x VP 8 = 128 chunks only with it; where the chunks divide either way the middle
    stages are unchanged and the last stage sheds a layer, so the step is never longer."""
    llama = preset("llama-3.1-405b").shape
    base = {"gpus": 256, "seq_len": 8192, "global_batch": 1536, "tp": 4, "pp": 16,
            "precision": Precision.FP8}
    gb200 = CATALOG.product("gb200")

    def est(**kw):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, llama, gb200, TrainingConfig(**{**base, **kw}),
                                 system=CATALOG.system("gb200 nvl72"))

    with pytest.raises(GpuarchError, match="--pp-edge-layers"):
        est(vpp=8)
    edged = est(vpp=8, pp_edge_layers=True)
    assert edged.parallelism["pp_edge_layers"] is True
    for vpp in (1, 4):
        assert est(vpp=vpp, pp_edge_layers=True).step_time_s <= est(vpp=vpp).step_time_s


def test_nvfp4_training() -> None:
    """NVFP4 GEMMs run at the dense FP4 peak where the catalog has one (GB200: 10 PFLOPS),
    at FP8's with a stated reason where not (H100); operands cost 0.5 byte plus a scale per
    16; stored activations and the optimizer state stay as in FP8 training."""
    from gpuarch.estimate.memory import bytes_per_param

    assert Precision.NVFP4.bytes == pytest.approx(0.5625)
    assert Precision.NVFP4.activation_bytes == 2
    assert bytes_per_param(Precision.NVFP4) == bytes_per_param(Precision.FP8)
    gb200 = CATALOG.product("gb200")
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, precision=Precision.NVFP4)
    fp4 = estimate_training(CATALOG, LLAMA_8B, gb200, cfg, system=CATALOG.system("gb200 nvl72"))
    assert fp4.assumptions["matmul_peak_tflops"] == pytest.approx(10_000)
    assert fp4.assumptions["precision_fallback"] is None
    fp8 = estimate_training(CATALOG, LLAMA_8B, gb200,
                            dataclasses.replace(cfg, precision=Precision.FP8),
                            system=CATALOG.system("gb200 nvl72"))
    assert fp4.step_time_s < fp8.step_time_s
    h100 = estimate_training(CATALOG, LLAMA_8B, H100, cfg, system=DGX_H100)
    assert "publishes no FP4" in h100.assumptions["precision_fallback"]
    # before BF16 (V100) the chain ends at the FP16 Tensor rate, as FP8's does
    v100 = CATALOG.product("v100-sxm2-32gb")
    on_v100 = estimate_training(CATALOG, LLAMA_8B, v100, cfg)
    assert on_v100.assumptions["matmul_peak_tflops"] == pytest.approx(
        v100.peak(PeakKey.TENSOR_FP16) / 1e12)
    assert "FP16 Tensor rate" in on_v100.assumptions["precision_fallback"]


def test_pipeline_edge_layers_do_nothing_without_a_pipeline() -> None:
    one_stage = _est(shape=LLAMA_8B, tp=1, pp=1)
    assert _est(shape=LLAMA_8B, tp=1, pp=1, pp_edge_layers=True).step_time_s == \
        one_stage.step_time_s


@given(ep=st.sampled_from([8, 16, 32, 64]), micro_batch=st.sampled_from([1, 2, 4]),
       gpus_per_node=st.sampled_from([4, 8]))
@settings(max_examples=25, deadline=None)
def test_expert_comm_overlap_and_node_dedup_never_lengthen_the_step(
        ep: int, micro_batch: int, gpus_per_node: int) -> None:
    """Overlapping the expert all-to-alls with another micro-batch's compute only hides
    communication: the step never gets longer, compute is untouched, and the exposed
    communication never goes below what TP/PP/DP leave. Deduplicating (DeepEP, HybridEP)
    never lengthens it either, and saves the two passes that sort the received tokens by
    expert (every layout here holds several experts per GPU)."""
    qwen = preset("qwen3-235b-a22b").shape
    h100, system = CATALOG.product("h100"), CATALOG.system("dgx h100")
    base = {"gpus": 512, "seq_len": 4096, "global_batch": 512, "micro_batch": micro_batch,
            "tp": 1, "pp": 8, "vpp": 2, "ep": ep, "precision": Precision.FP8,
            "gpus_per_node": gpus_per_node}  # interleaved: the overlap needs it with PP

    def est(**kw):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, qwen, h100, TrainingConfig(**{**base, **kw}),
                                 system=system)

    plain, hidden = est(), est(ep_comm_overlap=True)
    assert hidden.step_time_s <= plain.step_time_s * (1 + 1e-12)
    assert hidden.time_breakdown.compute == pytest.approx(plain.time_breakdown.compute)
    assert hidden.time_breakdown.exposed_communication >= 0.0
    assert hidden.parallelism["ep_comm_overlap"] is True
    dedup = est(ep_dispatcher="deepep")
    assert dedup.parallelism["ep_dispatcher"] == "deepep"
    assert dedup.step_time_s <= plain.step_time_s * (1 + 1e-12)
    assert dedup.time_breakdown.compute < plain.time_breakdown.compute


def test_overlapped_all_to_alls_are_exposed_on_the_unpaired_passes() -> None:
    """With the expert all-to-alls overlapped, a pass hides its own only beside a partner
    pass of another micro-batch. Without a pipeline the step's first forward and last
    backward have none: where the pairs hide everything, exactly one micro-batch's
    all-to-alls stay exposed, 1/m of what the step exposes without the overlap. With a
    pipeline the fill and drain are unpaired too, so the bubble keeps them."""
    mixtral = preset("mixtral-8x7b").shape
    h100, system = CATALOG.product("h100"), CATALOG.system("dgx h100")
    base = {"gpus": 8, "seq_len": 4096, "global_batch": 64, "ep": 8}

    def est(**kw):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, mixtral, h100, TrainingConfig(**{**base, **kw}),
                                 system=system)

    plain, paired = est(), est(ep_comm_overlap=True)
    m = plain.parallelism["micro_batches"]
    assert m == 8
    full = plain.time_breakdown.communication_parts["expert_parallel"]
    assert full > 0
    assert paired.time_breakdown.communication_parts["expert_parallel"] == pytest.approx(
        full / m, rel=1e-9)
    piped = {"gpus": 32, "pp": 4, "vpp": 2, "global_batch": 64 * 4 // 4}
    plain, paired = est(**piped), est(**piped, ep_comm_overlap=True)
    # the bubble's stage time still holds the all-to-alls: unchanged by the overlap
    assert paired.time_breakdown.pipeline_bubble == pytest.approx(
        plain.time_breakdown.pipeline_bubble, rel=1e-9)


def test_an_estimate_says_whose_dispatcher_wait_it_charged() -> None:
    """The dropless dispatcher's wait is Megatron-Core's fitted one unless given: the note
    names its value and source, points another framework at --dispatcher-wait-us, and is
    absent where no expert layer pays the wait."""
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as eff

    qwen = preset("qwen3-30b-a3b").shape
    base = {"gpus": 8, "seq_len": 4096, "global_batch": 512, "ep": 8}
    b200, gb200 = CATALOG.product("b200"), CATALOG.product("gb200")

    def note(product, **kw):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, qwen, product, TrainingConfig(**base, **kw),
                                 system=CATALOG.system_for(product)
                                 ).assumptions.get("dispatcher_wait")

    fitted = note(b200)
    assert f"{eff.moe_layer_overhead_s * 1e6:,.0f} us" in fitted
    assert "moe_layer_overhead_s" in fitted and "--dispatcher-wait-us" in fitted
    assert "moe_layer_overhead_c2c_s" in note(gb200)
    given = note(b200, dispatcher_wait_s=74e-6)
    assert "74 us" in given and "as given" in given
    assert note(b200, moe_token_drop=True) is None
    assert note(b200, cuda_graphs=True) is None
    assert note(b200, cuda_graph_scope=("attn",)) is None  # every expert layer follows one
    assert _est(shape=LLAMA_8B, tp=1, pp=1).assumptions.get("dispatcher_wait") is None


def test_token_permutation_passes_by_dispatcher() -> None:
    """Megatron-Core's all-to-all dispatcher permutes each routed copy once on the way in and
    once on the way out, and with several experts per GPU sorts the received chunks by expert
    and back: three passes (a read and a write each) against one; DeepEP and HybridEP deliver
    tokens per destination GPU and permute them locally once, with no sort."""
    copies, hidden, element = 4096 * 8, 7168, 2.0
    row = 2.0 * copies * hidden * element  # one read and one write of every copy
    assert dispatch_permutation(copies, hidden, element, "alltoall", 1).bytes_moved == row
    assert dispatch_permutation(copies, hidden, element, "alltoall", 8).bytes_moved == 3 * row
    for local in (1, 8):
        assert dispatch_permutation(copies, hidden, element, "deepep", local).bytes_moved == row
    assert set(PERMUTATION_PASSES) == set(EP_DISPATCHERS)


def test_node_dedup_shortens_a_cross_node_expert_group() -> None:
    """EP 32 over four DGX H100 nodes at top-8: DeepEP-style dispatch sends each token once
    per other node, so the exposed all-to-all shrinks; a bad dispatcher name is an error
    naming the flag with a suggestion."""
    qwen = preset("qwen3-235b-a22b").shape
    h100, system = CATALOG.product("h100"), CATALOG.system("dgx h100")
    base = {"gpus": 256, "seq_len": 4096, "global_batch": 2048, "tp": 2, "pp": 8, "vpp": 4,
            "ep": 32, "etp": 1, "precision": Precision.FP8}
    plain = estimate_training(CATALOG, qwen, h100, TrainingConfig(**base), system=system)
    dedup = estimate_training(CATALOG, qwen, h100,
                              TrainingConfig(**base, ep_dispatcher="deepep"), system=system)
    assert dedup.time_breakdown.exposed_communication < \
        0.7 * plain.time_breakdown.exposed_communication
    with pytest.raises(GpuarchError, match=r"--ep-dispatcher: .* got 'deep'; did you mean "
                                           r"'deepep'"):
        estimate_training(CATALOG, qwen, h100, TrainingConfig(**base, ep_dispatcher="deep"),
                          system=system)


def test_expert_comm_bottleneck_names_the_remedies() -> None:
    """When exposed communication of a cross-node expert group bounds the step, the reason
    names EP and the two switches that shrink it; with both on, neither is suggested."""
    qwen = preset("qwen3-235b-a22b").shape
    h100, system = CATALOG.product("h100"), CATALOG.system("dgx h100")
    base = {"gpus": 256, "seq_len": 4096, "global_batch": 2048, "tp": 2, "pp": 8, "vpp": 4,
            "ep": 32, "etp": 1, "precision": Precision.FP8, "moe_token_drop": True}
    est = estimate_training(CATALOG, qwen, h100, TrainingConfig(**base), system=system)
    assert est.bottleneck == "communication"
    assert "EP x32" in est.bottleneck_reason
    assert "--ep-comm-overlap" in est.bottleneck_reason
    assert "--ep-dispatcher deepep" in est.bottleneck_reason
    both = estimate_training(CATALOG, qwen, h100,
                             TrainingConfig(**base, ep_comm_overlap=True,
                                            ep_dispatcher="deepep"), system=system)
    assert "--ep-" not in both.bottleneck_reason


def test_readme_names_every_part_of_the_breakdowns() -> None:
    """Other tools script against the JSON keys the README lists, so the lists name every
    part the estimate splits its compute and exposed communication into."""
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    start = readme.index("`compute_breakdown_s` {")
    listed = readme[start:readme.index("without remainder", start)]
    for part in (*COMPUTE_PARTS, *COMMUNICATION_PARTS):
        assert part in listed, part


@settings(max_examples=40, deadline=None)
@given(kw=layouts, recompute=st.sampled_from(list(Recompute)), moe=st.booleans(),
       edge=st.booleans(), overlap=st.booleans(), vpp=st.sampled_from([1, 2]),
       mtp=st.booleans())
def test_compute_and_communication_parts_add_up(kw: dict, recompute: Recompute,  # type: ignore[type-arg]
                                                moe: bool, edge: bool, overlap: bool,
                                                vpp: int, mtp: bool) -> None:
    """compute_breakdown_s and communication_breakdown_s split the step's compute and
    exposed communication without remainder, whatever the layout, recomputation, pipeline
    edge layers, MTP block or expert overlap; each part is non-negative, attention and the
    dense GEMMs are never zero, and only an MoE model has expert GEMMs or expert traffic."""
    kw = _valid(kw)
    if vpp > 1 and kw["pp"] == 1:
        vpp = 1
    # the expert overlap where Megatron-Core allows it (no full recomputation; interleaved
    # with pipeline stages)
    overlap = overlap and recompute is not Recompute.FULL and (kw["pp"] == 1 or vpp > 1)
    extra = {"ep": 8, "etp": 1, "ep_comm_overlap": overlap} if moe else {}
    shape = preset("mixtral-8x7b").shape if moe else LLAMA_70B
    doc = _est(shape, **kw, **extra, recompute=recompute, pp_edge_layers=edge,
               vpp=vpp, mtp_layers=int(mtp)).as_json()
    compute, comm = doc["compute_breakdown_s"], doc["communication_breakdown_s"]
    assert set(compute) == set(COMPUTE_PARTS) and set(comm) == set(COMMUNICATION_PARTS)
    times = doc["time_breakdown_s"]
    assert sum(compute.values()) == pytest.approx(times["compute"], rel=1e-9)
    assert sum(comm.values()) == pytest.approx(times["exposed_communication"], rel=1e-9,
                                               abs=1e-12)
    assert min(compute.values()) >= 0 and min(comm.values()) >= 0
    assert compute["attention"] > 0 and compute["dense_gemms"] > 0
    assert (compute["expert_gemms"] > 0) is moe
    assert moe or comm["expert_parallel"] == 0
    if moe and not overlap:
        assert comm["expert_parallel"] > 0
    assert (compute["recompute"] > 0) is (recompute is not Recompute.NONE)
    assert (comm["tensor_parallel"] > 0) is (kw["tp"] > 1)
    assert kw["pp"] > 1 or comm["pipeline_p2p"] == 0


def test_compute_parts_follow_the_work() -> None:
    """Full recomputation repeats the whole forward (a third of forward + backward, the
    backward costing 2x the forward GEMMs), selective recomputation only attention's; the
    LM head's share grows with the vocabulary."""
    full = _est(recompute=Recompute.FULL).time_breakdown.compute_parts
    sel = _est(recompute=Recompute.SELECTIVE).time_breakdown.compute_parts
    body = sum(v for k, v in full.items() if k not in ("recompute", "lm_head_and_loss"))
    assert 0.25 < full["recompute"] / body < 0.4
    assert sel["recompute"] < full["recompute"]
    assert sel["recompute"] == pytest.approx(sel["attention"] / 3.5, rel=0.05)
    wide = dataclasses.replace(LLAMA_70B, vocab=4 * LLAMA_70B.vocab)
    assert _est(wide).time_breakdown.compute_parts["lm_head_and_loss"] > \
        2 * _est().time_breakdown.compute_parts["lm_head_and_loss"]


def test_a_run_states_its_expected_interruptions() -> None:
    """The rate is the Llama 3 report's (419 unexpected interruptions in 54 days on 16,384
    H100s, section 3.3.4): a job of that size and length expects exactly 419; a training
    estimate with tokens states the count for its own GPUs and days, and says the time
    leaves the restarts out."""
    from gpuarch.estimate.reliability import INTERRUPTIONS_PER_GPU_DAY, expected_interruptions

    assert expected_interruptions(16_384, 54) == pytest.approx(419)
    assert pytest.approx(4.736e-4, rel=1e-3) == INTERRUPTIONS_PER_GPU_DAY
    shape = preset("llama-3.1-8b").shape
    est = estimate_training(CATALOG, shape, CATALOG.product("h100"),
                            TrainingConfig(gpus=64, seq_len=4096, global_batch=256),
                            system=CATALOG.system("dgx h100"), tokens=1e12)
    assert est.total is not None
    assert est.total["expected_interruptions"] == pytest.approx(
        INTERRUPTIONS_PER_GPU_DAY * 64 * est.total["time_days"])
    assert "restarts" in est.assumptions["interruptions"]


def test_gb300_racks_talk_over_their_cited_network() -> None:
    """GB300 NVL72 racks reach each other through one 800 Gb/s ConnectX-8 per GPU, GB200 NVL72
    racks through one 400 Gb/s ConnectX-7: a data-parallel run over four racks, identical on
    both (same dense peaks and HBM bandwidth; GB300's published faster kernels left out),
    computes for the same time and spends less on its gradient traffic between racks on
    GB300; within one rack the two are the same."""
    cfg = TrainingConfig(gpus=288, seq_len=4096, global_batch=576, tp=4, zero=1,
                         gpus_per_node=72)
    same_kernels = DEFAULT_EFFICIENCY.with_overrides({"sibling_rates": 0})
    gb200, gb300 = (estimate_training(CATALOG, LLAMA_70B, CATALOG.product(key), cfg,
                                      system=CATALOG.system(f"{key} nvl72"),
                                      efficiency=same_kernels)
                    for key in ("gb200", "gb300"))
    assert gb300.time_breakdown.compute == pytest.approx(gb200.time_breakdown.compute)
    dp200, dp300 = (e.time_breakdown.communication_parts["data_parallel"]
                    for e in (gb200, gb300))
    assert 0.0 < dp300 < dp200
    one_rack = dataclasses.replace(cfg, gpus=72, global_batch=144)
    inside = [estimate_training(CATALOG, LLAMA_70B, CATALOG.product(key), one_rack,
                                system=CATALOG.system(f"{key} nvl72"),
                                efficiency=same_kernels).step_time_s
              for key in ("gb200", "gb300")]
    assert inside[0] == pytest.approx(inside[1])


def test_mlperf_v60_moe_runs_where_the_model_holds() -> None:
    """MLPerf Training v6.0 (NVIDIA's reference code, out of sample, nothing refitted): CoreWeave's
    DeepSeek-V3 671B on 2,048, 4,096 and 8,192 GB300 (6.221, 3.109 and 1.787 s a step at 16,384
    sequences) within 7.5% each (6% until GB300's FP8 GEMM factor took in aiconfigurator's
    tables, 1.138 -> 1.122: the 4,096-GPU run -5.3% -> -6.1%; 6.5% until the overlapped
    all-to-alls of the unpaired passes were charged: -5.0% -> -7.1%), and GPT-OSS-20B on one node of
    GB300, GB200, B200 or B300 within 16% each (13 runs of eight submitters), and on 64-128
    H100 with capacity-bounded routing within 10% (docs/performance-model.md, "MLPerf Training
    v6.0's MoE benchmarks"; the multi-GPU-expert GPT-OSS runs and NVIDIA's GB200 DeepSeek-V3
    runs at scale are documented misses, not pinned)."""
    summary = validate_training(CATALOG)
    errors = {r.id: r.error for r in summary.rows if r.id.startswith("mlperf60-")}
    coreweave = [e for k, e in errors.items() if k.startswith("mlperf60-coreweave-")]
    # (within 8.5% since they are entered with the FP8 attention their configs turn on: the
    # 8,192-GPU run +1.0% -> +4.9% with MXFP8's kernel, +8.0% with the per-tensor one)
    assert len(coreweave) == 3 and all(abs(e) <= 0.085 for e in coreweave), coreweave
    one_node = [e for k, e in errors.items() if "gpt-oss-20b" in k and k.endswith("-8")]
    # within 16% (15% while attention ran at one rate at every length: the full-attention
    # layers' 8,192 positions run faster now, every run 2-3 points; GB200 +12% -> +15%)
    assert len(one_node) >= 13 and all(abs(e) <= 0.16 for e in one_node), one_node
    # Cisco's GPT-OSS-20B on 64 and 128 H100 with EP 4 and capacity-bounded routing (0.42589
    # and 0.41584 s a step): -4% and -8%, then +16% and +8% with the data-parallel overlap
    # by its physics; +50% and +47% since the 2026-12-05 audit read their pretrain.py's BF16
    # gradient reduction (grad_reduce_in_fp32=False): the FP32 gradient traffic that had
    # made the model agree was not in the run, and what makes Cisco's H100 runs slow (its
    # Llama 3.1 8B at TP 2 reads +34% too) is not established
    capped = [e for k, e in errors.items() if k.startswith("mlperf60-cisco-h100-gpt-oss")]
    assert len(capped) == 2 and all(0.4 <= e <= 0.55 for e in capped), capped


def test_layer_pass_floor_binds_only_on_small_passes() -> None:
    """layer_pass_floor_s: a pass shorter than the floor is charged up to it (as overhead),
    a longer one is untouched. Llama-3.1-70B on 64 H100 (TP4 PP4, 8k tokens) is unchanged;
    MLPerf Training v6.0's Llama 3.1 8B on 1,024 GB200 (TP4 CP4, 2,048 tokens a GPU; NVIDIA's
    result log, training.toml) went from +95% without the floor to within 5% with it; since
    the data-parallel overlap by its physics and the fixed time per step (fitted with the
    floor) it reads +29% without the floor and -21% with it: the two overlap on this run."""
    off = DEFAULT_EFFICIENCY.with_overrides({"layer_pass_floor_s": 0.0})
    big = TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                         sequence_parallel=True, recompute=Recompute.SELECTIVE)
    shape = preset("llama-3.1-70b").shape
    assert (estimate_training(CATALOG, shape, H100, big, system=DGX_H100).step_time_s
            == estimate_training(CATALOG, shape, H100, big, system=DGX_H100,
                                 efficiency=off).step_time_s)
    point = next(p for p in load_training_points()
                 if p.id == "mlperf60-gb200-llama31-8b-1024-fp8")
    with_floor = compare_point(CATALOG, point, DEFAULT_EFFICIENCY)
    without = compare_point(CATALOG, point, off)
    assert without.error > 0.2 and -0.25 < with_floor.error < 0.0
    floored = with_floor.explain["time_breakdown_s"]["other"]
    assert floored > without.explain["time_breakdown_s"]["other"] + 0.02  # ~32 ms a step


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=0.0, max_value=3e-3), st.floats(min_value=0.0, max_value=3e-3))
def test_a_higher_layer_floor_never_shortens_the_step(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=64, tp=4, cp=2,
                         sequence_parallel=True)
    shape = preset("llama-3.1-8b").shape

    def step(floor: float) -> float:
        eff = DEFAULT_EFFICIENCY.with_overrides({"layer_pass_floor_s": floor})
        return estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100,
                                 efficiency=eff).step_time_s

    assert step(lo) <= step(hi)


def test_layer_pass_floor_is_its_own_part_and_bottleneck() -> None:
    """The floor's seconds are named apart from the host's (``other_breakdown_s``), and when
    they dominate the step the bottleneck says so, not the MoE dispatcher's host wait."""
    eff = DEFAULT_EFFICIENCY.with_overrides({"layer_pass_floor_s": 5e-3})
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=8, tp=8, cp=8,
                         sequence_parallel=True)
    est = estimate_training(CATALOG, preset("llama-3.1-8b").shape, H100, cfg,
                            system=DGX_H100, efficiency=eff)
    other = est.assumptions["other_breakdown_s"]
    assert other["host_overhead"] == 0.0
    # 8 micro-batches (DP 1) of 32 layers, forward 5 ms and backward 10 ms less their work
    assert 0.8 * 8 * 32 * 15e-3 < other["layer_pass_floor"] < 8 * 32 * 15e-3
    assert est.bottleneck == "layer_pass_floor" and "layer_pass_floor_s" in est.bottleneck_reason
    assert "not measured" in est.assumptions["layer_pass_floor"]  # said wherever it binds
    big = estimate_training(CATALOG, preset("llama-3.1-70b").shape, H100,
                            TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                                           sequence_parallel=True), system=DGX_H100)
    assert "layer_pass_floor" not in big.assumptions


def test_data_parallel_traffic_hides_behind_one_micro_batch() -> None:
    """Megatron-Core reduces gradients during the last micro-batch's backward and gathers
    parameters during the first one's forward: on two DGX H100 nodes the 8B model's traffic
    fits inside one micro-batch's compute, so only dp_comm_exposed of one layer's bucket is
    charged; over a network a hundred times slower what outlasts the compute is exposed as
    well; and the exposure per step does not grow with the micro-batches, which only the
    first and last of overlap."""
    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=16, seq_len=8192, global_batch=16, tp=1, pp=1, zero=1)

    def dp(c: TrainingConfig, eff: Any = DEFAULT_EFFICIENCY) -> float:
        e = estimate_training(CATALOG, shape, H100, c, system=DGX_H100, efficiency=eff)
        return e.time_breakdown.communication_parts["data_parallel"]

    hidden = dp(cfg)
    assert 0 < hidden < 0.01  # a share of one layer's bucket
    assert dp(cfg, DEFAULT_EFFICIENCY.with_overrides({"dp_comm_exposed": 0.0})) == 0.0
    slow = DEFAULT_EFFICIENCY.with_overrides({"network_bus": 0.0085})
    assert dp(cfg, slow) > 20 * hidden
    assert dp(dataclasses.replace(cfg, global_batch=64)) == pytest.approx(hidden, rel=1e-9)


def test_the_data_parallel_traffic_is_reported_by_part() -> None:
    """assumptions.data_parallel_traffic_s gives the step's parameter gathers and gradient
    reductions and what of them is exposed: ZeRO-0 (DDP) only all-reduces; ZeRO-1 gathers
    the updated parameters as well; the exposed seconds are the breakdown's data-parallel
    part, and what outlasts one micro-batch's compute is exposed."""
    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=16, seq_len=8192, global_batch=16, tp=1, pp=1, zero=0)
    quiet = DEFAULT_EFFICIENCY.with_overrides({"dp_comm_exposed": 0.0})

    def run(c: TrainingConfig, eff: Any = quiet) -> Any:
        return estimate_training(CATALOG, shape, H100, c, system=DGX_H100, efficiency=eff)

    ddp = run(cfg).assumptions["data_parallel_traffic_s"]
    assert ddp["gather"] == 0.0 and ddp["reduce"] > 0.0
    zero1 = run(dataclasses.replace(cfg, zero=1)).assumptions["data_parallel_traffic_s"]
    assert zero1["gather"] > 0.0 and zero1["reduce"] > 0.0
    # a network a hundred times slower: the traffic outlasts the one micro-batch
    slow = run(cfg, quiet.with_overrides({"network_bus": quiet.network_bus / 100}))
    traffic = slow.assumptions["data_parallel_traffic_s"]
    exposed = slow.time_breakdown.communication_parts["data_parallel"]
    assert exposed == pytest.approx(traffic["exposed"])
    window = slow.time_breakdown.compute  # one micro-batch a step
    assert exposed == pytest.approx(traffic["gather"] + traffic["reduce"] - window,
                                    rel=1e-6)
    assert "ZeRO-3" in run(dataclasses.replace(cfg, zero=3)).assumptions[
        "data_parallel_traffic_s"]["how"]


@pytest.mark.parametrize(("gpu", "precision"), [("h100", Precision.FP8),
                                               ("b200", Precision.FP8),
                                               ("b200", Precision.NVFP4)])
def test_a_low_precision_runs_lm_head_runs_in_bf16(gpu: str, precision: Precision) -> None:
    """Megatron-Core's output layer is its own ColumnParallelLinear, outside Transformer
    Engine's FP8/FP4 autocast, so an FP8 or NVFP4 run's LM head and loss take what the BF16
    run's do, while its layers run faster."""
    shape = preset("llama-3.1-8b").shape
    product = CATALOG.product(gpu)
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=64, precision=precision)
    low = estimate_training(CATALOG, shape, product, cfg).as_json()["compute_breakdown_s"]
    bf16 = estimate_training(CATALOG, shape, product, dataclasses.replace(
        cfg, precision=Precision.BF16)).as_json()["compute_breakdown_s"]
    assert low["lm_head_and_loss"] == pytest.approx(bf16["lm_head_and_loss"], rel=1e-12)
    assert low["dense_gemms"] < bf16["dense_gemms"]


def test_a_dense_16_bit_run_takes_the_tp_overlap_as_hiding_none_of_its_traffic() -> None:
    """Every published dense 16-bit run with userbuffers TP overlap reads as if it hid none of
    the tensor-parallel traffic, while FP8 runs and MoE runs in 16-bit read right with it
    hidden: a dense BF16 estimate with --tp-comm-overlap leaves
    ``tp_comm_exposed_16_bit_dense`` of the traffic exposed (all of it), and says what the
    step would be were it hidden; the FP8 run of the same layout and a BF16 MoE run do not
    read that parameter, and the MoE one carries its step without the overlap instead (the
    estimate run with the overlap off)."""
    shape = preset("llama-3.1-70b").shape
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=64, tp=4, pp=2,
                         sequence_parallel=True, tp_comm_overlap=True)
    hiding = dataclasses.replace(DEFAULT_EFFICIENCY, tp_comm_exposed_16_bit_dense=0.0)

    def run(c: TrainingConfig, eff: Efficiency = DEFAULT_EFFICIENCY,
            model: Any = shape) -> Any:
        return estimate_training(CATALOG, model, H100, c, system=DGX_H100, efficiency=eff)

    bf16, hidden = run(cfg), run(cfg, hiding)
    assert DEFAULT_EFFICIENCY.tp_comm_exposed_16_bit_dense == 1.0
    assert bf16.step_time_s > hidden.step_time_s
    assert bf16.time_breakdown.exposed_communication > hidden.time_breakdown.exposed_communication
    extra = bf16.assumptions["tp_overlap_16_bit"]
    assert extra["step_time_s_with_overlap_hidden"] == pytest.approx(hidden.step_time_s,
                                                                     rel=1e-12)
    assert "step_time_s_without_overlap" not in extra
    assert "--tp-comm-overlap" in extra["note"] and "100%" in extra["note"]
    fp8 = dataclasses.replace(cfg, precision=Precision.FP8)
    assert run(fp8).step_time_s == run(fp8, hiding).step_time_s
    assert "tp_overlap_16_bit" not in run(fp8).assumptions
    mixtral = preset("mixtral-8x7b").shape
    moe = dataclasses.replace(cfg, ep=2)
    moe_run = run(moe, model=mixtral)
    assert moe_run.step_time_s == run(moe, hiding, mixtral).step_time_s
    moe_extra = moe_run.assumptions["tp_overlap_16_bit"]
    assert "step_time_s_with_overlap_hidden" not in moe_extra
    off = run(dataclasses.replace(moe, tp_comm_overlap=False), model=mixtral)
    assert moe_extra["step_time_s_without_overlap"] == pytest.approx(off.step_time_s,
                                                                     rel=1e-12)
    assert off.step_time_s > moe_run.step_time_s


def _leaves(x: Any) -> list[Any]:
    """The numbers in a (nested) named tuple, in order."""
    return [leaf for v in x for leaf in _leaves(v)] if isinstance(x, tuple) else [x]


def test_what_a_step_takes_beside_its_layers_does_not_read_the_tp_overlap() -> None:
    """The estimate prices the userbuffers overlap's other case (the step with the traffic
    hidden, or without the overlap) with the run's ``fixed_costs``: so none of them may read
    ``tp_comm_overlap`` or the TP exposure parameters. Held over every published layout
    (dense and MoE, FP8 and FP4, pipeline layouts, LoRA, MTP, offloading), each costed
    with the overlap on and off and the exposures at their extremes."""
    moved = dataclasses.replace(DEFAULT_EFFICIENCY, tp_comm_exposed=0.7,
                                tp_comm_exposed_16_bit_dense=0.0)
    checked = 0
    for point in load_training_points():
        product = CATALOG.product(point.get("gpu"))
        system = CATALOG.system_with_link(product, point_system(CATALOG, point, product),
                                          point.get("gpu_link"))
        shape, cfg = point_shape(point), point_config(point, system)
        device = Device.of(product, cfg.precision,
                           CATALOG.chip_of(product).sm.tensor_core_generation)
        intra, inter = link_for(product, system, None, required=False)
        costs = [fixed_costs(shape, product, device, intra, inter,
                             dataclasses.replace(cfg, tp_comm_overlap=overlap), eff, 1e10)
                 for overlap in (False, True) for eff in (DEFAULT_EFFICIENCY, moved)]
        flat = [np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in _leaves(c)])
                for c in costs]
        assert all(np.array_equal(f, flat[0]) for f in flat[1:]), point.id
        checked += 1
    assert checked == len(load_training_points())


def test_a_step_pays_a_fixed_time_beside_its_layers() -> None:
    """step_overhead_s is added once per step whatever the configuration, reported under
    'other', and named as the bottleneck where a step is that short."""
    shape = preset("llama-3.1-8b").shape
    off = DEFAULT_EFFICIENCY.with_overrides({"step_overhead_s": 0.0})
    for cfg in (TrainingConfig(gpus=8, seq_len=8192, global_batch=32),
                TrainingConfig(gpus=64, seq_len=4096, global_batch=256, tp=2, pp=2)):
        with_it = estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100)
        without = estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100,
                                    efficiency=off)
        assert with_it.step_time_s == pytest.approx(
            without.step_time_s + DEFAULT_EFFICIENCY.step_overhead_s, rel=1e-12)
        assert with_it.assumptions["other_breakdown_s"]["step_overhead"] == \
            DEFAULT_EFFICIENCY.step_overhead_s
    tiny = dataclasses.replace(shape, layers=2, vocab=1024)
    small = estimate_training(CATALOG, tiny, H100,
                              TrainingConfig(gpus=8, seq_len=512, global_batch=8),
                              system=DGX_H100)
    assert small.bottleneck == "step_overhead" and "step_overhead_s" in small.bottleneck_reason



@given(imbalance=st.floats(min_value=1.0, max_value=3.0), cp=st.sampled_from([1, 2, 4]),
       tp=st.sampled_from([1, 2]), ep=st.sampled_from([4, 8]))
@settings(max_examples=30, deadline=None)
def test_a_busier_expert_rank_never_shortens_the_step(imbalance: float, cp: int, tp: int,
                                                      ep: int) -> None:
    """More routed work on the busiest expert-parallel rank (--moe-imbalance) never makes a
    step shorter, also where a layer pass is short enough for the layer-pass floor to bind:
    MLPerf v6.0's GPT-OSS-20B run on 512 GB300 (one sequence per data-parallel rank, the
    rack's NVLink domain) and layouts around it. The floor's wait is time the data-parallel
    traffic runs behind, as the compute it stands in for is."""
    point = next(p for p in load_training_points()
                 if p.id == "mlperf60-gb300-gpt-oss-20b-512")
    gb300 = CATALOG.product(point.get("gpu"))
    system = CATALOG.system_for(gb300)
    shape = point_shape(point)
    base = dataclasses.replace(point_config(point, system), tp=tp, cp=cp, ep=ep,
                               global_batch=512 // (tp * cp), sequence_parallel=tp > 1)

    def step(x: float) -> float:
        cfg = dataclasses.replace(base, moe_imbalance=x)
        return estimate_training(CATALOG, shape, gb300, cfg, system=system).step_time_s

    assert step(imbalance) >= step(1.0) * (1 - 1e-12)


def test_sandwich_norms_add_two_norm_passes() -> None:
    """Gemma 2's norms after attention and MLP (four a layer) cost two more read-and-write
    passes over each layer's hidden states than the same shape with two: memory-bound time
    grows, nothing else does, and the weights grow by the norms' vectors."""
    gemma = preset("gemma-2-27b").shape
    plain = dataclasses.replace(gemma, sandwich_norms=False)
    kw = {"gpus": 8, "tp": 8, "pp": 1, "global_batch": 64, "seq_len": 4096}
    four, two = _est(gemma, **kw).as_json(), _est(plain, **kw).as_json()
    bound = "memory_bound"
    assert four["compute_breakdown_s"][bound] > two["compute_breakdown_s"][bound]
    for part in ("dense_gemms", "attention"):
        assert four["compute_breakdown_s"][part] == two["compute_breakdown_s"][part]
    assert four["step_time_s"] > two["step_time_s"]
    assert four["memory_per_gpu_gib"]["weights"] > two["memory_per_gpu_gib"]["weights"]


def test_cuda_graphs_say_when_they_change_nothing() -> None:
    """--cuda-graphs hides a dropless MoE dispatcher's host wait; on a dense model (or with
    token dropping) the step is the same and the assumptions say why."""
    dense, graphed = _est(), _est(cuda_graphs=True)
    assert graphed.step_time_s == dense.step_time_s
    assert "no experts" in graphed.assumptions["cuda_graphs"]
    assert "cuda_graphs" not in dense.assumptions
    mixtral = preset("mixtral-8x7b").shape
    kw = {"tp": 1, "pp": 1, "ep": 8}
    moe, moe_graphed = _est(mixtral, **kw), _est(mixtral, **kw, cuda_graphs=True)
    assert moe_graphed.step_time_s < moe.step_time_s
    assert "cuda_graphs" not in moe_graphed.assumptions
    dropped = _est(mixtral, **kw, cuda_graphs=True, moe_token_drop=True)
    assert "token dropping" in dropped.assumptions["cuda_graphs"]


def test_deepseek_v3_runs_at_tp2_are_entered_without_tp_overlap() -> None:
    """Megatron Bridge's DeepSeek-V3 recipe builds CommOverlapConfig(tp_comm_overlap=False)
    (src/megatron/bridge/recipes/deepseek/deepseek_v3.py), which MLPerf v6.0's pretrain.py
    and the performance configs keep: every DeepSeek-V3 row at TP > 1 from those frameworks
    says so, and reads faster were the overlap taken as on (the framework default the
    validation assumes otherwise), the sequence-parallel traffic then charged nothing."""
    rows = [p for p in load_training_points() if p.get("preset") == "deepseek-v3"
            and int(p.get("tp") or 1) > 1
            and ("bridge" in p.get("framework", "").lower()
                 or "nemo" in p.get("framework", "").lower())]
    assert len(rows) >= 7
    assert all(p.get("tp_comm_overlap") is False for p in rows)
    gb200 = next(p for p in rows if p.id == "mlperf60-gb200-deepseek-v3-512")
    on = dataclasses.replace(gb200, raw={**gb200.raw, "tp_comm_overlap": True})
    off_error, on_error = (r.error for r in validate_training(CATALOG, points=[gb200, on]).rows)
    assert on_error > off_error + 0.03


@pytest.mark.parametrize(("name", "coarse"), [("mixtral-8x7b", True), ("qwen3-30b-a3b", False),
                                              ("deepseek-v3", False)])
def test_coarse_experts_run_their_gemms_at_the_dense_rate(name: str, coarse: bool) -> None:
    """A coarse mixture of experts (16 routed experts or fewer) runs its grouped expert
    GEMMs at moe_grouped_gemm_coarse (the dense GEMMs' rate), a fine-grained one at the
    fitted moe_grouped_gemm: changing the one it does not use changes nothing, and the
    expert GEMMs' time scales as the inverse of the one it does."""
    from gpuarch.estimate.training_layers import expert_efficiency
    from gpuarch.perf import DEFAULT_EFFICIENCY

    shape = preset(name).shape
    assert shape.is_moe and shape.is_fine_grained_moe is not coarse
    used, unused = (("moe_grouped_gemm_coarse", "moe_grouped_gemm") if coarse
                    else ("moe_grouped_gemm", "moe_grouped_gemm_coarse"))
    assert expert_efficiency(DEFAULT_EFFICIENCY, shape).moe_grouped_gemm == \
        getattr(DEFAULT_EFFICIENCY, used)
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8, precision=Precision.BF16)

    def experts(eff) -> float:  # type: ignore[no-untyped-def]
        e = estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100, efficiency=eff)
        return e.time_breakdown.compute_parts["expert_gemms"]

    base = experts(DEFAULT_EFFICIENCY)
    note = estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100).assumptions[
        "expert_gemms"]
    assert used in note and f"{shape.experts} experts" in note
    assert ("moe_grouped_gemm_coarse" in note) is coarse
    half = getattr(DEFAULT_EFFICIENCY, used) / 2
    assert experts(DEFAULT_EFFICIENCY.with_overrides({unused: 0.3})) == pytest.approx(base)
    slower = experts(DEFAULT_EFFICIENCY.with_overrides({used: half}))
    # the router's GEMM takes no expert multiplier, so the grouped GEMMs' part doubles
    assert base < slower < 2 * base + 1e-12
    assert slower == pytest.approx(2 * base, rel=0.05)


def test_the_folding_papers_coarse_and_fine_twins_read_right_with_their_own_rates() -> None:
    """The MoE Parallel Folding paper (arXiv:2504.14960, Tables 3 and 4) trains Mixtral-8x22B
    (8 experts of 16,384, top-2) and its fine-grained twin G8T8 (64 experts of 2,048, top-8)
    on the same H100s: 46-52% MFU against 13-30%. Entered after moe_grouped_gemm_coarse was
    set on Grok-1, the coarse runs read within 15% at the dense GEMMs' rate and 22-39% slow
    at the fine-grained runs' fitted moe_grouped_gemm; the twin reads within 7% at it."""
    from gpuarch.perf import DEFAULT_EFFICIENCY

    points = [p for p in load_training_points() if p.source == "mcore-folding-2025"
              and p.get("preset") == "mixtral-8x22b"]
    coarse = [p for p in points if not point_shape(p).is_fine_grained_moe]
    fine = [p for p in points if point_shape(p).is_fine_grained_moe]
    assert len(coarse) == 12 and len(fine) == 10
    rows = validate_training(CATALOG, points=points).rows
    errors = {r.id: r.error for r in rows}
    assert all(abs(errors[p.id]) < 0.15 for p in coarse)
    assert all(abs(errors[p.id]) < 0.07 for p in fine)
    fine_rate = DEFAULT_EFFICIENCY.with_overrides(
        {"moe_grouped_gemm_coarse": DEFAULT_EFFICIENCY.moe_grouped_gemm})
    slow = validate_training(CATALOG, fine_rate, points=coarse).rows
    assert all(-0.40 < r.error < -0.20 for r in slow)


@pytest.mark.parametrize(("kw", "message"), [
    ({"ep": 1}, r"--ep-comm-overlap: .*needs --ep > 1"),
    ({"recompute": Recompute.FULL}, r"--ep-comm-overlap: .*full recomputation"),
    ({"mtp_layers": 2}, r"--ep-comm-overlap: .*at most one MTP depth"),
    ({"precision": Precision.FP32}, r"--ep-comm-overlap: needs a 16-bit model"),
    ({"pp": 2, "gpus": 32}, r"--ep-comm-overlap: with --pp > 1 .* give --vpp > 1"),
])
def test_ep_comm_overlap_takes_megatron_cores_conditions(kw: dict, message: str  # type: ignore[type-arg]
                                                         ) -> None:
    """Megatron-Core's TransformerConfig refuses overlap_moe_expert_parallel_comm without
    expert parallelism, with full recomputation, with more than one MTP depth, for a model
    that is not 16-bit, and with pipeline stages but no interleaving; the estimate refuses
    the same, naming the flag. The base layout (EP 8, PP 1, BF16) estimates."""
    qwen = preset("qwen3-30b-a3b").shape
    base = {"gpus": 16, "seq_len": 4096, "global_batch": 64, "ep": 8,
            "ep_comm_overlap": True, "precision": Precision.BF16}
    estimate_training(CATALOG, qwen, H100, TrainingConfig(**base), system=DGX_H100)
    with pytest.raises(GpuarchError, match=message):
        estimate_training(CATALOG, qwen, H100, TrainingConfig(**{**base, **kw}),
                          system=DGX_H100)
    if "pp" in kw:  # interleaved, it estimates
        estimate_training(CATALOG, qwen, H100, TrainingConfig(**{**base, **kw, "vpp": 2}),
                          system=DGX_H100)
