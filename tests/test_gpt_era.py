"""The GPT-2-era families read from config.json: OPT (``opt``), MPT (``mpt``), GPTBigCode
(``gpt_bigcode``: StarCoder, SantaCoder) and GPT-Neo (``gpt_neo``). Counts are pinned to the
models Hugging Face Transformers 5.25.0 builds on the meta device
(``scripts/params_vs_transformers.py``) and worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import FfnKind, Position
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

# OPT-66B's sizes (Zhang et al., "OPT", arXiv 2205.01068, Table 1: 64 layers, 72 heads,
# a width of 9,216), its FFN four times that, the rest OPTConfig's defaults
OPT_66B = {"model_type": "opt", "hidden_size": 9216, "num_hidden_layers": 64,
           "num_attention_heads": 72, "ffn_dim": 36864, "word_embed_proj_dim": 9216}
TINY_OPT = {"model_type": "opt", "enable_bias": False, "hidden_size": 512,
            "num_hidden_layers": 3, "num_attention_heads": 8, "ffn_dim": 2048,
            "tie_word_embeddings": False}
# a 30B-class MPT config (48 layers of 7,168, 64 heads, a vocabulary of 50,432, 8,192
# tokens), with the keys Transformers' port requires at their only values
MPT_30B = {"model_type": "mpt", "d_model": 7168, "n_heads": 64, "n_layers": 48,
           "max_seq_len": 8192, "vocab_size": 50432, "expansion_ratio": 4, "no_bias": True,
           "attn_config": {"alibi": True, "attn_type": "multihead_attention"}}
TINY_BIGCODE = {"model_type": "gpt_bigcode", "multi_query": False, "n_embd": 512,
                "n_layer": 3, "n_head": 8, "n_inner": 1024, "tie_word_embeddings": False}
TINY_NEO = {"model_type": "gpt_neo", "hidden_size": 512, "num_layers": 6, "num_heads": 8,
            "attention_types": [[["global"], 2], [["local"], 4]], "intermediate_size": 1536}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device
    ({"model_type": "opt"}, 125_239_296),  # OPTConfig's defaults: OPT-125m
    (OPT_66B, 65_719_701_504),
    (TINY_OPT, 61_972_480),
    ({"model_type": "mpt"}, 1_311_213_568),
    (MPT_30B, 29_957_200_896),
    ({"model_type": "gpt_bigcode"}, 111_446_784),  # one key-value head (multi_query)
    (TINY_BIGCODE, 58_296_832),
    ({"model_type": "gpt_neo"}, 1_315_575_808),  # GPT-Neo 1.3B
    (TINY_NEO, 42_537_472),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_opt_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "opt"})
    assert s.ffn_kind is FfnKind.RELU and s.position is Position.LEARNED
    h, f = 768, 3072
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h  # biases, LayerNorms
    # the position table has 2 rows beyond max_position_embeddings (OPT's offset)
    assert count_params(s).total == 12 * layer + 2 * h + 50272 * h + (2048 + 2) * h
    # without biases: none on the projections, the LayerNorms keep theirs
    tiny = _read(tmp_path, TINY_OPT)
    h, f = 512, 2048
    assert count_params(tiny).total == 3 * (4 * h * h + 2 * h * f + 4 * h) + 2 * h \
        + 2 * 50272 * h + 2050 * h


def test_layers_as_each_family_has_them(tmp_path: Path) -> None:
    mpt = _read(tmp_path, MPT_30B)
    assert (mpt.position, mpt.context_window, mpt.d_ffn) == (Position.ALIBI, 8192, 4 * 7168)
    bigcode = _read(tmp_path, {"model_type": "gpt_bigcode"})
    assert bigcode.n_kv_heads == 1 and _read(tmp_path, TINY_BIGCODE).n_kv_heads == 8
    neo = _read(tmp_path, TINY_NEO)
    # four local layers of six, within GPT-Neo's window of 256
    assert (neo.sliding_window, neo.sliding_layers) == (256, 4)
    default_neo = _read(tmp_path, {"model_type": "gpt_neo"})
    assert (default_neo.sliding_window, default_neo.sliding_layers) == (256, 12)


@pytest.mark.parametrize(("cfg", "message"), [
    ({"model_type": "opt", "word_embed_proj_dim": 512, "hidden_size": 1024},
     r"word_embed_proj_dim: 512 is not read"),
    ({"model_type": "opt", "do_layer_norm_before": False},
     r"do_layer_norm_before: false is not read"),
    ({"model_type": "opt", "activation_function": "silu"},
     r"activation_function: expected one of relu, gelu"),
    ({**MPT_30B, "expansion_ratio": 8}, r"expansion_ratio: only 4 is read"),
    ({**MPT_30B, "no_bias": False}, r"no_bias: only True is read"),
    ({**MPT_30B, "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8}},
     r"attn_config\.attn_type: only 'multihead_attention' is read"),
    ({**MPT_30B, "attn_config": {"alibi": False}}, r"attn_config\.alibi: only True"),
    ({**TINY_NEO, "attention_types": [[["global", "local"], 2]]},
     r"attention_types: expected \[\[kinds, repeats\], \.\.\.\] expanding to 6"),
    ({**TINY_NEO, "attention_types": [[["sparse"], 6]]}, r"attention_types: expected"),
])
def test_refusals(tmp_path: Path, cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


@pytest.mark.parametrize("cfg", [TINY_OPT, MPT_30B, TINY_BIGCODE, TINY_NEO])
def test_estimates_run(tmp_path: Path, cfg: dict[str, Any]) -> None:
    s = _read(tmp_path, cfg)
    gpu = CATALOG.product("h100")
    train = estimate_training(CATALOG, s, gpu, TrainingConfig(seq_len=1024, global_batch=16,
                                                              micro_batch=1, gpus=8))
    assert train.step_time_s > 0 and 0 < train.mfu < 1
    infer = estimate_inference(CATALOG, s, gpu, InferenceConfig(input_len=512, output_len=64,
                                                                batch=4))
    assert infer.tpot_s > 0 and infer.ttft_s > 0
