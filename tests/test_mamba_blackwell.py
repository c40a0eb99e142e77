"""Mamba-2's kernels on Blackwell (``Efficiency.mamba_blackwell``): the value is the one that
gives state-spaces/mamba issue 904's measured GB200-over-H200 training speed of a Mamba-2
model, it reaches those kernels only, only on Blackwell, and it touches no transformer."""

from __future__ import annotations

import dataclasses

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.perf import Precision
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.workloads import preset
from gpuarch.workloads.shape import TransformerShape

CATALOG = load_catalog()
AT_ROOFLINE = dataclasses.replace(DEFAULT_EFFICIENCY, mamba_blackwell=1.0)


def _mamba2_1p4b() -> TransformerShape:
    """The issue's model: 48 Mamba-2 blocks of width 2,048 (expand 2: 64 heads of 64, state
    128, one group), GPT-NeoX's vocabulary padded to 50,280, tied embeddings; no attention,
    no MLP."""
    base = preset("nemotron-h-8b").shape
    assert base.mamba is not None
    mamba = dataclasses.replace(base.mamba, heads=64, head_dim=64, state=128, groups=1)
    return dataclasses.replace(base, name="mamba2-1.4b", layers=48, hidden=2048, heads=64,
                               kv_heads=64, head_dim=64, vocab=50280, ffn_hidden=0,
                               hybrid_pattern="M" * 48, mamba=mamba, tied_embeddings=True)


def _tokens_per_s(gpu: str, shape: TransformerShape, eff: object = DEFAULT_EFFICIENCY,
                  precision: Precision = Precision.BF16) -> float:
    cfg = TrainingConfig(gpus=1, seq_len=4096, global_batch=4, micro_batch=4,
                         precision=precision)
    return estimate_training(CATALOG, shape, CATALOG.product(gpu), cfg,
                             efficiency=eff).tokens_per_s  # type: ignore[arg-type]


def test_the_value_gives_issue_904s_gb200_over_h200() -> None:
    """Issue 904 (mamba_ssm 2.3.1, batch 4 x 4,096, BF16, one GPU): 360.4 TFLOP/s on GB200,
    239.2 on H200, 1.51x. At the roofline's rate the model gives about 2.05x."""
    shape = _mamba2_1p4b()
    measured = 360.4 / 239.2
    ratio = _tokens_per_s("gb200", shape) / _tokens_per_s("h200", shape)
    assert ratio == pytest.approx(measured, rel=0.02)
    at_roofline = (_tokens_per_s("gb200", shape, AT_ROOFLINE)
                   / _tokens_per_s("h200", shape, AT_ROOFLINE))
    assert at_roofline > 1.3 * measured


def test_only_mamba_kernels_on_blackwell() -> None:
    """Hopper's estimate and a transformer's on Blackwell are the same at any value; a hybrid
    on Blackwell trains slower, its decode steps (the state update, not a chunked kernel)
    unchanged and its prefill longer."""
    nano = preset("nemotron-3-nano-30b-a3b").shape
    llama = preset("llama-3.1-8b").shape
    assert _tokens_per_s("h200", nano) == _tokens_per_s("h200", nano, AT_ROOFLINE)
    assert _tokens_per_s("gb200", llama) == _tokens_per_s("gb200", llama, AT_ROOFLINE)
    assert _tokens_per_s("gb200", nano) < _tokens_per_s("gb200", nano, AT_ROOFLINE)
    b200 = CATALOG.product("b200")
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=32)
    derated = estimate_inference(CATALOG, nano, b200, cfg)
    plain = estimate_inference(CATALOG, nano, b200, cfg, efficiency=AT_ROOFLINE)
    assert derated.decode_step_parts_s == plain.decode_step_parts_s
    assert derated.prefill_parts_s["mamba_scan"] > 1.5 * plain.prefill_parts_s["mamba_scan"]
    assert derated.prefill_parts_s["dense_gemms"] == plain.prefill_parts_s["dense_gemms"]
