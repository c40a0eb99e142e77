"""Mamba-1 mixers (``MambaShape(kind="mamba1")``): Jamba (``jamba``), Falcon Mamba
(``falcon_mamba``) and state-spaces' Mamba (``mamba``). Counts are pinned to the models
Hugging Face Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``)
and worked out by hand; the selective scan's costs, the state a sequence holds and the
x_proj all-reduce are checked against the arithmetic their docstrings state."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate import inference_passes, training_layers
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.mamba import hybrid_state_bytes, mamba_decode_ops, selective_scan_costs
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import mamba_forward_flops_per_token
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

# tiiuae/falcon-mamba-7b's config.json (its "expand" of 16 is not what Transformers builds:
# the config's intermediate_size, 8,192, is)
FALCON_MAMBA_7B = {
    "architectures": ["FalconMambaForCausalLM"], "conv_kernel": 4, "expand": 16,
    "hidden_size": 4096, "intermediate_size": 8192, "model_type": "falcon_mamba",
    "num_hidden_layers": 64, "state_size": 16, "tie_word_embeddings": False,
    "time_step_rank": 256, "use_bias": False, "use_conv_bias": True, "vocab_size": 65024}
# ai21labs/AI21-Jamba-1.5-Mini's shape (also Jamba v0.1's, and JambaConfig's defaults)
JAMBA_MINI = {
    "architectures": ["JambaForCausalLM"], "model_type": "jamba", "attn_layer_offset": 4,
    "attn_layer_period": 8, "expert_layer_offset": 1, "expert_layer_period": 2,
    "hidden_size": 4096, "intermediate_size": 14336, "mamba_conv_bias": True,
    "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256, "mamba_expand": 2,
    "mamba_proj_bias": False, "max_position_embeddings": 262144, "num_attention_heads": 32,
    "num_experts": 16, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "tie_word_embeddings": False, "vocab_size": 65536}
JAMBA_SMALL = {
    "model_type": "jamba", "hidden_size": 1024, "intermediate_size": 2048,
    "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 4,
    "num_experts": 8, "num_experts_per_tok": 2, "attn_layer_period": 4,
    "attn_layer_offset": 1, "expert_layer_period": 3, "expert_layer_offset": 2,
    "mamba_d_state": 8, "mamba_d_conv": 3, "mamba_expand": 3, "mamba_dt_rank": 40,
    "mamba_conv_bias": False, "mamba_proj_bias": True, "vocab_size": 32000,
    "tie_word_embeddings": True}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    (FALCON_MAMBA_7B, 7_272_665_088),
    (JAMBA_MINI, 51_570_323_328),
    ({"model_type": "jamba"}, 51_570_323_328),  # JambaConfig's defaults
    (JAMBA_SMALL, 481_543_840),
    # every layer dense (one expert), attention every eighth
    ({"model_type": "jamba", "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 16,
      "num_experts": 1, "vocab_size": 65536}, 872_979_552),
    ({"model_type": "mamba"}, 159_308_544),  # MambaConfig's defaults, tied
    ({"model_type": "falcon_mamba"}, 159_308_544),  # its norms have no weights
    # the width from expand x hidden, a rank given, biases on the projections, none on the
    # convolution
    ({"model_type": "mamba", "num_hidden_layers": 64, "hidden_size": 2560, "state_size": 16,
      "expand": 2, "vocab_size": 50280, "use_bias": True, "use_conv_bias": False,
      "time_step_rank": 100}, 2_729_515_520),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_falcon_mamba_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, FALCON_MAMBA_7B)
    m = s.mamba
    assert m is not None and m.selective and s.hybrid_pattern == "M" * 64
    assert (m.inner, m.state, m.dt_rank, m.conv_kernel) == (8192, 16, 256, 4)
    mixer = (4096 * 2 * 8192  # in_proj: x and z
             + 8192 * 4 + 8192  # the convolution's taps and bias over x
             + 8192 * (256 + 2 * 16)  # x_proj: the step's rank, B and C
             + 256 * 8192 + 8192  # dt_proj and its bias
             + 8192 * 16 + 8192  # A_log, D
             + 8192 * 4096)  # out_proj
    layer = mixer + 4096  # its norm
    assert count_params(s).total == 64 * layer + 4096 + 2 * 65024 * 4096 == 7_272_665_088
    # the forward FLOPs of one block: four projections at 2 a weight, 7 a state element
    assert mamba_forward_flops_per_token(s) == 2 * (
        4096 * 3 * 8192 + 8192 * (288 + 256)) + 7 * 8192 * 16


def test_jamba_layers(tmp_path: Path) -> None:
    s = _read(tmp_path, JAMBA_MINI)
    assert s.hybrid_pattern == "M-MEM-ME*-MEM-ME" * 4
    assert (s.mamba_layers, s.attention_layers, s.moe_layers) == (28, 4, 16)
    # "12B active" (AI21's model card): two of sixteen experts a layer
    assert count_params(s).active(s) == 12_110_311_296
    small = _read(tmp_path, JAMBA_SMALL)
    # attention where i % 4 == 1, experts where i % 3 == 2
    want = "".join(("*" if i % 4 == 1 else "M") + ("E" if i % 3 == 2 else "-")
                   for i in range(16))
    assert small.hybrid_pattern == want
    m = small.mamba
    assert m is not None and m.dt_bc_norms and (m.inner, m.dt_rank) == (3072, 40)
    # Jamba's three norms: the step's rank, B and C
    assert count_params(small).total - count_params(dataclasses.replace(
        small, mamba=dataclasses.replace(m, dt_bc_norms=False))).total \
        == small.mamba_layers * (40 + 2 * 8)


def test_selective_scan_and_state(tmp_path: Path) -> None:
    s = _read(tmp_path, JAMBA_MINI)
    m = s.mamba
    assert m is not None
    # TP 2: 4,096 channels a GPU, B and C (16 each) whole
    assert selective_scan_costs(m, 2, 2.0) == (
        (5 * 4096 + 32) * 2.0, (8 * 4096 + 32) * 2.0 + 32 * 4.0,
        7 * 4096 * 16, 3 * 7 * 4096 * 16)
    # a sequence's state: the convolution's last 3 inputs (16-bit) and a 4,096 x 16 FP32
    # state a block, 28 blocks
    assert hybrid_state_bytes(s, 2, 4.0) == 28 * (3 * 4096 * 2 + 4096 * 16 * 4)
    # a decode step: the state read and written; x, step, z and y a channel and B and C
    # read; the convolution's window; no norm
    ops = {op.name: op for op in mamba_decode_ops(m, 2, 8, 2.0, 4.0)}
    assert set(ops) == {"mamba_conv", "mamba_scan"}
    assert ops["mamba_scan"].bytes_moved == 2 * 8 * 4096 * 16 * 4.0 \
        + 8 * (4 * 4096 + 32) * 2.0  # type: ignore[union-attr]


def test_x_proj_reduces_once_more_a_block(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """At TP 2 each Mamba-1 block all-reduces x_proj's output (the step's rank, B and C)
    beside its output: with that reduction left out the tensor-parallel seconds fall; with
    its bytes made the hidden state's they are exactly twice those without it."""
    s = _read(tmp_path, FALCON_MAMBA_7B)
    gpu = CATALOG.product("h100")
    cfg = InferenceConfig(gpus=2, tp=2, input_len=1024, output_len=128, batch=16)

    def tp_seconds() -> tuple[float, float]:
        r = estimate_inference(CATALOG, s, gpu, cfg)
        return r.prefill_parts_s["tensor_parallel"], r.decode_step_parts_s["tensor_parallel"]

    real = tp_seconds()
    monkeypatch.setattr(inference_passes, "x_proj_reduce_bytes",
                        lambda m, tokens, element: None)
    without = tp_seconds()
    monkeypatch.setattr(inference_passes, "x_proj_reduce_bytes",
                        lambda m, tokens, element: tokens * s.hidden * element)
    doubled = tp_seconds()
    for a, b, c in zip(without, real, doubled, strict=True):
        assert 0 < a < b < c and c == pytest.approx(2 * a)
    # and in training, forward and backward
    train = TrainingConfig(gpus=8, tp=2, seq_len=4096, global_batch=64)
    with_reduce = estimate_training(CATALOG, s, gpu, train).step_time_s
    monkeypatch.setattr(training_layers, "x_proj_reduce_bytes",
                        lambda m, tokens, element: 0.0)
    assert estimate_training(CATALOG, s, gpu, train).step_time_s < with_reduce


def test_estimates_and_refusals(tmp_path: Path) -> None:
    s = _read(tmp_path, JAMBA_MINI)
    h100 = CATALOG.product("h100")
    r = estimate_inference(CATALOG, s, h100, InferenceConfig(
        gpus=2, tp=2, input_len=2048, output_len=256, batch=32))
    assert r.fits_in_memory and r.tpot_s > 0
    t = estimate_training(CATALOG, s, h100, TrainingConfig(
        gpus=8, tp=2, ep=4, seq_len=4096, global_batch=64, zero=3))
    assert t.step_time_s > 0 and "selective scan" in t.assumptions["mamba_kernels"]
    with pytest.raises(GpuarchError, match=r"--cp: .* Mamba-1 blocks are modelled without "
                                           "context parallelism"):
        estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, cp=2,
                                                            seq_len=4096, global_batch=64))
    pure = _read(tmp_path, FALCON_MAMBA_7B)
    with pytest.raises(GpuarchError, match=r"--tp: 3 does not divide the 8192 channels of "
                                           "its Mamba-1 mixers"):
        estimate_inference(CATALOG, pure, h100, InferenceConfig(
            gpus=3, tp=3, input_len=100, output_len=10, batch=4))
    # the mixers split their channels alone (B and C whole on every GPU)
    pure.check_mamba_split(8, "--tp", "8")
    with pytest.raises(GpuarchError, match=r"--tp: 3 must divide the Mamba-1 inner width "
                                           r"\(8192\)"):
        pure.check_mamba_split(3, "--tp", "3")


@pytest.mark.parametrize(("change", "message"), [
    ({"attn_layer_offset": 8}, r"attn_layer_offset: expected 0 to attn_layer_period - 1 "
                               r"\(7\), got 8"),
    ({"expert_layer_period": 0}, r"expert_layer_period: expected an integer >= 1, got 0"),
    ({"mamba_expand": 0}, r"mamba_expand: expected an integer >= 1, got 0"),
    ({"mamba_dt_rank": "big"}, r"mamba_dt_rank: expected an integer, got 'big'"),
])
def test_jamba_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**JAMBA_MINI, **change})


def test_shape_checks() -> None:
    with pytest.raises(GpuarchError, match="a Mamba-1 mixer is held as one-channel heads"):
        MambaShape(kind="mamba1", heads=64, head_dim=2, state=16, groups=1, gated_norm=False,
                   dt_rank=4)
    with pytest.raises(GpuarchError, match=r"mamba\.dt_rank: a Mamba-1 mixer needs"):
        MambaShape(kind="mamba1", heads=64, head_dim=1, state=16, groups=1, gated_norm=False)
    with pytest.raises(GpuarchError, match=r"mamba\.dt_rank / mamba\.dt_bc_norms"):
        MambaShape(heads=8, head_dim=64, state=16, groups=1, dt_rank=4)


def test_a_config_saved_from_a_directory_is_named_by_its_own(tmp_path: Path) -> None:
    """Falcon Mamba 7B's config.json has ``"_name_or_path": "./"``, which names no model:
    the checkpoint's directory does."""
    folder = tmp_path / "falcon-mamba-7b"
    folder.mkdir()
    assert _read(folder, {**FALCON_MAMBA_7B, "_name_or_path": "./"}).name == "falcon-mamba-7b"
    assert _read(folder, {**FALCON_MAMBA_7B, "_name_or_path": "tiiuae/x"}).name == "tiiuae/x"
