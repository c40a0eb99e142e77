"""Liquid AI's LFM2 and LFM2-MoE (``lfm2``, ``lfm2_moe``): gated short convolutions
(``MambaShape(kind="short_conv")``) beside grouped-query attention. Counts are pinned to the
models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``) and worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.mamba import hybrid_state_bytes, mamba_decode_ops, mamba_mixer_ops
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

HYBRID = {"model_type": "lfm2", "hidden_size": 1024, "intermediate_size": 4096,
          "num_hidden_layers": 6, "num_attention_heads": 16, "num_key_value_heads": 8,
          "vocab_size": 1000,
          "layer_types": ["conv", "conv", "full_attention", "conv", "full_attention", "conv"]}
# the keys LiquidAI's own configs use (block_ff_dim, tie_embedding, full_attn_idxs)
OWN_KEYS = {"model_type": "lfm2", "hidden_size": 512, "block_ff_dim": 3000,
            "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 2,
            "vocab_size": 1000, "full_attn_idxs": [1, 3], "conv_bias": True,
            "conv_L_cache": 4, "block_ffn_dim_multiplier": 1.5, "block_multiple_of": 128,
            "tie_embedding": False}
MOE = {"model_type": "lfm2_moe", "hidden_size": 1024, "intermediate_size": 4096,
       "moe_intermediate_size": 512, "num_experts": 8, "num_experts_per_tok": 2,
       "num_dense_layers": 1, "num_hidden_layers": 4, "num_attention_heads": 16,
       "num_key_value_heads": 8, "vocab_size": 1000,
       "layer_types": ["conv", "full_attention", "conv", "conv"]}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    ({"model_type": "lfm2"}, 2_705_497_600),  # Lfm2Config's defaults: every layer attention
    (HYBRID, 76_023_040),
    (OWN_KEYS, 29_093_120),
    ({"model_type": "lfm2", "hidden_size": 512, "intermediate_size": 1500,
      "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
      "vocab_size": 1000, "full_attn_idxs": [2], "block_auto_adjust_ff_dim": False},
     10_183_296),
    (MOE, 67_127_424),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, HYBRID)
    assert s.hybrid_pattern == "M-M-*-M-*-M-"
    m = s.mamba
    assert m is not None and m.short_conv and (m.inner, m.conv_kernel, m.state) == (1024, 3, 0)
    # Lfm2MLP's width: two thirds of 4,096, rounded up to a multiple of 256
    assert s.d_ffn == 2816
    conv = 1024 * 3 * 1024 + 1024 * 3 + 1024 * 1024  # in_proj (B, C, x), taps, out_proj
    attention = 2 * 1024 * 1024 + 2 * 1024 * 512 + 2 * 64  # and the per-head q/k norms
    mlp = 3 * 1024 * 2816
    assert count_params(s).total == 4 * conv + 2 * attention + 6 * (mlp + 2 * 1024) + 1024 \
        + 1000 * 1024
    own = _read(tmp_path, OWN_KEYS)
    # block_ff_dim 3,000: two thirds, times 1.5, rounded up to 128; its two attention layers
    assert own.d_ffn == 3072 and own.hybrid_pattern == "M-*-M-*-M-" and not own.tied_embeddings
    experts = _read(tmp_path, MOE)
    assert (experts.hybrid_pattern, experts.d_ffn, experts.moe_ffn_hidden) == (
        "M-*EMEME", 4096, 512)
    # named only by its class, as vLLM picks a model: the same experts
    renamed = _read(tmp_path, {**MOE, "model_type": "my_lfm2_moe",
                               "architectures": ["Lfm2MoeForCausalLM"]})
    assert count_params(renamed).total == count_params(experts).total == 67_127_424


def test_no_recurrent_state(tmp_path: Path) -> None:
    s = _read(tmp_path, HYBRID)
    m = s.mamba
    assert m is not None
    # a sequence holds the convolution's last two inputs a channel, 16-bit, nothing else
    assert hybrid_state_bytes(s, 2, 4.0) == 4 * 2 * 512 * 2
    assert [op.name for op in mamba_decode_ops(m, 2, 8, 2.0)] == ["mamba_conv", "conv_gates"]
    assert [op.name for op in mamba_mixer_ops(m, 2, 1024, 2.0, 1024)] == ["mamba_conv",
                                                                          "conv_gates"]


def test_estimates_and_refusals(tmp_path: Path) -> None:
    s = _read(tmp_path, MOE)
    h100 = CATALOG.product("h100")
    r = estimate_inference(CATALOG, s, h100, InferenceConfig(
        gpus=2, tp=2, input_len=1000, output_len=100, batch=16))
    assert r.fits_in_memory and r.tpot_s > 0
    t = estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, seq_len=2048,
                                                           global_batch=64))
    assert t.step_time_s > 0 and "no recurrent state" in t.assumptions["mamba_kernels"]
    with pytest.raises(GpuarchError, match=r"--cp: .* short convolution blocks are "
                                           "modelled without context parallelism"):
        estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, cp=2,
                                                            seq_len=2048, global_batch=64))


@pytest.mark.parametrize(("cfg", "message"), [
    ({**MOE, "layer_types": None}, r"layer_types: missing \(LFM2-MoE's config class"),
    ({**HYBRID, "layer_types": None, "full_attn_idxs": [1, 6]},
     r"full_attn_idxs: expected layer indices from 0 to 5, got \[1, 6\]"),
    ({**HYBRID, "layer_types": ["conv"] * 5}, r"layer_types: expected 6 entries"),
    ({**HYBRID, "block_ffn_dim_multiplier": -1}, r"block_ffn_dim_multiplier: expected a "
                                                 "positive number, got -1"),
])
def test_refusals(tmp_path: Path, cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_shape_checks() -> None:
    with pytest.raises(GpuarchError, match="a short convolution is held as one-channel heads"):
        MambaShape(kind="short_conv", heads=64, head_dim=1, state=16, groups=1,
                   gated_norm=False)
    with pytest.raises(GpuarchError, match=r"mamba\.state: expected an integer from 1"):
        MambaShape(heads=8, head_dim=64, state=0, groups=1)
