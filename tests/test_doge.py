"""Doge (``doge``): grouped-query attention with a dynamic mask (a projection of the values
to a logit a KV head and a learned scale a KV head: ``dynamic_mask``), norms over each
head's queries and keys and learned scales on the residual. Counts are pinned to the models
Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``); the mask's parts are also worked out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import attention_projections, forward_flops_per_token
from gpuarch.workloads.params import attention_params, count_params
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

D: dict[str, Any] = {"model_type": "doge"}
SMALL: dict[str, Any] = {**D, "hidden_size": 256, "intermediate_size": 512,
                         "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}


@pytest.mark.parametrize(("cfg", "total"), [
    (D, 403_055_872),  # DogeConfig's defaults
    ({**D, "hidden_size": 768, "intermediate_size": 1536, "num_hidden_layers": 24,
      "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 128,
      "tie_word_embeddings": True}, 152_676_168),
    ({**D, "attention_bias": True, "mlp_bias": True, "num_hidden_layers": 3,
      "num_key_value_heads": 2}, 93_886_220),
    ({**D, "sliding_window": 512, "num_hidden_layers": 2, "hidden_act": "gelu"}, 88_106_512),
    (SMALL, 1_827_336),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_mask_by_hand(tmp_path: Path) -> None:
    """The defaults: 8 heads (8 KV) of 128 over a hidden 1,024. The mask's projection reads
    every KV head's values (8 x 128) and writes a logit a KV head (8); A is a scale a KV
    head; the residual scales two hidden-wide vectors a layer."""
    s = _read(tmp_path, D)
    plain = dataclasses.replace(s, dynamic_mask=False)
    assert attention_params(s) - attention_params(plain) == 8 * 128 * 8 + 8
    assert attention_projections(s, 2)[-2] == ("dt_proj", 8, 8 * 128)
    assert forward_flops_per_token(s, 2048).attention_proj \
        - forward_flops_per_token(plain, 2048).attention_proj == 2.0 * 32 * 8 * 128 * 8
    # the attention core is the dense one Transformers computes
    assert forward_flops_per_token(s, 2048).attention_core \
        == forward_flops_per_token(plain, 2048).attention_core
    residual = count_params(s).norms - count_params(dataclasses.replace(
        s, residual_gates=False)).norms
    assert residual == 32 * 2 * 1024


def test_estimates_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = _read(tmp_path, D)
    r = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=1024, output_len=128,
                                                             batch=8))
    assert r.ttft_s > 0 and r.tpot_s > 0
    t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, seq_len=2048,
                                                           global_batch=64))
    assert t.step_time_s > 0
    with pytest.raises(GpuarchError, match="is_moe: true is not read"):
        _read(tmp_path, {**D, "is_moe": True})
    with pytest.raises(GpuarchError, match="hidden_act: expected SiLU or GELU"):
        _read(tmp_path, {**D, "hidden_act": "relu"})
    with pytest.raises(GpuarchError, match="dynamic_mask: Doge's dynamic mask stands on plain"):
        dataclasses.replace(s, hybrid_pattern="*-" * 32, layers=64)
    assert main(["models", str(write_config(tmp_path, SMALL))]) == 0
    out = capsys.readouterr().out
    assert "attention     a dynamic mask a KV head from a projection of the values" in out
    assert "the stream scaled by it: Doge's" in out
