"""Laguna (Poolside; ``laguna``): per-kind query heads, a gate on the attention's output
and experts beside a shared MLP. Counts are pinned to the models Hugging Face Transformers
5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.workloads.params import count_params
from tests.hf_configs import read_config as _read

WINDOW_FULL = ["sliding_attention"] * 3 + ["full_attention"]
SWA = {"model_type": "laguna", "hidden_size": 1024, "num_hidden_layers": 8,
       "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
       "layer_types": WINDOW_FULL * 2,
       "num_attention_heads_per_layer": [24, 24, 24, 16] * 2, "num_experts": 16,
       "num_experts_per_tok": 4, "moe_intermediate_size": 256,
       "shared_expert_intermediate_size": 256, "intermediate_size": 2048, "vocab_size": 5000}
SMALL = {"model_type": "laguna", "hidden_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
         "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
         "intermediate_size": 1024, "vocab_size": 3000}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "laguna"}, 33_189_975_808),  # LagunaConfig's defaults
    (SWA, 137_693_296),
    ({**SMALL, "gating": "per-element", "shared_expert_intermediate_size": 256},
     14_230_552),
    ({**SMALL, "attention_bias": True, "mlp_layer_types": ["dense"] * 2 + ["sparse"] * 2,
      "tie_word_embeddings": True}, 12_056_592),  # the default shared MLP of 512: four
    ({**SMALL, "num_hidden_layers": 3, "mlp_layer_types": ["dense"] * 3, "head_dim": 128,
      "num_experts": 256, "moe_intermediate_size": 512}, 11_739_392),
])
def test_counted_as_transformers_builds_it(tmp_path: Path, cfg: dict[str, Any],
                                           total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_heads_by_kind_and_gates(tmp_path: Path) -> None:
    """The window layers' 24 query heads are the shape's, the full layers' 16 its
    full_attention's; the default gate is one a head, "per-element" one a channel."""
    s = _read(tmp_path, SWA)
    assert (s.heads, s.sliding_window, s.sliding_layers) == (24, 512, 6)
    assert s.full_attention is not None and s.full_attention.heads == 16
    assert s.head_gate and not s.attention_gate
    assert (s.experts, s.shared_experts, s.dense_layers, s.router_bias) == (16, 1, 1, True)
    element = _read(tmp_path, {**SMALL, "gating": "per-element"})
    assert element.attention_gate and not element.head_gate
    r = estimate_inference(load_catalog(), s, load_catalog().product("h100"),
                           InferenceConfig(input_len=1024, output_len=128, batch=8))
    assert r.tpot_s > 0 and r.fits_in_memory


@pytest.mark.parametrize(("extra", "message"), [
    ({"num_attention_heads_per_layer": [24, 16, 24, 16, 24, 24, 24, 16]},
     r"num_attention_heads_per_layer: query heads are read a kind of layer at a time"),
    ({"num_attention_heads_per_layer": [24] * 7}, r"expected 8 positive integers"),
    ({"gating": False}, r"gating: expected true, \"per-head\" or \"per-element\", got False"),
    ({"moe_apply_router_weight_on_input": True}, r"moe_apply_router_weight_on_input: true"),
    ({"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 6},
     r"mlp_layer_types: dense layers are read as the leading ones"),
    ({"shared_expert_intermediate_size": 128}, r"shared_expert_intermediate_size: the shared "
                                               r"MLP is read as shared experts"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SWA, **extra})
