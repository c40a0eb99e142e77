"""Hybrid Mamba-2 models (Nemotron-H, Nemotron 3 Nano) in the training model: FLOPs as
Megatron-LM counts them, the chunked scan's memory traffic, blocks that cost what the layers
they make up cost, and the layouts modelled so far."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.mamba import mamba_scan_bytes, mamba_scan_flops
from gpuarch.estimate.memory import activation_bytes_per_layer
from gpuarch.perf import Precision
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.workloads import preset
from gpuarch.workloads.flops import forward_flops_per_token, mamba_forward_flops_per_token
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.mtp import mtp_forward_flops_per_token
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MambaShape, TransformerShape
from tests.test_workloads import NEMOTRON_3_NANO, NEMOTRON_H_8B, _write

CATALOG = load_catalog()


def _nano(tmp_path: Path) -> TransformerShape:
    return shape_from_hf_config(_write(tmp_path, NEMOTRON_3_NANO))


def test_mamba_flops_are_megatrons_where_the_inner_width_is_twice_the_hidden(
        tmp_path: Path) -> None:
    """Megatron-LM's hybrid_flops (megatron/training/training.py @001b00c2) counts a Mamba-2
    layer's forward per token as 2h(2 d_in + 2 groups state + heads) + 7 d_in state
    + 2 d_in h with d_in = 2h; Nemotron-H 8B's inner width is 2 x 4,096, so the counts
    agree to the FLOP."""
    shape = shape_from_hf_config(_write(tmp_path, NEMOTRON_H_8B))
    h, d_in, groups, state, heads = 4096, 2 * 4096, 8, 128, 128
    megatron = 2 * h * (2 * d_in + 2 * groups * state + heads) + 7 * d_in * state \
        + 2 * d_in * h
    assert mamba_forward_flops_per_token(shape) == megatron
    fwd = forward_flops_per_token(shape, 8192)
    assert fwd.mamba == 24 * megatron
    # 4 attention blocks (projections and the full core), 24 squared-ReLU MLP blocks
    assert fwd.attention_proj == 2 * 4 * (4096 * 128 * (2 * 32 + 2 * 8))
    assert fwd.attention_core == 4 * (4 * 8192 * 32 * 128)
    assert fwd.mlp == 2 * 24 * (2 * 4096 * 21504)


def test_nano_flops_reconcile_with_nvidias_published_tflops(tmp_path: Path) -> None:
    """Megatron Bridge's 26.06 table (svcnemo-autobot/Megatron-Bridge @52dfa152,
    docs/performance-summary-archive.md) gives Nemotron 3 Nano on 8 GB300 at 39,749 tokens
    and 885 TFLOP/s a GPU: 22.265 GFLOP a token. This model's count differs from
    Megatron's by its two documented conventions only: the Mamba inner width (4,096, where
    Megatron takes 2 x 2,688) and the attention core counted in full (Megatron's hybrid
    count halves it, causal). Put back, the published figure is matched within 0.1%."""
    shape = _nano(tmp_path)
    seq = 8192
    ours = 3 * forward_flops_per_token(shape, seq).total
    h, state, groups, heads = 2688, 128, 8, 64
    d_in = 2 * h  # Megatron's
    megatron_mamba = 2 * h * (2 * d_in + 2 * groups * state + heads) + 7 * d_in * state \
        + 2 * d_in * h
    core_full = 4 * seq * 32 * 128
    megatron = ours + 3 * (23 * (megatron_mamba - mamba_forward_flops_per_token(shape))
                           - 6 * core_full / 2)
    # the router's GEMM, which Megatron's hybrid count leaves out
    megatron -= 3 * 2 * count_params(shape).router
    published = 885e12 / 39749
    assert megatron == pytest.approx(published, rel=1e-3)
    assert ours < published  # ours: the model's own inner width, the full core


def test_super_flops_reconcile_with_nvidias_published_tflops() -> None:
    """Megatron Bridge's 26.06 table (svcnemo-autobot/Megatron-Bridge @52dfa152,
    docs/performance-summary-archive.md) gives Nemotron 3 Super on 64 GB300 at 9,652 tokens
    and 817 TFLOP/s a GPU: 84.65 GFLOP a token. Megatron's hybrid count
    (megatron/training/training.py @001b00c2; Megatron Bridge's flop_utils.py @4bb7450c)
    takes the latent experts at their latent width with both projections, the shared expert
    at the hidden size, the causal attention core, both MTP depths' '*E' blocks and their
    passes through the head, and leaves out the routers and the MTP blocks' 2h -> h
    projections; the Mamba inner width it takes, twice the hidden, is Super's own. With
    those left out of this model's count, the published figure is matched within 0.2%; it
    is not without the MTP depths (75 GFLOP)."""
    shape = preset("nemotron-3-super").shape
    seq = 8192
    forward = forward_flops_per_token(shape, seq, causal=True).total
    mtp = mtp_forward_flops_per_token(shape, seq, causal=True)
    ours = 3 * (forward + 2 * mtp)
    routers = 3 * 2 * (40 + 2) * 4096 * 512
    projections = 3 * 2 * 2 * (2 * 4096 * 4096)
    published = 817e12 / 9652
    assert ours - routers - projections == pytest.approx(published, rel=2e-3)
    assert 3 * forward < 0.9 * published


def test_nano_preset_is_its_config(tmp_path: Path) -> None:
    """The Nemotron 3 Nano preset (Megatron Bridge's Nemotron3NanoProvider) is the shape its
    config.json reads as, 31.6B in all and 3.6B active (NVIDIA-NeMo/Nemotron @20a06ac3,
    docs/nemotron/nano3/README.md)."""
    shape = preset("nemotron-3-nano").shape
    read = _nano(tmp_path)
    assert shape == dataclasses.replace(read, name=shape.name, context_window=262144)
    assert count_params(shape).total / 1e9 == pytest.approx(31.6, abs=0.05)
    assert count_params(shape).active(shape) / 1e9 == pytest.approx(3.6, abs=0.05)
    assert preset("nemotron-h-8b").shape.mamba_layers == 24


def test_scan_bytes_by_kernel(tmp_path: Path) -> None:
    """The chunked scan's bytes per token for Nemotron 3 Nano on one GPU (16-bit
    activations): forward x/z 5 x 4,096 and B/C 2 x 2,048 elements of 2 bytes, 64 heads x
    (2 + 24) bytes, the state 64 x 64 x 128 / 128 elements x 12 bytes, B C^T 2 x 8 x 128
    FP32; the backward 13 and 5.5 passes, 2 + 60 bytes a head, 40 bytes a state element,
    five B C^T passes. Split over TP 2, every term halves."""
    m = _nano(tmp_path).mamba
    assert m is not None
    fwd, bwd = mamba_scan_bytes(m, 1, 2.0)
    state = 64 * 64 * 128 / 128
    assert fwd == 2 * (5 * 4096 + 2 * 2048) + 64 * 26 + 12 * state + 2 * 8 * 128 * 4
    assert bwd == 2 * (13 * 4096 + 5.5 * 2048) + 64 * 62 + 40 * state + 5 * 8 * 128 * 4
    assert 2.8 < bwd / fwd < 3.0
    half = mamba_scan_bytes(m, 2, 2.0)
    assert half == pytest.approx((fwd / 2, bwd / 2))


def test_scan_efficiency_is_the_published_h200_kernel_rate() -> None:
    """mamba_scan is TileOPs' H200 benchmark of mamba_ssm's forward scan
    (tile-ai/TileOPs.github.io @cac0905a docs/benchmarks/index.md, Mamba2Fwd
    'full-2.7b-long-ctx': TileOPs 18.5093 ms at 1.01x mamba_ssm, so 18.69 ms for 4 x
    32,768 tokens of 128 heads of 64, state 128, one group, chunks of 256) over H200's
    989.4 TFLOPS BF16 peak, at this model's FLOP count."""
    m = MambaShape(heads=128, head_dim=64, state=128, groups=1)
    forward, _ = mamba_scan_flops(m, 1, chunk=256)
    assert forward == 8_454_144
    rate = forward * 4 * 32768 / (18.5093e-3 * 1.01)
    assert DEFAULT_EFFICIENCY.mamba_scan == pytest.approx(rate / 989.4e12, abs=5e-4)


@pytest.mark.parametrize(("name", "block", "ep", "tp", "cp"), [
    ("llama-3.1-8b", "-", 1, 1, 1), ("llama-3.1-8b", "-", 1, 2, 1),
    ("llama-3.1-8b", "-", 1, 1, 2), ("qwen3-30b-a3b", "E", 8, 1, 1),
    ("qwen3-30b-a3b", "E", 8, 2, 1)])
def test_blocks_in_pairs_cost_what_their_layers_do(name: str, block: str, ep: int,
                                                   tp: int, cp: int) -> None:
    """A hybrid pattern of attention blocks each followed by an MLP (or expert) block is
    the plain model written block by block: the same parameters, FLOPs and activation
    memory, and the same step time but for the data-parallel bucket share, which is per
    layer (within 0.1%)."""
    plain = preset(name).shape
    hybrid = dataclasses.replace(plain, layers=2 * plain.layers,
                                 hybrid_pattern=("*" + block) * plain.layers)
    assert count_params(hybrid).total == count_params(plain).total
    assert forward_flops_per_token(hybrid, 4096) == forward_flops_per_token(plain, 4096)
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, tp=tp, cp=cp,
                         ep=max(1, ep // tp), sequence_parallel=tp > 1)
    h100 = CATALOG.product("h100")
    a = estimate_training(CATALOG, plain, h100, cfg)
    b = estimate_training(CATALOG, hybrid, h100, cfg)
    assert b.memory.activations == pytest.approx(a.memory.activations, rel=1e-12)
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-3)


@pytest.mark.parametrize("shared", [False, True])
def test_a_hybrids_mtp_blocks_cost_what_a_layers_do(shared: bool) -> None:
    """A hybrid model's MTP block is an attention and an expert block (Nemotron 3 Super's
    '*E'): on a pattern of such pairs, two MTP depths cost what they cost the plain model
    (activations, weights, step within 0.1%); depths sharing one block's weights hold one
    block's parameters, not two, and the same compute time."""
    plain = preset("qwen3-30b-a3b").shape
    hybrid = dataclasses.replace(plain, layers=2 * plain.layers,
                                 hybrid_pattern="*E" * plain.layers)
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8, mtp_layers=2,
                         mtp_shared_weights=shared)
    h100 = CATALOG.product("h100")
    a = estimate_training(CATALOG, plain, h100, cfg)
    b = estimate_training(CATALOG, hybrid, h100, cfg)
    assert b.memory.activations == pytest.approx(a.memory.activations, rel=1e-12)
    assert b.memory.weights == pytest.approx(a.memory.weights, rel=1e-12)
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-3)
    assert b.model_flops_per_token == pytest.approx(a.model_flops_per_token, rel=1e-12)
    without = estimate_training(CATALOG, hybrid, h100, dataclasses.replace(cfg, mtp_layers=0,
                                                                          mtp_shared_weights=False))
    assert b.step_time_s > without.step_time_s
    if shared:
        two = estimate_training(CATALOG, hybrid, h100,
                                dataclasses.replace(cfg, mtp_shared_weights=False))
        # the same compute; only the optimizer and gradient traffic of fewer weights
        assert b.step_time_s < two.step_time_s < b.step_time_s * 1.001
        assert two.memory.weights - b.memory.weights == pytest.approx(
            b.memory.weights - without.memory.weights, rel=1e-9)


@pytest.mark.parametrize(("name", "block", "pp", "mtp"), [
    ("llama-3.1-8b", "-", 2, 0), ("llama-3.1-8b", "-", 4, 0), ("qwen3-30b-a3b", "E", 2, 0),
    ("qwen3-30b-a3b", "E", 4, 1)])
def test_a_hybrid_pipeline_of_pairs_costs_what_the_plain_ones_does(name: str, block: str,
                                                                   pp: int, mtp: int) -> None:
    """A hybrid's pipeline splits its blocks evenly over the stages, as Megatron-Core does
    without '|' segments in the pattern (the embedding on the first, the MTP blocks and the
    loss on the last): for a pattern of attention and MLP (or expert) pairs the step is
    the plain model's within 0.1%, the activations held the same, and the weights of the
    most loaded rank within 1e-5 (the final norm whole on the last rank, not spread)."""
    plain = preset(name).shape
    hybrid = dataclasses.replace(plain, layers=2 * plain.layers,
                                 hybrid_pattern=("*" + block) * plain.layers)
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, pp=pp,
                         ep=8 // pp if block == "E" else 1, mtp_layers=mtp)
    h100 = CATALOG.product("h100")
    a = estimate_training(CATALOG, plain, h100, cfg)
    b = estimate_training(CATALOG, hybrid, h100, cfg)
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-3)
    assert b.memory.activations == pytest.approx(a.memory.activations, rel=1e-12)
    assert b.memory.weights == pytest.approx(a.memory.weights, rel=1e-5)
    assert b.memory.weights != a.memory.weights


def test_a_hybrid_pipeline_cut_by_bars_interleaves_its_segments() -> None:
    """--pp-layout cuts a hybrid's pattern by '|' into PP x VPP virtual stages, virtual
    stage v on rank v mod PP, as newer Megatron-Core's --hybrid-layer-pattern does (the only
    way it interleaves a hybrid): Nemotron 3 Nano's 52 blocks in four segments of 13 over
    PP 2 x VPP 2 hold what the even PP 2 split's ranks hold but for the order (rank 0 gets
    segments 1 and 3), and interleaving shortens the bubble. Uneven segments load their
    ranks unevenly, and the slower rank paces the pipeline."""
    from gpuarch.estimate.pipeline_layout import hybrid_layout
    shape = preset("nemotron-3-nano").shape
    p = shape.hybrid_pattern
    cut = "|".join(p[i:i + 13] for i in range(0, 52, 13))
    laid = hybrid_layout(p, pp=2, vpp=2, mtp_layers=0, segments=cut)
    assert dict(laid.ranks[0].blocks) == {
        b: (p[:13] + p[26:39]).count(b) for b in set(p[:13] + p[26:39])}
    assert laid.virtual[0].startswith("E") and laid.virtual[-1].endswith("L")
    h100 = CATALOG.product("h100")
    base = TrainingConfig(gpus=8, seq_len=8192, global_batch=64, pp=2, ep=4)
    even = estimate_training(CATALOG, shape, h100, base)
    inter = estimate_training(CATALOG, shape, h100,
                              dataclasses.replace(base, vpp=2, pp_layout=cut))
    assert inter.time_breakdown.pipeline_bubble < even.time_breakdown.pipeline_bubble
    lopsided = p[:30] + "|" + p[30:]
    skew = estimate_training(CATALOG, shape, h100,
                             dataclasses.replace(base, pp_layout=lopsided))
    assert skew.step_time_s > even.step_time_s


def test_a_hybrid_pipelines_ranks_hold_every_parameter_once() -> None:
    """Nemotron 3 Super over 4 stages of 22 blocks: the ranks' parameters, blocks by kind
    with their norms, the embedding on the first and the head with the final norm on the
    last, add up to the model's; the two MTP depths of one shared block sit on the last."""
    from gpuarch.estimate.pipeline_layout import hybrid_layout
    from gpuarch.estimate.training_step import _rank_params
    from gpuarch.workloads.mtp import mtp_block_params
    shape = preset("nemotron-3-super").shape
    layout = hybrid_layout(shape.hybrid_pattern, pp=4, mtp_layers=2)
    assert [r.layers for r in layout.ranks] == [22] * 4
    assert dict(layout.ranks[0].blocks) == {"M": 10, "E": 10, "*": 2}
    assert layout.ranks[-1].mtp == 2 and layout.ranks[0].embedding and layout.ranks[-1].loss
    assert layout.max_layers == 22 + 2 * 2  # an MTP block holds two blocks' activations
    dense, expert = _rank_params(shape, layout, 0, 0)
    assert dense.sum() + expert.sum() == count_params(shape).total
    one_dense, one_expert = mtp_block_params(shape)
    dense2, expert2 = _rank_params(shape, layout, one_dense / 2, one_expert / 2)
    assert dense2[-1] - dense[-1] == pytest.approx(one_dense)
    assert expert2[-1] - expert[-1] == pytest.approx(one_expert)


def test_a_mamba_block_keeps_its_projection_scan_and_norm_outputs() -> None:
    """Activation memory of a hybrid model is its blocks' mean: a Mamba-2 block keeps its
    norm's input and output, the input projection's output, the scan's output and the
    gated norm's output (the output projection's input: 8-bit under FP8)."""
    mamba = MambaShape(heads=8, head_dim=64, state=16, groups=2)
    shape = TransformerShape(name="h", layers=2, hidden=256, heads=4, vocab=100,
                             hybrid_pattern="M*", mamba=mamba)
    tokens, element = 1024, 2
    sbh = tokens * 256 * element
    got = activation_bytes_per_layer(shape, 1, tokens, 1, False, Recompute.NONE, element)
    m_block = 2 * sbh + tokens * element * (mamba.in_proj_width + 2 * mamba.inner)
    a_block = 2 * sbh + tokens * element * (4 * 64 + 2 * 4 * 64 + 4 * 64)
    assert got == m_block / 2 + a_block / 2
    fp8 = activation_bytes_per_layer(shape, 1, tokens, 1, False, Recompute.NONE, element,
                                     quantized_inputs=True)
    assert fp8 < got


def test_nano_trains_with_a_scan_in_its_breakdown(tmp_path: Path) -> None:
    """Nemotron 3 Nano on 8 GB300 as Megatron Bridge's recipe runs it: the step has Mamba-2
    scan time, each kind of block costed; a plain model has none."""
    shape = _nano(tmp_path)
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=512, micro_batch=4, ep=8,
                         precision=Precision.FP8, fp8_params=True, bf16_grads=True,
                         cuda_graphs=True, ep_dispatcher="deepep")
    est = estimate_training(CATALOG, shape, CATALOG.product("gb300"), cfg)
    parts = est.time_breakdown.compute_parts
    assert parts["mamba_scan"] > 0.05 * est.time_breakdown.compute
    assert parts["attention"] > 0 and parts["expert_gemms"] > 0
    assert est.fits_in_memory
    plain = estimate_training(CATALOG, preset("qwen3-30b-a3b").shape,
                              CATALOG.product("gb300"), cfg)
    assert plain.time_breakdown.compute_parts["mamba_scan"] == 0


@pytest.mark.parametrize(("change", "message"), [
    ({"pp": 2, "vpp": 2}, r"--vpp: a hybrid model's stages interleave only as '\|' "
                          r"segments of its pattern \(--pp-layout\); got --vpp 2"),
    ({"pp": 2, "pp_layout": "MEMEM*EMEMEM*EMEMEM*EMEMEM*E|MEMEM*EMEMEMEM*EMEMEMEMX"},
     "--pp-layout: the stages joined must be the model's block pattern .*differ at block 52"),
    ({"pp": 2, "vpp": 2, "pp_layout": "MEMEM*EMEMEM*|EMEMEM*EMEMEM*E"},
     r"--pp-layout: 2 stages in .* but PP x VPP = 2 x 2 = 4"),
    ({"pp": 3, "gpus": 6}, r"--pp: 3 must divide the 52 blocks of the hybrid pattern"),
    ({"pp": 2, "pp_edge_layers": True}, "--pp-edge-layers: .* hold its blocks alone"),
    ({"cp": 16, "gpus": 16}, r"--cp: TP x CP = 1 x 16 must divide the Mamba-2 heads \(64\) "
                             r"and groups \(8\)"),
    ({"lora_rank": 8}, "--lora-rank: .*--lora-rank 0"),
    ({"tp": 16, "gpus": 16}, r"--tp: 16 must divide the Mamba-2 heads \(64\) and groups "
                             r"\(8\)"),
])
def test_hybrid_layouts_not_yet_modelled_are_refused(tmp_path: Path, change: dict,  # type: ignore[type-arg]
                                                     message: str) -> None:
    shape = _nano(tmp_path)
    cfg = dataclasses.replace(TrainingConfig(gpus=8, seq_len=8192, global_batch=64), **change)
    with pytest.raises(GpuarchError, match=message):
        estimate_training(CATALOG, shape, CATALOG.product("h100"), cfg)


def test_megatron_launch_builds_a_hybrid_as_mambamodel() -> None:
    """A hybrid model launches as Megatron-LM's MambaModel (pretrain_mamba.py with the
    mamba stack spec, as NVIDIA's examples/mamba/train.sh does), its block pattern and
    Mamba-2 shape given (flags of megatron/training/arguments.py @000c4ac2: the pattern's
    length must be --num-layers), and no position encoding; a plain model still launches
    pretrain_gpt.py."""
    from gpuarch.report.launch import megatron_launch

    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=512, micro_batch=4, ep=8)
    argv = megatron_launch(preset("nemotron-3-nano").shape, cfg).argv
    assert "pretrain_mamba.py" in argv and "pretrain_gpt.py" not in argv

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert argv[argv.index("--spec") + 1:argv.index("--spec") + 3] == (
        "megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")
    assert "--is-hybrid-model" in argv
    assert value("--hybrid-override-pattern") == NEMOTRON_3_NANO["hybrid_override_pattern"]
    assert len(value("--hybrid-override-pattern")) == int(value("--num-layers"))
    assert (value("--mamba-num-heads"), value("--mamba-head-dim"), value("--mamba-state-dim"),
            value("--mamba-num-groups")) == ("64", "64", "128", "8")
    assert value("--position-embedding-type") == "none"
    plain = megatron_launch(preset("qwen3-30b-a3b").shape, cfg).argv
    assert "pretrain_gpt.py" in plain and "--hybrid-override-pattern" not in plain


def test_the_advisors_search_a_hybrid_only_where_it_is_modelled() -> None:
    """The training advisor lays a hybrid out with a TP x CP that splits its Mamba-2 heads
    and groups and a PP (x VPP) that splits its blocks evenly; the serving
    advisor serves it, disaggregated deployments too."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.infer import InferenceSearch, advise_inference

    shape = preset("nemotron-3-nano").shape
    adv = advise_training(CATALOG, shape, TrainingSearch(tokens=1e11, max_gpus=64,
                                                          seq_len=32768, gpus=("h100",),
                                                          top=50),
                          load_prices())
    assert adv.top
    for option in (*adv.top, *adv.pareto):
        assert 52 % (option.pp * option.vpp) == 0 and 8 % (option.tp * option.cp) == 0
    served = advise_inference(CATALOG, shape, InferenceSearch(
        input_len=1024, output_len=1024, concurrency=64, gpus=("h100",)), load_prices())
    assert served.top
    split = advise_inference(CATALOG, shape, InferenceSearch(
        input_len=1024, output_len=1024, concurrency=64, gpus=("h100",),
        disaggregated=True), load_prices())
    assert any(o.prefill is not None for o in (*split.top, *split.pareto))


def test_context_parallel_mamba_blocks_swap_sequence_for_heads() -> None:
    """With context parallelism a Mamba-2 block sends its input projection's output
    all-to-all (sequence shards to head shards) and the scan's output back, as Megatron-Core's
    MambaContextParallel does; attention blocks exchange keys and values as before, MLP and
    expert blocks nothing. Without CP there is no such traffic."""
    shape = preset("nemotron-3-nano").shape
    gb300 = CATALOG.product("gb300")
    base = TrainingConfig(gpus=16, seq_len=65536, global_batch=32, ep=8,
                          precision=Precision.FP8, gpus_per_node=72)
    plain = estimate_training(CATALOG, shape, gb300, base)
    split = estimate_training(CATALOG, shape, gb300, dataclasses.replace(base, cp=2))
    assert plain.time_breakdown.communication_parts["context_parallel"] == 0
    assert split.time_breakdown.communication_parts["context_parallel"] > 0
    # a pattern without Mamba blocks exchanges only its attention blocks' keys and values
    attention_only = dataclasses.replace(
        shape, hybrid_pattern=shape.hybrid_pattern.replace("M", "E"), mamba=None)
    fewer = estimate_training(CATALOG, attention_only, gb300, dataclasses.replace(base, cp=2))
    assert 0 < fewer.time_breakdown.communication_parts["context_parallel"] \
        < split.time_breakdown.communication_parts["context_parallel"]


def test_latent_experts_compute_and_send_the_latent_width() -> None:
    """Latent experts (Megatron-Core's moe_latent_size, per NVIDIA/Megatron-LM @37b95c51's
    moe_layer.py: fc1_latent_proj before dispatch, fc2_latent_proj after the combine, both
    duplicated over TP): the routed experts' GEMMs read and write 1,024-wide rows, the
    projections run on each rank's own sequence-parallel tokens, the router and the shared
    expert see the 4,096-wide hidden state, and the permutation moves latent rows."""
    from gpuarch.estimate.training_layers import _ffn_ops
    shape = preset("nemotron-3-super").shape
    cfg = TrainingConfig(gpus=16, seq_len=8192, global_batch=64, tp=2, ep=8, etp=1,
                         gpus_per_node=72, sequence_parallel=True)
    ops, _ = _ffn_ops(shape, cfg, True, 8192)
    by = {op.name: op for op in ops}
    assert (by["router"].n, by["router"].k) == (512, 4096)
    assert (by["moe_latent_down"].m, by["moe_latent_down"].n, by["moe_latent_down"].k) == \
        (4096, 1024, 4096)
    assert (by["moe_latent_up"].n, by["moe_latent_up"].k) == (4096, 1024)
    assert (by["grouped_expert_up"].n, by["grouped_expert_up"].k) == (2688, 1024)
    assert (by["grouped_expert_down"].n, by["grouped_expert_down"].k) == (1024, 2688)
    assert by["shared_up"].k == 4096 and by["shared_down"].n == 4096
    plain = dataclasses.replace(shape, moe_latent=0)
    wide = {op.name: op for op in _ffn_ops(plain, cfg, True, 8192)[0]}
    assert "moe_latent_down" not in wide
    assert by["moe_permute"].bytes_moved * 4 == wide["moe_permute"].bytes_moved
    # the projections' weights are whole on every tensor-parallel rank: TP 2 halves the
    # rest (the experts are split over EP 8 either way)
    gb200 = CATALOG.product("gb200")
    two = estimate_training(CATALOG, shape, gb200, cfg)
    one = estimate_training(CATALOG, shape, gb200, dataclasses.replace(
        cfg, tp=1, gpus=8, sequence_parallel=False))
    pc = count_params(shape)
    assert pc.moe_latent == 40 * 2 * 4096 * 1024
    rest = pc.total - pc.mlp_experts - pc.moe_latent
    assert two.memory.weights / one.memory.weights == pytest.approx(
        (rest / 2 + pc.moe_latent + pc.mlp_experts / 8)
        / (rest + pc.moe_latent + pc.mlp_experts / 8), rel=1e-12)


def test_a_hybrid_pipelines_latent_projections_stay_whole_over_tp() -> None:
    """Over a pipeline too, TP 2 halves a rank's weights but its latent experts'
    projections (duplicated over TP), 2 x 4,096 x 1,024 an expert block."""
    from gpuarch.estimate.pipeline_layout import hybrid_layout
    from gpuarch.estimate.training_step import _rank_params
    shape = preset("nemotron-3-super").shape
    gb300 = CATALOG.product("gb300")
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=64, pp=2, ep=16, etp=1,
                         gpus_per_node=72)
    one = estimate_training(CATALOG, shape, gb300, cfg)
    two = estimate_training(CATALOG, shape, gb300, dataclasses.replace(
        cfg, tp=2, sequence_parallel=True))
    layout = hybrid_layout(shape.hybrid_pattern, pp=2)
    dense, expert = _rank_params(shape, layout, 0, 0)
    heaviest = int(np.argmax(dense + expert / 16))
    latent = dict(layout.ranks[heaviest].blocks)["E"] * 2 * 4096 * 1024
    per_param = one.memory.weights / (dense[heaviest] + expert[heaviest] / 16)
    assert two.memory.weights == pytest.approx(
        per_param * ((dense[heaviest] - latent) / 2 + latent + expert[heaviest] / 16),
        rel=1e-9)


def test_the_training_advisor_pipelines_a_hybrid_that_needs_it() -> None:
    """Nemotron-H 8B on eight 24 GB L4s: pipelines are searched (the even split of its 52
    blocks, and interleaved as the pattern cut into PP x VPP equal segments), and each
    pipelined option's step and memory are what estimate train gives that configuration,
    rank by rank."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.estimate.pipeline_layout import even_segments

    shape = preset("nemotron-h-8b").shape
    adv = advise_training(CATALOG, shape, TrainingSearch(tokens=1e9, max_gpus=8,
                                                          gpus=("l4",), top=300),
                          load_prices())
    piped = [o for o in (*adv.top, *adv.pareto) if o.pp > 1]
    assert piped and any(o.vpp > 1 for o in piped)
    product = CATALOG.product("l4")
    for o in [*piped[:3], *[o for o in piped if o.vpp > 1][:3]]:
        assert 52 % (o.pp * o.vpp) == 0
        est = estimate_training(CATALOG, shape, product, TrainingConfig(
            gpus=o.gpus, seq_len=4096, global_batch=o.global_batch, micro_batch=o.micro_batch,
            tp=o.tp, pp=o.pp, vpp=o.vpp, cp=o.cp, ep=o.ep,
            pp_layout=even_segments(shape.hybrid_pattern, o.pp, o.vpp) if o.vpp > 1 else "",
            zero=o.zero, fsdp_prefetch=o.fsdp_prefetch,
            recompute=Recompute(o.recompute), sequence_parallel=o.sequence_parallel,
            tp_comm_overlap=o.tp_comm_overlap, precision=Precision(o.precision),
            fp8_params=o.precision == "fp8", ep_dispatcher="deepep"),
            system=CATALOG.system_for(product))
        assert o.step_time_s == pytest.approx(est.step_time_s, rel=1e-9)
        assert o.memory_per_gpu_gib * 2**30 == pytest.approx(est.memory.total, rel=1e-9)


def test_layers_costed_once_serve_every_pipeline_split() -> None:
    """The advisor costs a hybrid's layers once for layouts of several pipeline splits
    (``layer_costs``) and hands each split its run of them (``LayerCosts.take``): each
    split's estimate is what it is when it costs its own layers."""
    from gpuarch.estimate.pipeline_layout import even_segments
    from gpuarch.estimate.training_layers import layer_costs
    from gpuarch.estimate.training_step import evaluate_training
    from gpuarch.perf import Device, link_for

    shape = preset("nemotron-h-8b").shape
    product = CATALOG.product("h100")
    device = Device.of(product, Precision.FP8, 4)
    intra, inter = link_for(product, CATALOG.system("dgx h100"), None)
    n = 6
    arrays = dict(gpus=np.array([8, 16, 16, 32, 32, 64]), global_batch=np.full(n, 128),
                  micro_batch=np.array([1, 2, 2, 1, 1, 1]), tp=np.array([1, 2, 1, 2, 4, 2]),
                  cp=np.ones(n, int), ep=np.ones(n, int))
    common = dict(seq_len=4096, precision=Precision.FP8, recompute=Recompute.SELECTIVE,
                  gpus_per_node=8)
    shared = layer_costs(shape, device, intra, inter, TrainingConfig(**arrays, **common),
                         DEFAULT_EFFICIENCY)
    splits = ((slice(0, 2), {"pp": 1, "vpp": 1}),
              (slice(2, 4), {"pp": 2, "vpp": 2,
                             "pp_layout": even_segments(shape.hybrid_pattern, 2, 2)}),
              (slice(4, 6), {"pp": 4, "vpp": 1}))
    for span, split in splits:
        cfg = TrainingConfig(**{k: v[span] for k, v in arrays.items()}, **common, **split)
        own = evaluate_training(shape, product, device, intra, inter, cfg, DEFAULT_EFFICIENCY)
        given = evaluate_training(shape, product, device, intra, inter, cfg,
                                  DEFAULT_EFFICIENCY, layers=shared.take(span))
        np.testing.assert_array_equal(given.step, own.step)
        np.testing.assert_array_equal(given.memory_total, own.memory_total)
        # another run's layers give another answer: the run is what is used
        other = slice(span.start - 2, span.stop - 2) if span.start else slice(2, 4)
        assert not np.array_equal(evaluate_training(
            shape, product, device, intra, inter, cfg, DEFAULT_EFFICIENCY,
            layers=shared.take(other)).step, own.step)


def test_lightning_is_nanos_backbone_with_a_shared_mtp_block() -> None:
    """Nemotron 3.5 Lightning is Nemotron 3 Nano's backbone (Megatron Bridge builds every
    Lightning recipe on Nano's) with one attention-and-experts MTP block run twice with
    shared weights. Megatron Bridge's verification card for the checkpoint
    (nemotron-3.5-lightning.mdx @d5d8c192, hf_to_megatron_gpu: 'all 6,513 tensors and
    32,913,266,240 parameters match the pinned source') counts the whole checkpoint, the MTP
    block once: the backbone, routers' score-correction biases included, and the block's
    2h -> h projection, norms, attention and expert layer give it to the last parameter."""
    from gpuarch.workloads.mtp import mtp_block_params
    from gpuarch.workloads.presets import preset
    lightning, nano = preset("nemotron-3.5-lightning").shape, preset("nemotron-3-nano").shape
    assert count_params(lightning).total == count_params(nano).total
    dense, routed = mtp_block_params(lightning)
    assert count_params(lightning).total + dense + routed == 32_913_266_240
