"""Tencent's Hy4 (``hy_v4``, Hy4-preview's sizes; ``hy_v4_vl_text``, the language model of
Hy4 VL, read alone or through a ``hy_v4_vl`` checkpoint's text_config): DeepSeek-V3.2's
latent attention with its indexer in some layers, an output gate a value channel, a learned
sink a head, and independent hyper-connections (iHC) around every block. Counts are pinned
to the models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``); the hyper-connections, sinks and gates are also
counted by hand."""

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
from gpuarch.perf.roofline import Gemm, hyper_connection_ops
from gpuarch.workloads.params import attention_params, count_params, hyper_connection_params
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")
H200 = CATALOG.product("h200-sxm-141gb")

# a small Hy4: 7 layers, 8 experts of 64, an indexer of 2 heads (the ids Transformers needs
# inside the small vocabulary)
SMALL = {"model_type": "hy_v4", "vocab_size": 1000, "hidden_size": 256,
         "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 7,
         "num_attention_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2,
         "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
         "qk_rope_head_dim": 8, "v_head_dim": 16, "index_n_heads": 2, "index_head_dim": 16,
         "index_topk": 32, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "hy_v4"}, 58_278_193_133),  # HYV4Config's defaults (Hy4-preview)
    ({"model_type": "hy_v4_vl_text"}, 769_907_389_085),  # HYV4VLTextConfig's defaults
    (SMALL, 4_202_669),
    ({**SMALL, "indexer_types": ["full", "full", "shared", "full", "shared", "shared", "full"],
      "mlp_layer_types": ["dense", "sparse", "dense", "sparse", "sparse", "sparse", "sparse"]},
     4_158_157),
    ({**SMALL, "hc_mult": 2, "attention_bias": True, "n_shared_experts": 2,
      "tie_word_embeddings": True}, 4_154_955),
    ({**SMALL, "n_shared_experts": 0, "hc_mult": 1, "swiglu_limit": 0.0}, 3_796_310),
    ({**SMALL, "num_hidden_layers": 1}, 1_002_909),
    ({**SMALL, "mlp_layer_types": ["dense"] * 7}, 3_895_469),
    # Hy4 VL's wrapper: its language model counted, the vision tower not
    ({"model_type": "hy_v4_vl", "text_config": {
        **SMALL, "model_type": "hy_v4_vl_text",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "mrope_section": [2, 1, 1]}}}, 4_202_669),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_hyper_connections_sinks_and_gates_by_hand(tmp_path: Path) -> None:
    """Hy4-preview: each of 34 layers' two blocks projects 4 streams x 2816 to 8 logits (a
    read and a write weight a stream) with a bias a logit and two scales; the last mix 4
    logits, 4 biases, one scale. DeepSeek-V4's mHC would make (2 + 4) x 4 = 24 logits a
    block and carry three scales. Every layer's attention has a sink a head (32) and a gate
    of 2816 x 32 x 256; 10 of the 34 layers (the first and every fourth from the second)
    run an indexer."""
    s = _read(tmp_path, {"model_type": "hy_v4"})
    assert (s.hyper_connections, s.independent_hyper_connections) == (4, True)
    assert s.hyper_connection_logits == 8
    assert hyper_connection_params(s) == 68 * (8 * 4 * 2816 + 8 + 2) + 4 * 4 * 2816 + 4 + 1 \
        == 6_173_357
    mhc = dataclasses.replace(s, independent_hyper_connections=False)
    assert hyper_connection_params(mhc) == 68 * (24 * 4 * 2816 + 24 + 3) + 4 * 4 * 2816 + 5
    assert s.attention_sinks and s.attention_gate and s.glu_limit == 10.0
    no_sinks = dataclasses.replace(s, attention_sinks=False)
    assert attention_params(s) - attention_params(no_sinks) == 32
    no_gate = dataclasses.replace(s, attention_gate=False)
    assert attention_params(s) - attention_params(no_gate) == 2816 * 32 * 256
    assert (s.indexer_layers, s.attention_layers, s.moe_layers) == (10, 34, 33)
    # the mixing GEMM: 8 rows (logits) from 4 x 2816 a token, twice a layer
    mixes = [op for op in hyper_connection_ops(100, s) if isinstance(op, Gemm)]
    assert [(op.m, op.n, op.k) for op in mixes] == [(100, 8, 4 * 2816)] * 2


def test_read_choices(tmp_path: Path) -> None:
    s = _read(tmp_path, {**SMALL, "swiglu_limit": -1.0, "hc_mult": 2,
                         "indexer_types": ["full"] + ["shared"] * 6})
    assert s.glu_limit == 0.0 and s.hyper_connections == 2 and s.indexer_layers == 1
    with pytest.raises(GpuarchError, match="swiglu_limit: expected a number, got 'x'"):
        _read(tmp_path, {**SMALL, "swiglu_limit": "x"})
    with pytest.raises(GpuarchError, match="indexer_types: the first layer shares"):
        _read(tmp_path, {**SMALL, "indexer_types": ["shared"] * 7})
    with pytest.raises(GpuarchError, match="hc_mult: expected an integer"):
        _read(tmp_path, {**SMALL, "hc_mult": 2.5})


def test_shape_checks(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="independent_hyper_connections: needs "
                                           "hyper_connections"):
        dataclasses.replace(s, hyper_connections=0)


def test_a_wrapper_without_its_text_config_says_so(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, {"model_type": "hy_v4_vl"})
    assert main(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert "('hy_v4_vl_text') is read from its text_config" in err
    assert "Traceback" not in err


def test_estimates_run_and_say_what_they_assumed(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "hy_v4"})
    served = estimate_inference(CATALOG, s, H200, InferenceConfig(
        input_len=2048, output_len=512, batch=32))
    assert served.fits_in_memory and served.tpot_s > 0
    assert served.assumptions["hyper_connections"] == {
        "streams": 4, "independent": True, "logits_per_block": 8}
    trained = estimate_training(CATALOG, s, H100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, ep=8, zero=2))
    assert trained.step_time_s > 0
    assert "independent (Hy4's iHC)" in trained.assumptions["hyper_connections"]
    # the streams' mixing costs time: the same model with a plain residual is faster
    plain = dataclasses.replace(s, hyper_connections=0, independent_hyper_connections=False)
    assert estimate_training(CATALOG, plain, H100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, ep=8, zero=2)).step_time_s \
        < trained.step_time_s
