"""ABEJA's GPT-NeoX Japanese (``gpt_neox_japanese``, gpt-neox-japanese-2.7b): GPT-NeoX-style
layers without biases but for the last layer's attention output, an MLP as wide as a
multiple of the hidden size. Counts are pinned to the models Hugging Face Transformers
5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the one bias is
also counted by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.workloads.params import count_params
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

SMALL: dict[str, Any] = {"model_type": "gpt_neox_japanese", "vocab_size": 1000,
                         "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 8,
                         "bos_token_id": 1, "eos_token_id": 2}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "gpt_neox_japanese"}, 2_598_837_760),  # the config class's defaults
    (SMALL, 2_619_136),
    ({**SMALL, "tie_word_embeddings": False}, 2_875_136),
    ({**SMALL, "intermediate_multiple_size": 2}, 1_832_704),
    ({**SMALL, "num_hidden_layers": 1}, 1_044_224),
    ({**SMALL, "hidden_act": "gelu_new", "rope_parameters": {
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
     2_619_136),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_last_layers_output_bias_by_hand(tmp_path: Path) -> None:
    """The defaults: 32 layers of 2,560 with fused QKV and output projections and an MLP
    four times as wide, none with biases, two LayerNorms (weight and bias) a layer and a
    final one, a tied 32,000-token embedding, and one output bias of 2,560 in the last
    layer."""
    s = _read(tmp_path, {"model_type": "gpt_neox_japanese"})
    assert (s.d_ffn, s.last_out_bias, s.tied_embeddings) == (10240, True, True)
    h = 2560
    layer = 4 * h * h + 2 * h * 10240 + 2 * 2 * h
    assert count_params(s).total == 32 * layer + 2 * h + 32000 * h + h
    without = dataclasses.replace(s, last_out_bias=False)
    assert count_params(s).total - count_params(without).total == h
    served = estimate_inference(CATALOG, s, CATALOG.product("h100-sxm5-80gb"),
                                InferenceConfig(input_len=1024, output_len=128, batch=8))
    assert served.fits_in_memory and served.tpot_s > 0


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match="hidden_act: only a GELU MLP is read, got 'relu'"):
        _read(tmp_path, {**SMALL, "hidden_act": "relu"})
    with pytest.raises(GpuarchError, match="intermediate_multiple_size: expected an integer "
                                           ">= 1, got 0"):
        _read(tmp_path, {**SMALL, "intermediate_multiple_size": 0})
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="last_out_bias: the last layer's output bias "
                                           "alone"):
        dataclasses.replace(s, out_bias=True)
