"""Inkling (``inkling_text``; an ``inkling_mm_model`` checkpoint's language model): grouped-
query attention without rotary positions, a relative position bias (``relative_bias``,
``relative_extent``), short convolutions over the keys, values and both blocks' outputs
(``short_conv_taps``), window layers with heads of their own, and experts beside shared ones
the router scores too (``shared_expert_sink``). Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the
new parts are also worked out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import memory_parts
from gpuarch.estimate.inkling_ops import (
    relative_bias_ops,
    relative_bias_table_bytes,
    short_conv_state_bytes,
)
from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.perf.roofline import Elementwise, Gemm
from gpuarch.workloads.flops import (
    attention_projections,
    conv_tap_gemms,
    forward_flops_per_token,
)
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import Position
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")
B200 = CATALOG.product("b200")
FP4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.BF16)

D: dict[str, Any] = {"model_type": "inkling_text"}
SMALL: dict[str, Any] = {
    **D, "hidden_size": 512, "num_hidden_layers": 12, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "swa_num_attention_heads": 8,
    "swa_num_key_value_heads": 4, "swa_head_dim": 64, "vocab_size": 1000,
    "intermediate_size": 1024, "moe_intermediate_size": 256, "n_routed_experts": 16,
    "num_experts_per_tok": 2, "n_shared_experts": 1, "d_rel": 8, "rel_extent": 256,
    "sliding_window_size": 128, "dense_mlp_idx": 2}


@pytest.mark.parametrize(("cfg", "total"), [
    (D, 975_340_270_146),  # InklingTextConfig's defaults (66 layers, 256 experts)
    (SMALL, 80_772_620),
    ({**SMALL, "local_layer_ids": [0, 2, 4, 6, 8, 10]}, 80_248_332),
    ({**SMALL, "sconv_kernel_size": 3, "n_shared_experts": 3}, 88_629_260),
    ({**SMALL, "mlp_layer_types": ["dense"] * 12}, 29_567_500),
    # a checkpoint's spelling: intermediate_size the experts', dense_intermediate_size the
    # dense MLP's
    ({**SMALL, "dense_intermediate_size": 2048, "intermediate_size": 384}, 117_341_708),
    # the multimodal checkpoint's language model (its towers and MTP block not counted)
    ({"model_type": "inkling_mm_model", "text_config": SMALL,
      "mtp_config": {"num_nextn_predict_layers": 1}}, 80_772_620),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_new_parts_by_hand(tmp_path: Path) -> None:
    """SMALL: hidden 512; 10 window layers (every sixth full: 2 of 12) of 8 heads (4 KV) of
    64, full layers of 8 heads (2 KV); d_rel 8; extents 128 (window) and 256 (full);
    4-tap convolutions; 2 dense layers, 10 of 16 experts + 1 shared."""
    s = _read(tmp_path, SMALL)
    assert s.position is Position.NONE
    assert (s.sliding_window, s.sliding_layers, s.heads, s.kv_heads) == (128, 10, 8, 4)
    assert s.full_attention is not None and s.full_attention.kv_heads == 2
    assert s.relative_bias_params == 8 * (10 * 128 + 2 * 256)
    plain = dataclasses.replace(s, relative_bias=0, relative_extent=0, short_conv_taps=0,
                                mlp_scalar=False, shared_expert_sink=False)
    a, b = count_params(s), count_params(plain)
    # r_proj (512 x 8 heads x 8) a layer, the banks; the key and value convolutions
    # (4 taps over each KV channel: 4 x 64 x 2 in the window layers, 2 x 64 x 2 in the full)
    assert a.attention - b.attention == 12 * 512 * 64 + 8 * (10 * 128 + 2 * 256) \
        + 10 * 4 * 4 * 64 * 2 + 2 * 4 * 2 * 64 * 2
    # the output convolutions (2 x hidden x 4 a layer) with the norms
    assert a.norms - b.norms == 12 * 2 * 512 * 4
    # a router row a shared expert and a scalar an expert layer; a scalar a dense MLP
    assert a.router - b.router == 10 * 512 + 10
    assert a.mlp_dense - b.mlp_dense == 2
    # the fused projection carries r (8 numbers a head) beside q, k and v
    assert attention_projections(s, 2)[0] == ("qkv", 4 * 64 + 2 * 64 * 2 + 4 * 8, 512)
    core = forward_flops_per_token(s, 4096).attention_core \
        - forward_flops_per_token(plain, 4096).attention_core
    assert core == 2.0 * 8 * (2 * 8 * 256 + 10 * 8 * 128)


def test_relative_bias_and_convolutions_priced(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    window, full = relative_bias_ops(s, 1000, 4, 128, 2048), relative_bias_ops(s, 1000, 4, 0, 60)
    assert isinstance(window[0], Gemm) and (window[0].m, window[0].n, window[0].k) == (
        4000, 128, 8)
    # the score modifier reads the entries its queries reach: the extent, or fewer keys
    assert isinstance(window[1], Elementwise) and window[1].bytes_moved == 4000 * 128 * 2
    assert isinstance(full[1], Elementwise) and full[1].bytes_moved == 4000 * 60 * 2
    assert relative_bias_ops(dataclasses.replace(
        s, relative_bias=0, relative_extent=0), 1000, 4, 0, 60) == []
    # the defaults at TP 8: each sequence keeps 3 inputs of 16 bits a channel: a KV head's
    # keys and values (1 in the 11 full layers, 2 in the 55 window layers, 128 wide) and the
    # two outputs (2 x 6,144)
    big = _read(tmp_path, D)
    kept = sum(n * short_conv_state_bytes(view, 8) for _, n, view in big.attention_kinds())
    assert kept == 11 * (256 + 12288) * 3 * 2 + 55 * (512 + 12288) * 3 * 2
    cfg8 = InferenceConfig(input_len=8192, output_len=512, batch=8, gpus=8, tp=8, ep=8,
                           quant=FP4)
    r = estimate_inference(CATALOG, big, B200, cfg8)
    assert r.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == kept
    assert r.assumptions["recurrent_mixer"] == "short convolution"
    # a pass holds one layer's table at a time beside its other activations: the widest,
    # a full layer's 64 / 8 heads x 1,024 distances, 16-bit, a token
    assert relative_bias_table_bytes(big, 8) == 8 * 1024 * 2
    no_table = dataclasses.replace(big, relative_bias=0, relative_extent=0)
    tokens = InferenceConfig(input_len=8192, output_len=512, batch=8).max_num_tokens
    assert (memory_parts(big, cfg8, 8, B200)["activations"]
            - memory_parts(no_table, cfg8, 8, B200)["activations"]) == pytest.approx(
        min(8 * 8192, tokens) * 8 * 1024 * 2, rel=1e-12)
    # the bias and the convolutions cost time: without them the same model serves faster
    plain = dataclasses.replace(big, relative_bias=0, relative_extent=0, short_conv_taps=0)
    p = estimate_inference(CATALOG, plain, CATALOG.product("b200"), InferenceConfig(
        input_len=8192, output_len=512, batch=8, gpus=8, tp=8, ep=8,
        quant=FP4))
    assert r.ttft_s > p.ttft_s and r.tpot_s > p.tpot_s


def test_training_keeps_the_table_and_refuses_cp(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    plain = dataclasses.replace(s, relative_bias=0, relative_extent=0, short_conv_taps=0)
    kept = activation_bytes_per_layer(s, 1, 4096, 2, False, Recompute.SELECTIVE)
    base = activation_bytes_per_layer(plain, 1, 4096, 2, False, Recompute.SELECTIVE)
    # per layer, averaged over the kinds: r (8 a head) and a table row (the mean extent,
    # (10 x 128 + 2 x 256) / 12) for 4 heads a GPU; the keys and values before their
    # convolutions (the kinds' mean KV width, 2 KV heads of 64 in the full layers, 4 in the
    # window layers, over TP 2); the two block outputs (hidden-wide, replicated)
    tokens = 4096 * 2
    mean_kv = (10 * 4 + 2 * 2) / 12 * 64 * 2
    assert kept - base == pytest.approx(
        tokens * 4 * (8 + (10 * 128 + 2 * 256) / 12) + tokens * mean_kv / 2
        + 2 * tokens * 512, rel=1e-12)
    t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, tp=2, seq_len=4096,
                                                           global_batch=64))
    assert t.step_time_s > estimate_training(CATALOG, plain, H100, TrainingConfig(
        gpus=8, tp=2, seq_len=4096, global_batch=64)).step_time_s
    with pytest.raises(GpuarchError, match=r"--cp: .* without context parallelism"):
        estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, tp=2, cp=2,
                                                           seq_len=4096, global_batch=64))


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in (("use_sconv", False), ("q_bias", True), ("o_bias", True),
                       ("use_global_scale", False)):
        with pytest.raises(GpuarchError, match=rf"{key}: .* is not read"):
            _read(tmp_path, {**SMALL, key: value})
    with pytest.raises(GpuarchError, match="tie_word_embeddings: true is not read"):
        _read(tmp_path, {**SMALL, "tie_word_embeddings": True})
    with pytest.raises(GpuarchError, match="n_shared_experts: 0 is not read"):
        _read(tmp_path, {**SMALL, "n_shared_experts": 0})
    with pytest.raises(GpuarchError, match="hidden_act: expected silu"):
        _read(tmp_path, {**SMALL, "hidden_act": "gelu"})
    with pytest.raises(GpuarchError, match="layer_types: expected 12 entries"):
        _read(tmp_path, {**SMALL, "layer_types": ["hybrid"] * 11})
    with pytest.raises(GpuarchError, match="relative_bias: the relative position bias "
                                           "replaces position encodings"):
        dataclasses.replace(_read(tmp_path, SMALL), position=Position.ROPE)
    path = str(write_config(tmp_path, SMALL))
    assert main(["estimate", "train", "--model", path, "--gpu", "h100", "--gpus", "8",
                 "--seq-len", "4096", "--global-batch", "64", "--launch", "megatron"]) == 2
    assert "not something Megatron-LM builds" in capsys.readouterr().err
    assert main(["models", path]) == 0
    out = capsys.readouterr().out
    assert "positions     a relative bias, no rotary positions: 8 numbers a query head" in out
    assert "convolutions  short causal ones of 4 taps over the keys, the values" in out
    assert "query and key norms over each head; one after the token embedding" in out


# Inkling 2 (``inkling2_text``; an ``inkling2`` checkpoint's language model)
D2: dict[str, Any] = {"model_type": "inkling2_text"}
SMALL2: dict[str, Any] = {
    **D2, "hidden_size": 512, "num_hidden_layers": 12, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "swa_num_attention_heads": 8,
    "swa_num_key_value_heads": 4, "swa_head_dim": 64, "vocab_size": 1000,
    "unpadded_vocab_size": 990, "moe_intermediate_size": 256, "n_routed_experts": 16,
    "num_experts_per_tok": 2, "d_rel": 8, "rel_extent": 256, "sliding_window_size": 128,
    "n_layers_per_attn_res_block": 4}


@pytest.mark.parametrize(("cfg", "total"), [
    (D2, 593_718_478_848),  # Inkling2TextConfig's defaults (48 layers, 384 experts)
    (SMALL2, 89_516_800),
    ({**SMALL2, "sconv_kernel_size": 3, "n_layers_per_attn_res_block": 3}, 89_494_784),
    ({**SMALL2, "swa_num_key_value_heads": 2}, 88_195_840),
    ({**SMALL2, "layer_types": ["hybrid_sliding", "hybrid"] * 2 + ["hybrid_sliding"] * 3
      + ["hybrid"] + ["hybrid_sliding"] * 4}, 89_395_968),
    ({"model_type": "inkling2", "text_config": SMALL2,
      "vision_config": {"text_hidden_size": 512}}, 89_516_800),
])
def test_inkling2_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                                        total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_inkling2_parts_by_hand(tmp_path: Path) -> None:
    """SMALL2: hidden 512, 12 layers (2 full: every sixth), 8 heads of 64 (4 KV in the
    window layers, 2 in the full ones), d_rel 8, 4 taps. Beside Inkling's parts: a scale a
    query channel and a relative-state channel (8 x (64 + 8)) and a sink projection (512 x
    8) a layer; the full layers' tap projections (512 x 2 KV heads x 4 taps, keys and
    values); block attention residuals of one weightless query a mix (two a layer, less the
    first layer's attention, plus the last), two more a full layer, whose two extra norms
    count with the norms."""
    s = _read(tmp_path, SMALL2)
    assert (s.sliding_layers, s.full_layers, s.head_vocab) == (10, 2, 990)
    a = count_params(s)
    plain = dataclasses.replace(s, head_scales=False, sink_projection=False,
                                dynamic_kv_convs=False)
    b = count_params(plain)
    assert a.attention - b.attention == 12 * (8 * (64 + 8) + 512 * 8) + 2 * 2 * 512 * 2 * 4
    assert a.attention_residuals == (2 * 12 + 2 * 2) * 512
    assert a.norms - count_params(dataclasses.replace(
        s, split_attention_inputs=False)).norms == 2 * 2 * 512
    # the tap projections run in the full layers only, beside the fused projection (which
    # carries the gate, r and the sink logits)
    assert conv_tap_gemms(s, 0, 2) == [("conv_taps", 2 * 1 * 4, 512)]
    assert conv_tap_gemms(s, 128, 2) == []
    assert attention_projections(s, 2)[0] == ("qkv", 4 * 64 * 2 + 2 * 64 * 2 + 4 * (8 + 1),
                                              512)
    assert forward_flops_per_token(s, 2048).attention_proj \
        - forward_flops_per_token(plain, 2048).attention_proj \
        == 2.0 * (12 * 512 * 8 + 2 * 2 * 512 * 2 * 4)
    with pytest.raises(GpuarchError, match="layer_types: a full-attention first layer"):
        _read(tmp_path, {**SMALL2, "layer_types": ["hybrid"] * 12})
    r = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=2048, output_len=128,
                                                             batch=8))
    assert r.ttft_s > estimate_inference(CATALOG, plain, H100, InferenceConfig(
        input_len=2048, output_len=128, batch=8)).ttft_s
    with pytest.raises(GpuarchError, match=r"--cp: .* without context parallelism"):
        estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, cp=2, seq_len=4096,
                                                           global_batch=64))
