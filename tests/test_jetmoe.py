"""JetMoE (``jetmoe``): expert MLPs and a mixture of attention heads, whose query and output
projections are experts a router picks a token (``TransformerShape.attention_experts``).
Counts are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``); the experts' parts are also worked out by hand."""

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
from gpuarch.workloads.flops import attention_expert_gemms, forward_flops_per_token
from gpuarch.workloads.params import count_params
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

J: dict[str, Any] = {"model_type": "jetmoe"}
SMALL: dict[str, Any] = {**J, "hidden_size": 512, "num_hidden_layers": 3,
                         "num_key_value_heads": 4, "kv_channels": 32, "intermediate_size": 704,
                         "num_local_experts": 16, "num_experts_per_tok": 4, "vocab_size": 1000}


@pytest.mark.parametrize(("cfg", "total"), [
    (J, 4_293_888_000),  # JetMoeConfig's defaults (12 layers)
    ({**J, "num_hidden_layers": 24, "rms_norm_eps": 1e-5}, 8_522_237_952),  # JetMoE-8B
    ({**J, "tie_word_embeddings": False, "num_hidden_layers": 4}, 1_540_524_032),
    ({**J, "num_experts_per_tok": 1, "num_hidden_layers": 3}, 1_122_625_536),
    ({**J, "num_local_experts": 4, "num_experts_per_tok": 3, "num_hidden_layers": 2,
      "kv_channels": 64, "num_key_value_heads": 8}, 363_382_784),
    ({**J, "activation_function": "gelu", "num_hidden_layers": 2, "intermediate_size": 1000,
      "vocab_size": 5000}, 259_622_912),
    ({**J, "num_attention_heads": 7, "num_hidden_layers": 2}, 770_263_040),  # ignored
    (SMALL, 59_156_992),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_experts_by_hand(tmp_path: Path) -> None:
    """JetMoE-8B: 24 layers, hidden 2,048; 8 attention experts, each the query projection
    to 16 heads of 128 and the output projection back, 2 a token; one key-value projection
    (2,048 -> 2 x 16 x 128); two routers (2,048 -> 8) and two biases (2,048) a layer."""
    s = _read(tmp_path, {**J, "num_hidden_layers": 24})
    assert (s.heads, s.n_kv_heads, s.d_head, s.attention_experts) == (32, 16, 128, 8)
    pc = count_params(s)
    expert = 2 * 2048 * 16 * 128
    assert pc.attention_experts == 24 * 8 * expert
    assert pc.attention == 24 * (2048 * 2 * 16 * 128 + 2048)  # keys, values and the bias
    assert pc.router == 24 * (2 * 2048 * 8 + 2048)  # both routers and the MoE's bias
    routed = 3 * 2048 * 5632
    assert pc.mlp_experts == 24 * 8 * routed
    assert pc.active(s) == pc.total - 24 * 6 * (expert + routed)
    # a token's FLOPs: its two experts' queries (32 heads) and outputs, as dense attention
    f = forward_flops_per_token(s, 4096)
    assert f.attention_proj == 2.0 * 24 * (2048 * (32 + 2 * 16) * 128 + 32 * 128 * 2048
                                           + 2048)
    assert attention_expert_gemms(s, 2) == [("kv", 2 * 8 * 128, 2048), ("router", 8, 2048),
                                            ("attn_expert_q", 8 * 128, 2048),
                                            ("attn_expert_out", 2048, 8 * 128)]


def test_decode_reads_only_the_chosen_experts(tmp_path: Path) -> None:
    """A token's attention is its two experts' 32 heads: at batch 1 a decode step reads those
    two experts' query and output weights, as much as dense attention of 32 heads would
    (the same step but for the router, within 0.1%); a batch of 16 touches nearly all eight
    experts and reads their weights, so the step takes longer than the dense equivalent's,
    and all eight are held."""
    s = _read(tmp_path, {**J, "num_hidden_layers": 24})
    dense = dataclasses.replace(s, attention_experts=0, moe_out_bias=False, out_bias=False)
    one, many = (InferenceConfig(input_len=2048, output_len=128, batch=b) for b in (1, 16))
    a, b = (estimate_inference(CATALOG, x, H100, one) for x in (s, dense))
    assert a.tpot_s == pytest.approx(b.tpot_s, rel=1e-3)
    a, b = (estimate_inference(CATALOG, x, H100, many) for x in (s, dense))
    assert a.tpot_s > 1.05 * b.tpot_s
    assert a.memory["weights"] > b.memory["weights"]
    t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, seq_len=4096,
                                                           global_batch=64))
    assert t.step_time_s > 0 and t.memory.weights > 0


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuarchError, match="num_experts_per_tok: expected 1 to "
                                           "num_local_experts"):
        _read(tmp_path, {**J, "num_experts_per_tok": 9})
    with pytest.raises(GpuarchError, match="activation_function: expected SiLU or GELU"):
        _read(tmp_path, {**J, "activation_function": "relu"})
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match=r"attention_experts: heads must be "
                                           r"experts_per_token x kv_heads \(4 x 4 = 16"):
        dataclasses.replace(s, heads=8)
    with pytest.raises(GpuarchError, match="sliding_window: not with attention_experts"):
        dataclasses.replace(s, sliding_window=64)
    with pytest.raises(GpuarchError, match="attention_experts: a mixture of attention heads "
                                           "is read beside expert MLPs in every layer"):
        dataclasses.replace(s, dense_layers=1)
    with pytest.raises(GpuarchError, match="moe_out_bias: a bias after the experts' combine "
                                           "needs experts > 0"):
        dataclasses.replace(s, experts=0, experts_per_token=0, moe_ffn_hidden=0,
                            attention_experts=0)
    path = str(write_config(tmp_path, SMALL))
    train = ["estimate", "train", "--model", path, "--gpu", "h100", "--gpus", "8",
             "--seq-len", "2048", "--global-batch", "64"]
    assert main([*train, "--tp", "8"]) == 2
    assert "--tp: 8 does not divide the 4 heads of each attention expert" in \
        capsys.readouterr().err
    assert main([*train, "--lora-rank", "8"]) == 2
    assert "mixture of attention heads" in capsys.readouterr().err
    assert main([*train, "--launch", "megatron"]) == 2
    assert "mixture of attention heads" in capsys.readouterr().err
    assert main(["models", path]) == 0
    out = capsys.readouterr().out
    assert ("attention     a mixture of 16 experts (top 4), each the query and output "
            "projections of 4 heads") in out
