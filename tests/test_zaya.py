"""Zyphra's ZAYA (``zaya``, ZAYA1-8B): grouped-query attention whose queries and keys are
convolved over time (compressed convolutional attention), a top-1 expert block with a skip
choice and an MLP router, learned residual scales. Counts are pinned to the models Hugging
Face Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``);
the convolutions, the router and the state a sequence keeps are also counted by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.mamba import hybrid_state_bytes
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import attention_projections, router_gemms
from gpuarch.workloads.params import count_params, qk_conv_params, router_params
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

SMALL = {"model_type": "zaya", "hidden_size": 512, "num_hidden_layers": 3,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "vocab_size": 1000, "num_experts": 4, "moe_intermediate_size": 256,
         "router_hidden_size": 64}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "zaya"}, 8_840_488_784),  # ZayaConfig's defaults: ZAYA1-8B's sizes
    (SMALL, 6_703_942),
    ({**SMALL, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 1,
      "head_dim": 32, "num_experts": 8, "router_hidden_size": 96, "attention_bias": True,
      "lm_head_bias": True, "tie_word_embeddings": False, "cca_time0": 3, "cca_time1": 4,
      "layer_types": ["hybrid_sliding", "hybrid"], "sliding_window": 128}, 8_134_090),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_convolutions_router_and_scales_by_hand(tmp_path: Path) -> None:
    """ZAYA1-8B: each layer's convolutions run over (8 + 2) x 128 query and key channels, 2
    taps and a bias a channel, then 2 x 128 taps within each head and a bias a channel, and a
    temperature a KV head; its MLP router takes 2048 to 256 (with a bias), a norm, two
    256-wide layers with biases and 17 scores (16 experts and the skip), and in the 39
    layers after the first a scale of the previous layer's router state; residual scales
    and shifts 8 x 2048 a layer and 2 x 2048 on the embedding's output."""
    s = _read(tmp_path, {"model_type": "zaya"})
    channels = (8 + 2) * 128
    assert qk_conv_params(s) == channels * 3 + channels * (2 * 128 + 1) + 2
    assert router_params(s) == 40 * (2048 * 256 + 2 * 256 * 256 + 256 * 17 + 4 * 256) \
        + 39 * 256
    plain = dataclasses.replace(s, residual_scales=False)
    assert count_params(s).norms - count_params(plain).norms == 40 * 8 * 2048 + 2 * 2048
    assert count_params(s).active(s) == 1_290_741_584  # one of 16 experts a token
    # the grouped convolution is a GEMM of each head's 2 x 128 inputs a channel; the
    # router's four GEMMs
    assert ("qk_conv", channels, 256) in attention_projections(s)
    assert [g[1:] for g in router_gemms(s)] == [(256, 2048), (256, 256), (256, 256),
                                                (17, 256)]


def test_what_a_sequence_keeps(tmp_path: Path) -> None:
    """Per token 40 layers x 2 KV heads x 128 x (keys, values) x 2 bytes; per sequence, in
    each layer, the convolutions' last 2 inputs of the 1,280 query and key channels and the
    previous token's 128 delayed value channels, 16-bit: 215,040 bytes."""
    s = _read(tmp_path, {"model_type": "zaya"})
    assert hybrid_state_bytes(s, 1) == 40 * (1280 * 2 + 128) * 2 == 215_040
    prompt, answer = 4032, 64
    est = estimate_inference(CATALOG, s, H100, InferenceConfig(
        input_len=prompt, output_len=answer, batch=1))
    assert est.memory["kv_cache"] == pytest.approx(40 * 2 * 128 * 2 * 2 * 4096 + 215_040)


@pytest.mark.parametrize(("extra", "message"), [
    ({"num_experts_per_tok": 2}, "num_experts_per_tok: ZAYA routes each token to one"),
    ({"cca": True, "ffn_hidden_size": 8192}, "cca: the legacy ZAYA config"),
    ({"layer_types": ["hybrid", "sliding_attention", "hybrid"]}, "layer_types: expected 3"),
    ({"layer_types": ["hybrid", "hybrid_sliding", "hybrid"]}, "sliding_window: the"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **extra})


def test_shape_checks(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="qk_conv_depthwise / qk_conv_grouped"):
        dataclasses.replace(s, qk_conv_grouped=0)
    with pytest.raises(GpuarchError, match="router_hidden: an MLP router needs experts"):
        dataclasses.replace(s, router_bias=True)


def test_estimates_run(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "zaya"})
    served = estimate_inference(CATALOG, s, H100, InferenceConfig(
        input_len=4096, output_len=512, batch=32))
    assert served.fits_in_memory and served.tpot_s > 0
    trained = estimate_training(CATALOG, s, H100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, ep=8))
    assert trained.step_time_s > 0
