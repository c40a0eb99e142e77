"""Lara 4 Mini (``lara_mini``): Gated DeltaNet layers beside window and full attention
layers, an expert block with an ungated shared MLP in every layer. Counts are pinned to the
models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``)."""

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
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

SMALL = {"model_type": "lara_mini", "hidden_size": 512, "num_hidden_layers": 5,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
         "vocab_size": 1000, "moe_intermediate_size": 128,
         "shared_expert_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2,
         "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 32,
         "linear_value_head_dim": 64, "sliding_window": 64}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "lara_mini"}, 7_281_684_672),  # LaraMiniConfig's defaults
    (SMALL, 14_192_672),
    ({**SMALL, "attention_bias": True}, 14_196_512),  # 3 attention layers' q/k/v/o biases
    ({**SMALL, "shared_expert_intermediate_size": 0}, 12_226_592),
    ({**SMALL, "num_hidden_layers": 4, "tie_word_embeddings": False,
      "linear_conv_kernel_dim": 3, "layer_types": ["linear_attention", "full_attention",
                                                   "linear_attention", "sliding_attention"]},
     12_076_448),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_layers_as_the_config_class_repeats_them(tmp_path: Path) -> None:
    s = _read(tmp_path, {**SMALL, "num_hidden_layers": 7})
    # linear, window, linear, full, window, then again
    assert s.hybrid_pattern == "ME*EME*E*EME*E"
    assert (s.attention_layers, s.windowed_layers, s.sliding_window) == (4, 3, 64)
    assert s.shared_experts == 2 and not s.shared_expert_gate and not s.attention_gate


def test_the_window_blocks_hold_the_window(tmp_path: Path) -> None:
    """Two of the three attention layers keep 64 positions: the cache of a 4,096-token
    sequence is the full layer's 4,096 positions and the window layers' 64 each, per
    position 2 KV heads x 64 x (keys, values) x 2 bytes; beside it the two Gated DeltaNet
    layers' state, 8 heads of 64 x 32 in FP32 and the convolution's last 3 inputs of the
    queries, keys and values (4 x 32 + 4 x 32 + 8 x 64 channels) in 16 bits."""
    s = _read(tmp_path, SMALL)
    est = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=4032, output_len=64,
                                                               batch=1))
    per_position = 2 * 64 * 2 * 2.0
    state = 2 * (8 * 64 * 32 * 4 + (4 * 32 * 2 + 8 * 64) * 3 * 2)
    assert est.memory["kv_cache"] == pytest.approx(per_position * (4096 + 2 * 64) + state)


def test_refusals_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match="layer_types: expected 5 entries"):
        _read(tmp_path, {**SMALL, "layer_types": ["conv"] * 5})
    with pytest.raises(GpuarchError, match="sliding_window: the \"sliding_attention\" layers"):
        _read(tmp_path, {**SMALL, "sliding_window": None})


def test_estimates_run_on_the_default(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "lara_mini"})
    served = estimate_inference(CATALOG, s, H100, InferenceConfig(
        input_len=4096, output_len=512, batch=32))
    assert served.tpot_s > 0 and served.memory["kv_cache"] > 0
    trained = estimate_training(CATALOG, s, H100, TrainingConfig(
        gpus=8, seq_len=8192, global_batch=64, ep=8))
    assert trained.step_time_s > 0
