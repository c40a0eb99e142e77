"""IBM's Bamba (``bamba``): each layer a Mamba-2 or attention mixer (attention at the indices
``attn_layer_indices`` lists) and a SwiGLU MLP. Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``) and
worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.workloads.params import count_params
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

# Bamba-9B's layout as a public test fixture quotes ibm-ai-platform/Bamba-9B's config
# (32 layers of 4,096, 32 heads, attention at layers 9, 18 and 27, a state of 128), the
# rest BambaConfig's defaults
BAMBA_9B_LAYOUT = {"model_type": "bamba", "attn_layer_indices": [9, 18, 27],
                   "mamba_d_state": 128}
BIASES = {"model_type": "bamba", "attn_layer_indices": [1, 3], "hidden_size": 1024,
          "intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
          "num_key_value_heads": 4, "mamba_n_heads": 32, "mamba_n_groups": 2,
          "mamba_d_state": 64, "mamba_d_conv": 3, "mamba_expand": 2, "mamba_proj_bias": True,
          "mamba_conv_bias": False, "attention_bias": True, "mlp_bias": True,
          "vocab_size": 1000, "tie_word_embeddings": True}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    ({"model_type": "bamba"}, 9_992_765_440),  # BambaConfig's defaults: no attention
    (BAMBA_9B_LAYOUT, 9_778_138_240),
    (BIASES, 44_669_184),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, BIASES)
    assert s.hybrid_pattern == "M-*-M-*-"
    m = s.mamba
    # the head size "auto": 2 x 1,024 over 32 heads
    assert m is not None and (m.heads, m.head_dim, m.groups, m.state) == (32, 64, 2, 64)
    conv = 2048 + 2 * 2 * 64  # x, B and C
    in_proj = 1024 * (2048 + conv + 32) + (2048 + conv + 32)  # with its bias
    mixer = (in_proj + conv * 3  # the convolution's taps, no bias
             + 3 * 32  # dt_bias, A_log and D
             + 2048  # the gated norm
             + 2048 * 1024 + 1024)  # out_proj and its bias
    attention = (1024 * 1024 + 1024) + 2 * (1024 * 256 + 256) + (1024 * 1024 + 1024)
    mlp = 2 * (1024 * 2048 + 2048) + 2048 * 1024 + 1024
    norms = 2 * 1024
    assert count_params(s).total == (2 * mixer + 2 * attention + 4 * (mlp + norms) + 1024
                                     + 1000 * 1024)


def test_served(tmp_path: Path) -> None:
    s = _read(tmp_path, BAMBA_9B_LAYOUT)
    assert (s.mamba_layers, s.attention_layers, s.mlp_layers) == (29, 3, 32)
    r = estimate_inference(CATALOG, s, CATALOG.product("h100"), InferenceConfig(
        input_len=1000, output_len=1000, batch=64))
    assert r.fits_in_memory and r.tpot_s > 0
    # its one B/C group whole on each of two GPUs
    two = estimate_inference(CATALOG, s, CATALOG.product("h100"), InferenceConfig(
        gpus=2, tp=2, input_len=1000, output_len=1000, batch=64))
    assert two.tpot_s < r.tpot_s


@pytest.mark.parametrize(("change", "message"), [
    ({"attn_layer_indices": [1, 9]}, r"attn_layer_indices: expected layer indices from 0 "
                                     r"to 3, got \[1, 9\]"),
    ({"attn_layer_indices": "all"}, r"attn_layer_indices: expected layer indices"),
    ({"mamba_n_heads": 30}, r"mamba_n_heads: 30 must divide the mixer's width 2048"),
    ({"mamba_d_head": 32}, r"mamba_n_heads x mamba_d_head: expected the mixer's width 2048, "
                           r"got 1024"),
])
def test_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**BIASES, **change})
