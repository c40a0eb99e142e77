"""Liquid AI's LFM3 (``lfm3``): LFM2's short convolutions beside attention, some of it within a
sliding window, a gate a head on the attention's output and a norm after every block too.
Counts are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``); the window and the norms after each block are also
checked against the same model without them, by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import QkNorm
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

SMALL = {"model_type": "lfm3", "hidden_size": 512, "num_hidden_layers": 8,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
         "vocab_size": 1000, "intermediate_size": 1024}


@pytest.mark.parametrize(("cfg", "total"), [
    # Lfm3Config's defaults (LFM3-1.7B's sizes: 13 convolutions, 6 full and 5 window layers)
    ({"model_type": "lfm3"}, 1_728_801_536),
    (SMALL, 20_351_360),
    ({**SMALL, "use_attention_gate": False, "use_sandwich_norm": False,
      "attention_bias": True, "conv_bias": True, "tie_word_embeddings": False}, 20_859_520),
    ({**SMALL, "layer_types": ["conv", "sliding_attention", "conv", "full_attention"] * 2,
      "sliding_window": 64, "conv_L_cache": 3}, 19_950_592),
    # LFM2's keys are not LFM3's: block_ff_dim and tie_embedding are not read
    ({**SMALL, "layer_types": ["conv", "sliding_attention"] * 4, "block_ff_dim": 4096,
      "block_auto_adjust_ff_dim": True, "tie_embedding": False}, 19_958_784),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_layers_as_the_config_class_makes_them(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    # layer 2 and 6 full, 4 windowed (i % 4 == 0 from the fifth), the rest convolutions
    assert s.hybrid_pattern == "M-M-*-M-*-M-*-M-"
    assert (s.attention_layers, s.windowed_layers, s.sliding_window) == (3, 1, 256)
    assert s.sandwich_norms and s.head_gate and s.qk_norm is QkNorm.HEAD
    assert s.block_norms == 2


def test_the_norms_after_each_block_by_hand(tmp_path: Path) -> None:
    """A norm after each of the 16 blocks: 16 x 512 more parameters than without them."""
    with_them = _read(tmp_path, SMALL)
    without = _read(tmp_path, {**SMALL, "use_sandwich_norm": False})
    assert count_params(with_them).total - count_params(without).total == 16 * 512


def test_the_window_limits_the_cache_and_the_attention(tmp_path: Path) -> None:
    """Windowed attention blocks of a hybrid hold at most the window's positions and attend
    to no more: against the same model with every attention block full, the KV cache is
    smaller by exactly the window blocks' positions beyond the window, and a long prompt's
    attention costs less."""
    windowed = _read(tmp_path, {**SMALL, "layer_types": ["conv", "sliding_attention",
                                                         "conv", "full_attention"] * 2,
                                "sliding_window": 64})
    full = dataclasses.replace(windowed, sliding_window=0, sliding_layers=0)
    prompt, answer = 2048, 64
    cfg = InferenceConfig(input_len=prompt, output_len=answer, batch=1)
    a, b = (estimate_inference(CATALOG, s, H100, cfg) for s in (windowed, full))
    # per position and attention layer: 2 KV heads x 64 x (keys, values) x 2 bytes
    per_layer = 2 * 64 * 2 * 2.0
    held = prompt + answer  # a static batch reserves the whole answer
    saved = 2 * per_layer * (held - 64)  # two window layers keep 64 positions
    assert b.memory["kv_cache"] - a.memory["kv_cache"] == pytest.approx(saved)
    assert a.ttft_s < b.ttft_s and a.tpot_s <= b.tpot_s
    assert forward_flops_per_token(windowed, prompt, causal=True).attention_core \
        < forward_flops_per_token(full, prompt, causal=True).attention_core

    # a training step of the default model at 32k positions: 5 of its 11 attention blocks
    # within 256 of them
    default = _read(tmp_path, {"model_type": "lfm3"})
    everywhere = dataclasses.replace(default, sliding_window=0, sliding_layers=0)
    cfg_t = TrainingConfig(gpus=8, seq_len=32768, global_batch=64)
    ta, tb = (estimate_training(CATALOG, s, H100, cfg_t) for s in (default, everywhere))
    assert ta.step_time_s < 0.9 * tb.step_time_s


@pytest.mark.parametrize(("extra", "message"), [
    ({"layer_types": ["conv", "linear_attention"] * 4}, "layer_types: expected 8 entries"),
    ({"layer_types": ["conv", "sliding_attention"] * 4, "sliding_window": None},
     "sliding_window: the \"sliding_attention\" layers need a window"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **extra})


def test_estimates_run_on_the_default(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "lfm3"})
    served = estimate_inference(CATALOG, s, H100, InferenceConfig(
        input_len=4096, output_len=512, batch=32))
    assert served.tpot_s > 0 and served.memory["kv_cache"] > 0
    trained = estimate_training(CATALOG, s, H100, TrainingConfig(
        gpus=8, seq_len=8192, global_batch=64))
    assert trained.step_time_s > 0
