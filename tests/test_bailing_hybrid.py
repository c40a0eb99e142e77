"""Ling's hybrid models (``bailing_hybrid``): a gated delta rule with full-rank decay and
output gates (Kimi Delta Attention's structure) beside latent attention gated a head, and
grouped experts. Counts are pinned to the models Hugging Face Transformers 5.25.0 builds
on the meta device (``scripts/params_vs_transformers.py``)."""

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
from gpuarch.workloads.flops import attention_projections
from gpuarch.workloads.params import count_params, mamba_params
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
SMALL = {"model_type": "bailing_hybrid", "hidden_size": 512, "num_hidden_layers": 6,
         "num_attention_heads": 8, "head_dim": 64, "num_key_value_heads": 8,
         "num_local_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 128,
         "n_shared_experts": 2, "n_group": 4, "topk_group": 2, "first_k_dense_replace": 1,
         "intermediate_size": 1024, "vocab_size": 3000, "kv_lora_rank": 128,
         "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
         "layer_group_size": 3, "pad_token_id": 0, "eos_token_id": 1}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "bailing_hybrid"}, 124_414_191_072),  # BailingHybridConfig's defaults
    (SMALL, 29_664_288),
    ({**SMALL, "num_hidden_layers": 4, "num_local_experts": 0, "layer_group_size": 2,
      "mlp_layer_types": ["dense"] * 4}, 13_477_776),
    ({**SMALL, "num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 2,
      "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "q_lora_rank": 96,
      "layer_group_size": 4, "attention_bias": True, "first_k_dense_replace": 2},
     14_881_960),
    # the given layer and MLP kinds; tie_word_embeddings is not acted on (no tied weights)
    ({**SMALL, "num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 2,
      "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "tie_word_embeddings": True,
      "layer_types": ["full_attention", "linear_attention", "linear_attention",
                      "full_attention"],
      "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]}, 13_879_184),
])
def test_counted_as_transformers_builds_it(tmp_path: Path, cfg: dict[str, Any],
                                           total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_mixer_and_the_gated_latent_attention(tmp_path: Path) -> None:
    """The delta rule's gates are full-rank projections of the hidden state (512 x 512
    each), not low-rank pairs; the latent attention's gate is one value a head (512 x 8),
    its own GEMM."""
    s = _read(tmp_path, SMALL)
    m = s.mamba
    assert m is not None and m.kda and m.full_rank_decay and m.full_rank_gate
    assert (m.low_rank_pairs, m.gate_up_width, m.replicated_in_proj) == (0, 0, 0)
    low_rank = dataclasses.replace(m, full_rank_decay=False, full_rank_gate=False)
    with_low = dataclasses.replace(s, mamba=low_rank)
    # two full-rank projections in place of two low-rank pairs (512 -> 64 -> 512)
    assert mamba_params(s) - mamba_params(with_low) == 2 * (512 * 512 - (512 * 64 + 64 * 512))
    assert s.head_gate and s.mla is not None
    assert ("attn_gate", 8, 512) in attention_projections(s)
    no_gate = dataclasses.replace(s, head_gate=False)
    assert count_params(s).attention - count_params(no_gate).attention \
        == s.attention_layers * 512 * 8


def test_estimates_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = _read(tmp_path, SMALL)
    h100 = CATALOG.product("h100")
    r = estimate_inference(CATALOG, s, h100, InferenceConfig(
        gpus=2, tp=2, input_len=1024, output_len=128, batch=16))
    assert r.tpot_s > 0 and r.fits_in_memory
    t = estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, seq_len=4096,
                                                           global_batch=64, ep=2))
    assert t.step_time_s > 0
    path = write_config(tmp_path, SMALL)
    assert main(["models", str(path)]) == 0
    assert "full-rank decay and output gates" in capsys.readouterr().out


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match=r"num_local_experts: 0 experts in the sparse "
                                           r"layers"):
        _read(tmp_path, {**SMALL, "num_local_experts": 0})
    for group in (0, -3):  # (found by scripts/fuzz_cli.py: 0 had divided by zero)
        with pytest.raises(GpuarchError, match=rf"layer_group_size: expected a positive "
                                               rf"integer .*, got {group}"):
            _read(tmp_path, {**SMALL, "layer_group_size": group})
    with pytest.raises(GpuarchError, match=r"mamba.full_rank_gate / mamba.full_rank_decay: "
                                           r"Kimi Delta Attention's"):
        MambaShape(heads=8, head_dim=64, state=64, groups=8, full_rank_decay=True)
