"""OLMo Hybrid (``olmo_hybrid``, Ai2's Olmo-Hybrid-7B): Gated DeltaNet layers beside OLMo 3
attention layers, each with a SwiGLU MLP. Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds from the same configs (``scripts/params_vs_transformers.py`` on
PyTorch's meta device); one Gated DeltaNet layer is also counted by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import QkNorm
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

SMALL = {"model_type": "olmo_hybrid", "hidden_size": 512, "num_hidden_layers": 6,
         "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 1024}


@pytest.mark.parametrize(("cfg", "total"), [
    # OlmoHybridConfig's defaults (Olmo-Hybrid-7B's sizes): 24 Gated DeltaNet and 8 attention
    # layers, the linear attention's widths derived (keys 0.75 x 3840 / 30 = 96, values 192)
    ({"model_type": "olmo_hybrid"}, 7_430_870_688),
    (SMALL, 19_454_000),
    # two layers: no fourth layer, so the last is attention, as the config class makes it
    ({**SMALL, "num_hidden_layers": 2}, 6_809_200),
    ({**SMALL, "layer_types": ["linear_attention", "full_attention"] * 3,
      "attention_bias": True, "num_key_value_heads": 2, "tie_word_embeddings": True},
     16_689_616),
    ({**SMALL, "linear_num_key_heads": 4, "linear_num_value_heads": 8,
      "linear_key_head_dim": 64, "linear_value_head_dim": 96, "linear_conv_kernel_dim": 3},
     18_787_120),
    ({**SMALL, "head_dim": 96}, 19_978_800),  # a head_dim the config carries is used
])
def test_counted_as_transformers_builds_it(tmp_path: Path, cfg: dict[str, Any],
                                           total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_layers_and_attention(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    # every fourth layer attention: layer 3 of 0-5
    assert s.hybrid_pattern == "M-M-M-*-M-M-"
    assert s.qk_norm is QkNorm.FULL and not s.attention_gate
    assert s.mamba is not None and s.mamba.kind == "gated_delta"
    # 8 heads: keys int(0.75 x 512 / 8) = 48 wide, values 96
    assert (s.mamba.groups, s.mamba.heads, s.mamba.state, s.mamba.head_dim) == (8, 8, 48, 96)
    two = _read(tmp_path, {**SMALL, "num_hidden_layers": 2})
    assert two.hybrid_pattern == "M-*-"


def test_a_gated_deltanet_layer_by_hand(tmp_path: Path) -> None:
    """One linear-attention layer's parameters as OlmoHybridGatedDeltaNet builds them: the
    query, key, value and gate projections, alpha and beta a value head, the depthwise
    convolution over queries, keys and values, A_log and dt_bias a value head, the gated
    norm over a value head, the output projection; then the layer's MLP and two norms."""
    hidden, heads, key, value, conv = 512, 8, 48, 96, 4
    key_dim, value_dim = heads * key, heads * value
    mixer = (hidden * (2 * key_dim + 2 * value_dim + 2 * heads)
             + (2 * key_dim + value_dim) * conv + 2 * heads + value + value_dim * hidden)
    layer = mixer + 3 * hidden * 1024 + 2 * hidden
    one = _read(tmp_path, {**SMALL, "num_hidden_layers": 2,
                           "layer_types": ["linear_attention", "full_attention"]})
    two = _read(tmp_path, {**SMALL, "num_hidden_layers": 3,
                           "layer_types": ["linear_attention"] * 2 + ["full_attention"]})
    assert count_params(two).total - count_params(one).total == layer


@pytest.mark.parametrize(("extra", "message"), [
    ({"layer_types": ["linear_attention"] * 6}, "needs both"),
    ({"layer_types": ["full_attention"] * 6}, "needs both"),
    ({"layer_types": ["linear_attention", "sliding_attention"] * 3}, "layer_types"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **extra})


def test_estimates_run(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "olmo_hybrid"})
    h100 = CATALOG.product("h100-sxm5-80gb")
    served = estimate_inference(CATALOG, s, h100, InferenceConfig(
        input_len=1024, output_len=256, batch=16))
    assert served.tpot_s > 0 and served.memory["kv_cache"] > 0
    trained = estimate_training(CATALOG, s, h100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64))
    assert trained.step_time_s > 0
