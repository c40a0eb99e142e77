"""IBM Granite 4.0's hybrid configs (``granitemoehybrid``) read block by block: each layer a
Mamba-2 or attention mixer and a shared SwiGLU MLP, with experts beside it in the MoE models
(Transformers' modeling_granitemoehybrid.py)."""

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

# granite-4.0-h-tiny's architecture fields as a public test fixture mirrors its published
# config.json (GRANITE_H_TINY_HF), checked against Ollama's GGUF metadata of the release
# (granite4:tiny-h: embedding 1536, 40 blocks, 12 heads, 64 experts top 6 of 512, shared
# 1024, SSM inner 3072, state 128, 48 heads, one group, convolution 4)
GRANITE_H_TINY = {
    "model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 40,
    "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 512,
    "shared_intermediate_size": 1024, "num_local_experts": 64, "num_experts_per_tok": 6,
    "vocab_size": 100352, "tie_word_embeddings": True, "mamba_d_state": 128,
    "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_expand": 2,
    "mamba_d_conv": 4, "max_position_embeddings": 131072, "position_embedding_type": "nope",
    "layer_types": (["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"]
                    + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9 + ["attention"]
                    + ["mamba"] * 4)}


def _write(tmp_path: Path, cfg: dict[str, object]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_tiny_counts_to_the_parameter_and_its_blocks(tmp_path: Path) -> None:
    """Counted by hand: tied embeddings 100,352 x 1,536; a Mamba-2 mixer's in_proj
    1,536 x (2 x 3,072 + 2 x 128 + 48), convolution (3,072 + 256) x 4 with its bias, dt_bias,
    A_log and D a head, gated norm 3,072, out_proj 3,072 x 1,536; attention 1,536 x 1,536 twice
    and 1,536 x 512 twice; each layer's router 1,536 x 64, 64 experts of 3 x 1,536 x 512, the
    shared MLP 3 x 1,536 x 1,024 and two norms; the final norm: 6,939,037,248, IBM's "7B
    total" model."""
    shape = shape_from_hf_config(_write(tmp_path, GRANITE_H_TINY))
    h, din, n = 1536, 3072, 128
    mamba = h * (2 * din + 2 * n + 48) + (din + 2 * n) * 5 + 3 * 48 + din + din * h
    attention = 2 * h * h + 2 * h * 512
    layer = h * 64 + 64 * 3 * h * 512 + 3 * h * 1024 + 2 * h
    assert 100352 * h + 36 * mamba + 4 * attention + 40 * layer + h == 6_939_037_248
    assert count_params(shape).total == 6_939_037_248
    assert round(count_params(shape).total / 1e9) == 7
    assert (shape.mamba_layers, shape.attention_layers, shape.moe_layers) == (36, 4, 40)
    assert shape.hybrid_pattern.startswith("MEMEMEMEME*E") and shape.shared_experts == 2
    assert shape.position.value == "none" and shape.tied_embeddings


def test_transformers_5_layer_names_read_the_same(tmp_path: Path) -> None:
    """A config saved by Transformers 5 names the blocks "linear_attention" and
    "full_attention" (remap_legacy_layer_types in its configuration_utils.py): the same
    model; Transformers 5.25 builds it with the same 6,939,037,248 parameters
    (scripts/params_vs_transformers.py)."""
    renamed = {**GRANITE_H_TINY, "layer_types": [
        {"mamba": "linear_attention", "attention": "full_attention"}[k]
        for k in GRANITE_H_TINY["layer_types"]]}  # type: ignore[attr-defined]
    assert shape_from_hf_config(_write(tmp_path, renamed)) \
        == shape_from_hf_config(_write(tmp_path, GRANITE_H_TINY))


def test_a_dense_granite_hybrid_has_mlp_blocks(tmp_path: Path) -> None:
    """Without experts each layer's MLP is the shared one: a block of
    ``shared_intermediate_size``, whatever ``intermediate_size`` says."""
    dense = {**GRANITE_H_TINY, "num_local_experts": 0, "shared_intermediate_size": 4096,
             "intermediate_size": 999}
    shape = shape_from_hf_config(_write(tmp_path, dense))
    assert not shape.is_moe and shape.mlp_layers == 40 and shape.d_ffn == 4096
    mixers = 36 * (1536 * (2 * 3072 + 256 + 48) + 3328 * 5 + 144 + 3072 + 3072 * 1536)
    expected = 100352 * 1536 + mixers + 4 * (2 * 1536 * 1536 + 2 * 1536 * 512) \
        + 40 * (3 * 1536 * 4096 + 2 * 1536) + 1536
    assert count_params(shape).total == expected


@pytest.mark.parametrize(("change", "message"), [
    ({"layer_types": ["mamba"] * 39}, r"layer_types: expected 40 entries"),
    ({"layer_types": ["mamba"] * 39 + ["linear"]}, r"layer_types: expected 40 entries"),
    ({"shared_intermediate_size": 1000}, r"shared_intermediate_size: expected a multiple "
                                         r"of intermediate_size \(512\), got 1000"),
    ({"mamba_n_heads": 40}, r"mamba_n_heads x mamba_d_head: expected mamba_expand x "
                            r"hidden_size \(3072\), got 2560"),
])
def test_bad_configs_are_refused_by_field(tmp_path: Path, change: dict,  # type: ignore[type-arg]
                                          message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        shape_from_hf_config(_write(tmp_path, {**GRANITE_H_TINY, **change}))


def test_it_trains_and_serves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, GRANITE_H_TINY)
    shape = shape_from_hf_config(path)
    catalog = load_catalog()
    h100 = catalog.product("h100")
    trained = estimate_training(catalog, shape, h100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, ep=8))
    assert trained.tokens_per_s > 0
    served = estimate_inference(catalog, shape, h100, InferenceConfig(
        input_len=2048, output_len=256, batch=16))
    assert served.decode_step_parts_s["mamba_scan"] > 0 and served.output_tokens_per_s > 0
    assert main(["models", str(path)]) == 0
    assert "36 Mamba-2, 4 attention and 40 expert blocks" in capsys.readouterr().out
