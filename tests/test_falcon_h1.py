"""Falcon-H1 (``falcon_h1``): a Mamba-2 mixer and an attention side by side on one norm in
every layer (``TransformerShape.parallel_mixers``), a mixer without its gated norm unless
``mamba_rms_norm``; and a single B/C group held whole on every tensor-parallel GPU in
serving (``MambaShape.groups_per_gpu``), as vLLM and SGLang replicate it. Counts are pinned
to the models Hugging Face Transformers 5.25.0 builds (``scripts/params_vs_transformers.py``)
and worked out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_config import model_weight_bytes
from gpuarch.estimate.mamba import mamba_decode_ops
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.roofline import Elementwise
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MambaShape, TransformerShape
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

# Transformers' FalconH1Config defaults (an 8.5B shape): 32 layers of 4,096, the mixer 1,024
# wide in 128 heads of 8 with one B/C group of state 256
FALCON_H1 = {"model_type": "falcon_h1", "vocab_size": 128000, "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "mamba_d_ssm": 1024, "mamba_n_heads": 128,
             "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4}
TINY = {"model_type": "falcon_h1", "vocab_size": 1000, "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "mamba_d_ssm": 384, "mamba_n_heads": 12,
        "mamba_d_head": 32, "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
        "mamba_rms_norm": True, "tie_word_embeddings": True}



@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    (FALCON_H1, 8_514_961_408),
    (TINY, 2_054_280),
    # the mixer's width from mamba_expand x hidden, its head size from the width ("auto")
    ({**FALCON_H1, "mamba_d_ssm": None, "mamba_n_heads": 64, "num_hidden_layers": 4,
      "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
      "intermediate_size": 2048, "mamba_d_state": 64}, 323_801_344),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, TINY)
    assert s.hybrid_pattern == "M*-M*-" and s.parallel_mixers and s.shared_norm_pairs == 2
    m = s.mamba
    assert m is not None and (m.heads, m.head_dim, m.groups, m.state) == (12, 32, 1, 16)
    attention = 256 * 256 + 2 * 256 * 128 + 256 * 256
    conv_channels = 384 + 2 * 16  # x, B and C
    mixer = (256 * (384 + conv_channels + 12)  # in_proj: z, x, B, C and dt a head
             + conv_channels * 4 + conv_channels  # the convolution's taps and bias
             + 3 * 12  # dt_bias, A_log and D a head
             + 384  # mamba_rms_norm's gated norm
             + 384 * 256)  # out_proj
    mlp = 3 * 256 * 512
    norms = 2 * 256  # one before the mixer and attention together, one before the MLP
    assert count_params(s).total == 2 * (attention + mixer + mlp + norms) + 256 + 1000 * 256
    # without mamba_rms_norm the mixer has no gated norm
    assert count_params(s).total - count_params(_read(tmp_path, {
        **TINY, "mamba_rms_norm": False})).total == 2 * 384


def test_parallel_mixers_share_a_norm() -> None:
    m = MambaShape(heads=8, head_dim=32, state=16, groups=1)
    base = TransformerShape(name="x", layers=6, hidden=256, heads=4, vocab=1000,
                            ffn_hidden=512, hybrid_pattern="M*-" * 2, mamba=m)
    paired = dataclasses.replace(base, parallel_mixers=True)
    assert count_params(base).total - count_params(paired).total == 2 * 256
    with pytest.raises(GpuarchError, match="parallel_mixers: the hybrid_pattern has no"):
        dataclasses.replace(base, hybrid_pattern="*M-" * 2, parallel_mixers=True)
    with pytest.raises(GpuarchError, match="parallel_mixers: pairs a hybrid_pattern's"):
        TransformerShape(name="x", layers=2, hidden=256, heads=4, vocab=1000,
                         parallel_mixers=True)
    with pytest.raises(GpuarchError, match=r"mamba\.gated_norm: only a Mamba-2 mixer"):
        MambaShape(heads=8, head_dim=32, state=16, groups=1, kind="gated_delta",
                   gated_norm=False)


def test_one_group_whole_on_every_serving_gpu(tmp_path: Path) -> None:
    s = _read(tmp_path, FALCON_H1)
    m = s.mamba
    assert m is not None
    assert (m.groups_per_gpu(1), m.groups_per_gpu(4)) == (1, 1)
    assert m.conv_per_gpu(4) == 1024 // 4 + 2 * 256
    assert m.in_proj_per_gpu(4) == (2 * 1024 + 128) // 4 + 2 * 256
    # grouped mixers still split their groups
    split = MambaShape(heads=128, head_dim=64, state=128, groups=8)
    assert (split.groups_per_gpu(4), split.conv_per_gpu(4)) == (2, 8192 // 4 + 2 * 2 * 128)
    assert split.replicated_params(4, 4096) == 0
    # serving at TP 2 holds the group's projection rows and convolution taps on both GPUs
    one, two = (InferenceConfig(gpus=tp, tp=tp, input_len=1000, output_len=100, batch=8)
                for tp in (1, 2))
    extra = s.mamba_layers * 2 * 256 * (1 - 1 / 2) * (4096 + 4 + 1) * 2
    assert model_weight_bytes(s, two) == pytest.approx(model_weight_bytes(s, one) / 2 + extra)
    # each GPU's decode step reads the whole group's B and C
    conv = [next(op for op in mamba_decode_ops(m, tp, 8, 2.0, 4.0) if op.name == "mamba_conv")
            for tp in (1, 2)]
    assert isinstance(conv[0], Elementwise) and isinstance(conv[1], Elementwise)
    assert conv[1].bytes_moved / conv[0].bytes_moved == pytest.approx(
        (512 + 512) / (1024 + 512))
    result = estimate_inference(CATALOG, s, CATALOG.product("h100"), two)
    assert result.tpot_s > 0


def test_training_splits_groups_as_megatron_does(tmp_path: Path) -> None:
    s = _read(tmp_path, FALCON_H1)
    h100 = CATALOG.product("h100")
    assert estimate_training(CATALOG, s, h100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64)).step_time_s > 0
    with pytest.raises(GpuarchError, match=r"groups \(1\)"):
        estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, seq_len=4096,
                                                            global_batch=64))


@pytest.mark.parametrize(("change", "message"), [
    ({"mamba_proj_bias": True}, r"mamba_proj_bias: true is not read"),
    ({"projectors_bias": True}, r"projectors_bias: true is not read"),
    ({"mamba_n_heads": 100}, r"mamba_n_heads: 100 must divide the mixer's width 1024"),
    ({"mamba_d_head": 16}, r"mamba_n_heads x mamba_d_head: expected the mixer's width 1024"),
])
def test_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**FALCON_H1, **change})
