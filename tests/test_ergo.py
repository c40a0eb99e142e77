"""Ergo (``ergo``), a row of the family table: grouped-query attention with per-head query and
key norms in window and full layers, four norms a layer, squared-ReLU experts each followed
by a norm of its own beside a shared expert and its norm, and a learned gate a channel on
each residual add; the LM head never tied. Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the
norms, gates and head are also counted by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.workloads.params import count_params
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()

SMALL: dict[str, Any] = {
    "model_type": "ergo", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 6,
    "num_attention_heads": 8, "num_key_value_heads": 2, "first_dense_intermediate_size": 1024,
    "num_dense_blocks": 1, "moe_intermediate_size": 128, "shared_intermediate_size": 256,
    "num_experts": 8, "num_experts_per_tok": 2, "sliding_window": 64,
    "global_attention_every_n_layers": 3, "pad_token_id": 0, "eos_token_id": 1,
    "bos_token_id": 2}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "ergo"}, 1_105_550_917_632),  # ErgoConfig's defaults
    (SMALL, 5_327_744),
    ({**SMALL, "tie_word_embeddings": True}, 5_327_744),  # the head is never tied
    ({**SMALL, "num_dense_blocks": 2}, 5_192_320),
    ({**SMALL, "layer_types": ["sliding_attention", "full_attention"] * 3,
      "mlp_layer_types": ["dense", "dense", "sparse", "sparse", "sparse", "sparse"]},
     5_192_320),
    ({**SMALL, "num_hidden_layers": 1, "num_dense_blocks": 0}, 1_337_408),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_norms_gates_and_head_by_hand(tmp_path: Path) -> None:
    """The small model: 5 expert layers of 8 experts, each expert's norm 256 wide (its
    Transformers name post_expert_norm: 8 x 256 a layer), the shared expert's norm; two gates
    of 256 on every one of 6 layers; a head of its own whatever tie_word_embeddings says."""
    s = _read(tmp_path, {**SMALL, "tie_word_embeddings": True})
    assert (s.routed_expert_norms, s.residual_gates, s.tied_embeddings) == (True, True, False)
    assert (s.shared_experts, s.expert_layer_norms, s.windowed_layers) == (2, 1, 4)
    pc = count_params(s)
    plain = count_params(dataclasses.replace(s, routed_expert_norms=False,
                                             residual_gates=False))
    assert pc.mlp_experts - plain.mlp_experts == 5 * 8 * 256
    assert pc.norms - plain.norms == 6 * 2 * 256
    assert pc.lm_head == 1000 * 256
    # a token applies the norms of its two experts, not all eight
    assert pc.active(s) - plain.active(s) == 5 * 2 * 256 + 6 * 2 * 256


def test_refusals_and_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="routed_expert_norms: a norm after each routed "
                                           "expert needs experts > 0"):
        dataclasses.replace(s, experts=0, experts_per_token=0, shared_experts=0,
                            dense_layers=0, moe_ffn_hidden=0, expert_layer_norms=0)
    with pytest.raises(GpuarchError, match="residual_gates: a learned gate"):
        dataclasses.replace(s, residual_scales=True)
    assert main(["models", str(write_config(tmp_path, SMALL))]) == 0
    out = capsys.readouterr().out
    assert "each routed expert followed by a norm of its own" in out
    assert "residual      a learned gate a channel on each residual add" in out


def test_an_estimate_runs(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    served = estimate_inference(CATALOG, s, CATALOG.product("h100-sxm5-80gb"),
                                InferenceConfig(input_len=1024, output_len=128, batch=8))
    assert served.fits_in_memory and served.tpot_s > 0
