"""Mamba-2's kernels on Blackwell (``Efficiency.mamba_blackwell``) and their backward rate on
each architecture (``Efficiency.mamba_backward_*``): with them the model gives
state-spaces/mamba issue 904's measured training throughput of a Mamba-2 model on one A100,
H200 and GB200; they reach those kernels only, the Blackwell factor only on Blackwell, the
backward ones only in training's backward pass, and they touch no transformer."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf import Precision
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.workloads import preset
from gpuarch.workloads.shape import TransformerShape

CATALOG = load_catalog()
AT_ROOFLINE = dataclasses.replace(DEFAULT_EFFICIENCY, mamba_blackwell=1.0)
BACKWARD_AT_ROOFLINE = dataclasses.replace(
    DEFAULT_EFFICIENCY, mamba_backward_ampere=1.0, mamba_backward_hopper=1.0,
    mamba_backward_blackwell=1.0)


def _script() -> ModuleType:
    """scripts/mamba_backward.py, which holds the issue's runs and its model's shape."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "mamba_backward.py"
    spec = importlib.util.spec_from_file_location("mamba_backward", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mamba_backward", module)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _mamba2_1p4b() -> TransformerShape:
    shape: TransformerShape = SCRIPT.mamba2_1p4b()
    return shape


def _tokens_per_s(gpu: str, shape: TransformerShape, eff: object = DEFAULT_EFFICIENCY
                  ) -> float:
    """Tokens/s of ``shape`` trained as the issue's run is (``ISSUE_904_RUN``)."""
    return estimate_training(CATALOG, shape, CATALOG.product(gpu), SCRIPT.ISSUE_904_RUN,
                             efficiency=eff).tokens_per_s  # type: ignore[arg-type]


@pytest.mark.parametrize(("gpu", "tflops"), [("a100-sxm4-80gb", 102.5),
                                             ("h200-sxm-141gb", 239.2), ("gb200", 360.4)])
def test_the_model_gives_issue_904s_throughput(gpu: str, tflops: float) -> None:
    """Issue 904 (mamba_ssm's Triton kernels, batch 4 x 4,096, BF16, one GPU): 102.5 TFLOP/s
    on A100, 239.2 on H200, 360.4 on GB200, counted as six FLOPs a parameter and token (the
    issue's Mamba-3 kernel table implies that count); the model has 1,343,740,928 parameters,
    so 12,713, 29,668 and 44,701 tokens/s. With the backward kernels at the roofline's rate
    the model reads +8.5%, +31% and +31%."""
    shape = _mamba2_1p4b()
    measured = tflops * 1e12 / (6 * 1_343_740_928)
    assert _tokens_per_s(gpu, shape) == pytest.approx(measured, rel=0.005)
    assert _tokens_per_s(gpu, shape, BACKWARD_AT_ROOFLINE) > 1.08 * measured


def test_the_backward_rates_are_what_the_script_reads() -> None:
    """The three defaults are scripts/mamba_backward.py's bisection, to its three decimals."""
    assert SCRIPT.solve() == {"ampere": DEFAULT_EFFICIENCY.mamba_backward_ampere,
                              "hopper": DEFAULT_EFFICIENCY.mamba_backward_hopper,
                              "blackwell": DEFAULT_EFFICIENCY.mamba_backward_blackwell}


def test_backward_rates_reach_training_backward_kernels_only() -> None:
    """A transformer trains as fast at any backward rate, a hybrid slower on every
    architecture (Ada takes Ampere's), and serving (prefill runs forward kernels only, decode
    the state update) does not move."""
    nano = preset("nemotron-3-nano-30b-a3b").shape
    llama = preset("llama-3.1-8b").shape
    for gpu in ("a100-sxm4-80gb", "l40s", "h100-sxm5-80gb", "b200"):
        assert _tokens_per_s(gpu, llama) == _tokens_per_s(gpu, llama, BACKWARD_AT_ROOFLINE)
        assert _tokens_per_s(gpu, nano) < _tokens_per_s(gpu, nano, BACKWARD_AT_ROOFLINE)
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=32)
    for gpu in ("h200-sxm-141gb", "b200"):
        product = CATALOG.product(gpu)
        ours = estimate_inference(CATALOG, nano, product, cfg)
        plain = estimate_inference(CATALOG, nano, product, cfg, efficiency=BACKWARD_AT_ROOFLINE)
        assert (ours.ttft_s, ours.tpot_s, ours.prefill_parts_s) == \
            (plain.ttft_s, plain.tpot_s, plain.prefill_parts_s)


def test_gb200_over_h200_is_the_issues_and_the_blackwell_factor_matters() -> None:
    """The issue's GB200 over H200, 1.51x, follows from the absolute figures above; at
    Blackwell's roofline rate for every Mamba-2 kernel (``mamba_blackwell`` 1) the model
    would give far more."""
    shape = _mamba2_1p4b()
    measured = 360.4 / 239.2
    ratio = _tokens_per_s("gb200", shape) / _tokens_per_s("h200", shape)
    assert ratio == pytest.approx(measured, rel=0.02)
    at_roofline = (_tokens_per_s("gb200", shape, AT_ROOFLINE)
                   / _tokens_per_s("h200", shape, AT_ROOFLINE))
    assert at_roofline > 1.2 * measured


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


def test_a_hybrid_estimate_names_the_mamba_rates_it_used() -> None:
    """A hybrid's training estimate says at what rates its Mamba-2 kernels ran, the
    architecture's own backward parameter by name; a transformer's says nothing of them."""
    nano = preset("nemotron-3-nano-30b-a3b").shape
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, micro_batch=1, ep=8,
                         precision=Precision.BF16)
    for gpu, name, blackwell in (("b200", "mamba_backward_blackwell", True),
                                 ("h100-sxm5-80gb", "mamba_backward_hopper", False),
                                 ("a100-sxm4-80gb", "mamba_backward_ampere", False)):
        note = estimate_training(CATALOG, nano, CATALOG.product(gpu), cfg
                                 ).assumptions["mamba_kernels"]
        assert name in note and ("mamba_blackwell" in note) == blackwell
    assert "gated_delta" not in note and "gdn_glue" not in note
    # a Gated DeltaNet hybrid's names its scan's forward and backward rates and the copies
    # priced around it; Blackwell's factor for that backward only on Blackwell
    qwen = preset("qwen3-next-80b-a3b").shape
    for gpu, blackwell in (("gb200", True), ("h100-sxm5-80gb", False)):
        note = estimate_training(CATALOG, qwen, CATALOG.product(gpu), cfg
                                 ).assumptions["mamba_kernels"]
        assert "gated_delta_scan" in note and "gated_delta_backward" in note
        assert "FlashQLA" in note and "gdn_glue" in note
        assert ("gated_delta_backward_blackwell" in note) == blackwell
    llama = estimate_training(CATALOG, preset("llama-3.1-8b").shape,
                              CATALOG.product("b200"), dataclasses.replace(cfg, ep=1))
    assert "mamba_kernels" not in llama.assumptions
