"""RWKV-4 (``rwkv``): blocks of time mixing (a recurrence a channel, ``MambaShape`` kind
"rwkv4") and channel mixing (a squared-ReLU MLP gated by a receptance:
``receptance_mlp``). Counts are pinned to the models Hugging Face Transformers 5.25.0 builds
on the meta device (``scripts/params_vs_transformers.py``); the blocks are also worked out
by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.mamba import mamba_state_bytes
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.flops import forward_flops_per_token, mlp_side_gemms
from gpuarch.workloads.params import count_params, mamba_params, receptance_params
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import assert_draft_and_mtp_run, write_config
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

R: dict[str, Any] = {"model_type": "rwkv"}
SMALL: dict[str, Any] = {**R, "hidden_size": 512, "num_hidden_layers": 3, "vocab_size": 2000}


@pytest.mark.parametrize(("cfg", "total"), [
    (R, 7_392_649_216),  # RwkvConfig's defaults (RWKV-4 7B's sizes)
    ({**R, "hidden_size": 768, "num_hidden_layers": 12}, 169_342_464),  # rwkv-4-169m-pile
    ({**R, "hidden_size": 5120, "num_hidden_layers": 40, "context_length": 8192},
     14_148_597_760),
    ({**SMALL, "tie_word_embeddings": True}, 11_266_560),
    ({**SMALL, "attention_hidden_size": 768, "intermediate_size": 1000,
      "num_hidden_layers": 2}, 7_780_352),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_blocks_by_hand(tmp_path: Path) -> None:
    """RWKV-4 169M: hidden 768, 12 layers. Time mixing: three token-shift mixes, key, value,
    receptance and output (768 x 768 each), a decay and a bonus a channel. Channel mixing:
    768 -> 3,072 -> 768 and a 768 x 768 receptance, two mixes. LayerNorms (weight and bias)
    before each, one after the embedding and one at the end; an untied head."""
    s = _read(tmp_path, {**R, "hidden_size": 768, "num_hidden_layers": 12})
    m = s.mamba
    assert m is not None and (m.kind, m.inner, m.state, m.conv_kernel) == ("rwkv4", 768, 3, 2)
    assert mamba_params(s) == 3 * 768 + 4 * 768 * 768 + 2 * 768
    assert receptance_params(s) == 768 * 768 + 2 * 768
    pc = count_params(s)
    assert pc.mlp_dense == 12 * (2 * 768 * 3072 + 768 * 768 + 2 * 768)
    assert pc.norms == (2 * 12 + 2) * 2 * 768
    assert pc.embedding == pc.lm_head == 50277 * 768
    f = forward_flops_per_token(s, 1024)
    assert f.mamba == 12 * 2.0 * 768 * 4 * 768
    assert f.mlp == 12 * 2.0 * (2 * 768 * 3072 + 768 * 768)
    assert mlp_side_gemms(s, 2) == [("receptance", 384, 768)]
    # a sequence's state a block: the three numbers a channel (FP32) and the two token
    # shifts' previous inputs (16-bit)
    assert mamba_state_bytes(m, 1, 2.0, 4.0) == 3 * 768 * 4 + 2 * 768 * 2


def test_estimates(tmp_path: Path) -> None:
    s = _read(tmp_path, R)
    r = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=1024, output_len=256,
                                                             batch=8))
    assert r.fits_in_memory and r.ttft_s > 0 and r.tpot_s > 0
    t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, seq_len=4096,
                                                           global_batch=64, tp=2))
    assert t.step_time_s > 0


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuarchError, match=r"mamba\.head_dim / mamba\.state / "
                                           r"mamba\.conv_kernel: RWKV-4's time mixing"):
        MambaShape(kind="rwkv4", heads=64, head_dim=1, state=3, groups=1, conv_kernel=4,
                   gated_norm=False)
    s = _read(tmp_path, SMALL)
    assert s.mamba is not None
    with pytest.raises(GpuarchError, match="receptance_mlp: RWKV's channel mixing"):
        dataclasses.replace(s, mamba=dataclasses.replace(s.mamba, kind="mamba1", state=16,
                                                         dt_rank=32, conv_kernel=4))
    path = str(write_config(tmp_path, SMALL))
    train = ["estimate", "train", "--model", path, "--gpu", "h100", "--gpus", "8",
             "--seq-len", "4096", "--global-batch", "64"]
    assert main([*train, "--cp", "2"]) == 2
    assert "RWKV-4 time mixing blocks are modelled without context parallelism" in \
        capsys.readouterr().err
    assert main([*train, "--launch", "megatron"]) == 2
    assert "RWKV-4 time mixing blocks, which Megatron-LM's MambaModel does not build" in \
        capsys.readouterr().err
    assert main(["models", path]) == 0
    assert "RWKV-4        512 channels, a recurrence a channel" in capsys.readouterr().out


def test_a_draft_and_mtp_blocks_run(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    assert_draft_and_mtp_run(CATALOG, s, H100)
