"""Zamba (``zamba``) and Zamba2 (``zamba2``): Mamba layers with a shared transformer block
called after every few of them (``TransformerShape.shared_blocks``), its weights held once a
set and its work done at every call. Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the
shared and per-call parts are also worked out by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import kv_bytes_per_token
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.report.serialize import to_json
from gpuarch.workloads.flops import (
    attention_projections,
    forward_flops_per_token,
    mlp_side_gemms,
)
from gpuarch.workloads.params import (
    count_params,
    shared_block_call_params,
    shared_block_params,
)
from gpuarch.workloads.presets import shape_from_mapping
from tests.hf_configs import assert_draft_and_mtp_run, write_config
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

Z2: dict[str, Any] = {"model_type": "zamba2"}
Z1: dict[str, Any] = {"model_type": "zamba"}
SMALL2: dict[str, Any] = {
    **Z2, "hidden_size": 256, "num_hidden_layers": 6, "num_attention_heads": 4,
    "n_mamba_heads": 4, "layers_block_type": ["mamba", "hybrid"] * 3, "num_mem_blocks": 2,
    "vocab_size": 1000, "intermediate_size": 320}
# Zamba2-7B's layers (its published config's layers_block_type: 13 hybrid of 81)
LAYERS_7B = (["mamba"] * 6 + ["hybrid"] + ["mamba"] * 4 + ["hybrid"]
             + (["mamba"] * 5 + ["hybrid"]) * 11 + ["mamba"] * 3)


@pytest.mark.parametrize(("cfg", "total"), [
    (Z2, 2_481_848_336),  # Zamba2Config's defaults (Zamba2-2.7B's sizes, one block)
    ({**Z2, "num_mem_blocks": 2}, 2_652_249_616),
    ({**Z2, "num_mem_blocks": 3, "use_shared_attention_adapter": True}, 2_858_040_336),
    ({**Z2, "num_mem_blocks": 20, "use_shared_attention_adapter": True}, 3_880_448_016),
    ({**Z2, "num_key_value_heads": 8, "num_mem_blocks": 2}, 2_573_606_416),
    ({**Z2, "add_bias_linear": True, "use_mem_rope": True, "hidden_act": "silu"},
     2_482_569_920),
    ({**Z2, "mamba_ngroups": 2, "n_mamba_heads": 80, "mamba_d_state": 128}, 2_545_001_120),
    ({**Z2, "adapter_rank": 16, "num_mem_blocks": 2,
      "layers_block_type": (["linear_attention"] * 3 + ["hybrid"]) * 13
      + ["linear_attention"] * 2}, 2_656_714_256),
    ({**Z2, "hidden_size": 3584, "num_hidden_layers": 81, "num_mem_blocks": 2,
      "n_mamba_heads": 112, "mamba_ngroups": 2, "intermediate_size": 14336,
      "use_mem_rope": True, "layers_block_type": LAYERS_7B}, 7_356_749_648),
    (SMALL2, 5_710_920),
    (Z1, 7_232_490_496),  # ZambaConfig's defaults (Zamba-7B-v1's sizes)
    ({**Z1, "hidden_size": 512, "num_hidden_layers": 12, "num_attention_heads": 8,
      "num_key_value_heads": 4, "intermediate_size": 1024, "n_mamba_heads": 4,
      "mamba_dt_rank": 24, "vocab_size": 5000}, 27_426_816),
    ({**Z1, "hidden_size": 512, "num_hidden_layers": 10, "attention_hidden_size": 768,
      "attention_head_dim": 96, "num_attention_heads": 8, "num_key_value_heads": 8,
      "intermediate_size": 1000, "mamba_proj_bias": True, "mamba_conv_bias": False,
      "attn_layer_period": 3, "attn_layer_offset": 1}, 37_838_592),
    ({**Z1, "num_hidden_layers": 8, "hidden_size": 384, "num_attention_heads": 6,
      "num_key_value_heads": 6, "intermediate_size": 900,
      "layers_block_type": ["mamba", "hybrid", "mamba", "mamba", "hybrid", "hybrid", "mamba",
                            "mamba"]}, 23_546_880),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_shared_and_per_call_parts_by_hand(tmp_path: Path) -> None:
    """Zamba2's defaults at two blocks: 54 layers, 9 hybrid, hidden 2,560. A set of weights
    is the attention (q, k and v from 5,120 to 32 heads of 160, the output from 5,120 to
    2,560) with its 5,120-wide norm and the GeGLU MLP of 10,240 with its norm; each call
    holds its MLP adapter (2,560 -> 128 -> 20,480) and its 2,560 x 2,560 projection."""
    s = _read(tmp_path, {**Z2, "num_mem_blocks": 2})
    assert (s.layers, s.shared_blocks, s.shared_block_calls) == (72, 2, 9)
    assert s.hybrid_pattern.count("*-M") == 9 and s.mamba_layers == 54
    one_set = 3 * 5120 * 5120 + 5120 * 2560 + 5120 + 3 * 2560 * 10240 + 2560
    assert shared_block_params(s) == one_set
    assert shared_block_call_params(s) == (0, 128 * (2560 + 20480) + 2560 * 2560)
    one = _read(tmp_path, Z2)
    assert count_params(s).total - count_params(one).total == one_set
    # a token passes through a set's weights at each call: the applied count is the same
    # whatever the number of sets
    pc = count_params(s)
    assert pc.active(s) == pc.total + 7 * one_set == count_params(one).active(one)
    assert forward_flops_per_token(s, 4096) == forward_flops_per_token(one, 4096)
    f = forward_flops_per_token(s, 4096)
    calls_mlp = 9 * (3 * 2560 * 10240 + 128 * (2560 + 20480) + 2560 * 2560)
    assert f.mlp == 2.0 * calls_mlp
    # with adapters on q, k and v, three sets over the nine calls apply as many weights a
    # token as Transformers builds when each call has its own (2,858,040,336 held)
    three = _read(tmp_path, {**Z2, "num_mem_blocks": 3, "use_shared_attention_adapter": True})
    nine = _read(tmp_path, {**Z2, "num_mem_blocks": 9, "use_shared_attention_adapter": True})
    assert count_params(three).active(three) == count_params(nine).total == 3_880_448_016
    assert f.attention_proj == 2.0 * 9 * (3 * 5120 * 5120 + 5120 * 2560)
    # the query, key and value projections read the 5,120-wide input
    assert attention_projections(s) == [("qkv", 3 * 5120, 5120), ("attn_out", 2560, 5120)]
    assert mlp_side_gemms(s, 2) == [("mlp_adapter_down", 64, 2560),
                                            ("mlp_adapter_up", 10240, 128),
                                            ("block_out", 2560, 2560)]
    # each call caches its own keys and values: 9 x 2 x 32 heads x 160 x 2 bytes a token
    assert kv_bytes_per_token(s, 2.0) == 9 * 2 * 32 * 160 * 2


def test_attention_adapters_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, {**Z2, "use_shared_attention_adapter": True})
    # q, k and v each: 5,120 -> 128 -> 5,120, in every one of the 9 calls
    assert shared_block_call_params(s)[0] == 3 * 2 * 5120 * 128
    assert attention_projections(s, 4) == [
        ("qkv", 3 * 5120 // 4, 5120), ("qkv_adapter_down", 3 * 32, 5120),
        ("qkv_adapter_up", 3 * 8 * 160, 128), ("attn_out", 2560, 5120 // 4)]
    plain = _read(tmp_path, Z2)
    delta = forward_flops_per_token(s, 4096).attention_proj \
        - forward_flops_per_token(plain, 4096).attention_proj
    assert delta == 2.0 * 9 * 3 * 2 * 5120 * 128


def test_sharing_changes_memory_not_time(tmp_path: Path) -> None:
    """The same calls with fewer sets of weights: the same work and the same weight reads
    each step (every call reads its set again), less memory."""
    shared = _read(tmp_path, {**Z2, "num_mem_blocks": 2})
    own = dataclasses.replace(shared, shared_blocks=9)
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=8)
    a, b = (estimate_inference(CATALOG, x, H100, cfg) for x in (shared, own))
    assert (a.ttft_s, a.tpot_s) == pytest.approx((b.ttft_s, b.tpot_s), rel=1e-12)
    weights = 7 * shared_block_params(shared) * 2  # bytes, BF16
    assert b.memory["weights"] - a.memory["weights"] == pytest.approx(weights, rel=1e-3)
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=64)
    ta, tb = (estimate_training(CATALOG, x, H100, train) for x in (shared, own))
    assert ta.step_time_s == pytest.approx(tb.step_time_s, rel=1e-3)
    assert ta.memory.weights < tb.memory.weights and ta.memory.optimizer < tb.memory.optimizer


def test_zamba1_reads_its_mixer_as_mamba1(tmp_path: Path) -> None:
    """Zamba-7B-v1: 76 layers, 13 hybrid (the third, then i % 6 == 4 of the rest); its
    two-head Mamba-1 mixer counts as one of 7,424 channels with a step rank of 232."""
    s = _read(tmp_path, Z1)
    assert s.shared_blocks == 1 and s.shared_block_calls == 13 and s.mamba_layers == 76
    assert s.hybrid_pattern.startswith("MM*-M") and s.adapter_rank == 0
    assert s.mamba is not None and (s.mamba.kind, s.mamba.heads, s.mamba.dt_rank) == (
        "mamba1", 7424, 232)
    assert (s.heads, s.d_head, s.attention_in) == (16, 464, 7424)


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(GpuarchError, match="tie_word_embeddings: false is not read"):
        _read(tmp_path, {**Z2, "tie_word_embeddings": False})
    with pytest.raises(GpuarchError, match="layers_block_type: needed for 10 layers"):
        _read(tmp_path, {**Z2, "num_hidden_layers": 10})
    with pytest.raises(GpuarchError, match="layers_block_type: no \"hybrid\" layer"):
        _read(tmp_path, {**SMALL2, "layers_block_type": ["mamba"] * 6})
    with pytest.raises(GpuarchError, match="num_mem_blocks: expected an integer >= 1"):
        _read(tmp_path, {**Z2, "num_mem_blocks": 0})
    with pytest.raises(GpuarchError, match="n_mamba_heads: 7 must divide"):
        _read(tmp_path, {**Z2, "n_mamba_heads": 7})
    with pytest.raises(GpuarchError, match="hidden_act: expected a GELU or SiLU"):
        _read(tmp_path, {**Z2, "hidden_act": "relu"})
    # Transformers' adapters write the attention's input width to the keys and values too
    with pytest.raises(GpuarchError, match="adapter_attention: the query, key and value "
                                           "adapters each write"):
        _read(tmp_path, {**Z2, "num_key_value_heads": 8, "use_shared_attention_adapter": True})
    s = _read(tmp_path, SMALL2)
    with pytest.raises(GpuarchError, match="shared_blocks: the hybrid_pattern must be"):
        dataclasses.replace(s, hybrid_pattern="M*M-M*-M*-", layers=10)
    with pytest.raises(GpuarchError, match="shared_blocks: 4 sets of weights for 3 calls"):
        dataclasses.replace(s, shared_blocks=4)
    with pytest.raises(GpuarchError, match="attention_input / adapter_rank / "
                                           "adapter_attention: only with shared_blocks"):
        dataclasses.replace(s, shared_blocks=0)
    with pytest.raises(GpuarchError, match="sliding_window: not with shared_blocks"):
        dataclasses.replace(s, sliding_window=128)


@pytest.mark.parametrize("argv", [
    ["estimate", "train", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
     "--pp", "2"],
    ["estimate", "train", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
     "--lora-rank", "16"],
    ["estimate", "train", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
     "--launch", "megatron"],
    ["estimate", "infer", "--gpus", "2", "--pp", "2", "--input-len", "512",
     "--output-len", "64", "--batch", "1"],
])
def test_unpriced_layouts_are_usage_errors(tmp_path: Path, argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, SMALL2)
    assert main([*argv, "--model", str(path), "--gpu", "h100"]) == 2
    err = capsys.readouterr().err
    assert "shared transformer blocks" in err and "Traceback" not in err


def test_listing_and_json_round_trip(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {**SMALL2, "use_shared_attention_adapter": True}
    s = _read(tmp_path, cfg)
    raw = {k: v for k, v in json.loads(to_json(s)).items() if v is not None}
    assert shape_from_mapping(raw, "model") == s
    assert main(["models", str(write_config(tmp_path, cfg))]) == 0
    out = capsys.readouterr().out
    assert "applied per token (a shared block's at each call)" in out
    assert ("shared        each attention and MLP pair a call of a shared block (2 sets of "
            "weights, taken in turn), its attention reading 512 wide") in out
    assert "LoRA adapters of rank 128 a call on the query, key and value projections" in out


def test_estimates_run_on_the_defaults(tmp_path: Path) -> None:
    for cfg in (Z2, Z1):
        s = _read(tmp_path, cfg)
        r = estimate_inference(CATALOG, s, H100, InferenceConfig(input_len=1024,
                                                                  output_len=128, batch=4))
        assert r.fits_in_memory and r.ttft_s > 0 and r.tpot_s > 0
        t = estimate_training(CATALOG, s, H100, TrainingConfig(gpus=8, seq_len=4096,
                                                               global_batch=64))
        assert t.step_time_s > 0


def test_the_training_advisor_offers_no_pipeline(tmp_path: Path) -> None:
    """The advisor's layouts for a model of shared blocks keep PP 1 (its estimate refuses
    more); the same model's pattern without sharing may be cut into stages."""
    from gpuarch.advise.train import TrainingSearch, _layouts

    s = _read(tmp_path, {**Z2, "num_mem_blocks": 2})
    search = TrainingSearch(tokens=1e9, max_gpus=64)
    assert set(_layouts(s, search, 8, True)["pp"]) == {1}
    plain = dataclasses.replace(s, shared_blocks=0, attention_input=0, adapter_rank=0)
    assert max(_layouts(plain, search, 8, True)["pp"]) > 1


def test_a_draft_and_mtp_blocks_are_plain_layers(tmp_path: Path) -> None:
    """Speculative decoding's draft and training's MTP blocks take a plain layer of the
    model's attention and MLP sizes (no sharing, adapters or wide input): they run."""
    s = _read(tmp_path, {**Z2, "num_mem_blocks": 2, "use_shared_attention_adapter": True})
    assert_draft_and_mtp_run(CATALOG, s, H100)
