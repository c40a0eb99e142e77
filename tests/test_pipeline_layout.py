"""Explicit pipeline layouts (Megatron's --pipeline-model-parallel-layout) and multi-token
prediction blocks in the training model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.pipeline_layout import parse_pp_layout
from gpuarch.perf import Precision
from gpuarch.workloads import count_params, forward_flops_per_token, preset
from gpuarch.workloads.mtp import mtp_block_params, mtp_forward_flops_per_token

CATALOG = load_catalog()
DSV3 = preset("deepseek-v3").shape
LLAMA_8B = preset("llama-3.1-8b").shape
# Megatron Bridge's DeepSeek-V3 recipe layout for PP 4 x VPP 4 and for PP 16
# (set_deepseek_v3_pipeline_model_parallel_layout in recipes/deepseek/deepseek_v3.py)
RECIPE = "Et*4|(t*4|)*14tmL"


def test_the_deepseek_recipe_layout_puts_sixteen_layers_on_the_middle_ranks() -> None:
    """PP 4 x VPP 4: virtual stage v runs on rank v mod 4, so rank 0 has the embedding with
    4 + 4 + 4 + 4 layers (the three dense ones among them), ranks 1 and 2 sixteen expert
    layers, rank 3 thirteen layers, the MTP block and the loss."""
    layout = parse_pp_layout(RECIPE, pp=4, vpp=4, layers=61, dense_layers=3, mtp_layers=1)
    assert len(layout.virtual) == 16
    first, second, third, last = layout.ranks
    assert (first.dense_layers, first.expert_layers, first.embedding) == (3, 13, True)
    assert (second.layers, second.mtp, second.loss) == (16, 0, False)
    assert third.layers == 16
    assert (last.layers, last.mtp, last.loss, last.embedding) == (13, 1, True, False)
    assert layout.max_layers == 16


def test_groups_repeat_and_spaces_are_ignored() -> None:
    """'(tt|)*3' is 'tt|tt|tt|'; whitespace between symbols does not matter."""
    a = parse_pp_layout("E t t | (t t |)*2 t L", pp=4, vpp=1, layers=7)
    b = parse_pp_layout("Ett|tt|tt|tL", pp=4, vpp=1, layers=7)
    assert a.virtual == b.virtual == ("Ett", "tt", "tt", "tL")


@pytest.mark.parametrize("text, match", [
    ("Et*4|(t*4|)*14tmL", "16 stages in 'Et\\*4\\|\\(t\\*4\\|\\)\\*14tmL', but PP x VPP = 8 x 4"),
    ("Et*4|(t*4|*14tmL", "unclosed '\\('"),
    ("Et*4|t*4)|tmL", "unmatched '\\)'"),
    ("Ex|t", "unexpected 'x' at position 2"),
    ("Et*|t", "needs a repeat count"),
    ("", "empty layout"),
])
def test_malformed_layouts_are_refused_with_the_reason(text: str, match: str) -> None:
    with pytest.raises(GpuarchError, match="--pp-layout: .*" + match):
        parse_pp_layout(text, pp=8, vpp=4, layers=61, mtp_layers=1)


@pytest.mark.parametrize("text, kw, match", [
    ("Et*4|(t*4|)*14tmL", {"layers": 60}, "61 transformer layers \\('t'\\) in .* the model has 60"),
    ("Et*4|(t*4|)*14tmL", {"mtp_layers": 0}, "1 MTP blocks \\('m'\\) .* --mtp-layers is 0"),
    ("t*4|E(t*4|)*14tmL", {}, "embedding \\('E'\\) must appear once, in the first stage"),
    ("Et*4|(t*4|)*14tm|LL", {}, "17 stages in"),
    ("Et*4|t*3L|(t*4|)*13t*2m", {}, "loss \\('L'\\) must appear once, in the last stage"),
])
def test_layouts_that_disagree_with_the_run_are_refused(text: str, kw: dict[str, int],
                                                        match: str) -> None:
    args = {"pp": 4, "vpp": 4, "layers": 61, "mtp_layers": 1} | kw
    with pytest.raises(GpuarchError, match=match):
        parse_pp_layout(text, **args)


def test_an_mtp_block_is_what_megatron_counts() -> None:
    """With DeepSeek-V3's one MTP block, causal attention counted at half, the model's FLOPs
    per token are what Megatron prints: the 25.09 GB200 DeepSeek-V3 row of the Megatron
    Bridge performance table gives 899 TFLOP/s per GPU at 3,454 tokens/s per GPU, 260.3
    GFLOP per token, and the 25.11 GB200 BF16 row, run without MTP, 782 at 3,139, 249.1."""
    main = 3 * forward_flops_per_token(DSV3, 4096, causal=True).total
    with_mtp = main + 3 * mtp_forward_flops_per_token(DSV3, 4096, causal=True)
    assert with_mtp == pytest.approx(899e12 / 3454, rel=0.005)
    assert main == pytest.approx(782e12 / 3139, rel=0.006)


def test_an_mtp_block_holds_one_expert_layer_and_a_projection() -> None:
    """DeepSeek-V3's block: all 256 experts of one layer, an MLA attention, the 2h x h
    projection and five norms; the embedding and head are shared, not counted."""
    dense, experts = mtp_block_params(DSV3)
    pc = count_params(DSV3)
    assert experts == pc.mlp_experts // DSV3.moe_layers
    projection_and_norms = 2 * DSV3.hidden ** 2 + 5 * DSV3.hidden
    layer_dense = (pc.attention // DSV3.layers + (pc.mlp_shared + pc.router) // DSV3.moe_layers)
    assert dense == layer_dense + projection_and_norms
    # DeepSeek's model card: 671B main model plus 14B of MTP module, which also carries
    # its own copy of the embedding and the head in the checkpoint
    assert 13.0e9 < dense + experts + 2 * DSV3.vocab * DSV3.hidden < 14.5e9


def _dsv3(**kw):  # type: ignore[no-untyped-def]
    product = CATALOG.product("gb200")
    system = CATALOG.system_for(product)
    cfg = TrainingConfig(gpus=256, seq_len=4096, global_batch=4096, pp=4, vpp=4, ep=64,
                         precision=Precision.BF16, gpus_per_node=system.gpus_per_node, **kw)
    return estimate_training(CATALOG, DSV3, product, cfg, system=system)


def test_mtp_on_the_last_stage_slows_it_and_the_recipe_layout_balances_it() -> None:
    """Without a layout the MTP block joins the last stage's 16 layers and head; the recipe's
    layout gives that rank 13 layers instead, so a middle rank's 16 layers set the pace and
    the step is shorter than without MTP (whose last stage also carries the head)."""
    plain, mtp = _dsv3(), _dsv3(mtp_layers=1)
    laid = _dsv3(mtp_layers=1, pp_layout=RECIPE)
    assert mtp.step_time_s > plain.step_time_s > laid.step_time_s
    assert mtp.model_flops_per_token == laid.model_flops_per_token > plain.model_flops_per_token
    # the slowest rank of the layout runs no head: no head time in its compute
    assert laid.time_breakdown.compute_parts["lm_head_and_loss"] == 0.0
    assert mtp.time_breakdown.compute_parts["lm_head_and_loss"] > \
        plain.time_breakdown.compute_parts["lm_head_and_loss"]
    assert laid.parallelism["pp_layout"] == RECIPE and laid.parallelism["mtp_layers"] == 1
    assert laid.memory.other > plain.memory.other  # the MTP block's logits too
    for e in (mtp, laid):  # the parts still add up to the compute
        assert sum(e.time_breakdown.compute_parts.values()) == pytest.approx(
            e.time_breakdown.compute, rel=1e-9)
        assert sum(e.time_breakdown.communication_parts.values()) == pytest.approx(
            e.time_breakdown.exposed_communication, rel=1e-9)


def test_a_layout_that_only_restates_the_even_split_changes_nothing() -> None:
    """Llama-3.1-8B's 32 layers over PP 4: 'Et*8|t*8|t*8|t*8L' is the default split, so
    the step and the memory are the default's."""
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, pp=4)
    product = CATALOG.product("h100")
    even = estimate_training(CATALOG, LLAMA_8B, product, cfg)
    laid = estimate_training(CATALOG, LLAMA_8B, product,
                             TrainingConfig(gpus=8, seq_len=4096, global_batch=64, pp=4,
                                            pp_layout="Et*8|t*8|t*8|t*8L"))
    # (the layout counts the final norm on the last rank, the even split a quarter of it
    # on each: parts per million)
    assert laid.step_time_s == pytest.approx(even.step_time_s, rel=1e-7)
    assert laid.memory.activations == pytest.approx(even.memory.activations, rel=1e-12)
    assert laid.memory.weights == pytest.approx(even.memory.weights, rel=1e-5)


@settings(max_examples=25, deadline=None)
@given(cut=st.integers(1, 31))
def test_the_slowest_rank_sets_the_step(cut: int) -> None:
    """Two stages split Llama-3.1-8B's 32 layers at ``cut`` (the second also runs the head):
    moving the cut one layer towards the balance never lengthens the step, and the
    activation memory follows the rank holding the most layer-passes at its warm-up's end:
    the first rank two micro-batches of its layers (1F1B runs PP - rank forwards before
    the first backward), the second one of its own."""
    product = CATALOG.product("h100")

    def run(at: int):  # type: ignore[no-untyped-def]
        cfg = TrainingConfig(gpus=2, seq_len=2048, global_batch=16, pp=2,
                             pp_layout=f"Et*{at}|t*{32 - at}L")
        return estimate_training(CATALOG, LLAMA_8B, product, cfg)

    here = run(cut)
    # with the head (between one and two layers' time) 17 layers before it balance best
    if cut != 17:
        towards = cut - 1 if cut > 17 else cut + 1
        assert run(towards).step_time_s <= here.step_time_s * (1 + 1e-9)
    assert run(17).step_time_s <= here.step_time_s * (1 + 1e-9)
    assert here.memory.activations == pytest.approx(
        run(16).memory.activations * max(2 * cut, 32 - cut) / 32, rel=1e-9)


def test_bad_mtp_and_layout_flags_are_usage_errors() -> None:
    for bad in (-1, 62, 10**20):  # DeepSeek-V3 has 61 layers; 10^20 overflowed NumPy
        with pytest.raises(GpuarchError, match=r"--mtp-layers: expected an integer from 0 "
                           rf"to 61 \(the model's layers\), got {bad}"):
            _dsv3(mtp_layers=bad)
    with pytest.raises(GpuarchError, match="--pp-edge-layers: not with --pp-layout"):
        _dsv3(mtp_layers=1, pp_layout=RECIPE, pp_edge_layers=True)
    with pytest.raises(GpuarchError, match="--pp-layout: 1 MTP blocks"):
        _dsv3(pp_layout=RECIPE)
