"""Pure Mamba-2 models (Transformers' ``mamba2``: no attention, no MLP), read block by block
and costed by the hybrid machinery: no KV cache, a fixed state per sequence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.params import count_params

# mistralai/Mamba-Codestral-7B-v0.1's architecture fields, as its Hugging Face conversion
# (huggingface.co/Molbap/code2 config.json) and the mlx-community 8-bit mirror give them
CODESTRAL_MAMBA = {
    "model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64, "num_heads": 128,
    "head_dim": 64, "expand": 2, "n_groups": 8, "state_size": 128, "conv_kernel": 4,
    "chunk_size": 256, "use_bias": False, "use_conv_bias": True, "vocab_size": 32768,
    "tie_word_embeddings": False}
CATALOG = load_catalog()


def _write(tmp_path: Path, cfg: dict[str, object]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_codestral_mamba_counts_by_hand(tmp_path: Path) -> None:
    """Untied embedding and LM head 32,768 x 4,096 each; a block's norm 4,096, in_proj
    4,096 x (2 x 8,192 + 2 x 8 x 128 + 128), convolution (8,192 + 2,048) x 4 with its bias,
    dt_bias, A_log and D a head, gated norm 8,192, out_proj 8,192 x 4,096; the final norm:
    7,285,403,648; no exact published count was at hand to compare with."""
    shape = shape_from_hf_config(_write(tmp_path, CODESTRAL_MAMBA))
    h, din, gn = 4096, 8192, 8 * 128
    block = h + h * (2 * din + 2 * gn + 128) + (din + 2 * gn) * 5 + 3 * 128 + din + din * h
    assert 2 * 32768 * h + 64 * block + h == 7_285_403_648
    assert count_params(shape).total == 7_285_403_648
    assert (shape.mamba_layers, shape.attention_layers, shape.mlp_layers) == (64, 0, 0)


def test_no_kv_cache_and_a_state_per_sequence(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, CODESTRAL_MAMBA)
    shape = shape_from_hf_config(path)
    h100 = CATALOG.product("h100")
    est = estimate_inference(CATALOG, shape, h100, InferenceConfig(
        input_len=2000, output_len=500, batch=8))
    assert est.assumptions["kv_bytes_per_token_per_gpu"] == 0 and est.max_context is None
    # 64 blocks x (3 x (8,192 + 2,048) x 2 bytes of convolution inputs + 128 x 64 x 128 x 4
    # bytes of FP32 state)
    assert est.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == \
        64 * (3 * 10240 * 2 + 128 * 64 * 128 * 4)
    assert est.decode_step_parts_s["attention"] == 0
    longer = estimate_inference(CATALOG, shape, h100, InferenceConfig(
        input_len=8000, output_len=500, batch=8))
    assert longer.memory["kv_cache"] == est.memory["kv_cache"]  # the state does not grow
    assert estimate_training(CATALOG, shape, h100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, tp=2)).tokens_per_s > 0
    assert main(["estimate", "infer", "--model", str(path), "--gpu", "h100", "--input-len",
                 "2000", "--output-len", "500", "--batch", "8"]) == 0
    out = capsys.readouterr().out
    assert "no limit (no KV cache: Mamba-2 blocks only)" in out
    assert main(["models", str(path)]) == 0
    assert "no attention" in capsys.readouterr().out


def test_heads_that_are_not_the_inner_width_are_refused(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match=r"num_heads x head_dim: expected expand x "
                                           r"hidden_size \(8192\), got 4096"):
        shape_from_hf_config(_write(tmp_path, {**CODESTRAL_MAMBA, "num_heads": 64}))
