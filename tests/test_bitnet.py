"""Microsoft's BitNet (``bitnet``, BitNet b1.58 2B4T's sizes): Llama's layers with a norm
inside attention and inside the MLP (its sub-norms) and an MLP gated by a squared ReLU.
Counts are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``); the sub-norms are also counted by hand, and what
its two checkpoint layouts declare is read or refused by name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.report.launch import megatron_launch
from gpuarch.workloads.hf_quant import checkpoint_formats
from gpuarch.workloads.params import count_params, layer_norm_params
from gpuarch.workloads.shape import FfnKind
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

SMALL = {"model_type": "bitnet", "hidden_size": 512, "intermediate_size": 1024,
         "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
         "vocab_size": 1000}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "bitnet"}, 2_741_155_840),  # BitNetConfig's defaults: b1.58 2B4T's
    (SMALL, 7_716_864),
    ({**SMALL, "intermediate_size": 1536, "num_hidden_layers": 2, "num_key_value_heads": 4,
      "attention_bias": True, "tie_word_embeddings": True}, 6_813_184),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_sub_norms_and_gate_by_hand(tmp_path: Path) -> None:
    """Each of 30 layers holds, beside its two norms, one over the attention's output
    (2,560 wide) and one over the MLP's gated product (6,912): 9,472 weights a layer; its
    MLP three matrices, gated by a squared ReLU."""
    s = _read(tmp_path, {"model_type": "bitnet"})
    assert s.sub_norms and s.ffn_kind is FfnKind.RELU2_GLU and s.ffn_kind.gated
    plain = dataclasses.replace(s, sub_norms=False)
    assert layer_norm_params(s) - layer_norm_params(plain) == 2560 + 6912
    assert count_params(s).total - count_params(plain).total == 30 * (2560 + 6912)
    assert count_params(s).mlp_dense == 30 * 3 * 2560 * 6912
    launch = megatron_launch(s, TrainingConfig(gpus=8, seq_len=2048, global_batch=16))
    assert any("squared ReLU (BitNet)" in note for note in launch.notes)
    assert any("sub-norms" in note for note in launch.notes)


def test_sub_norms_are_priced(tmp_path: Path) -> None:
    """The norms read and write the attention's output and the MLP's gated product once
    more a layer: a step of the same model without them is shorter, in training and in
    serving."""
    s = _read(tmp_path, {"model_type": "bitnet"})
    plain = dataclasses.replace(s, sub_norms=False)
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=64)
    assert estimate_training(CATALOG, plain, H100, train).step_time_s \
        < estimate_training(CATALOG, s, H100, train).step_time_s
    serve = InferenceConfig(input_len=2048, output_len=256, batch=64)
    assert estimate_inference(CATALOG, plain, H100, serve).ttft_s \
        < estimate_inference(CATALOG, s, H100, serve).ttft_s


def test_refusals_and_shape_checks(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match="hidden_act: only 'relu2' is read for BitNet"):
        _read(tmp_path, {**SMALL, "hidden_act": "silu"})
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="sub_norms: the norms inside attention and MLP"):
        dataclasses.replace(s, experts=4, experts_per_token=1)


def test_checkpoint_layouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """microsoft/bitnet-b1.58-2B-4T-bf16 declares quantization_mode "online" (BF16 master
    weights, made ternary as each linear runs): read as 16-bit weights. The packed checkpoint
    (quantization_mode "offline", Transformers' default) holds 2-bit ternary weights, which
    is refused by name unless --weight-precision is given."""
    quant = {"quant_method": "bitnet", "linear_class": "autobitlinear"}
    for name in ("online", "packed", "bad"):
        (tmp_path / name).mkdir()
    online = write_config(tmp_path / "online", {
        "model_type": "bitnet", "quantization_config": {**quant, "quantization_mode": "online"}})
    found = checkpoint_formats(online)
    assert found is not None and found.weights == "bf16"
    assert "made ternary as each linear runs" in found.origin
    packed = write_config(tmp_path / "packed", {
        "model_type": "bitnet", "quantization_config": {**quant, "quantization_mode": "offline"}})
    with pytest.raises(GpuarchError, match="ternary weights packed four to a byte"):
        checkpoint_formats(packed)
    args = ["estimate", "infer", "--model", str(packed), "--gpu", "h100", "--input-len", "100",
            "--output-len", "10", "--batch", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "give --weight-precision" in err and "Traceback" not in err
    assert main([*args, "--weight-precision", "bf16"]) == 0
    bad = write_config(tmp_path / "bad", {
        "model_type": "bitnet", "quantization_config": {**quant, "quantization_mode": 3}})
    with pytest.raises(GpuarchError, match="quantization_mode: expected"):
        checkpoint_formats(bad)
