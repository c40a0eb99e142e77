"""The recurrent state's format a serving engine keeps by default
(``estimate.mamba.default_state_precision``), the formats a checkpoint's config.json names
for it (``MambaShape.ssm_cache_dtype``, ``ssm_dtype``) and the flags a launch command sets
when an estimate's format is not the engine's own. The engines' rules are the ones the
function's docstring cites (vLLM's MambaStateDtypeCalculator and config hooks, SGLang's
--mamba-ssm-dtype default, TensorRT-LLM's resolve_ssm_cache_dtype)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.mamba import default_state_precision
from gpuarch.report.launch import serving_launch
from gpuarch.workloads.presets import preset
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config
from tests.test_launch import pairs
from tests.test_lightning import TEXT_01

NEXT = preset("qwen3-next-80b-a3b").shape  # Gated DeltaNet; its config names no format
NANO = preset("nemotron-3-nano").shape  # Mamba-2; mamba_ssm_cache_dtype float32
QWEN35 = preset("qwen3.5-35b-a3b").shape  # Gated DeltaNet; mamba_ssm_dtype float32
KIMI = preset("kimi-linear-48b-a3b").shape  # Kimi Delta Attention
LLAMA = preset("llama-3.1-8b").shape

# a Jamba-style Mamba-1 hybrid (hf_layer_kinds' jamba reader) with no format named
JAMBA = {"model_type": "jamba", "hidden_size": 1024, "intermediate_size": 2048,
         "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
         "num_experts": 1, "vocab_size": 1000, "mamba_d_state": 16, "mamba_d_conv": 4,
         "mamba_expand": 2, "attn_layer_period": 8, "attn_layer_offset": 4}


def test_checkpoint_formats_are_read() -> None:
    """The presets carry what their configs say: Nemotron 3 Nano's mamba_ssm_cache_dtype
    and Qwen3.5-35B-A3B's mamba_ssm_dtype, both float32; Qwen3-Next names neither."""
    assert NANO.mamba is not None and NANO.mamba.ssm_cache_dtype == "fp32"
    assert QWEN35.mamba is not None and QWEN35.mamba.ssm_dtype == "fp32"
    assert NEXT.mamba is not None and (NEXT.mamba.ssm_cache_dtype, NEXT.mamba.ssm_dtype) \
        == ("", "")


@pytest.mark.parametrize(("shape", "engine", "state"), [
    # no engine named: FP32 (lightning attention's 16 bits aside)
    (NEXT, "", "fp32"), (NANO, "", "fp32"),
    # vLLM: the model's dtype but where a hook reads the config
    (NEXT, "vllm", "bf16"), (NANO, "vllm", "fp32"), (QWEN35, "vllm", "fp32"),
    # TensorRT-LLM: only mamba_ssm_cache_dtype, not Qwen3.5's mamba_ssm_dtype
    (NEXT, "trtllm", "bf16"), (NANO, "trtllm", "fp32"), (QWEN35, "trtllm", "bf16"),
    # SGLang: its FP32 default whatever the config says
    (NEXT, "sglang", "fp32"), (QWEN35, "sglang", "fp32"),
    # Kimi Delta Attention: FP32 everywhere
    (KIMI, "", "fp32"), (KIMI, "vllm", "fp32"), (KIMI, "trtllm", "fp32"),
    (KIMI, "sglang", "fp32"),
    # no recurrent mixer: the estimate's default, unused
    (LLAMA, "vllm", "fp32"),
])
def test_engine_defaults(shape: object, engine: str, state: str) -> None:
    assert default_state_precision(shape, engine) == state  # type: ignore[arg-type]


def test_mamba1_and_lightning_defaults(tmp_path: Path) -> None:
    """A Mamba-1 state stays in the model's 16 bits in vLLM and in FP32 in SGLang;
    lightning attention's in 16 bits whichever engine, and in FP16 where the model runs in
    FP16 (before Ampere)."""
    jamba = read_config(tmp_path, JAMBA)
    assert jamba.mamba is not None and jamba.mamba.kind == "mamba1"
    assert [default_state_precision(jamba, e) for e in ("", "vllm", "sglang", "trtllm")] \
        == ["fp32", "bf16", "fp32", "bf16"]
    assert default_state_precision(jamba, "vllm", "fp16") == "fp16"
    minimax = read_config(tmp_path, TEXT_01)
    assert [default_state_precision(minimax, e) for e in ("", "vllm", "sglang")] \
        == ["bf16", "bf16", "bf16"]


@pytest.mark.parametrize(("key", "value", "field", "expected"), [
    ("mamba_ssm_cache_dtype", "bfloat16", "ssm_cache_dtype", "bf16"),
    ("mamba_ssm_cache_dtype", "auto", "ssm_cache_dtype", ""),
    ("mamba_ssm_dtype", "float16", "ssm_dtype", "fp16"),
])
def test_nemotron_h_config_keys(tmp_path: Path, key: str, value: str, field: str,
                                expected: str) -> None:
    """A Nemotron-H config without mamba_ssm_cache_dtype takes Transformers'
    NemotronHConfig default, float32; one that names a format (or "auto") is read as it
    says."""
    bare = _small_nemotron_h()
    read = read_config(tmp_path, bare)
    assert read.mamba is not None and read.mamba.ssm_cache_dtype == "fp32"
    named = read_config(tmp_path, {**bare, key: value})
    assert named.mamba is not None and getattr(named.mamba, field) == expected


def _small_nemotron_h() -> dict[str, object]:
    return {"model_type": "nemotron_h", "hidden_size": 1024, "num_hidden_layers": 4,
            "hybrid_override_pattern": "M-*-", "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 2048,
            "vocab_size": 1000, "mamba_num_heads": 32, "mamba_head_dim": 64,
            "ssm_state_size": 64, "n_groups": 4, "conv_kernel": 4, "expand": 2}


@pytest.mark.parametrize("value", ["float8", 32, ["float32"]])
def test_a_bad_format_is_named(tmp_path: Path, value: object) -> None:
    with pytest.raises(GpuarchError, match=r"config\.json: mamba_ssm_cache_dtype: expected "
                                           r"one of float32, bfloat16, float16 or \"auto\""):
        read_config(tmp_path, {**_small_nemotron_h(), "mamba_ssm_cache_dtype": value})


def test_the_shape_checks_its_formats() -> None:
    with pytest.raises(GpuarchError, match=r"mamba\.ssm_dtype: expected one of fp32, bf16, "
                                           r"fp16 \(or none\), got 'fp8'"):
        MambaShape(heads=8, head_dim=64, state=64, groups=1, ssm_dtype="fp8")


def _state(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    argv = ["estimate", "infer", "--model", "qwen3-next-80b-a3b", "--gpu", "h200",
            "--input-len", "1000", "--output-len", "100", "--batch", "8", "--json", *extra]
    assert main(argv) == 0
    return str(json.loads(capsys.readouterr().out)["assumptions"]["ssm_state_precision"])


def test_the_named_engine_sets_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert _state(capsys) == "fp32"
    assert _state(capsys, "--engine", "vllm") == "bf16"
    assert _state(capsys, "--launch", "vllm") == "bf16"
    assert _state(capsys, "--engine", "sglang") == "fp32"
    assert _state(capsys, "--engine", "vllm", "--ssm-state-precision", "fp32") == "fp32"
    assert main(["advise", "infer", "--model", "qwen3-next-80b-a3b", "--engine", "vllm",
                 "--input-len", "1000", "--output-len", "100", "--rate", "1", "--json"]) == 0
    capsys.readouterr()


def _launch(engine: str, shape: object, state: str, kv: str = "bf16") -> object:
    from gpuarch.perf.quant import QuantFormat, QuantScheme

    scheme = QuantScheme(QuantFormat.BF16, QuantFormat.BF16, QuantFormat(kv))
    cfg = InferenceConfig(input_len=1000, output_len=1000, batch=8, quant=scheme,
                          batching=Batching.CONTINUOUS, ssm_state_precision=state)
    return serving_launch(engine, shape, cfg, "m", 8)


def test_launch_flags_set_the_estimates_format(tmp_path: Path) -> None:
    """A command sets the state's format only where the engine would keep another: vLLM's
    --mamba-ssm-cache-dtype (--mamba-cache-dtype for lightning attention), SGLang's
    --mamba-ssm-dtype, TensorRT-LLM's kv_cache_config beside the KV cache's dtype."""
    assert "--mamba-ssm-cache-dtype" not in pairs(_launch("vllm", NEXT, "bf16").argv)
    assert pairs(_launch("vllm", NEXT, "fp32").argv)["--mamba-ssm-cache-dtype"] == ["float32"]
    assert pairs(_launch("vllm", NANO, "bf16").argv)["--mamba-ssm-cache-dtype"] \
        == ["bfloat16"]
    assert pairs(_launch("sglang", NEXT, "bf16").argv)["--mamba-ssm-dtype"] == ["bfloat16"]
    assert "--mamba-ssm-dtype" not in pairs(_launch("sglang", NEXT, "fp32").argv)
    sglang16 = _launch("sglang", NEXT, "fp16")
    assert any("fp16: SGLang has no such setting" in n for n in sglang16.notes)
    trt = _launch("trtllm", NANO, "bf16", kv="fp8")
    options = dict(trt.files)[pairs(trt.argv)["--extra_llm_api_options"][0]]
    assert "kv_cache_config:\n  dtype: fp8\n  mamba_ssm_cache_dtype: bfloat16" in options
    assert not _launch("trtllm", NANO, "fp32").files
    minimax = read_config(tmp_path, TEXT_01)
    assert pairs(_launch("vllm", minimax, "fp32").argv)["--mamba-cache-dtype"] == ["float32"]
    kda = _launch("vllm", KIMI, "bf16")
    assert "--mamba-ssm-cache-dtype" not in pairs(kda.argv)
    assert any("keeps Kimi Delta Attention's state in FP32" in n for n in kda.notes)
    assert pairs(_launch("sglang", KIMI, "bf16").argv)["--mamba-ssm-dtype"] == ["bfloat16"]


def test_a_model_without_a_recurrent_state_sets_nothing() -> None:
    llama = _launch("vllm", LLAMA, "bf16")
    assert not any("mamba" in word for word in llama.argv)
    lfm = dataclasses.replace(NEXT, mamba=MambaShape(kind="short_conv", heads=2048,
                                                     head_dim=1, state=0, groups=1,
                                                     gated_norm=False))
    assert not any("mamba" in word for word in _launch("vllm", lfm, "fp32").argv)
