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

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import kv_bytes_per_token
from gpuarch.estimate.mamba import hybrid_state_bytes, mamba_input_projections
from gpuarch.workloads import preset
from gpuarch.workloads.flops import mamba_forward_flops_per_token
from gpuarch.workloads.hf_quant import checkpoint_formats
from gpuarch.workloads.params import count_params, mamba_params
from gpuarch.workloads.shape import MambaShape, MlaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

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
                                           "gated_delta, kda, mamba1, lightning, short_conv, "
                                           "mlstm, rwkv4, got 'x'"):
        MambaShape(kind="x", heads=32, head_dim=128, state=128, groups=32)


@pytest.mark.parametrize(("change", "message"), [
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


_K3_FULL = [*range(4, 93, 4), 93]
# moonshotai/Kimi-K3's text_config (config.json as NVIDIA aiconfigurator-core 0.12.0 ships
# it), the keys that shape it, and its quantization_config (MXFP4 routed experts)
KIMI_K3 = {"model_type": "kimi_k3", "text_config": {
    "model_type": "kimi_linear", "hidden_size": 7168, "intermediate_size": 33792,
    "num_hidden_layers": 93, "num_attention_heads": 96, "num_key_value_heads": 96,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True,
    "mla_use_output_gate": True, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "moe_intermediate_size": 3072, "routed_expert_hidden_size": 3584,
    "latent_moe_use_norm": True, "num_experts": 896, "num_experts_per_token": 16,
    "num_shared_experts": 2, "num_expert_group": 1, "topk_group": 1, "vocab_size": 163840,
    "tie_word_embeddings": False, "attn_res_block_size": 12, "hidden_act": "situ",
    "linear_attn_config": {"full_attn_layers": _K3_FULL, "head_dim": 128, "num_heads": 96,
                           "kda_layers": [i for i in range(1, 94) if i not in _K3_FULL],
                           "short_conv_kernel_size": 4, "use_full_rank_gate": True,
                           "gate_lower_bound": -5.0},
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                      "weights": {"num_bits": 4, "type": "float",
                                                  "group_size": 32, "strategy": "group"}}},
        "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*",
                   "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
                   "re:.*vision_tower.*", "re:.*mm_projector.*"]}}}


def test_kimi_k3_by_hand(tmp_path: Path) -> None:
    """Kimi K3 (Transformers 5.25 builds no kimi_k3, so its count is worked out here, module
    by module as TensorRT-LLM's modeling_kimi_linear.py builds them)."""
    s = _read(tmp_path, KIMI_K3)
    h = 7168
    assert s.hybrid_pattern.count("M") == 69 and s.hybrid_pattern.count("*") == 24
    counted = count_params(s)
    # each routed expert reads and writes the latent width: 3 x 3,072 x 3,584
    assert counted.mlp_experts == 92 * 896 * 3 * 3072 * 3584
    # the latent's projections from and back to the hidden size, and its norm
    assert counted.moe_latent == 92 * (2 * h * 3584 + 3584)
    # a query and a norm a mix: before each of 186 blocks and after the last
    assert counted.attention_residuals == 187 * 2 * h
    # latent attention with an output gate a channel (96 x 128) from the hidden state
    mla = (h * 1536 + 1536 + 1536 * 96 * 192 + h * 576 + 512 + 512 * 96 * 256
           + 96 * 128 * h + h * 96 * 128)
    assert counted.attention == 24 * mla
    # Kimi Delta Attention with a full-rank output gate: q, k, v, beta, the decay's low-rank
    # pair, the gate (hidden to 12,288), conv taps, dt_bias, A_log, norm, output
    inner = 96 * 128
    kda = (h * (3 * inner + 96 + 128 + inner) + 128 * inner + inner * h
           + 3 * inner * 4 + inner + 96 + 128)
    assert counted.mamba == 69 * kda
    # Hugging Face lists the checkpoint (its vision tower too) as 2.8T
    assert counted.total / 1e12 == pytest.approx(2.8, abs=0.05)
    # the block summaries a mix reads: 2 + layer // 12, averaged over 93 layers
    assert s.attention_residual_reads == pytest.approx(2 + 315 / 93)


def test_kimi_k3_checkpoint_formats(tmp_path: Path) -> None:
    """compressed-tensors' ignore list leaves K3's attention, shared experts and dense MLP in
    16 bits; its 4-bit floats with a scale per 32 are MXFP4."""
    path = write_config(tmp_path, KIMI_K3)
    found = checkpoint_formats(path)
    assert found is not None
    assert (found.weights, found.expert_weights) == ("bf16", "mxfp4")
    assert "attention left out (ignore)" in found.origin


def test_kimi_k3_estimates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, KIMI_K3)
    assert main(["models", str(path)]) == 0
    text = capsys.readouterr().out
    assert "block attention residuals: a summary every 12 layers" in text
    assert "a full-rank output gate" in text and "normed before the way back" in text
    assert "gated: a sigmoid gate on each output channel, from a projection of its own" in text
    args = ["estimate", "infer", "--model", str(path), "--gpu", "gb200", "--system",
            "NVIDIA GB200 NVL72", "--gpus", "16", "--tp", "1", "--ep", "16", "--input-len",
            "2000", "--output-len", "500", "--batch", "8", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["tpot_s"] > 0
    # the residual mixes are priced: without them the same decode step is shorter
    s = _read(tmp_path, KIMI_K3)
    plain = dataclasses.replace(s, attention_residual_block=0)
    catalog = load_catalog()
    cfg = InferenceConfig(gpus=8, tp=1, ep=8, input_len=2000, output_len=500, batch=8)
    b200 = catalog.product("b200")
    assert estimate_inference(catalog, s, b200, cfg).tpot_s > \
        estimate_inference(catalog, plain, b200, cfg).tpot_s


def test_a_wrapped_error_names_the_file_once(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Kimi K3's checkpoint wraps a kimi_linear text model: a bad key in it is named, and
    the file once."""
    path = tmp_path / "config.json"
    cfg = json.loads(json.dumps(KIMI_K3))
    cfg["text_config"]["linear_attn_config"]["kda_layers"] = [1]
    path.write_text(json.dumps(cfg))
    assert main(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count(str(path)) == 1 and "kda_layers" in err
    # (and no heads at all are refused by name, not by a division by zero)
    cfg = json.loads(json.dumps(KIMI_K3))
    cfg["text_config"]["num_attention_heads"] = 0
    path.write_text(json.dumps(cfg))
    assert main(["models", str(path)]) == 2
    assert "heads: expected an integer from 1" in capsys.readouterr().err


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
