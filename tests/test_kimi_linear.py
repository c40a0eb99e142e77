"""Kimi Linear (``kimi_linear``): Kimi Delta Attention blocks (a gated delta rule whose decay
runs per channel, with low-rank decay and output gates) beside multi-head latent attention
blocks in one hybrid pattern. Parameter counts are pinned to the models Hugging Face
Transformers 5.25 builds (``scripts/params_vs_transformers.py``); the per-block weights,
FLOPs, state and cache are worked out by hand from the shapes below."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference_memory import kv_bytes_per_token
from gpuarch.estimate.mamba import hybrid_state_bytes, mamba_input_projections
from gpuarch.workloads import preset
from gpuarch.workloads.flops import mamba_forward_flops_per_token
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.params import count_params, mamba_params
from gpuarch.workloads.shape import MambaShape, MlaShape, TransformerShape

_FULL = [4, 8, 12, 16, 20, 24, 27]
# moonshotai/Kimi-Linear-48B-A3B-Instruct config.json, the keys that shape it
KIMI_LINEAR = {
    "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"],
    "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 27,
    "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "mla_use_nope": True, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "moe_intermediate_size": 1024, "num_experts": 256, "num_experts_per_token": 8,
    "num_shared_experts": 1, "num_expert_group": 1, "topk_group": 1, "vocab_size": 163840,
    "tie_word_embeddings": False, "model_max_length": 1048576,
    "linear_attn_config": {"full_attn_layers": _FULL, "head_dim": 128, "num_heads": 32,
                           "kda_layers": [i for i in range(1, 28) if i not in _FULL],
                           "short_conv_kernel_size": 4},
}
# a small variant with compressed queries and attention biases (Transformers 5.25 builds
# 67,047,960 parameters from it)
SMALL = {**KIMI_LINEAR, "num_hidden_layers": 8, "num_experts": 16, "hidden_size": 512,
         "intermediate_size": 1024, "moe_intermediate_size": 256, "vocab_size": 1000,
         "q_lora_rank": 256, "attention_bias": True, "first_k_dense_replace": 2,
         "num_shared_experts": 2,
         "linear_attn_config": {"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7],
                                "num_heads": 4, "head_dim": 64, "short_conv_kernel_size": 4}}


def _read(tmp_path: Path, cfg: dict[str, Any]) -> TransformerShape:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return shape_from_hf_config(path)


def test_count_matches_transformers_and_the_preset(tmp_path: Path) -> None:
    shape = _read(tmp_path, KIMI_LINEAR)
    counted = count_params(shape)
    # Transformers 5.25.0 on the meta device; Moonshot's "48B total, 3B activated"
    assert counted.total == 49_122_675_072
    assert round(counted.active(shape) / 1e9, 2) == 3.48
    assert shape.hybrid_pattern == "M-MEME*EMEMEME*EMEMEME*EMEMEME*EMEMEME*EMEMEME*EMEME*E"
    kimi = preset("kimi-linear-48b-a3b").shape
    assert dataclasses.replace(kimi, name=shape.name) == shape
    assert _read(tmp_path, SMALL).mla == MlaShape(q_lora_rank=256, kv_lora_rank=512,
                                                   qk_nope_head_dim=128, qk_rope_head_dim=64,
                                                   v_head_dim=128)
    assert count_params(_read(tmp_path, SMALL)).total == 67_047_960


def test_kda_block_by_hand() -> None:
    shape = preset("kimi-linear").shape
    m = shape.mamba
    assert m is not None and m.kda and m.gated_delta and m.label == "Kimi Delta Attention"
    inner = 32 * 128
    # q, k, v; beta a head; the decay's and the gate's low-rank halves (one head's width)
    in_proj = 3 * inner + 32 + 2 * 128
    assert m.in_proj_width == in_proj
    weights = (2304 * in_proj + 2 * 128 * inner  # in, then the two gates' up-projections
               + inner * 2304                    # out
               + 3 * inner * 4                   # the convolution's taps over q, k, v
               + inner + 32 + 128)               # dt_bias a channel, A_log a head, norm
    assert mamba_params(shape) == weights
    scan = 2 * (4 * 3 * inner + 4 * 32 * 128 * 128)
    assert mamba_forward_flops_per_token(shape) == \
        2 * (2304 * (in_proj + inner) + 128 * 2 * inner) + scan
    # on two tensor-parallel GPUs the low-rank halves stay whole
    assert mamba_input_projections(shape, 2) == [
        ("mamba_in_proj", (3 * inner + 32) // 2 + 256, 2304),
        ("kda_gate_up", inner, 128)]


def test_cache_and_state_by_hand() -> None:
    shape = preset("kimi-linear").shape
    # seven latent-attention blocks of 512 + 64 channels, 16-bit; the KDA blocks hold none
    assert kv_bytes_per_token(shape, 2.0) == 7 * 576 * 2
    # twenty KDA blocks: a 128 x 128 FP32 state a head and three positions of q, k and v
    assert hybrid_state_bytes(shape, 1) == 20 * (32 * 128 * 128 * 4 + 3 * 3 * 4096 * 2)
    assert hybrid_state_bytes(shape, 4) == 20 * (8 * 128 * 128 * 4 + 3 * 3 * 1024 * 2)


def test_latent_attention_in_a_hybrid_counts_its_blocks_only() -> None:
    """A latent-attention model's cache grows with its attention blocks, not its layers:
    turning recurrent blocks into MLP blocks leaves it as it was."""
    shape = preset("kimi-linear").shape
    dense = dataclasses.replace(shape, hybrid_pattern=shape.hybrid_pattern.replace("M", "-"),
                                mamba=None)
    assert kv_bytes_per_token(dense, 1.0) == kv_bytes_per_token(shape, 1.0) == 7 * 576
    with pytest.raises(GpuarchError, match="index_topk: sparse latent attention is not "
                                           "modelled in a hybrid_pattern"):
        dataclasses.replace(shape, mla=MlaShape(q_lora_rank=64, kv_lora_rank=512,
                                                qk_nope_head_dim=128, qk_rope_head_dim=64,
                                                v_head_dim=128, index_heads=4,
                                                index_head_dim=64, index_topk=256))


def test_kda_shape_checks() -> None:
    with pytest.raises(GpuarchError, match="Kimi Delta Attention has a key head a value head"):
        MambaShape(kind="kda", heads=32, head_dim=128, state=128, groups=16)
    with pytest.raises(GpuarchError, match=r"mamba\.kind: expected one of mamba2, "
                                           "gated_delta, kda, got 'x'"):
        MambaShape(kind="x", heads=32, head_dim=128, state=128, groups=32)


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.update(attn_res_block_size=12), "attn_res_block_size: attention residuals"),
    (lambda c: c.update(routed_expert_hidden_size=3584), "routed_expert_hidden_size: latent"),
    (lambda c: c.update(mla_use_output_gate=True), "mla_use_output_gate"),
    (lambda c: c["linear_attn_config"].update(use_full_rank_gate=True), "use_full_rank_gate"),
    (lambda c: c["linear_attn_config"].update(kda_layers=[1, 2, 3]),
     "kda_layers and full_attn_layers must together list every layer 1..27"),
    (lambda c: c["linear_attn_config"].update(full_attn_layers="4"),
     "kda_layers and full_attn_layers must together"),
    (lambda c: c.update(moe_layer_freq=2), "moe_layer_freq: 2 is not read"),
    (lambda c: c.update(layer_types=["linear_attention"] * 26), "layer_types: expected 27"),
    (lambda c: c.update(linear_attn_config=[1]), "linear_attn_config: expected an object"),
])
def test_refusals_name_the_key(tmp_path: Path, change: Any, message: str) -> None:
    cfg = json.loads(json.dumps(KIMI_LINEAR))
    change(cfg)
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_kimi_k3_wrapper_is_refused_once_by_name(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Kimi K3's checkpoint wraps a kimi_linear text model with additions of its own: the
    error names the first and the file once."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "kimi_k3", "text_config": {
        **KIMI_LINEAR, "attn_res_block_size": 12}}))
    assert main(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count(str(path)) == 1 and "attn_res_block_size" in err


def test_transformers_defaults_fill_a_sparse_config(tmp_path: Path) -> None:
    """Without layer lists every fourth layer from the fifth is latent attention (Transformers'
    KimiLinearConfig), and a tied-embedding flag ties nothing (KimiLinearForCausalLM ties no
    weights)."""
    shape = _read(tmp_path, {"model_type": "kimi_linear", "num_hidden_layers": 9,
                             "tie_word_embeddings": True})
    assert shape.hybrid_pattern == "M-MEMEME*EMEMEME*E"
    assert not shape.tied_embeddings and shape.hidden == 2304


def test_estimates_say_which_mixer(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "infer", "--model", "kimi-linear", "--gpu", "h200", "--tp", "2",
            "--gpus", "2", "--input-len", "4000", "--output-len", "1000", "--batch", "32"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assumptions"]["recurrent_mixer"] == "Kimi Delta Attention"
    assert out["fits_in_memory"] and out["tpot_s"] > 0
    assert main(args) == 0
    assert "MiB of Kimi Delta Attention state per sequence" in capsys.readouterr().out
    assert main(["estimate", "train", "--model", "kimi-linear", "--gpu", "h100", "--gpus",
                 "16", "--ep", "8", "--seq-len", "4096", "--global-batch", "128",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "Kimi Delta Attention priced as a Gated DeltaNet" in \
        out["assumptions"]["mamba_kernels"]
    assert main(["estimate", "train", "--model", "kimi-linear", "--gpu", "h100", "--gpus",
                 "16", "--ep", "8", "--seq-len", "4096", "--global-batch", "128",
                 "--launch", "megatron"]) == 2
    assert "is a Kimi Delta Attention hybrid" in capsys.readouterr().err
    assert main(["models", "kimi-linear"]) == 0
    text = capsys.readouterr().out
    assert "20 Kimi Delta Attention, 7 attention" in text
    assert "queries not compressed" in text
