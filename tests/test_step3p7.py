"""Step-3.5/3.7-Flash (``step3p5``, ``step3p7``): sliding-window layers with more query heads
than the full-attention layers (``FullAttention.heads``) and a sigmoid gate a query head
(``TransformerShape.head_gate``). Parameter counts are pinned to the models Hugging Face
Transformers 5.25 builds (``scripts/params_vs_transformers.py``); the rest is worked out by
hand from the shapes below."""

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
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import attention_projections, forward_flops_per_token
from gpuarch.workloads.params import attention_params, count_params
from gpuarch.workloads.shape import FullAttention, TransformerShape
from tests.hf_configs import assert_same_estimates, write_config
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

_KINDS = ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"]
# stepfun-ai/Step-3.7-Flash's text model as NVIDIA aiconfigurator-core 0.12.0 ships its
# config.json, under a text_config as the hub's step3p7 configs nest it
STEP37_TEXT = {"num_hidden_layers": 45, "hidden_size": 4096, "num_attention_heads": 64,
               "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128896,
               "max_position_embeddings": 65536, "intermediate_size": 11264,
               "sliding_window": 512, "layer_types": (_KINDS * 12)[:45] + _KINDS[:3],
               "first_k_dense_replace": 3, "num_experts": 288, "num_experts_per_tok": 8,
               "moe_intermediate_size": 1280, "share_expert_dim": 1280,
               "n_shared_experts": 1, "num_nextn_predict_layers": 3,
               "use_moe_router_bias": True, "moe_router_scaling_factor": 3.0}
STEP37 = {"model_type": "step3p7", "text_config": STEP37_TEXT}
# the same with 96 query heads in the window layers (attention_other_setting, as the hub's
# Step-3.5/3.7 configs give them)
STEP37_96 = {"model_type": "step3p7", "text_config": {
    **STEP37_TEXT, "attention_other_setting": {"num_attention_heads": 96,
                                               "num_attention_groups": 8, "head_dim": 128}}}



@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    (STEP37, 195_844_496_640),
    (STEP37_96, 196_956_118_272),
    # eight layers of 512, 8 full heads and 16 window heads of 64, attention biases, one MTP
    # layer listed past the decoder's in layer_types and moe_layers_enum
    ({"model_type": "step3p7", "text_config": {
        **STEP37_TEXT, "num_hidden_layers": 8, "hidden_size": 512, "intermediate_size": 1024,
        "moe_intermediate_size": 128, "share_expert_dim": 256, "n_routed_experts": 16,
        "vocab_size": 1000, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 64, "layer_types": _KINDS * 2 + ["full_attention"],
        "num_nextn_predict_layers": 1, "attention_other_setting": {"num_attention_heads": 16},
        "moe_layers_enum": "2,3,4,5,6,7,8"}}, 33_908_224),
])
def test_counts_match_transformers(tmp_path: Path, cfg: dict[str, Any], total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_reads_each_kind_of_layer(tmp_path: Path) -> None:
    shape = _read(tmp_path, STEP37_96)
    assert (shape.heads, shape.n_kv_heads, shape.d_head) == (96, 8, 128)
    assert (shape.sliding_window, shape.windowed_layers, shape.full_heads) == (512, 33, 64)
    assert shape.full_attention == FullAttention(kv_heads=8, head_dim=128, heads=64)
    assert shape.head_gate and shape.dense_layers == 3 and shape.shared_experts == 1
    # the flat config as aiconfigurator ships it reads the same as the nested one
    flat = _read(tmp_path, {"model_type": "step3p7", **STEP37_TEXT})
    assert dataclasses.replace(flat, name="x") == \
        dataclasses.replace(_read(tmp_path, STEP37), name="x")


def test_attention_by_hand(tmp_path: Path) -> None:
    shape = _read(tmp_path, STEP37_96)
    h = 4096

    def layer(heads: int) -> int:
        # q, k and v, the output, a gate a query head, then each head's query and key norms
        return h * heads * 128 + 2 * h * 8 * 128 + heads * 128 * h + h * heads + 2 * 128

    window, full = shape.attention_kind(512), shape.attention_kind(0)
    assert (window.heads, full.heads) == (96, 64)
    assert attention_params(window) == layer(96) - 2 * 128
    assert attention_params(full) == layer(64) - 2 * 128
    # the gate rides on the QKV GEMM: its outputs on each of 8 GPUs
    assert attention_projections(full, 8)[0] == ("qkv", 8 * 128 + 8 + 128 + 128, h)
    # the attention core at 4,096 tokens: full layers 64 heads over every position, window
    # layers 96 over 512 (2 FLOP a multiply-add, queries and keys 128 wide, values 128)
    flops = forward_flops_per_token(shape, 4096)
    assert flops.attention_core == 2.0 * (12 * 64 * 4096 * 256 + 33 * 96 * 512 * 256)
    # the KV cache: 8 KV heads of 128 in every layer, whichever its query heads
    assert kv_bytes_per_token(shape, 2.0) == 45 * 2 * 8 * 128 * 2


def test_same_heads_change_nothing(tmp_path: Path) -> None:
    """Full layers given the window layers' own query heads cost what one kind of layer
    costs: the mechanism adds nothing of its own."""
    base = _read(tmp_path, STEP37)
    same = dataclasses.replace(base, full_attention=FullAttention(kv_heads=8, head_dim=128,
                                                                  heads=64))
    assert count_params(same).total == count_params(base).total
    assert_same_estimates(
        CATALOG, base, same,
        (CATALOG.product("h200"),
         InferenceConfig(gpus=8, tp=8, input_len=2000, output_len=500, batch=32)),
        (CATALOG.product("h100"), TrainingConfig(gpus=8, ep=8, seq_len=4096, global_batch=64)))


def test_more_window_heads_cost_more(tmp_path: Path) -> None:
    """96 query heads in the window layers cost more than 64 everywhere, and less than 96
    everywhere."""
    s64, s96 = _read(tmp_path, STEP37), _read(tmp_path, STEP37_96)
    all96 = dataclasses.replace(s96, full_attention=None)
    cfg = InferenceConfig(gpus=8, tp=8, input_len=8000, output_len=500, batch=16)
    ttft = [estimate_inference(CATALOG, s, CATALOG.product("h200"), cfg).ttft_s
            for s in (s64, s96, all96)]
    assert ttft[0] < ttft[1] < ttft[2]


def test_head_gate_checks() -> None:
    with pytest.raises(GpuarchError, match="head_gate: a gate a head, or attention_gate"):
        TransformerShape(name="t", layers=2, hidden=512, heads=8, vocab=100, head_gate=True,
                         attention_gate=True)
    with pytest.raises(GpuarchError, match=r"full_attention\.kv_heads: 4 must divide the "
                                           "full layers' heads 6"):
        TransformerShape(name="t", layers=2, hidden=512, heads=8, kv_heads=4, vocab=100,
                         sliding_window=64, sliding_layers=1,
                         full_attention=FullAttention(kv_heads=4, head_dim=64, heads=6))
    with pytest.raises(GpuarchError, match=r"full_attention\.heads: expected an integer"):
        FullAttention(kv_heads=1, head_dim=64, heads=-1)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.update(attention_other_setting={"num_attention_heads": 96,
                                                 "num_attention_groups": 4}),
     "attention_other_setting.num_attention_groups: 4 differs"),
    (lambda t: t.update(moe_layers_enum="3,5,7"), "moe_layers_enum: dense layers are read"),
    (lambda t: t.update(moe_layers_enum="x"), "moe_layers_enum: expected the expert layers"),
    (lambda t: t.update(sparse_attention_config={"sparse_attention_freq": [1] * 45}),
     "sparse_attention_config: Step's block-sparse attention"),
    (lambda t: t.update(mlp_bias=True), "mlp_bias: biases on the dense and shared MLPs"),
    (lambda t: t.update(gating="per-channel"), "gating: 'per-channel' is not read"),
    (lambda t: t.update(share_expert_dim=1000), "share_expert_dim: .* got 1000"),
    (lambda t: t.update(layer_types=["x"] * 45), "layer_types: expected 45 entries"),
])
def test_refusals_name_the_key(tmp_path: Path, change: Any, message: str) -> None:
    cfg = json.loads(json.dumps(STEP37))
    change(cfg["text_config"])
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_commands_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, STEP37_96)
    assert main(["models", str(path)]) == 0
    text = capsys.readouterr().out
    assert "96 heads (8 KV) of 128" in text
    assert "full layers   12 layers of 64 heads and 8 KV heads of 128" in text
    assert "a sigmoid gate a query head" in text
    assert main(["estimate", "infer", "--model", str(path), "--gpu", "h200", "--gpus", "3",
                 "--tp", "3", "--input-len", "100", "--output-len", "10", "--batch", "1"]) == 2
    assert "--tp: 3 does not divide the 64 heads of the full-attention layers" in \
        capsys.readouterr().err
    assert main(["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "64",
                 "--tp", "8", "--ep", "8", "--seq-len", "4096", "--global-batch", "256",
                 "--launch", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "(64 heads, 8 KV heads of 128) are not emitted" in out
    assert "gate a head (Step-3.5/3.7-style) has no flag here" in out
