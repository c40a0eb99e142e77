"""xLSTM (``xlstm``): mLSTM blocks (a matrix memory a head, an input and a forget gate a
head; ``MambaShape`` kind "mlstm") and SwiGLU MLPs. Counts are pinned to the models Hugging
Face Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``);
the block is also worked out by hand."""

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
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import count_params, mamba_params
from gpuarch.workloads.shape import MambaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

X: dict[str, Any] = {"model_type": "xlstm"}
SMALL: dict[str, Any] = {**X, "hidden_size": 512, "num_hidden_layers": 4, "num_heads": 4,
                         "vocab_size": 1000}


@pytest.mark.parametrize(("cfg", "total"), [
    (X, 6_865_424_896),  # xLSTMConfig's defaults: xLSTM-7B's sizes
    (SMALL, 13_892_128),
    ({**X, "weight_mode": "fused", "num_hidden_layers": 2}, 815_427_616),
    ({**X, "hidden_size": 768, "num_blocks": 3, "num_heads": 6, "qk_dim_factor": 0.25,
      "v_dim_factor": 0.5, "ffn_proj_factor": 3.0, "ffn_round_up_to_multiple_of": 128,
      "vocab_size": 2000}, 22_570_404),
    # num_blocks wins over num_hidden_layers, as xLSTMModel builds them
    ({**X, "num_blocks": 3, "num_hidden_layers": 5, "hidden_size": 512, "num_heads": 2,
      "chunk_size": 32, "vocab_size": 3000}, 12_717_068),
    # the head is never tied (xLSTMForCausalLM declares no tie)
    ({**X, "tie_word_embeddings": True, "num_hidden_layers": 2, "hidden_size": 1024,
      "num_heads": 4, "vocab_size": 3000}, 31_464_464),
    ({**X, "num_hidden_layers": 1, "hidden_size": 256, "num_heads": 1, "vocab_size": 3000,
      "ffn_proj_factor": 1.3}, 2_094_594),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_block_by_hand(tmp_path: Path) -> None:
    """xLSTM-7B: hidden 4,096, 8 heads; q and k 2,048 wide, v and the output gate 4,096;
    two gates a head with biases; a 4,096-wide norm; the output projection; an MLP of
    2.667 x 4,096 rounded up to 10,944."""
    s = _read(tmp_path, X)
    m = s.mamba
    assert m is not None and (m.kind, m.heads, m.head_dim, m.state, m.block) == (
        "mlstm", 8, 512, 256, 64)
    assert s.hybrid_pattern == "M-" * 32 and s.d_ffn == 10944 and not s.attention_layers
    assert m.in_proj_width == 2048 + 2048 + 4096 + 4096 + 2 * 8
    assert mamba_params(s) == 4096 * m.in_proj_width + 2 * 8 + 4096 + 4096 * 4096
    # FLOPs a token: the projections and, a head, the memory's update and read-out
    assert forward_flops_per_token(s, 4096).mamba == 32 * (
        2.0 * 4096 * (m.in_proj_width + 4096) + 2.0 * 2 * 8 * 512 * 256)
    # a sequence's state: a 256 x 512 memory a head, FP32, in each of the 32 blocks
    assert mamba_state_bytes(m, 1, 2.0, 4.0) == 8 * 512 * 256 * 4


def test_estimates(tmp_path: Path) -> None:
    s = _read(tmp_path, X)
    r = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=2048, output_len=256,
                                                             batch=8))
    assert r.fits_in_memory and r.ttft_s > 0 and r.tpot_s > 0
    longer = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=16384,
                                                                  output_len=256, batch=8))
    # no KV cache: a longer prompt costs prefill time, not decode memory
    assert longer.memory["kv_cache"] == r.memory["kv_cache"]
    t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, seq_len=4096,
                                                           global_batch=64, tp=2))
    assert t.step_time_s > 0


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuarchError, match="use_bias: true is not read"):
        _read(tmp_path, {**X, "use_bias": True})
    with pytest.raises(GpuarchError, match="embedding_dim: 1024 must equal hidden_size"):
        _read(tmp_path, {**X, "embedding_dim": 1024})
    with pytest.raises(GpuarchError, match="num_heads: 3 must divide"):
        _read(tmp_path, {**SMALL, "num_heads": 3})
    with pytest.raises(GpuarchError, match="weight_mode: expected"):
        _read(tmp_path, {**SMALL, "weight_mode": "packed"})
    with pytest.raises(GpuarchError, match=r"mamba\.groups / mamba\.conv_kernel: an mLSTM cell"):
        MambaShape(kind="mlstm", heads=4, head_dim=8, state=8, groups=4, conv_kernel=4,
                   block=16)
    s = _read(tmp_path, SMALL)
    assert s.mamba is not None
    with pytest.raises(GpuarchError, match=r"mamba\.block"):
        dataclasses.replace(s.mamba, kind="mamba2", conv_kernel=4)
    path = str(write_config(tmp_path, SMALL))
    train = ["estimate", "train", "--model", path, "--gpu", "h100", "--gpus", "8",
             "--seq-len", "4096", "--global-batch", "64"]
    assert main([*train, "--cp", "2"]) == 2
    assert "mLSTM blocks are modelled without context parallelism" in capsys.readouterr().err
    assert main([*train, "--launch", "megatron"]) == 2
    assert "mLSTM blocks, which Megatron-LM's MambaModel does not build" in \
        capsys.readouterr().err
