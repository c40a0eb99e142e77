"""Naming the serving engine sets what that engine runs where its own flag is not given:
vLLM's and SGLang's fused MoE kernels (their measured layers' fixed time per pass, below
TensorRT-LLM's on Blackwell), LMDeploy's C++ executor (TurboMind); an explicit flag wins."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuarch.cli.main import main
from gpuarch.estimate.inference_config import (
    ENGINE_DEFAULTS,
    ENGINE_SETTINGS,
    EXECUTORS,
    MOE_KERNELS,
    engine_settings,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.bands import ENGINES

# a fine-grained MoE model on Blackwell, where TensorRT-LLM's measured MoE block floor
# (45 us) is above vLLM's and SGLang's (26.6 us): the kernels' choice shows in the step
BASE = ("estimate", "infer", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--input-len",
        "1000", "--output-len", "1000", "--batch", "64", "--json")


def _estimate(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main([*BASE, *flags]) == 0
    out, _ = capsys.readouterr()
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_the_table_names_known_engines_and_settings() -> None:
    assert set(ENGINE_SETTINGS) <= set(ENGINES)
    for engine in ("", *ENGINES):
        settings = engine_settings(engine)
        assert set(settings) == set(ENGINE_DEFAULTS)
        assert settings["executor"] in EXECUTORS
        assert settings["moe_kernels"] in MOE_KERNELS
    assert engine_settings("trtllm") == engine_settings("") == ENGINE_DEFAULTS


@pytest.mark.parametrize(("flags", "kernels", "executor"), [
    ((), "trtllm", "python"),
    (("--engine", "trtllm"), "trtllm", "python"),
    (("--engine", "nim"), "trtllm", "python"),
    (("--engine", "vllm"), "vllm", "vllm"),
    (("--launch", "vllm"), "vllm", "vllm"),
    (("--launch", "sglang"), "sglang", "sglang"),
    (("--engine", "lmdeploy"), "trtllm", "cpp"),
    (("--engine", "vllm", "--moe-kernels", "trtllm"), "trtllm", "vllm"),
    (("--engine", "vllm", "--executor", "python"), "vllm", "python"),
    (("--engine", "lmdeploy", "--executor", "python"), "trtllm", "python"),
])
def test_an_estimate_runs_the_named_engines_kernels(
        capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], kernels: str,
        executor: str) -> None:
    doc = _estimate(capsys, *flags)
    assert (doc["assumptions"]["moe_kernels"], doc["assumptions"]["executor"]) \
        == (kernels, executor)
    # the same estimate as the settings given by hand
    by_hand = _estimate(capsys, "--moe-kernels", kernels, "--executor", executor)
    assert doc["tpot_s"] == by_hand["tpot_s"]


def test_vllms_kernels_shorten_a_blackwell_moe_step(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's MoE kernels (26.6 us a layer on Blackwell against TensorRT-LLM's CUTLASS 45
    us) shorten the step at the same engine loop; vLLM's loop (the fitted 1.51 ms a step)
    lengthens it against TensorRT-LLM's PyTorch backend (its measured 0.58 ms) by the
    difference."""
    vllm, trt_kernels = _estimate(capsys, "--engine", "vllm"), _estimate(
        capsys, "--executor", "vllm")
    assert vllm["tpot_s"] < trt_kernels["tpot_s"]
    trt = _estimate(capsys)
    eff = DEFAULT_EFFICIENCY
    assert trt_kernels["tpot_s"] - trt["tpot_s"] == pytest.approx(
        eff.decode_step_overhead_s - eff.decode_step_overhead_pytorch_s, rel=0.05)


def test_the_serving_advisor_runs_the_named_engines_kernels(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "infer", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--top", "1",
            "--json"]
    for flags, kernels in (((), "trtllm"), (("--engine", "sglang"), "sglang"),
                           (("--engine", "sglang", "--moe-kernels", "trtllm"), "trtllm")):
        assert main([*argv, *flags]) == 0
        out, _ = capsys.readouterr()
        assert json.loads(out)["assumptions"]["moe_kernels"] == kernels


def test_the_estimate_names_its_loop_and_fixed_time_a_step(
        capsys: pytest.CaptureFixture[str]) -> None:
    """TensorRT-LLM's PyTorch backend (the default executor) is charged its measured fixed
    time a decode step (0.58 ms, TensorRT-LLM issue #13957), vLLM's loop the fitted one; the
    JSON and the text say which, and a launch for another engine than the loop priced says
    so."""
    eff = DEFAULT_EFFICIENCY
    assert eff.decode_step_overhead_pytorch_s == 0.58e-3
    assert eff.decode_step_overhead_pytorch_s < eff.decode_step_overhead_s
    assert _estimate(capsys)["assumptions"]["decode_step_overhead_s"] \
        == eff.decode_step_overhead_pytorch_s
    for flags in (("--engine", "vllm"), ("--executor", "cpp")):
        assert _estimate(capsys, *flags)["assumptions"]["decode_step_overhead_s"] \
            == eff.decode_step_overhead_s
    assert main(list(BASE[:-1])) == 0
    assert "executor      TensorRT-LLM's PyTorch backend: 0.58 ms fixed a decode step " \
           "(--executor cpp|vllm|sglang)" in capsys.readouterr().out
    assert main([*BASE[:-1], "--launch", "vllm", "--executor", "python"]) == 0
    out = capsys.readouterr().out
    assert "the estimate assumed TensorRT-LLM's PyTorch executor; vLLM runs its own " \
           "(estimate with --executor vllm)" in out
