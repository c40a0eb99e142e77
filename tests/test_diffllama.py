"""DiffLlama (``diffllama``): Llama's layers with differential attention, two softmax calls a
layer over the same queries and keys against the two halves of the value heads, the second
subtracted by a learned lambda. Counts are pinned to the models Hugging Face Transformers
5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the lambdas and the
doubled attention core are also worked out by hand."""

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
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import attention_params, count_params
from gpuarch.workloads.shape import MlaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

SMALL: dict[str, Any] = {"model_type": "diffllama", "vocab_size": 1000, "hidden_size": 256,
                         "intermediate_size": 512, "num_hidden_layers": 3,
                         "num_attention_heads": 8, "num_key_value_heads": 2,
                         "bos_token_id": 0, "eos_token_id": 1}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "diffllama"}, 1_204_885_504),  # DiffLlamaConfig's defaults
    (SMALL, 2_185_344),
    ({**SMALL, "attention_bias": True, "tie_word_embeddings": True}, 1_931_264),
    ({**SMALL, "head_dim": 64}, 2_677_248),
    ({**SMALL, "num_hidden_layers": 1}, 1_069_952),
    ({**SMALL, "num_key_value_heads": None}, 2_480_256),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_lambdas_and_the_two_calls_by_hand(tmp_path: Path) -> None:
    """The defaults: 16 layers of 32 heads of 64; each layer's four lambda vectors hold
    4 x 64 parameters, and its attention core (QK^T and AV) runs twice."""
    s = _read(tmp_path, {"model_type": "diffllama"})
    plain = dataclasses.replace(s, differential_attention=False)
    assert s.attention_calls == 2 and plain.attention_calls == 1
    assert attention_params(s) - attention_params(plain) == 4 * 64
    seq = 4096
    one = forward_flops_per_token(plain, seq, causal=True)
    two = forward_flops_per_token(s, seq, causal=True)
    assert one.attention_core == 2.0 * 16 * 32 * (seq / 2) * (64 + 64)
    assert two.attention_core == 2 * one.attention_core
    assert two.attention_proj == one.attention_proj and two.mlp == one.mlp


def test_estimates_price_the_second_call(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "diffllama"})
    plain = dataclasses.replace(s, differential_attention=False)
    cfg = InferenceConfig(input_len=4096, output_len=256, batch=8)
    a, b = (estimate_inference(CATALOG, shape, H100, cfg) for shape in (plain, s))
    assert b.ttft_s > a.ttft_s and b.tpot_s > a.tpot_s
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=64)
    ta, tb = (estimate_training(CATALOG, shape, H100, train) for shape in (plain, s))
    assert tb.step_time_s > ta.step_time_s
    # the two calls' outputs both kept for the backward pass
    assert tb.memory.activations > ta.memory.activations


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuarchError, match="kv_heads: differential attention splits the "
                                           "values over the KV heads in two halves; 1 is odd"):
        _read(tmp_path, {**SMALL, "num_key_value_heads": 1})
    with pytest.raises(GpuarchError, match=r"attention_dropout: only 0\.0 is read for "
                                           r"DiffLlama, got 0\.1"):
        _read(tmp_path, {**SMALL, "attention_dropout": 0.1})
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="mla: not with differential_attention"):
        dataclasses.replace(s, kv_heads=8, mla=MlaShape(
            q_lora_rank=0, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16,
            v_head_dim=32))
    path = write_config(tmp_path, SMALL)
    assert main(["models", str(path)]) == 0
    assert "attention     differential: two softmax calls a layer" in capsys.readouterr().out
