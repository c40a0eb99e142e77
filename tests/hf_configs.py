"""Helpers for tests of the config.json readers: a config written from a dict, read back,
and the estimates of two shapes that should cost the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.shape import TransformerShape


def write_config(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    """``cfg`` written as ``tmp_path``/config.json."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def read_config(tmp_path: Path, cfg: dict[str, Any]) -> TransformerShape:
    """The shape of ``cfg`` written as ``tmp_path``/config.json and read back."""
    return shape_from_hf_config(write_config(tmp_path, cfg))


def assert_same_estimates(catalog: Catalog, base: TransformerShape, same: TransformerShape,
                          serve: tuple[Product, InferenceConfig],
                          train: tuple[Product, TrainingConfig]) -> tuple[Any, Any]:
    """Two shapes of one model serve and train alike: first token, per-token time, step time
    and activation memory to a part in 10^12; the two training results, for more checks."""
    product, cfg = serve
    a, b = (estimate_inference(catalog, s, product, cfg) for s in (base, same))
    assert (a.ttft_s, a.tpot_s) == pytest.approx((b.ttft_s, b.tpot_s), rel=1e-12)
    product, tcfg = train
    ta, tb = (estimate_training(catalog, s, product, tcfg) for s in (base, same))
    assert ta.step_time_s == pytest.approx(tb.step_time_s, rel=1e-12)
    assert ta.memory.activations == pytest.approx(tb.memory.activations, rel=1e-12)
    return ta, tb


def assert_draft_and_mtp_run(catalog: Catalog, shape: TransformerShape, product: Product
                             ) -> None:
    """Speculative decoding (3 drafted tokens, 2 accepted) serves ``shape`` and one MTP
    block trains it: both estimates run to a positive time."""
    r = estimate_inference(catalog, shape, product, InferenceConfig(
        input_len=1024, output_len=128, batch=8, speculative_tokens=3, acceptance_length=2))
    assert r.tpot_s > 0
    t = estimate_training(catalog, shape, product, TrainingConfig(gpus=8, seq_len=4096,
                                                                  global_batch=64,
                                                                  mtp_layers=1))
    assert t.step_time_s > 0
