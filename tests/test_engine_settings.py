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
    (("--engine", "vllm"), "vllm", "python"),
    (("--launch", "vllm"), "vllm", "python"),
    (("--launch", "sglang"), "sglang", "python"),
    (("--engine", "lmdeploy"), "trtllm", "cpp"),
    (("--engine", "vllm", "--moe-kernels", "trtllm"), "trtllm", "python"),
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
    assert _estimate(capsys, "--engine", "vllm")["tpot_s"] \
        < _estimate(capsys)["tpot_s"]


def test_the_serving_advisor_runs_the_named_engines_kernels(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "infer", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--top", "1",
            "--json"]
    for flags, kernels in (((), "trtllm"), (("--engine", "sglang"), "sglang"),
                           (("--engine", "sglang", "--moe-kernels", "trtllm"), "trtllm")):
        assert main([*argv, *flags]) == 0
        out, _ = capsys.readouterr()
        assert json.loads(out)["assumptions"]["moe_kernels"] == kernels
