"""Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): read from config.json, counted to the
parameter, their FLOPs as Megatron-LM counts them, and costed in training and serving as the
recurrent blocks they are (a convolution, a chunked recurrence with a matrix state per value
head, a gated norm), beside gated attention."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.estimate.mamba import gated_delta_scan_flops, mamba_scan_flops
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, from_si
from gpuarch.workloads import count_params, preset
from gpuarch.workloads.flops import attention_projections, mamba_forward_flops_per_token
from gpuarch.workloads.hf import shape_from_hf_config

CATALOG = load_catalog()

# Qwen3-Next-80B-A3B's config.json keys (Transformers' Qwen3NextConfig defaults, "the
# Qwen3-Next-80B-A3B style configuration"; the released file adds intermediate_size 5120,
# unused where every layer has experts)
QWEN3_NEXT: dict[str, Any] = {
    "model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"],
    "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "decoder_sparse_step": 1,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "num_experts_per_tok": 10, "num_experts": 512, "mlp_only_layers": [],
    "full_attention_interval": 4, "vocab_size": 151936, "tie_word_embeddings": False,
    "max_position_embeddings": 262144, "attention_bias": False}

# Qwen3.5-35B-A3B (Transformers' Qwen3_5MoeTextConfig defaults), inside its multimodal wrapper
QWEN35_TEXT: dict[str, Any] = {
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "attn_output_gate": True, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "vocab_size": 248320,
    "tie_word_embeddings": False, "full_attention_interval": 4,
    "mamba_ssm_dtype": "float32"}  # as the published configs write it


# Both models' mixers have the same sizes (hidden 2,048): per Gated DeltaNet layer the input
# projections 2,048 x (2 x 2,048 + 2 x 4,096 + 2 x 32), the output projection 4,096 x 2,048,
# the convolution 8,192 x 4 (no bias), dt_bias and A_log 2 x 32, the gated norm 128; per gated
# attention layer queries and their gates 2,048 x 16 x 256 x 2, keys and values 2 x 2,048 x 2
# x 256, output 4,096 x 2,048, query and key norms 2 x 256
GDN_LAYER = 2048 * (2 * 2048 + 2 * 4096 + 2 * 32) + 4096 * 2048 + 8192 * 4 + 2 * 32 + 128
ATTENTION_LAYER = 2048 * 16 * 256 * 2 + 2 * 2048 * 2 * 256 + 4096 * 2048 + 2 * 256


def _moe_layer(experts: int) -> int:
    """An expert block by hand: the routed experts and one shared one of 3 x 2,048 x 512, the
    router experts x 2,048 and the shared expert's one-output gate 2,048."""
    return (experts + 1) * 3 * 2048 * 512 + experts * 2048 + 2048


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_qwen3_next_is_counted_to_the_parameter(tmp_path: Path) -> None:
    """36 Gated DeltaNet and 12 gated attention layers (GDN_LAYER, ATTENTION_LAYER), each
    with 512 experts and one shared (``_moe_layer``); embedding and head 2 x 151,936 x 2,048;
    97 norms of 2,048. Within 0.5% of the release's 80B (the multi-token-prediction layer is
    not in the shape)."""
    shape = shape_from_hf_config(_write(tmp_path, QWEN3_NEXT))
    expected = (36 * GDN_LAYER + 12 * ATTENTION_LAYER + 48 * _moe_layer(512)
                + 2 * 151936 * 2048 + 97 * 2048)
    assert count_params(shape).total == expected == 79_674_391_296
    assert from_si(expected, Unit.BILLION) == pytest.approx(80, rel=5e-3)
    assert (shape.mamba_layers, shape.attention_layers, shape.moe_layers) == (36, 12, 48)
    assert shape.hybrid_pattern.startswith("MEMEME*E") and shape.attention_gate
    assert shape.mamba is not None and shape.mamba.gated_delta
    assert shape == dataclasses.replace(preset("qwen3-next").shape, name=shape.name)


def test_qwen3_5_reads_through_its_multimodal_wrapper(tmp_path: Path) -> None:
    """Qwen3.5-35B-A3B's checkpoint wraps its language model (model_type qwen3_5_moe, a
    text_config of qwen3_5_moe_text); the language model is read, 30 Gated DeltaNet and 10
    gated attention layers with 256 experts of 512 (top 8) and one shared: 34,660,610,688
    parameters without the vision tower (the published 35B counts it), what Transformers
    5.25 builds from the published config.json (scripts/params_vs_transformers.py)."""
    wrapped = {"model_type": "qwen3_5_moe", "_name_or_path": "Qwen3.5-35B-A3B",
               "text_config": QWEN35_TEXT, "vision_config": {"depth": 27}}
    shape = shape_from_hf_config(_write(tmp_path, wrapped))
    expected = (30 * GDN_LAYER + 10 * ATTENTION_LAYER + 40 * _moe_layer(256)
                + 2 * 248320 * 2048 + 81 * 2048)
    assert count_params(shape).total == expected == 34_660_610_688
    assert shape == dataclasses.replace(preset("qwen3.5-35b-a3b").shape, name=shape.name)


def _gdn_layer(hidden: int, key_heads: int, value_heads: int) -> int:
    """A Gated DeltaNet layer of heads of 128 by hand: the input projections to queries and
    keys, values and their gate, and the two per-head scalars; the output projection; the
    4-tap convolution over queries, keys and values (no bias); dt_bias and A_log; the gated
    norm of one head's width."""
    qk, v = 2 * key_heads * 128, value_heads * 128
    return (hidden * (qk + 2 * v + 2 * value_heads) + v * hidden + (qk + v) * 4
            + 2 * value_heads + 128)


def _attention_layer(hidden: int, heads: int, kv_heads: int) -> int:
    """A gated attention layer of heads of 256: queries and their gates, keys and values,
    the output projection, the query and key norms."""
    return (hidden * heads * 256 * 2 + 2 * hidden * kv_heads * 256 + heads * 256 * hidden
            + 2 * 256)


# Qwen3.5-397B-A17B's language model as NVIDIA's Megatron-LM example configures it
# (examples/mimo/model_providers/qwen35/configuration.py @7b4416bb, "397b_a17b"), written as
# the text_config Transformers reads
QWEN35_397B_TEXT: dict[str, Any] = {
    **QWEN35_TEXT, "hidden_size": 4096, "num_hidden_layers": 60, "num_attention_heads": 32,
    "linear_num_value_heads": 64, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
    "max_position_embeddings": 262144}


def test_qwen3_5_397b_is_counted_to_the_parameter(tmp_path: Path) -> None:
    """45 Gated DeltaNet layers of 64 value heads and 16 query/key heads, 15 gated attention
    layers (32 heads, 2 KV heads), each with 512 experts of 1,024 and one shared (the
    router 512 x 4,096 and the shared expert's gate 4,096), embedding and head 2 x 248,320 x
    4,096, 121 norms: 396,346,350,336 without the vision tower (what Transformers 5.25 builds
    from the published config.json), 17.3B active; the release's 397B total and 17B
    activated include the tower (about 0.4B)."""
    shape = shape_from_hf_config(_write(tmp_path, {
        "model_type": "qwen3_5_moe", "text_config": QWEN35_397B_TEXT}))
    moe = 513 * 3 * 4096 * 1024 + 512 * 4096 + 4096
    expected = (45 * _gdn_layer(4096, 16, 64) + 15 * _attention_layer(4096, 32, 2)
                + 60 * moe + 2 * 248320 * 4096 + 121 * 4096)
    counts = count_params(shape)
    assert counts.total == expected == 396_346_350_336
    assert from_si(counts.active(shape), Unit.BILLION) == pytest.approx(17.35, abs=0.01)
    assert shape == dataclasses.replace(preset("qwen3.5-397b").shape, name=shape.name,
                                        context_window=shape.context_window)
    assert preset("qwen3.5-397b-a17b").shape.context_window == 262144


def test_qwen3_5_9b_is_counted_to_the_parameter(tmp_path: Path) -> None:
    """The dense Qwen3.5-9B (Transformers' Qwen3_5TextConfig defaults, NVIDIA's "9b"
    variant): 24 Gated DeltaNet layers of 32 value heads, 8 gated attention layers (16
    heads, 4 KV heads), a SwiGLU MLP of 12,288 after each, untied embedding and head of
    248,320: 8,953,803,264, the published 9B with the vision tower."""
    dense = {**QWEN35_TEXT, "model_type": "qwen3_5_text", "num_experts": 0,
             "hidden_size": 4096, "num_hidden_layers": 32, "num_key_value_heads": 4,
             "intermediate_size": 12288}
    shape = shape_from_hf_config(_write(tmp_path, dense))
    expected = (24 * _gdn_layer(4096, 16, 32) + 8 * _attention_layer(4096, 16, 4)
                + 32 * 3 * 4096 * 12288 + 2 * 248320 * 4096 + 65 * 4096)
    assert count_params(shape).total == expected == 8_953_803_264
    assert shape == dataclasses.replace(preset("qwen3.5-9b").shape, name=shape.name,
                                        context_window=shape.context_window)


def test_dense_qwen3_5_layers_and_the_gate_come_from_the_config(tmp_path: Path) -> None:
    """A dense Qwen3.5 (qwen3_5_text) has an MLP block after each mixer; explicit
    layer_types place the mixers as the interval does; attn_output_gate false drops the
    gate (the query projection then its plain width); a layer type it does not know is
    refused by key."""
    dense = {**QWEN35_TEXT, "model_type": "qwen3_5_text", "num_experts": 0,
             "intermediate_size": 12288, "num_hidden_layers": 8}
    shape = shape_from_hf_config(_write(tmp_path, dense))
    assert shape.hybrid_pattern == "M-M-M-*-" * 2 and not shape.is_moe
    listed = {**dense, "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 2}
    assert shape_from_hf_config(_write(tmp_path, listed)) == shape
    plain = shape_from_hf_config(_write(tmp_path, {**dense, "attn_output_gate": False}))
    assert not plain.attention_gate
    assert count_params(shape).total - count_params(plain).total == 2 * 2048 * 16 * 256
    assert count_params(shape).total == (6 * GDN_LAYER + 2 * ATTENTION_LAYER
                                         + 8 * 3 * 2048 * 12288 + 2 * 248320 * 2048
                                         + 17 * 2048)
    with pytest.raises(GpuarchError, match="layer_types"):
        shape_from_hf_config(_write(tmp_path, {**listed, "layer_types": ["sliding"] * 8}))


def test_flops_are_megatrons() -> None:
    """Megatron-LM's gdn_layer_flops (megatron/training/training.py @001b00c2): 2 x (hidden
    x (2 x 2,048 + 2 x 4,096 + 2 x 32) + 4 x (2 x 2,048 + 4,096) + 32 x 128^2 x 4 + hidden x
    4,096) a token; the gated attention's query projection counts its gate, as Megatron's
    gate_projection_size does."""
    shape = preset("qwen3-next-80b-a3b").shape
    megatron = 2 * (2048 * (2 * 2048 + 2 * 4096 + 2 * 32) + 4 * (2 * 2048 + 4096)
                    + 32 * 128 ** 2 * 4 + 2048 * 4096)
    assert mamba_forward_flops_per_token(shape) == megatron
    (name, width, k), _ = attention_projections(shape, 1)
    assert (name, width, k) == ("qkv", (2 * 16 + 2 * 2) * 256, 2048)


def test_the_chunked_scan_is_the_gated_delta_rule() -> None:
    """The scan of a Gated DeltaNet block is priced as the chunked delta rule (chunks of 64):
    per value head forward 2 x (3CK + 2CV + 3KV + C^2/3) FLOPs a token, split over TP."""
    m = preset("qwen3-next-80b-a3b").shape.mamba
    assert m is not None
    forward, backward = mamba_scan_flops(m, 1)
    assert (forward, backward) == gated_delta_scan_flops(m, 1)
    c, k = 64, 128
    assert forward == pytest.approx(32 * 2 * (3 * c * k + 2 * c * k + 3 * k * k + c * c / 3))
    assert backward > 2 * forward
    assert mamba_scan_flops(m, 4)[0] == pytest.approx(forward / 4)


def test_training_counts_megatrons_copies_around_the_scan() -> None:
    """Megatron-Core's GatedDeltaNet copies q, k and v around the convolution and FLA's scan
    (gated_delta_net.py @00caa53a): at Qwen3.5-35B-A3B's widths (16 key heads and 32 value
    heads of 128; QK 2,048, V 4,096, repeated 2x), forward 2(2 x 2,048 + 4,096) transposed
    + 8 x 2,048 contiguous and normalised + 2 x 2,048 x 3 repeated + 6 x 4,096 (v, the gate,
    the output) = 69,632 elements a token, backward 8,192 more; a training block carries
    them as one memory-bound operator, a Mamba-2 block none, and a model whose key and value
    heads are equal repeats nothing."""
    from gpuarch.estimate.mamba import gated_delta_glue_elements, mamba_ops
    from gpuarch.perf.roofline import Elementwise

    shape = preset("qwen3.5-35b-a3b").shape
    m = shape.mamba
    assert m is not None and (m.groups, m.heads, m.state, m.head_dim) == (16, 32, 128, 128)
    assert gated_delta_glue_elements(m, 1) == (69632, 77824)
    assert gated_delta_glue_elements(m, 2) == (34816, 38912)
    even = dataclasses.replace(m, groups=32)
    qk, v = 32 * 128, 4096
    assert gated_delta_glue_elements(even, 1)[0] == 2 * (2 * qk + v) + 8 * qk + 6 * v
    glue = [o for o in mamba_ops(shape, 1, 4096, 2.0, 4096) if o.name == "gdn_glue"]
    assert len(glue) == 1 and isinstance(glue[0], Elementwise)
    assert glue[0].bytes_moved == 4096 * 69632 * 2.0
    assert glue[0].backward is not None and glue[0].backward.bytes_moved == 4096 * 77824 * 2.0
    nano = preset("nemotron-3-nano-30b-a3b").shape
    assert not [o for o in mamba_ops(nano, 1, 4096, 2.0, 4096) if o.name == "gdn_glue"]


def test_serving_holds_each_sequences_state() -> None:
    """A sequence holds, in each of Qwen3-Next's 36 Gated DeltaNet blocks, its last three
    convolution inputs over q, k and v (3 x 8,192, 16-bit) and a 128 x 128 state per value
    head (32 heads, FP32, the engines' default), split over TP; attention keeps its KV cache
    in the 12 attention blocks only."""
    shape = preset("qwen3-next-80b-a3b").shape
    bf16 = QuantScheme(QuantFormat.BF16, QuantFormat.BF16, QuantFormat.BF16)
    for tp in (1, 2):
        cfg = InferenceConfig(input_len=4096, output_len=512, batch=8, gpus=tp, tp=tp,
                              quant=bf16)
        est = estimate_inference(CATALOG, shape, CATALOG.product("h200-sxm-141gb"), cfg)
        a = est.as_json()["assumptions"]
        state = 36 * (3 * 8192 * 2 + 32 * 128 * 128 * 4) / tp
        assert a["mamba_state_bytes_per_sequence_per_gpu"] == pytest.approx(state)
        assert a["kv_bytes_per_token_per_gpu"] == pytest.approx(12 * 2 * 2 * 256 * 2 / tp)
        assert a["recurrent_mixer"] == "Gated DeltaNet"
        assert est.decode_step_parts_s["mamba_scan"] > 0


def test_the_cli_trains_serves_and_refuses_what_it_does_not_write(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The presets estimate end to end; a TP that does not split the value and key heads is
    refused naming them; no Megatron launch command is written for a Gated DeltaNet model
    (Megatron-LM trains it as a GPT model with a linear-attention variant)."""
    assert main(["estimate", "infer", "--model", "qwen3.5-35b-a3b", "--gpu", "h100",
                 "--input-len", "2048", "--output-len", "256", "--batch", "16"]) == 0
    assert "Gated DeltaNet state per sequence" in capsys.readouterr().out
    train = ["estimate", "train", "--model", "qwen3-next", "--gpu", "h100", "--gpus", "32",
             "--tp", "2", "--pp", "2", "--ep", "8", "--seq-len", "4096", "--global-batch",
             "128", "--micro-batch", "1"]
    assert main(train) == 0
    out = capsys.readouterr().out
    assert "Gated DeltaNet blocks" in out and "gated_delta_backward" in out
    assert main([*train, "--launch", "megatron"]) == 2
    assert "Gated DeltaNet hybrid" in capsys.readouterr().err
    with pytest.raises(GpuarchError, match="value heads"):
        preset("qwen3-next").shape.check_mamba_split(3, "--tp", "TP")
