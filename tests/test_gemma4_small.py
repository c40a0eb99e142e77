"""Gemma 4's small models (E2B, E4B): per-layer input embeddings (``per_layer_input``) and
trailing layers that read the keys and values an earlier layer of their kind cached
(``kv_shared_layers``, their MLPs twice as wide with ``use_double_wide_mlp``). Parameter
counts are pinned to the models Hugging Face Transformers 5.25 builds
(``scripts/params_vs_transformers.py``); the cache, weights and FLOPs are worked out by hand
from the shapes below."""

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
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import attention_params, count_params, per_layer_input_params
from gpuarch.workloads.shape import TransformerShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()

_TYPES = (["sliding_attention"] * 4 + ["full_attention"]) * 7
# a Gemma 4 E2B-style text model: 35 layers of 1,536, one KV head (of 256 in the window
# layers, 512 in the full ones), the last 20 layers KV-shared with MLPs twice as wide,
# per-layer inputs of 256 from a table of 262,144 tokens
E2B = {"model_type": "gemma4", "text_config": {
    "model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35,
    "intermediate_size": 6144, "num_attention_heads": 8, "head_dim": 256,
    "global_head_dim": 512, "num_key_value_heads": 1, "num_kv_shared_layers": 20,
    "hidden_size_per_layer_input": 256, "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144, "max_position_embeddings": 131072,
    "sliding_window": 512, "layer_types": _TYPES, "use_double_wide_mlp": True,
    "tie_word_embeddings": True}}
_SMALL = {**E2B["text_config"], "hidden_size": 256, "num_hidden_layers": 10,
          "intermediate_size": 512, "vocab_size": 1000, "vocab_size_per_layer_input": 500,
          "hidden_size_per_layer_input": 32, "num_kv_shared_layers": 4, "head_dim": 64,
          "global_head_dim": 128, "num_key_value_heads": 2, "layer_types": _TYPES[:10]}



@pytest.mark.parametrize(("text", "total"), [
    # Transformers 5.25.0 on the meta device
    (E2B["text_config"], 4_628_569_344),
    (_SMALL, 9_785_568),
    ({**_SMALL, "use_double_wide_mlp": False, "attention_k_eq_v": True,
      "num_global_key_value_heads": 1}, 8_114_400),
    ({**_SMALL, "hidden_size_per_layer_input": 0, "attention_bias": True}, 9_387_712),
    ({**_SMALL, "num_kv_shared_layers": 0, "tie_word_embeddings": False}, 8_796_704),
])
def test_counts_match_transformers(tmp_path: Path, text: dict[str, Any], total: int) -> None:
    assert count_params(_read(tmp_path, {"model_type": "gemma4", "text_config": text})
                        ).total == total


def test_reads_the_small_models_keys(tmp_path: Path) -> None:
    shape = _read(tmp_path, E2B)
    # the last 20 of 35 layers: 16 window and 4 full ones (layers 19, 24, 29, 34)
    assert (shape.kv_shared_layers, shape.kv_shared_full, shape.kv_shared_mlp) == (20, 4, 12288)
    assert (shape.per_layer_input, shape.per_layer_vocab) == (256, 262144)
    assert [(w, n, v.reuses_kv) for w, n, v in shape.attention_kinds()] == [
        (512, 12, False), (512, 16, True), (0, 3, False), (0, 4, True)]
    assert sum(share for _, _, share, _ in shape.layer_kinds()) == pytest.approx(1.0)


def test_weights_cache_and_flops_by_hand(tmp_path: Path) -> None:
    shape = _read(tmp_path, E2B)
    h, d = 1536, 256
    window, window_shared = shape.layer_view(512), shape.layer_view(512, True)
    # a window layer: q (8 x 256), k and v (1 x 256), o; a KV-shared one q and o alone
    assert attention_params(window) == h * 8 * d + 2 * h * d + 8 * d * h
    assert attention_params(window_shared) == h * 8 * d + 8 * d * h
    assert window_shared.d_ffn == 12288 and window.d_ffn == 6144
    # the cache: 12 window layers of 1 x 2 x 256 and 3 full ones of 1 x 2 x 512, 16-bit
    assert kv_bytes_per_token(shape, 2.0) == (12 * 2 * 256 + 3 * 2 * 512) * 2
    # the per-layer inputs: their table, the projection to every layer's input and its
    # norm, then each layer's gate, projection back and norm
    counted = count_params(shape)
    assert counted.per_layer_table == 262144 * 35 * d
    assert per_layer_input_params(shape) == h * 35 * d + d + 35 * (2 * h * d + h)
    # FLOPs: the dense MLPs (GeGLU: three matrices) at their widths, the PLE projections
    flops = forward_flops_per_token(shape, 1024)
    assert flops.mlp == 2.0 * 3 * h * (15 * 6144 + 20 * 12288)
    assert flops.per_layer_inputs == 2.0 * 3 * 35 * h * d


def test_shared_layers_cost_less_than_caching_ones(tmp_path: Path) -> None:
    """The same model with every layer caching its own keys and values (and MLPs of one
    width) holds more cache and reads more weights a decode step; the KV-shared layers'
    attention still reads the cache they share."""
    shape = _read(tmp_path, E2B)
    own = dataclasses.replace(shape, kv_shared_layers=0, kv_shared_full=0, kv_shared_mlp=0)
    assert kv_bytes_per_token(own, 2.0) > kv_bytes_per_token(shape, 2.0)
    cfg = InferenceConfig(input_len=4000, output_len=500, batch=8)
    l4 = CATALOG.product("l4")
    a, b = (estimate_inference(CATALOG, s, l4, cfg) for s in (shape, own))
    assert a.memory["kv_cache"] < b.memory["kv_cache"]
    # twice-as-wide MLPs in 20 layers outweigh the K/V projections they drop
    assert a.tpot_s > b.tpot_s
    no_wide = dataclasses.replace(shape, kv_shared_mlp=0)
    assert estimate_inference(CATALOG, no_wide, l4, cfg).tpot_s < b.tpot_s
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=64)
    h100 = CATALOG.product("h100")
    ta, tb = (estimate_training(CATALOG, s, h100, train) for s in (shape, no_wide))
    assert ta.step_time_s > tb.step_time_s  # the wide MLPs
    assert ta.memory.weights > tb.memory.weights


def test_shape_checks() -> None:
    base = dict(name="t", layers=10, hidden=256, heads=4, kv_heads=2, vocab=100,
                sliding_window=64, sliding_layers=8)
    with pytest.raises(GpuarchError, match=r"kv_shared_layers: expected 1\.\.9"):
        TransformerShape(**base, kv_shared_layers=10)
    with pytest.raises(GpuarchError, match="each kind of KV-shared layer needs an earlier"):
        TransformerShape(**base, kv_shared_layers=3, kv_shared_full=2)
    with pytest.raises(GpuarchError, match="experts: not with kv_shared_layers"):
        TransformerShape(**base, kv_shared_layers=3, experts=4, experts_per_token=1)
    with pytest.raises(GpuarchError, match="per_layer_input / per_layer_vocab"):
        TransformerShape(**base, per_layer_input=16)


def test_refuses_shared_layers_beside_experts(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match="KV-shared layers beside experts"):
        _read(tmp_path, {**_SMALL, "model_type": "gemma4_text", "enable_moe_block": True,
                         "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 128})


def test_commands_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, E2B)
    assert main(["models", str(path)]) == 0
    text = capsys.readouterr().out
    assert "the last 20 layers (4 full, the rest window)" in text
    assert "their MLPs 12288 wide" in text and "per-layer input embeddings of 256" in text
    assert main(["estimate", "infer", "--model", str(path), "--gpu", "l4", "--input-len",
                 "2000", "--output-len", "500", "--batch", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fits_in_memory"]
    assert main(["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "8",
                 "--seq-len", "4096", "--global-batch", "64", "--launch", "megatron"]) == 0
    assert "KV-shared layers and per-layer input embeddings" in capsys.readouterr().out


def test_shared_layers_without_a_window() -> None:
    """Every layer full attention, the last 3 of 10 KV-shared: 7 layers cache (2 KV heads of
    64, keys and values) and the shares of the layer kinds still add up to one."""
    s = TransformerShape(name="t", layers=10, hidden=256, heads=4, kv_heads=2, vocab=100,
                         kv_shared_layers=3, kv_shared_full=3)
    assert [(w, n, v.reuses_kv) for w, n, v in s.attention_kinds()] == [
        (0, 7, False), (0, 3, True)]
    assert kv_bytes_per_token(s, 1.0) == 7 * 2 * 2 * 64
    assert sum(share for _, _, share, _ in s.layer_kinds()) == pytest.approx(1.0)
