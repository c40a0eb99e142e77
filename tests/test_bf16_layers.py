"""Layers run in BF16 beside a low-precision recipe (--bf16-layers-at-start/-at-end,
Megatron-Core's --first-last-layers-bf16): which ranks hold them, what they cost, what they
hold, and the errors and launch flags."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.pipeline_layout import even_layout, hybrid_layout, parse_pp_layout
from gpuarch.perf import Precision
from gpuarch.report.launch import megatron_launch
from gpuarch.workloads import preset
from gpuarch.workloads.params import attention_params, layer_norm_params, mlp_params
from tests.test_cli import run
from tests.test_launch import pairs

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
B200 = CATALOG.product("b200")


def _estimate(model: str, product: Any = H100, **kw: Any) -> Any:
    shape = preset(model).shape
    fields: dict[str, Any] = dict(gpus=8, seq_len=4096, global_batch=64,
                                  precision=Precision.FP8)
    fields.update(kw)
    return estimate_training(CATALOG, shape, product, TrainingConfig(**fields),
                             system=CATALOG.system_for(product))


def test_the_even_split_written_out_costs_what_the_even_split_does() -> None:
    """``even_layout`` is the even split as an explicit layout: where the layers divide,
    the per-rank path it takes gives the even split's step and memory (to 1e-6)."""
    shape = preset("llama-3.1-8b").shape
    for pp, vpp in ((2, 1), (4, 1), (4, 2)):
        fields = dict(gpus=8, seq_len=4096, global_batch=64, tp=2, pp=pp, vpp=vpp,
                      precision=Precision.FP8)
        even = estimate_training(CATALOG, shape, H100, TrainingConfig(**fields))
        laid = estimate_training(CATALOG, shape, H100, TrainingConfig(
            **fields, pp_layout=even_layout(shape.layers, pp=pp, vpp=vpp)))
        assert laid.step_time_s == pytest.approx(even.step_time_s, rel=1e-6)
        assert laid.memory.total == pytest.approx(even.memory.total, rel=1e-6)
    # the embedding and the loss as a layer's slot each: the first and last stage hold one
    # layer fewer; layers that do not divide go to the last stages
    assert even_layout(32, pp=4, vpp=1, edge_layers=True) == \
        "E" + "t" * 7 + "|" + "t" * 8 + "|" + "t" * 9 + "|" + "t" * 8 + "L"
    assert even_layout(10, pp=3, vpp=1, mtp_layers=1) == "Ettt|ttt|ttttmL"


def test_the_first_and_last_layers_land_on_the_first_and_last_ranks() -> None:
    """Megatron-Core picks the BF16 layers by their global number (is_first_last_bf16_layer):
    under interleaving the first ones sit in the first rank's first chunk and the last
    ones in the last rank's last chunk; a hybrid's are its first and last blocks, by kind."""
    laid = parse_pp_layout(even_layout(32, pp=4, vpp=2), pp=4, vpp=2, layers=32,
                           dense_layers=32, bf16=(2, 5))
    # 8 chunks of 4 layers: layers 0-1 in chunk 0 (rank 0), 27 in chunk 6 (rank 2), 28-31
    # in chunk 7 (rank 3)
    assert [dict(r.bf16).get(False, 0) for r in laid.ranks] == [2, 0, 1, 4]
    assert laid.bf16_virtual == (2, 0, 0, 0, 0, 0, 1, 4)
    # DeepSeek-style leading dense layers: the first BF16 layers are dense, the last expert
    moe = parse_pp_layout(even_layout(8, pp=2, vpp=1), pp=2, vpp=1, layers=8,
                          dense_layers=3, bf16=(4, 1))
    assert dict(moe.ranks[0].bf16) == {False: 3, True: 1}
    assert dict(moe.ranks[1].bf16) == {True: 1}
    hybrid = hybrid_layout("M-M*M-ME", pp=2, bf16=(1, 2))
    assert dict(hybrid.ranks[0].bf16) == {"M": 1}
    assert dict(hybrid.ranks[1].bf16) == {"M": 1, "E": 1}
    assert hybrid_layout("M-M*M-ME", pp=1).bf16_virtual == ()


@pytest.mark.parametrize(("model", "product", "kw"), [
    ("llama-3.1-8b", H100, dict(tp=2, pp=2)),
    ("mixtral-8x7b", H100, dict(tp=2, ep=4)),
    ("llama-3.1-8b", B200, dict(tp=2, precision=Precision.NVFP4)),
    ("nemotron-h-8b", H100, dict(tp=2, pp=2)),
    ("llama-3.1-8b", H100, dict(tp=2, pp=2, mtp_layers=1, mtp_bf16=True)),
    ("nemotron-3-nano-30b-a3b", B200, dict(ep=8, mtp_layers=2, mtp_shared_weights=True,
                                            mtp_bf16=True)),
])
def test_every_layer_in_bf16_costs_what_a_bf16_run_does(model: str, product: Any,
                                                        kw: dict[str, Any]) -> None:
    """All the layers (and with --mtp-bf16 the MTP blocks) in BF16: each part of the compute
    (GEMMs, attention, memory-bound work, the Mamba-2 scan, and the LM head, which runs in
    BF16 in every low-precision run: Megatron-Core's output layer is outside Transformer
    Engine's autocast) is the BF16 run's."""
    layers = preset(model).shape.layers
    mixed = _estimate(model, product, bf16_layers_start=layers // 2,
                      bf16_layers_end=layers - layers // 2, **kw)
    kw.pop("mtp_bf16", None)
    plain = _estimate(model, product, **{**kw, "precision": Precision.BF16})
    low = _estimate(model, product, **kw)
    for part, seconds in plain.as_json()["compute_breakdown_s"].items():
        assert mixed.as_json()["compute_breakdown_s"][part] == pytest.approx(
            seconds, rel=1e-9, abs=1e-12), part
    # (the low-precision run costs otherwise: FP8 is not faster for every layer, a small
    # expert's GEMMs can lose more to quantization than they gain)
    assert low.step_time_s != mixed.step_time_s


def test_each_bf16_layer_adds_one_bf16_layers_difference() -> None:
    """Without a pipeline every further BF16 layer adds the same time (a BF16 layer's over
    a low-precision one's), and with FP8 weights one layer's weights once more (a byte a
    parameter over the FP8 copy, split over TP)."""
    shape = preset("llama-3.1-8b").shape
    steps, weights = [], []
    for k in (1, 2, 3):
        est = _estimate("llama-3.1-8b", tp=2, bf16_layers_end=k, fp8_params=True)
        steps.append(est.step_time_s)
        weights.append(est.memory.weights)
    assert steps[2] - steps[1] == pytest.approx(steps[1] - steps[0], rel=1e-6)
    assert steps[1] > steps[0]
    layer = (attention_params(shape) + layer_norm_params(shape)
             + mlp_params(shape, shape.d_ffn))
    assert weights[1] - weights[0] == pytest.approx(layer / 2 * 1.0, rel=1e-9)
    assert weights[2] - weights[1] == pytest.approx(weights[1] - weights[0], rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "nemotron-h-8b"]),
       pp=st.sampled_from([1, 2, 4]), start=st.integers(0, 6), end=st.integers(0, 6),
       more=st.integers(1, 6), at_end=st.booleans(),
       precision=st.sampled_from([Precision.FP8, Precision.NVFP4]),
       fp8_params=st.booleans())
def test_more_bf16_layers_never_shorten_the_step_or_shrink_memory(
        model: str, pp: int, start: int, end: int, more: int, at_end: bool,
        precision: Precision, fp8_params: bool) -> None:
    """A layer moved from the recipe's format to BF16 never makes the memory per GPU
    smaller, nor the step shorter where the model's layers run faster in the recipe's format
    (dense layers and Mixtral's large experts; a fine-grained MoE's small expert GEMMs can
    lose more to quantization than they gain, so there it may)."""
    kw: dict[str, Any] = dict(gpus=4 * pp, tp=2, pp=pp, precision=precision,
                              fp8_params=fp8_params and precision is Precision.FP8,
                              ep=2 if preset(model).shape.is_moe else 1)
    a = _estimate(model, B200, bf16_layers_start=start, bf16_layers_end=end, **kw)
    b = _estimate(model, B200, bf16_layers_start=start + (0 if at_end else more),
                  bf16_layers_end=end + (more if at_end else 0), **kw)
    assert b.step_time_s >= a.step_time_s * (1 - 1e-9)
    assert b.memory.total >= a.memory.total * (1 - 1e-9)


def test_bad_bf16_layers_are_refused_by_flag() -> None:
    """Not beside a 16-bit run, not negative, not more than the model's layers."""
    with pytest.raises(GpuarchError, match=r"--bf16-layers-at-end: .* needs --precision fp8 "
                                           r"or nvfp4, got --precision bf16"):
        _estimate("llama-3.1-8b", bf16_layers_end=2, precision=Precision.BF16)
    with pytest.raises(GpuarchError, match=r"--bf16-layers-at-start: expected an integer "
                                           r">= 0, got -1"):
        _estimate("llama-3.1-8b", bf16_layers_start=-1)
    with pytest.raises(GpuarchError, match=r"20 \+ 20 layers in BF16, but the model has 32"):
        _estimate("llama-3.1-8b", bf16_layers_start=20, bf16_layers_end=20)


def test_the_cli_and_the_megatron_launch(capsys: pytest.CaptureFixture[str]) -> None:
    """The flags reach the estimate (its assumptions and text say so) and the Megatron
    launch spells them; a usage error exits 2 naming the flag."""
    argv = ("estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--tp", "2", "--pp", "2", "--global-batch", "64", "--seq-len", "4096")
    status, out, _ = run(capsys, *argv, "--precision", "fp8", "--bf16-layers-at-end", "2")
    assert status == 0 and "the last 2 layers in BF16" in out
    status, _, err = run(capsys, *argv, "--bf16-layers-at-end", "2")
    assert status == 2 and "--bf16-layers-at-end" in err and "Traceback" not in err
    launch = megatron_launch(preset("llama-3.1-8b").shape, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, tp=2, pp=2, precision=Precision.FP8,
        bf16_layers_end=2))
    got = pairs(launch.argv)
    assert "--first-last-layers-bf16" in got
    assert got["--num-layers-at-start-in-bf16"] == ["0"]
    assert got["--num-layers-at-end-in-bf16"] == ["2"]


def test_mtp_blocks_in_bf16() -> None:
    """--mtp-bf16 runs the MTP blocks as a BF16 run does: slower than in FP8, and with FP8
    weights each depth's weights a byte a parameter more (shared weights: one block's)."""
    from gpuarch.workloads.mtp import mtp_block_params

    shape = preset("nemotron-3-super").shape
    kw: dict[str, Any] = dict(gpus=64, global_batch=512, seq_len=8192, ep=64, etp=1,
                              mtp_layers=2, mtp_shared_weights=True, fp8_params=True,
                              ep_dispatcher="deepep")
    fp8 = _estimate("nemotron-3-super", B200, **kw)
    bf16 = _estimate("nemotron-3-super", B200, mtp_bf16=True, **kw)
    assert bf16.step_time_s > fp8.step_time_s
    dense, expert = mtp_block_params(shape)
    # ZeRO-1 keeps weights whole over DP: the block's dense part and its experts over EP
    assert bf16.memory.weights - fp8.memory.weights == pytest.approx(dense + expert / 64,
                                                                     rel=1e-9)
    with pytest.raises(GpuarchError, match=r"--mtp-bf16: needs --mtp-layers > 0"):
        _estimate("llama-3.1-8b", mtp_bf16=True)
