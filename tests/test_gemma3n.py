"""Gemma 3n's language model (``gemma3n_text``, and the ``gemma3n`` checkpoint's wrapper):
Gemma 4's small models' layers with AltUp's streams and LAuReL's low-rank branch. Counts
are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``) and, for AltUp's and LAuReL's weights and FLOPs,
worked out by hand from modeling_gemma3n.py."""

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
from gpuarch.report.launch import megatron_launch
from gpuarch.workloads.flops import forward_flops_per_token, stream_flops_per_token
from gpuarch.workloads.params import ALTUP_PROJECTION, altup_params, count_params, layer_op_shares
from gpuarch.workloads.shape import TransformerShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()

# Gemma 3n E2B's text model as public code quotes its config (30 layers of 2,048, 8 heads of
# 256 with 2 KV heads, a GeGLU MLP of 8,192, the last 10 layers KV-shared, per-layer inputs
# of 256 from a table of 262,144 tokens, 4 AltUp streams, LAuReL of rank 64)
E2B = {"model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 30,
       "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
       "intermediate_size": [8192] * 30, "num_kv_shared_layers": 10, "laurel_rank": 64,
       "vocab_size": 262400, "hidden_size_per_layer_input": 256,
       "vocab_size_per_layer_input": 262144, "sliding_window": 512, "altup_num_inputs": 4,
       "max_position_embeddings": 32768}
SMALL = {"model_type": "gemma3n_text", "hidden_size": 256, "num_hidden_layers": 4,
         "intermediate_size": 1024, "num_kv_shared_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 1000,
         "vocab_size_per_layer_input": 900, "hidden_size_per_layer_input": 16,
         "altup_num_inputs": 3, "laurel_rank": 8, "tie_word_embeddings": False,
         "layer_types": ["sliding_attention", "full_attention"] * 2}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "gemma3n_text"}, 6_835_235_568),  # Gemma3nTextConfig's defaults (E4B)
    (E2B, 4_435_182_688),
    (SMALL, 4_644_896),
    # the class's heads (8 of 256, 2 KV heads), a width a layer, two streams, no sharing
    ({"model_type": "gemma3n_text", "hidden_size": 512, "num_hidden_layers": 6,
      "intermediate_size": [2048] * 6, "num_kv_shared_layers": 0, "vocab_size": 3000,
      "vocab_size_per_layer_input": 3000, "hidden_size_per_layer_input": 32,
      "altup_num_inputs": 2, "laurel_rank": 16,
      "layer_types": ["sliding_attention", "full_attention"] * 3}, 37_666_920),
    ({**SMALL, "attention_bias": True, "num_kv_shared_layers": 1, "num_key_value_heads": 2,
      "altup_num_inputs": 4, "laurel_rank": 64, "tie_word_embeddings": True,
      "layer_types": None}, 4_769_808),
    # the checkpoint's wrapper, its vision and audio towers not counted
    ({"model_type": "gemma3n", "vision_config": {}, "audio_config": {}, "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 1024, "num_hidden_layers": 10,
        "intermediate_size": [4096] * 10, "num_kv_shared_layers": 4, "vocab_size": 5000,
        "vocab_size_per_layer_input": 4000, "hidden_size_per_layer_input": 64}},
     191_440_736),
])
def test_counted_as_transformers_builds_it(tmp_path: Path, cfg: dict[str, Any],
                                           total: int) -> None:
    cfg = {k: v for k, v in cfg.items() if v is not None}
    assert count_params(_read(tmp_path, cfg)).total == total


def test_altup_and_laurel_by_hand(tmp_path: Path) -> None:
    """E2B's AltUp: 3 square projections each way (2 x 3 x 2,048^2) and a layer's router
    (2,048 x 4) with its norm (2,048), prediction (4 x 16) and correction (4 x 4)
    coefficients and output scale (2,048); LAuReL a layer 2 x 2,048 x 64 and a norm."""
    s = _read(tmp_path, E2B)
    assert (s.altup_streams, s.laurel_rank) == (4, 64)
    per_layer = 2048 * 4 + 2048 + 64 + 16 + 2048
    assert altup_params(s) == count_params(s).alternating_updates \
        == 2 * 3 * 2048 * 2048 + 30 * per_layer
    assert count_params(s).laurel == 30 * (2 * 2048 * 64 + 2048)
    # without them, the rest counts as Gemma 4's small models' layers do
    plain = dataclasses.replace(s, altup_streams=0, laurel_rank=0)
    assert count_params(s).total - count_params(plain).total \
        == altup_params(s) + count_params(s).laurel


def test_flops_and_the_projections_share(tmp_path: Path) -> None:
    """Forward FLOPs a token: the projections into and out of the streams (2 x 3 x 2,048^2
    multiply-adds), a layer's two routings, the coefficients, the prediction's mix of four
    streams and the correction; LAuReL's two projections. The projections run once a pass,
    priced as 6/30 of a layer's square GEMM."""
    s = _read(tmp_path, E2B)
    n, h = 4, 2048
    layer = 2 * h * n + n ** 3 + n * n + n * n * h + n * h
    expected = 2.0 * (2 * (n - 1) * h * h + 30 * layer) + 2.0 * 30 * 2 * h * 64
    assert stream_flops_per_token(s) == expected
    plain = dataclasses.replace(s, altup_streams=0, laurel_rank=0)
    assert forward_flops_per_token(s, 1024).total - forward_flops_per_token(plain, 1024).total \
        == pytest.approx(expected)
    assert layer_op_shares(s)[ALTUP_PROJECTION] == pytest.approx(6 / 30)


def test_estimates_price_the_streams(tmp_path: Path) -> None:
    """Serving and training run with the streams' GEMMs and traffic: slower than the same
    layers without AltUp and LAuReL, and training holds the streams' activations."""
    s = _read(tmp_path, E2B)
    plain = dataclasses.replace(s, altup_streams=0, laurel_rank=0)
    h100 = CATALOG.product("h100")
    cfg = InferenceConfig(input_len=1024, output_len=256, batch=32)
    with_streams = estimate_inference(CATALOG, s, h100, cfg)
    without = estimate_inference(CATALOG, plain, h100, cfg)
    assert with_streams.ttft_s > without.ttft_s and with_streams.tpot_s > without.tpot_s
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=64)
    t, t0 = (estimate_training(CATALOG, x, h100, train) for x in (s, plain))
    assert t.step_time_s > t0.step_time_s
    assert t.memory.activations > t0.memory.activations


@pytest.mark.parametrize(("extra", "message"), [
    ({"intermediate_size": [8192] * 29 + [4096]}, r"intermediate_size: a width a layer is "
                                                  r"read only where all 30 are one integer"),
    ({"intermediate_size": [8192] * 29}, r"intermediate_size: a width a layer"),
    ({"altup_num_inputs": 1}, r"altup_num_inputs: AltUp needs 2 streams or more, got 1"),
    ({"num_kv_shared_layers": 30}, r"num_kv_shared_layers: 30 of 30 layers leaves none"),
    ({"num_kv_shared_layers": 2, "layer_types": ["sliding_attention"] * 28
      + ["full_attention"] * 2}, r"num_kv_shared_layers: the 2 last layers hold a kind of "
                                 r"attention no earlier layer caches"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**E2B, **extra})


def test_the_shape_checks_its_streams() -> None:
    base = {"name": "x", "layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}
    with pytest.raises(GpuarchError, match=r"altup_streams: AltUp needs 2 streams or more"):
        TransformerShape(**base, altup_streams=1)
    with pytest.raises(GpuarchError, match=r"laurel_rank: expected"):
        TransformerShape(**base, laurel_rank=-1)


def test_display_and_megatron_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    path = write_config(tmp_path, E2B)
    assert main(["models", str(path)]) == 0
    out = capsys.readouterr().out
    assert "AltUp         4 residual streams" in out and "rank 64" in out
    s = _read(tmp_path, E2B)
    launch = megatron_launch(s, TrainingConfig(gpus=8, seq_len=4096, global_batch=64))
    assert any("AltUp's streams and LAuReL's" in n for n in launch.notes)
