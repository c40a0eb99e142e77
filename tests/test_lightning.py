"""Lightning attention (``MambaShape(kind="lightning")``): MiniMax-Text-01 and MiniMax-M1
(``minimax``, and the checkpoints' own ``minimax_text_01`` / ``minimax_m1`` configs). Counts
are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``) and worked out by hand; the blocked scan, the state a
sequence holds and its default format are checked against the arithmetic their docstrings
state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.mamba import (
    default_state_precision,
    hybrid_state_bytes,
    mamba_decode_ops,
    mamba_mixer_ops,
    mamba_scan_flops,
)
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.params import count_params
from gpuarch.workloads.presets import preset
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()

# MiniMax-Text-01's shape as its paper gives it (MiniMax, "MiniMax-01", arXiv 2501.08313,
# section 2: 80 layers of 6,144, 64 heads of 128, softmax attention after every seven
# lightning layers with 8 KV heads, 32 experts of 9,216 and the top 2, a vocabulary of
# 200,064), in Transformers' layout
SOFTMAX_EVERY_EIGHTH = ["full_attention" if (i + 1) % 8 == 0 else "linear_attention"
                        for i in range(80)]
TEXT_01 = {"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"],
           "hidden_size": 6144, "intermediate_size": 9216, "num_hidden_layers": 80,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
           "num_local_experts": 32, "num_experts_per_tok": 2, "vocab_size": 200064,
           "layer_types": SOFTMAX_EVERY_EIGHTH}
SMALL = {"model_type": "minimax", "hidden_size": 1024, "intermediate_size": 2048,
         "num_hidden_layers": 6, "num_attention_heads": 16, "num_key_value_heads": 4,
         "head_dim": 96, "num_local_experts": 4, "num_experts_per_tok": 1, "vocab_size": 1000,
         "layer_types": ["linear_attention", "linear_attention", "full_attention"] * 2,
         "tie_word_embeddings": True}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    ({"model_type": "minimax"}, 47_373_946_880),  # MiniMaxConfig's defaults
    (TEXT_01, 456_089_655_296),  # "456B total"
    (SMALL, 191_384_576),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    assert s.hybrid_pattern == "MEME*E" * 2
    m = s.mamba
    assert m is not None and m.lightning and (m.heads, m.head_dim, m.block) == (16, 96, 256)
    lightning = (1024 * 3 * 1536  # qkv_proj
                 + 1024 * 1536  # the output gate
                 + 1536  # the norm over the inner width
                 + 1536 * 1024)  # out_proj
    softmax = 1024 * 1536 + 2 * 1024 * 4 * 96 + 1536 * 1024
    experts = 4 * 3 * 1024 * 2048 + 4 * 1024  # and the router
    norms = 2 * 1024
    assert count_params(s).total == (4 * lightning + 2 * softmax + 6 * (experts + norms)
                                     + 1024 + 1000 * 1024)


def test_text_01_as_published(tmp_path: Path) -> None:
    s = _read(tmp_path, TEXT_01)
    assert (s.mamba_layers, s.attention_layers, s.moe_layers) == (70, 10, 80)
    # "45.9B activated" (the paper), without the embedding and the LM head
    assert count_params(s).active(s) - 2 * 200064 * 6144 == 45_944_920_064
    # the checkpoints' own configs (vLLM's MiniMaxText01ForCausalLM) give the layers as
    # attn_type_list, 0 lightning and 1 softmax, and read the same
    own = {k: v for k, v in TEXT_01.items() if k != "layer_types"}
    own["attn_type_list"] = [0 if t == "linear_attention" else 1 for t in SOFTMAX_EVERY_EIGHTH]
    for model_type in ("minimax_text_01", "minimax_m1"):
        same = _read(tmp_path, {**own, "model_type": model_type, "architectures": []})
        assert (same.hybrid_pattern, same.mamba) == (s.hybrid_pattern, s.mamba)
        assert count_params(same).total == 456_089_655_296
    # named only by its class
    by_class = _read(tmp_path, {**own, "model_type": "x",
                                "architectures": ["MiniMaxM1ForCausalLM"]})
    assert by_class.hybrid_pattern == s.hybrid_pattern


def test_blocked_scan_and_state(tmp_path: Path) -> None:
    s = _read(tmp_path, TEXT_01)
    m = s.mamba
    assert m is not None
    # Mamba-2's chunked scan with a key head a head, over blocks of 256: at TP 8, 8 heads of
    # 128 with a 128 x 128 state each
    q, n, p, h = 256, 128, 128, 8
    assert mamba_scan_flops(m, 8) == (h * 2 * q * n + h * (2 * q * p + 4 * n * p),
                                      3 * h * 2 * q * n + h * (4 * q * p + 12 * n * p))
    # no convolution: the blocked scan and the gated norm
    assert [op.name for op in mamba_mixer_ops(m, 8, 1024, 2.0, 1024)] == ["mamba_scan",
                                                                          "mamba_norm"]
    decode = {op.name: op for op in mamba_decode_ops(m, 8, 4, 2.0, 2.0)}
    assert set(decode) == {"mamba_scan", "mamba_norm"}
    # the state read and written; q, k, v, the gate and the output a channel
    assert decode["mamba_scan"].bytes_moved == 2 * 4 * h * 128 * 128 * 2.0 \
        + 4 * 5 * h * 128 * 2.0  # type: ignore[union-attr]
    # a sequence's state: 70 layers of 8 heads' 128 x 128 in 16 bits, no convolution's
    assert hybrid_state_bytes(s, 8, 2.0) == 70 * 8 * 128 * 128 * 2


def test_state_kept_in_the_models_16_bits_by_default(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """vLLM keeps lightning attention's state in the model's dtype unless told (its earlier
    releases refused float32 for MiniMax); NVIDIA's Mamba-2 hybrids' in FP32, as the engines
    do."""
    s = _read(tmp_path, TEXT_01)
    assert default_state_precision(s) == "bf16"
    assert default_state_precision(preset("nemotron-3-nano").shape) == "fp32"
    path = write_config(tmp_path, TEXT_01)
    argv = ["estimate", "infer", "--model", str(path), "--gpu", "h200", "--gpus", "8",
            "--tp", "8", "--input-len", "1000", "--output-len", "100", "--batch", "8",
            "--weight-precision", "fp8", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["assumptions"]["ssm_state_precision"] == "bf16"
    assert main([*argv, "--ssm-state-precision", "fp32"]) == 0
    assert json.loads(capsys.readouterr().out)["assumptions"]["ssm_state_precision"] == "fp32"


def test_estimates_and_refusals(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    h100 = CATALOG.product("h100")
    r = estimate_inference(CATALOG, s, h100, InferenceConfig(
        gpus=4, tp=4, input_len=2048, output_len=256, batch=32, ssm_state_precision="bf16"))
    assert r.fits_in_memory and r.tpot_s > 0
    t = estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, seq_len=4096,
                                                           global_batch=64))
    assert t.step_time_s > 0 and "lightning kernels" in t.assumptions["mamba_kernels"]
    with pytest.raises(GpuarchError, match=r"--cp: .* lightning attention blocks are "
                                           "modelled without context parallelism"):
        estimate_training(CATALOG, s, h100, TrainingConfig(gpus=8, tp=2, cp=2,
                                                            seq_len=4096, global_batch=64))


@pytest.mark.parametrize(("change", "message"), [
    ({"shared_intermediate_size": 1536}, r"shared_intermediate_size: 1536 is not read"),
    ({"sliding_window": 4096}, r"sliding_window: 4096 is not read"),
    ({"layer_types": ["linear_attention"] * 5}, r"layer_types: expected 6 entries"),
    ({"layer_types": None, "attn_type_list": [0, 0, 2, 0, 0, 1]},
     r"attn_type_list: expected 6 entries \(num_hidden_layers\), each one of 0, 1"),
    ({"head_dim": None, "hidden_size": 1000}, r"head_dim: missing, and num_attention_heads "
                                              r"16 does not divide hidden_size 1000"),
])
def test_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **change})


def test_shape_checks() -> None:
    with pytest.raises(GpuarchError, match="lightning attention has a key head a head"):
        MambaShape(kind="lightning", heads=8, head_dim=64, state=64, groups=8, conv_kernel=4,
                   conv_bias=False, block=256)
    with pytest.raises(GpuarchError, match=r"mamba\.block: expected an integer from 1"):
        MambaShape(kind="lightning", heads=8, head_dim=64, state=64, groups=8, conv_kernel=0,
                   conv_bias=False)
    with pytest.raises(GpuarchError, match=r"mamba\.block: lightning attention's"):
        MambaShape(heads=8, head_dim=64, state=64, groups=8, block=256)
    with pytest.raises(GpuarchError, match=r"mamba\.conv_kernel: expected an integer from 1"):
        MambaShape(heads=8, head_dim=64, state=64, groups=8, conv_kernel=0)
