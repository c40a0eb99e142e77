"""Workloads: exact parameter counts against published totals, FLOPs, presets, HF import."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.errors import GpuarchError, UnknownNameError
from gpuarch.units import Unit, from_si
from gpuarch.workloads import (
    FfnKind,
    NormKind,
    Position,
    QkNorm,
    TransformerShape,
    count_params,
    forward_flops_per_token,
    load_presets,
    preset,
    training_flops_per_token,
)
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.mtp import mtp_block_params
from gpuarch.workloads.shape import MlaShape

PRESETS = load_presets().by_name


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if p.params is not None])
def test_exact_parameter_counts(name: str) -> None:
    """Counts match the published checkpoint totals to the last digit (e.g. Llama-2-7B =
    6,738,415,616, Llama-3.1-405B = 405,853,388,800, Mixtral-8x7B = 46,702,792,704; the
    sources are in workloads/data/models.toml)."""
    p = PRESETS[name]
    assert count_params(p.shape).total == p.params


@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if p.params_billions])
def test_rounded_parameter_counts(name: str) -> None:
    """Where only a rounded total is published (GPT-3 175B, Nemotron-4 340B, DeepSeek-V3
    671B), the count is within 0.5%."""
    p = PRESETS[name]
    assert p.params_billions is not None
    assert count_params(p.shape).total / 1e9 == pytest.approx(p.params_billions, rel=5e-3)


def test_moe_active_parameters() -> None:
    """Mixtral-8x7B activates about 12.9B of 46.7B; DeepSeek-V3 about 37B of 671B."""
    mixtral = preset("mixtral-8x7b").shape
    assert count_params(mixtral).active(mixtral) == pytest.approx(12.88e9, rel=1e-3)
    ds = preset("deepseek-v3").shape
    assert count_params(ds).active(ds) / 1e9 == pytest.approx(37, rel=0.03)
    # Llama 4 Maverick: "17B active, 400B total" (model card); experts on every other layer
    maverick = preset("llama-4-maverick").shape
    assert count_params(maverick).active(maverick) / 1e9 == pytest.approx(17, rel=0.03)
    assert maverick.moe_layers == 24


def test_flops_match_the_megatron_formula() -> None:
    """For a GPT shape (GELU, 4h MLP, no GQA) forward FLOPs per token equal Megatron-LM's
    24 l h^2 + 4 l s h + 2 h V (Narayanan et al. 2021, eq. 3 divided by 3 B s), up to biases."""
    s = TransformerShape(name="gpt", layers=96, hidden=12288, heads=96, vocab=51200,
                         ffn_kind=FfnKind.GELU)
    seq = 2048
    h, layers, v = s.hidden, s.layers, s.vocab
    expected = 24 * layers * h**2 + 4 * layers * seq * h + 2 * h * v
    assert forward_flops_per_token(s, seq).total == pytest.approx(expected, rel=1e-9)
    assert training_flops_per_token(s, seq) == pytest.approx(3 * expected, rel=1e-9)


@pytest.mark.parametrize(("name", "tflops", "tokens"), [
    # NeMo 24.07 performance table, Nemotron-8B and Nemotron-22B rows on 64 H100: model
    # TFLOP/s per GPU and tokens/s per GPU at sequence length 4,096
    ("nemotron-8b", 653, 12701),
    ("nemotron-22b", 554, 4256),
    # NeMo 25.04 performance summary, DGX-GB200 pre-training table, 'Nemotron-15B' (64 GPUs)
    ("nemotron-4-15b", 1674, 17809),
])
def test_nemotron_recipes_match_nemo_published_flops_per_token(name: str, tflops: int,
                                                              tokens: int) -> None:
    """The launcher shapes with a 256k vocabulary give the model FLOPs per token NeMo's own
    figures imply (the TFLOP/s are rounded to 1 in ~600)."""
    shape = preset(name).shape
    assert training_flops_per_token(shape, 4096) == pytest.approx(tflops * 1e12 / tokens,
                                                                 rel=2e-3)


def test_nemotron_4_15b_has_the_reports_parameter_split() -> None:
    """The Nemotron-4 15B report (arXiv:2402.16819, section 2) gives 12.5 billion
    non-embedding parameters and untied embeddings of its 256,000-entry vocabulary at width
    6,144: the preset's layers hold 12.48 billion, and its embedding and output layer
    2 x 256,000 x 6,144 = 3.15 billion (the report says 3.2)."""
    params = count_params(preset("nemotron-4-15b").shape)
    non_embedding = params.total - params.embedding - params.lm_head
    assert round(non_embedding / 1e9, 1) == 12.5
    assert params.embedding == params.lm_head == 256_000 * 6_144


def test_causal_halves_attention_core_only() -> None:
    """causal=True halves QK^T and AV and nothing else."""
    s = preset("llama-3.1-8b").shape
    full, causal = forward_flops_per_token(s, 8192), forward_flops_per_token(s, 8192,
                                                                             causal=True)
    assert causal.attention_core == full.attention_core / 2
    assert causal.mlp == full.mlp and causal.lm_head == full.lm_head


@given(layers=st.integers(1, 8), heads=st.sampled_from([4, 8, 16]),
       kv=st.sampled_from([1, 2, 4]), width=st.integers(1, 64))
def test_gqa_never_adds_parameters(layers: int, heads: int, kv: int, width: int) -> None:
    """Fewer KV heads never means more parameters or more FLOPs."""
    hidden = heads * width
    mha = TransformerShape(name="a", layers=layers, hidden=hidden, heads=heads, vocab=1000)
    gqa = TransformerShape(name="b", layers=layers, hidden=hidden, heads=heads, kv_heads=kv,
                           vocab=1000)
    assert count_params(gqa).total <= count_params(mha).total
    assert forward_flops_per_token(gqa, 128).total <= forward_flops_per_token(mha, 128).total


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"heads": 0}, "heads: expected an integer from 1 to 16,777,216, got 0"),
        # past int64 in the advisor's NumPy arrays: once an OverflowError with a traceback
        ({"ffn_hidden": 10**20}, "ffn_hidden: expected an integer from 0 to 16,777,216, got "
                                 "100000000000000000000"),
        ({"layers": 2**24 + 1}, "layers: expected an integer from 1 to 16,777,216"),
        ({"kv_heads": 3}, "kv_heads: 3 must divide heads 32"),
        ({"heads": 30}, "heads: 30 does not divide hidden 4096"),
        ({"experts": 8, "experts_per_token": 9}, "experts_per_token: expected 1..8"),
        ({"experts_per_token": 2}, "need experts > 0"),
    ],
)
def test_bad_shapes_name_the_field(kwargs: dict[str, int], message: str) -> None:
    """Invalid shapes raise errors that name the field and value."""
    base = {"name": "x", "layers": 2, "hidden": 4096, "heads": 32, "vocab": 1000}
    with pytest.raises(GpuarchError, match=message):
        TransformerShape(**{**base, **kwargs})  # type: ignore[arg-type]


def test_preset_lookup() -> None:
    """Presets resolve by name or alias; unknown names get suggestions."""
    assert preset("Llama-3-70B").shape.name == "llama-3.1-70b"
    with pytest.raises(UnknownNameError, match="did you mean 'llama-2-7b'"):
        preset("llama-2-7")


def _write(tmp_path: Path, cfg: dict[str, object]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_hf_llama_config_matches_preset(tmp_path: Path) -> None:
    """A Llama-2-7B config.json gives the same 6,738,415,616 parameters as the preset."""
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
           "vocab_size": 32000, "tie_word_embeddings": False, "hidden_act": "silu"}
    shape = shape_from_hf_config(_write(tmp_path, cfg))
    assert count_params(shape).total == 6_738_415_616


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("llama-2-7b", 4096),  # meta-llama/Llama-2-7b-hf config.json max_position_embeddings
        ("llama-3.1-70b", 131072),  # meta-llama/Llama-3.1-70B config.json
        ("qwen3-235b-a22b", 40960),  # Qwen/Qwen3-235B-A22B config.json
        ("deepseek-v3", 163840),  # deepseek-ai/DeepSeek-V3 config.json
        ("llama-4-maverick", 1048576),  # Llama-4-Maverick config.json, text_config
        ("gpt3-175b", 2048),  # GPT-3 paper: n_ctx 2048, the learned position table
        ("nemotron-8b", 0),  # a training recipe: no configured context published
    ],
)
def test_preset_context_windows(name: str, tokens: int) -> None:
    assert preset(name).shape.positions == tokens


def test_hf_config_context_window(tmp_path: Path) -> None:
    """max_position_embeddings is the configured context; absent, none is known."""
    cfg = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
           "vocab_size": 32000, "max_position_embeddings": 32768}
    assert shape_from_hf_config(_write(tmp_path, cfg)).positions == 32768
    del cfg["max_position_embeddings"]
    assert shape_from_hf_config(_write(tmp_path, cfg)).positions == 0


def test_hf_mixtral_and_deepseek(tmp_path: Path) -> None:
    """MoE and MLA fields are read (Mixtral 46.7B; DeepSeek-V3 671B)."""
    mixtral = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
               "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2}
    assert count_params(shape_from_hf_config(_write(tmp_path, mixtral))).total \
        == 46_702_792_704
    ds = {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
          "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_hidden_layers": 61,
          "num_key_value_heads": 128, "vocab_size": 129280, "n_routed_experts": 256,
          "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
          "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
          "qk_rope_head_dim": 64, "v_head_dim": 128}
    shape = shape_from_hf_config(_write(tmp_path, ds))
    assert count_params(shape).total == count_params(preset("deepseek-v3").shape).total
    assert (shape.expert_groups, shape.groups_per_token) == (0, 0)  # none given
    grouped = shape_from_hf_config(_write(tmp_path, {**ds, "n_group": 8, "topk_group": 4}))
    ds3 = preset("deepseek-v3").shape
    assert (grouped.expert_groups, grouped.groups_per_token) == (8, 4) \
        == (ds3.expert_groups, ds3.groups_per_token)
    # Kimi K2's n_group 1 / topk_group 1 is plain top-k routing
    plain = shape_from_hf_config(_write(tmp_path, {**ds, "n_group": 1, "topk_group": 1}))
    assert plain.expert_groups == 0


@pytest.mark.parametrize(("groups", "per_token", "match"), [
    (7, 2, "expert_groups: 7 must divide experts 256"),
    (8, 9, r"groups_per_token: expected 1\.\.8 \(expert_groups\), got 9"),
    (8, 0, r"groups_per_token: expected 1\.\.8"),
    (0, 4, r"groups_per_token: expected 1\.\.0")])
def test_routing_groups_are_checked(groups: int, per_token: int, match: str) -> None:
    """Group-limited routing needs groups that divide the experts and 1..groups per token."""
    with pytest.raises(GpuarchError, match=match):
        dataclasses.replace(preset("deepseek-v3").shape, expert_groups=groups,
                            groups_per_token=per_token)


def test_kimi_k2_is_deepseek_v3_shaped(tmp_path: Path) -> None:
    """Kimi K2: DeepSeek-V3's architecture with 384 experts, 64 heads, one leading dense
    layer and a 163,840-token vocabulary; the model card's "1 trillion total parameters, 32
    billion activated" (rounded) against the exact count (1,026.4B, 32.9B), and its
    config.json (model_type kimi_k2) reads into the preset's shape, MLA included."""
    k2 = preset("kimi-k2").shape
    counts = count_params(k2)
    assert counts.total == 1_026_408_209_408
    assert counts.total / 1e12 == pytest.approx(1.0, rel=0.03)
    assert counts.active(k2) / 1e9 == pytest.approx(32, rel=0.03)
    cfg = {"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
           "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
           "num_attention_heads": 64, "num_hidden_layers": 61, "num_key_value_heads": 64,
           "vocab_size": 163840, "n_routed_experts": 384, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "first_k_dense_replace": 1, "q_lora_rank": 1536,
           "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
           "v_head_dim": 128, "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, cfg))
    assert shape.mla == k2.mla and count_params(shape).total == counts.total


def test_hf_gpt_oss_and_qwen3_moe(tmp_path: Path) -> None:
    """GPT-OSS's biases and alternating 128-token windows (from layer_types) and Qwen3 MoE's
    experts are read; the shapes match the presets (116.8B and 30.5B parameters). GPT-OSS's
    count holds its attention sinks (a logit a head a layer, 36 x 64) and its routers' biases
    (36 x 128): 116,829,156,672, what Transformers 5.25 builds from openai/gpt-oss-120b's
    config.json (scripts/params_vs_transformers.py), and the model card's 116.83B; the sinks
    are no GEMM's weights, so not in its FLOPs."""
    gpt_oss = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
               "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
               "num_hidden_layers": 36, "vocab_size": 201088, "num_local_experts": 128,
               "num_experts_per_tok": 4, "attention_bias": True, "sliding_window": 128,
               "layer_types": ["sliding_attention", "full_attention"] * 18,
               "swiglu_limit": 7.0, "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, gpt_oss))
    assert (shape.sliding_window, shape.windowed_layers) == (128, 18)
    assert shape.glu_limit == preset("gpt-oss-120b").shape.glu_limit == 7.0
    assert count_params(shape).total == count_params(preset("gpt-oss-120b").shape).total \
        == 116_829_156_672
    bare = dataclasses.replace(shape, attention_sinks=False, router_bias=False)
    assert count_params(shape).total - count_params(bare).total == 36 * 64 + 36 * 128
    assert forward_flops_per_token(shape, 4096).attention_proj \
        == forward_flops_per_token(bare, 4096).attention_proj
    with pytest.raises(GpuarchError, match="swiglu_limit: expected a number >= 0, got 'x'"):
        shape_from_hf_config(_write(tmp_path, {**gpt_oss, "swiglu_limit": "x"}))
    with pytest.raises(GpuarchError, match="glu_limit: expected a number >= 0, got -1"):
        dataclasses.replace(shape, glu_limit=-1)
    qwen = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
            "moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4,
            "head_dim": 128, "num_hidden_layers": 48, "vocab_size": 151936,
            "num_experts": 128, "num_experts_per_tok": 8, "sliding_window": None,
            "use_sliding_window": False, "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, qwen))
    assert shape.windowed_layers == 0 and shape.qk_norm is QkNorm.HEAD
    assert count_params(shape).total == count_params(preset("qwen3-30b-a3b").shape).total
    # a window without layer_types covers every layer; use_sliding_window false disables it
    mistral = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
               "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
               "vocab_size": 32000, "sliding_window": 4096}
    assert shape_from_hf_config(_write(tmp_path, mistral)).windowed_layers == 32
    off = {**mistral, "use_sliding_window": False}
    assert shape_from_hf_config(_write(tmp_path, off)).windowed_layers == 0
    with pytest.raises(GpuarchError, match="sliding_window: expected a positive integer"):
        shape_from_hf_config(_write(tmp_path, {**mistral, "sliding_window": "wide"}))


@pytest.mark.parametrize(("seq", "window"), [(64, 16), (16, 64), (100, 7), (33, 33)])
def test_windowed_attention_flops_match_a_brute_force_count(seq: int, window: int) -> None:
    """Causal sliding-window attention: query i sees min(i + 1, window) positions. The
    workloads' count (a continuous approximation) agrees with the discrete sum to within
    half a position per query, and counted in full every query sees min(seq, window)."""
    base = TransformerShape(name="w", layers=2, hidden=64, heads=4, vocab=100)
    windowed = dataclasses.replace(base, sliding_window=window, sliding_layers=1)
    per_key = 2.0 * base.heads * 2 * base.d_head  # QK^T and AV for one query-key pair
    exact_keys = sum(min(i + 1, window) for i in range(seq)) / seq
    for causal, keys in ((True, exact_keys), (False, min(seq, window))):
        full = forward_flops_per_token(base, seq, causal=causal).attention_core
        mixed = forward_flops_per_token(windowed, seq, causal=causal).attention_core
        assert mixed - full / 2 == pytest.approx(keys * per_key, abs=0.5 * per_key)


LLAMA4_TEXT = {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
               "intermediate_size": 8192, "intermediate_size_mlp": 16384,
               "num_attention_heads": 40, "num_hidden_layers": 48, "num_key_value_heads": 8,
               "num_experts_per_tok": 1, "vocab_size": 202048, "tie_word_embeddings": False,
               "model_type": "llama4_text"}


def test_hf_glm4_moe(tmp_path: Path) -> None:
    """GLM-4.5's family (model_type glm4_moe): DeepSeek-style experts (routed, one shared,
    the first layers dense) under grouped-query attention with biased projections and a
    head width of its own. With GLM-4.5-Air's config.json values (zai-org/GLM-4.5-Air: 46
    layers, the first dense; 128 experts of 1,408, top 8, one shared; 96 heads of 128, 8 KV
    heads) the count is, to the parameter: embedding and LM head 2 x 151,552 x 4,096;
    attention 46 x (4,096 x 12,288 x 2 + 4,096 x 1,024 x 2 + 12,288 + 2,048); the dense
    layer 3 x 4,096 x 10,944; experts 45 x 128 x 3 x 4,096 x 1,408, the shared one 45 x 3 x
    4,096 x 1,408, routers 45 x 128 x 4,096; norms 46 x 2 x 4,096 + 4,096. That is within 1%
    of the model card's "106B total parameters" (its multi-token-prediction layer, which
    the config adds as num_nextn_predict_layers, is not part of the model shape)."""
    air = {"model_type": "glm4_moe", "architectures": ["Glm4MoeForCausalLM"],
           "hidden_size": 4096, "intermediate_size": 10944, "moe_intermediate_size": 1408,
           "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 46, "first_k_dense_replace": 1, "n_routed_experts": 128,
           "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 1, "topk_group": 1,
           "attention_bias": True, "use_qk_norm": False, "partial_rotary_factor": 0.5,
           "num_nextn_predict_layers": 1, "vocab_size": 151552, "tie_word_embeddings": False,
           "max_position_embeddings": 131072}
    shape = shape_from_hf_config(_write(tmp_path, air))
    assert (shape.experts, shape.experts_per_token, shape.shared_experts) == (128, 8, 1)
    assert (shape.dense_layers, shape.moe_ffn_hidden, shape.head_dim) == (1, 1408, 128)
    assert shape.qkv_bias and not shape.bias and shape.expert_groups == 0
    attention = 46 * (4096 * 12288 * 2 + 4096 * 1024 * 2 + 12288 + 2048)
    expected = (2 * 151552 * 4096 + attention + 3 * 4096 * 10944
                + 45 * 128 * 3 * 4096 * 1408 + 45 * 3 * 4096 * 1408 + 45 * 128 * 4096
                + 46 * 2 * 4096 + 4096)
    assert count_params(shape).total == expected == 106_852_245_504
    assert from_si(expected, Unit.BILLION) == pytest.approx(106, rel=0.01)
    # GLM-4.5 proper sets use_qk_norm: a norm over each head's queries and keys a layer
    normed = shape_from_hf_config(_write(tmp_path, {**air, "use_qk_norm": True}))
    assert normed.qk_norm is QkNorm.HEAD and shape.qk_norm is QkNorm.NONE
    assert count_params(normed).total == expected + 46 * 2 * 128


# MiniMax-M2's config.json keys (MiniMaxAI/MiniMax-M2, as Transformers' MiniMaxM2Config
# reads them; the MTP, routing and rotary keys are the released checkpoint's)
MINIMAX_M2 = {"model_type": "minimax_m2", "architectures": ["MiniMaxM2ForCausalLM"],
              "hidden_size": 3072, "intermediate_size": 1536, "num_hidden_layers": 62,
              "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
              "num_local_experts": 256, "num_experts_per_tok": 8,
              "shared_intermediate_size": 0, "scoring_func": "sigmoid",
              "use_routing_bias": True, "use_qk_norm": True, "qk_norm_type": "per_layer",
              "rotary_dim": 64, "use_mtp": True, "num_mtp_modules": 3,
              "attn_type_list": [1] * 62, "vocab_size": 200064,
              "tie_word_embeddings": False, "max_position_embeddings": 196608}


def test_hf_minimax_m2(tmp_path: Path) -> None:
    """MiniMax-M2 (model_type minimax_m2): Mixtral's experts (intermediate_size is the
    expert width; no shared expert, no dense layer) under sigmoid routing, and FlexOlmo's
    attention, whose q_norm and k_norm span the whole projections. To the parameter:
    embedding and LM head 2 x 200,064 x 3,072; attention 62 x (3,072 x 6,144 x 2 + 3,072 x
    1,024 x 2); experts 62 x 256 x 3 x 3,072 x 1,536; routers 62 x 256 x 3,072; norms 62 x
    (2 x 3,072 + 6,144 + 1,024) + 3,072 (the routing bias is a buffer in Transformers'
    MiniMaxM2SparseMoeBlock). That is within 1% of the README's "230 billion total
    parameters with 10 billion active" (MiniMax-AI/MiniMax-M2); active without the
    embedding 10.4 billion. The preset is the same shape."""
    shape = shape_from_hf_config(_write(tmp_path, MINIMAX_M2))
    assert (shape.experts, shape.experts_per_token, shape.shared_experts) == (256, 8, 0)
    assert shape.d_expert == 1536 and shape.dense_layers == 0 and shape.qk_norm is QkNorm.FULL
    expected = (2 * 200064 * 3072 + 62 * (3072 * 6144 * 2 + 3072 * 1024 * 2)
                + 62 * 256 * 3 * 3072 * 1536 + 62 * 256 * 3072
                + 62 * (2 * 3072 + 6144 + 1024) + 3072)
    counted = count_params(shape)
    assert counted.total == expected == 228_689_748_992
    assert from_si(expected, Unit.BILLION) == pytest.approx(230, rel=0.01)
    active = counted.active(shape) - counted.embedding
    assert from_si(active, Unit.BILLION) == pytest.approx(10, rel=0.05)
    assert count_params(preset("minimax-m2").shape).total == expected
    assert preset("minimax-m2").shape.qk_norm is QkNorm.FULL


@pytest.mark.parametrize(("key", "value", "named"), [
    ("attn_type_list", [0] * 7 + [1], "attn_type_list"),  # MiniMax-01's lightning layers
    ("qk_norm_type", "per_head", "qk_norm_type"),
])
def test_hf_minimax_m2_refuses_what_it_cannot_hold(tmp_path: Path, key: str, value: object,
                                                   named: str) -> None:
    with pytest.raises(GpuarchError, match=named):
        shape_from_hf_config(_write(tmp_path, {**MINIMAX_M2, key: value}))


def test_hf_qwen2_moe(tmp_path: Path) -> None:
    """Qwen2-MoE (Qwen1.5-MoE-A2.7B's config.json values, Qwen/Qwen1.5-MoE-A2.7B): 60
    experts of 1,408, top 4, and one shared expert of 5,632 = 4 routed widths, on every
    layer; biased QKV. To the parameter: embedding and LM head 2 x 151,936 x 2,048;
    attention 24 x (4 x 2,048 x 2,048 + 3 x 2,048); experts 24 x 60 x 3 x 2,048 x 1,408;
    shared 24 x 3 x 2,048 x 5,632; routers 24 x 60 x 2,048 and the shared experts' gates 24
    x 2,048; norms 24 x 2 x 2,048 + 2,048: the card's "14.3B", and what Transformers 5.25
    builds from this config (scripts/params_vs_transformers.py). ``decoder_sparse_step`` and
    ``mlp_only_layers`` place dense layers."""
    q = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
         "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
         "shared_expert_intermediate_size": 5632, "num_attention_heads": 16,
         "num_key_value_heads": 16, "num_hidden_layers": 24, "num_experts": 60,
         "num_experts_per_tok": 4, "decoder_sparse_step": 1, "vocab_size": 151936,
         "tie_word_embeddings": False, "use_sliding_window": False}
    shape = shape_from_hf_config(_write(tmp_path, q))
    assert (shape.experts, shape.experts_per_token, shape.shared_experts) == (60, 4, 4)
    assert shape.dense_layers == 0 and shape.qkv_bias
    expected = (2 * 151936 * 2048 + 24 * (4 * 2048 * 2048 + 3 * 2048)
                + 24 * 60 * 3 * 2048 * 1408 + 24 * 3 * 2048 * 5632 + 24 * 60 * 2048
                + 24 * 2048 + 24 * 2 * 2048 + 2048)
    assert shape.shared_expert_gate
    assert count_params(shape).total == expected == 14_315_784_192
    # experts on every second layer, and never on layer 0: layers 1, 3, ..., 23 keep them
    sparse = shape_from_hf_config(_write(tmp_path, {**q, "decoder_sparse_step": 2,
                                                    "mlp_only_layers": [0]}))
    assert sparse.dense_layers == 12
    with pytest.raises(GpuarchError, match=r"shared_expert_intermediate_size: expected a "
                                           r"multiple of moe_intermediate_size \(1408\)"):
        shape_from_hf_config(_write(tmp_path, {**q, "shared_expert_intermediate_size": 5000}))


def test_hf_qwen2_57b_a14b_gives_the_preset(tmp_path: Path) -> None:
    """Qwen/Qwen2-57B-A14B's config.json values (64 experts of 2,560, top 8, a shared expert
    of 20,480 = 8 routed widths, 28 layers, hidden 3,584, 28 heads in 4 KV groups, vocabulary
    151,936) import as the qwen2-57b-a14b preset, 57,408,658,944 parameters (the card's 57B;
    its shared-expert gates, one 3,584-vector a layer, counted)."""
    q = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
         "hidden_size": 3584, "intermediate_size": 18944, "moe_intermediate_size": 2560,
         "shared_expert_intermediate_size": 20480, "num_attention_heads": 28,
         "num_key_value_heads": 4, "num_hidden_layers": 28, "num_experts": 64,
         "num_experts_per_tok": 8, "decoder_sparse_step": 1, "vocab_size": 151936,
         "max_position_embeddings": 131072, "tie_word_embeddings": False,
         "use_sliding_window": False}
    shape = shape_from_hf_config(_write(tmp_path, q))
    expected = preset("qwen2-57b-a14b").shape
    assert dataclasses.replace(shape, name=expected.name) == expected
    assert count_params(shape).total == 57_408_558_592 + 28 * 3584 == 57_408_658_944


def test_hf_llama4_configs(tmp_path: Path) -> None:
    """Llama 4 configs (text_config of a llama4 config.json, as published): Maverick's
    (128 experts on every other layer) gives the preset's shape, 400.7B parameters; Scout's
    (16 experts on every layer) 17.2B active of 107.8B (its model card's 109B total counts
    the vision encoder, which is not a text layer). RoPE layers attend in 8,192-token
    chunks: 36 of 48 (every fourth layer has no RoPE and attends to everything)."""
    maverick_cfg = {"model_type": "llama4", "text_config": {
        **LLAMA4_TEXT, "num_local_experts": 128, "interleave_moe_layer_step": 2}}
    maverick = shape_from_hf_config(_write(tmp_path, maverick_cfg))
    expected = preset("llama-4-maverick").shape
    assert count_params(maverick).total == count_params(expected).total == 400_711_848_960
    assert (maverick.moe_layers, maverick.windowed_layers, maverick.sliding_window) == \
        (expected.moe_layers, expected.windowed_layers, expected.sliding_window) == \
        (24, 36, 8192)
    assert maverick.attention_chunked and expected.attention_chunked
    scout = shape_from_hf_config(_write(tmp_path, {
        **LLAMA4_TEXT, "num_local_experts": 16, "interleave_moe_layer_step": 1}))
    assert scout.moe_layers == 48 and scout.dense_layers == 0
    assert count_params(scout).active(scout) / 1e9 == pytest.approx(17, rel=0.03)
    assert count_params(scout).total / 1e9 == pytest.approx(107.77, rel=1e-3)
    scout_preset = preset("llama-4-scout").shape  # the preset is the config's text model
    assert count_params(scout_preset).total == count_params(scout).total
    assert (scout_preset.windowed_layers, scout_preset.attention_chunked) == \
        (scout.windowed_layers, scout.attention_chunked) == (36, True)
    listed = shape_from_hf_config(_write(tmp_path, {
        **LLAMA4_TEXT, "num_local_experts": 16, "moe_layers": [1, 3],
        "no_rope_layers": [1, 0] * 24}))
    assert listed.moe_layers == 2 and listed.windowed_layers == 24


def test_hf_errors_name_the_file(tmp_path: Path) -> None:
    """Unsupported types, missing keys and bad JSON are errors naming the file."""
    with pytest.raises(GpuarchError, match="model_type 'bert' is not supported"):
        shape_from_hf_config(_write(tmp_path, {"model_type": "bert"}))
    with pytest.raises(GpuarchError, match=r"config.json: missing num_attention_heads"):
        shape_from_hf_config(_write(tmp_path, {"model_type": "llama", "hidden_size": 8}))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(GpuarchError, match="not valid JSON"):
        shape_from_hf_config(bad)
    with pytest.raises(GpuarchError, match="cannot read"):
        shape_from_hf_config(tmp_path / "missing.json")


@pytest.mark.parametrize(("change", "message"), [
    ({"model_type": ["llama"]}, r"model_type \['llama'\] is not supported"),
    ({"hidden_size": "4096"}, r"hidden_size: expected an integer, got '4096'"),
    ({"num_hidden_layers": 10**30}, r"num_hidden_layers: expected at most 16,777,216"),
    ({"tie_word_embeddings": "no"}, r"tie_word_embeddings: expected true or false"),
    ({"kv_lora_rank": "x"}, r"kv_lora_rank: expected an integer, got 'x'"),
    ({"v_head_dim": 0}, r"v_head_dim: expected an integer from 1 to"),
    ({"q_lora_rank": -1}, r"q_lora_rank: expected an integer from 0 to"),
    ({"n_group": "8"}, r"n_group: expected an integer, got '8'"),
])
def test_hf_values_of_the_wrong_kind_name_the_key(tmp_path: Path, change: dict[str, Any],
                                                  message: str) -> None:
    """A config.json value of the wrong type or size is an error naming the key and value:
    strings, lists and out-of-range ranks had ended in a TypeError or ZeroDivisionError
    inside the parser (DeepSeek-V3's latent-attention ranks, its expert groups)."""
    config = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
              "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
              "intermediate_size": 18432, "moe_intermediate_size": 2048,
              "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
              "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
              "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
              "n_group": 8, "topk_group": 4}
    assert shape_from_hf_config(_write(tmp_path, config)).mla is not None
    with pytest.raises(GpuarchError, match=message):
        shape_from_hf_config(_write(tmp_path, {**config, **change}))


@given(seq=st.integers(1, 20_000), window=st.integers(1, 20_000),
       share=st.integers(0, 4), experts=st.sampled_from([0, 8]))
def test_a_window_never_adds_attention_work(seq: int, window: int, share: int,
                                           experts: int) -> None:
    """Limiting some layers to a window never raises the attention FLOPs (causal or counted
    in full), and the layer kinds' shares add up to one."""
    base = TransformerShape(name="w", layers=4, hidden=64, heads=4, vocab=100,
                            experts=experts, experts_per_token=2 if experts else 0,
                            dense_layers=1 if experts else 0)
    windowed = dataclasses.replace(base, sliding_window=window, sliding_layers=share)
    for causal in (True, False):
        assert forward_flops_per_token(windowed, seq, causal=causal).attention_core <= \
            forward_flops_per_token(base, seq, causal=causal).attention_core * (1 + 1e-12)
    assert sum(w for _, _, w, _ in windowed.layer_kinds()) == pytest.approx(1.0)


def test_hf_parallel_attention_families(tmp_path: Path) -> None:
    """GPT-NeoX, GPT-J and Falcon configs read with their attention and MLP side by side.
    GPT-NeoX-20B's config counts 20,554,567,680 parameters, its Hugging Face model card's
    figure (EleutherAI/gpt-neox-20b: biases everywhere, two LayerNorms a layer, the padded
    vocabulary of 50,432, untied embeddings); Falcon's attention is multi-query (7B) or
    grouped (the new decoder architecture of 40B and 180B). GPT-J 6B counts 6,050,882,784
    and Falcon-7B 6,921,720,704, what Transformers 5.25 builds from their configs (one
    LayerNorm a layer; GPT-J's MLP and LM head biases)."""
    neox = {"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
            "num_hidden_layers": 44, "intermediate_size": 24576, "vocab_size": 50432,
            "max_position_embeddings": 2048, "use_parallel_residual": True,
            "tie_word_embeddings": False, "rotary_pct": 0.25}
    shape = shape_from_hf_config(_write(tmp_path, neox))
    assert shape.parallel_attention and shape.bias and shape.norm is NormKind.LAYERNORM
    assert count_params(shape).total == 20_554_567_680
    sequential = shape_from_hf_config(_write(tmp_path, {**neox,
                                                        "use_parallel_residual": False}))
    assert not sequential.parallel_attention and sequential.tp_reductions == 2
    gptj = shape_from_hf_config(_write(tmp_path, {
        "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28,
        "n_positions": 2048, "rotary_dim": 64, "vocab_size": 50400,
        "tie_word_embeddings": False}))
    assert (gptj.parallel_attention, gptj.ffn_hidden, gptj.ffn_kind, gptj.context_window) \
        == (True, 16384, FfnKind.GELU, 2048)
    assert gptj.tp_reductions == 1 and gptj.layer_norms == 1
    assert count_params(gptj).total == 6_050_882_784
    falcon = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
              "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
              "parallel_attn": True, "bias": False, "alibi": False}
    seven = shape_from_hf_config(_write(tmp_path, falcon))
    assert (seven.kv_heads, seven.ffn_hidden, seven.parallel_attention, seven.tied_embeddings) \
        == (1, 4 * 4544, True, True)
    assert seven.shared_norm and count_params(seven).total == 6_921_720_704
    big = shape_from_hf_config(_write(tmp_path, {
        **falcon, "hidden_size": 14848, "num_attention_heads": 232, "num_hidden_layers": 80,
        "new_decoder_architecture": True, "num_kv_heads": 8}))
    assert (big.kv_heads, big.head_dim or big.hidden // big.heads) == (8, 64)
    assert not big.shared_norm  # ln_attn and ln_mlp
    assert shape_from_hf_config(_write(tmp_path, {
        **falcon, "new_decoder_architecture": True, "num_kv_heads": 71,
        "num_ln_in_parallel_attn": 1})).shared_norm  # Falcon2-11B's one
    with pytest.raises(GpuarchError, match="num_ln_in_parallel_attn: expected 1 or 2, got 3"):
        shape_from_hf_config(_write(tmp_path, {**falcon, "num_ln_in_parallel_attn": 3}))
    assert seven.position is Position.ROPE
    assert shape_from_hf_config(_write(tmp_path, {**falcon, "alibi": True})).position \
        is Position.ALIBI
    with pytest.raises(GpuarchError, match=r"parallel_attn: expected true or false, got 1"):
        shape_from_hf_config(_write(tmp_path, {**falcon, "parallel_attn": 1}))


# Gemma 2 report (arXiv 2408.00118) Table 2: non-embedding parameters, which count a norm
# before and after each layer's attention and MLP (four a layer) and the final norm
GEMMA2_NON_EMBEDDING = {"gemma-2-2b": 2024517888, "gemma-2-9b": 8324201984,
                        "gemma-2-27b": 26047480320}


@pytest.mark.parametrize("name", sorted(GEMMA2_NON_EMBEDDING))
def test_gemma2_non_embedding_counts_match_the_report(name: str) -> None:
    shape = preset(name).shape
    pc = count_params(shape)
    assert pc.total - pc.embedding - pc.lm_head == GEMMA2_NON_EMBEDDING[name]
    # the same shape with two norms a layer falls short by two hidden-wide norms a layer
    plain = count_params(dataclasses.replace(shape, sandwich_norms=False)).total
    assert pc.total - plain == 2 * shape.layers * shape.hidden


def test_hf_gemma_configs(tmp_path: Path) -> None:
    """Gemma 2's config.json (google/gemma-2-9b's keys, no tie_word_embeddings: tied by
    default), Gemma 3 1B's (gemma3_text, sliding_window_pattern) and a multimodal Gemma 3 4B
    config whose sparse text_config leaves heads, KV heads, head size and vocabulary to
    Transformers' defaults all read as the presets' shapes."""
    gemma2 = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
              "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 256, "query_pre_attn_scalar": 256, "sliding_window": 4096,
              "vocab_size": 256000, "max_position_embeddings": 8192}
    shape = shape_from_hf_config(_write(tmp_path, gemma2))
    assert shape.ffn_kind is FfnKind.GEGLU and shape.sandwich_norms and shape.tied_embeddings
    assert (shape.sliding_window, shape.windowed_layers) == (4096, 21)  # layers 0, 2, .., 40
    assert shape == dataclasses.replace(preset("gemma-2-9b").shape, name=shape.name)
    gemma3 = {"model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912,
              "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
              "head_dim": 256, "sliding_window": 512, "sliding_window_pattern": 6,
              "max_position_embeddings": 32768, "vocab_size": 262144}
    shape = shape_from_hf_config(_write(tmp_path, gemma3))
    assert shape.windowed_layers == 26 - 4  # layers 5, 11, 17 and 23 are global
    assert shape == dataclasses.replace(preset("gemma-3-1b").shape, name=shape.name)
    # layer_types, where a config lists them, decide
    listed = {**gemma3, "layer_types": ["sliding_attention"] * 20 + ["full_attention"] * 6}
    assert shape_from_hf_config(_write(tmp_path, listed)).windowed_layers == 20
    multimodal = {"model_type": "gemma3", "vision_config": {"hidden_size": 1152},
                  "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                                  "intermediate_size": 10240, "num_hidden_layers": 34,
                                  "sliding_window": 1024}}
    shape = shape_from_hf_config(_write(tmp_path, multimodal))
    # Transformers' default vocabulary (262,208) holds 64 rows more than the text-only count
    assert shape.vocab == 262208 and shape.context_window == 131072
    assert count_params(shape).total - count_params(preset("gemma-3-4b").shape).total \
        == 64 * 2560
    with pytest.raises(GpuarchError, match="text_config: expected an object"):
        shape_from_hf_config(_write(tmp_path, {"model_type": "gemma3", "text_config": [1]}))
    with pytest.raises(GpuarchError, match="sliding_window_pattern: expected a positive"):
        shape_from_hf_config(_write(tmp_path, {**gemma3, "sliding_window_pattern": 0}))


def test_hf_phi3_and_olmo2_configs(tmp_path: Path) -> None:
    """Phi-3-mini's config.json (a 2,047-token window on every layer) gives its published
    3,821,079,552 parameters; OLMo 2 13B's (whole-projection query and key norms) its
    safetensors index's 13,716,198,400."""
    phi3 = {"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
            "vocab_size": 32064, "sliding_window": 2047, "max_position_embeddings": 4096,
            "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, phi3))
    assert shape.windowed_layers == 32 and count_params(shape).total == 3821079552
    olmo2 = {"model_type": "olmo2", "hidden_size": 5120, "intermediate_size": 13824,
             "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
             "vocab_size": 100352, "max_position_embeddings": 4096,
             "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, olmo2))
    assert shape.qk_norm is QkNorm.FULL and count_params(shape).total == 13716198400
    # the query and key norms: 40 + 40 heads of 128 a layer
    plain = count_params(dataclasses.replace(shape, qk_norm=QkNorm.NONE)).total
    assert count_params(shape).total - plain == 40 * (40 + 40) * 128


# Qwen3-VL's config.json (Qwen/Qwen3-VL-8B-Instruct and -2B-Instruct): the language model in
# text_config, tie_word_embeddings at the top level
QWEN3_VL_8B_TEXT = {"model_type": "qwen3_vl_text", "hidden_size": 4096,
                    "intermediate_size": 12288, "num_hidden_layers": 36,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                    "vocab_size": 151936, "max_position_embeddings": 262144}


def test_hf_qwen_vl_configs_read_their_language_model(tmp_path: Path) -> None:
    """Qwen3-VL-8B's language model is Qwen3-8B's shape (its published 8,190,735,360
    parameters, the vision tower not counted); Qwen3-VL-2B's, tied by the wrapper's
    tie_word_embeddings, Qwen3-1.7B's; Qwen3-VL-30B-A3B's text_config (qwen3_vl_moe_text)
    Qwen3-30B-A3B's; a Qwen2.5-VL config with its text fields at the top level (Qwen/
    Qwen2.5-VL-7B-Instruct) Qwen2.5-7B's."""
    wrapped = {"model_type": "qwen3_vl", "text_config": QWEN3_VL_8B_TEXT,
               "tie_word_embeddings": False, "vision_config": {"depth": 27}}
    shape = shape_from_hf_config(_write(tmp_path, wrapped))
    assert shape.qk_norm is QkNorm.HEAD and not shape.tied_embeddings
    assert count_params(shape).total == count_params(preset("qwen3-8b").shape).total \
        == 8190735360
    small = {**wrapped, "tie_word_embeddings": True,
             "text_config": {**QWEN3_VL_8B_TEXT, "hidden_size": 2048, "intermediate_size": 6144,
                             "num_hidden_layers": 28, "num_attention_heads": 16}}
    shape = shape_from_hf_config(_write(tmp_path, small))
    assert shape.tied_embeddings
    assert count_params(shape).total == count_params(preset("qwen3-1.7b").shape).total
    # the language model's own setting, where it gives one, decides
    untied = {**small, "text_config": {**small["text_config"], "tie_word_embeddings": False}}
    assert not shape_from_hf_config(_write(tmp_path, untied)).tied_embeddings
    moe = {"model_type": "qwen3_vl_moe", "tie_word_embeddings": False,
           "text_config": {**QWEN3_VL_8B_TEXT, "model_type": "qwen3_vl_moe_text",
                           "hidden_size": 2048, "intermediate_size": 6144,
                           "num_hidden_layers": 48, "num_key_value_heads": 4,
                           "moe_intermediate_size": 768, "num_experts": 128,
                           "num_experts_per_tok": 8, "decoder_sparse_step": 1,
                           "mlp_only_layers": []}}
    assert count_params(shape_from_hf_config(_write(tmp_path, moe))) \
        == count_params(preset("qwen3-30b-a3b").shape)
    qwen25_vl = {"model_type": "qwen2_5_vl", "hidden_size": 3584, "intermediate_size": 18944,
                 "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
                 "vocab_size": 152064, "tie_word_embeddings": False,
                 "max_position_embeddings": 128000, "vision_config": {"depth": 32}}
    shape = shape_from_hf_config(_write(tmp_path, qwen25_vl))
    assert shape.qkv_bias
    assert count_params(shape).total == count_params(preset("qwen2.5-7b").shape).total


def test_hf_config_family_by_architectures(tmp_path: Path) -> None:
    """MiMo-7B (model_type mimo) reads as Qwen2's layers; a model_type no family has is read
    by its ``architectures`` where those name a supported model class (a re-quantized
    DeepSeek-V4 published as "deepseek_ref"); neither known, it is refused by name."""
    mimo = {"model_type": "mimo", "hidden_size": 4096, "intermediate_size": 11008,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151680, "attention_bias": True,
            "num_nextn_predict_layers": 1, "tie_word_embeddings": False}
    shape = shape_from_hf_config(_write(tmp_path, mimo))
    assert shape == shape_from_hf_config(_write(tmp_path, {**mimo, "model_type": "qwen2"}))
    assert shape.qkv_bias and count_params(shape).total == 7622619136
    renamed = {**mimo, "model_type": "my_finetune", "architectures": ["Qwen2ForCausalLM"]}
    assert shape_from_hf_config(_write(tmp_path, renamed)) == shape
    with pytest.raises(GpuarchError, match="model_type 'my_finetune' is not supported"):
        shape_from_hf_config(_write(tmp_path, {**renamed, "architectures": ["MyModel"]}))


@pytest.mark.parametrize(("cfg", "why"), [
    ({"model_type": "a_wrapper", "text_config": {"model_type": "qwen4_exp_text"}},
     "Qwen4-Exp's low-rank hyper-connections"),
    ({"model_type": "kolibri1_1"}, "Kolibri-1.1's weightless pooled-key indexer"),
    ({"model_type": "a_wrapper", "text_config": {"model_type": ["gemma4"]}},
     "model_type 'a_wrapper' is not supported"),
])
def test_hf_families_not_read_yet_say_why(tmp_path: Path, cfg: dict[str, Any], why: str
                                          ) -> None:
    """Families seen in published checkpoints whose layers the shape cannot hold are refused
    with what it lacks, not only as unknown."""
    with pytest.raises(GpuarchError, match=why):
        shape_from_hf_config(_write(tmp_path, cfg))


def test_hf_config_named_after_its_file(tmp_path: Path) -> None:
    """A checkpoint's config.json is named after its directory; a config saved under a name
    of its own after that name, less a ``_config`` suffix."""
    cfg = {**QWEN3_VL_8B_TEXT, "model_type": "qwen3"}
    path = tmp_path / "Qwen--Qwen3-8B_config.json"
    path.write_text(json.dumps(cfg))
    assert shape_from_hf_config(path).name == "Qwen--Qwen3-8B"
    assert shape_from_hf_config(_write(tmp_path, cfg)).name == tmp_path.name


def test_hf_emu3_reads_llama_with_its_defaults(tmp_path: Path) -> None:
    """Emu3's text model (emu3_text_model) is Llama's layers with Emu3TextConfig's defaults:
    8,492,011,520 parameters from the bare model_type, as Transformers 5.25's
    Emu3ForCausalLM builds it; an emu3 config reads its text_config."""
    bare = shape_from_hf_config(_write(tmp_path, {"model_type": "emu3_text_model"}))
    assert (bare.layers, bare.hidden, bare.n_kv_heads, bare.vocab) == (32, 4096, 8, 184622)
    assert count_params(bare).total == 8_492_011_520
    wrapped = {"model_type": "emu3", "text_config": {"model_type": "emu3_text_model",
                                                     "num_hidden_layers": 32}}
    assert shape_from_hf_config(_write(tmp_path, wrapped)) == bare


def test_geglu_costs_what_swiglu_costs() -> None:
    """The GELU-gated MLP has SwiGLU's three matrices: the same parameters and FLOPs."""
    gemma = preset("gemma-2-9b").shape
    swiglu = dataclasses.replace(gemma, ffn_kind=FfnKind.SWIGLU)
    assert count_params(gemma) == count_params(swiglu)
    assert forward_flops_per_token(gemma, 4096) == forward_flops_per_token(swiglu, 4096)


def test_a_multimodal_wrapper_reads_its_language_model(tmp_path: Path) -> None:
    """A wrapper family the importer does not know (Mistral 3) around a text_config of one it
    does reads as that language model, named after the checkpoint; an unknown family
    inside is still refused by name."""
    text = {"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 32768,
            "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 131072, "max_position_embeddings": 131072}
    wrapped = {"model_type": "mistral3", "_name_or_path": "mistral-small-3.1",
               "text_config": text, "vision_config": {"model_type": "pixtral"}}
    shape = shape_from_hf_config(_write(tmp_path, wrapped))
    assert shape.name == "mistral-small-3.1"
    assert shape == dataclasses.replace(shape_from_hf_config(_write(tmp_path, text)),
                                        name=shape.name)
    unknown = {**wrapped, "text_config": {**text, "model_type": "a_new_family"}}
    with pytest.raises(GpuarchError, match="model_type 'mistral3' is not supported"):
        shape_from_hf_config(_write(tmp_path, unknown))


NEMOTRON_H_8B = {  # nvidia/Nemotron-H-8B-Base-8K config.json
    "model_type": "nemotron_h", "hidden_size": 4096, "num_hidden_layers": 52,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "num_attention_heads": 32, "num_key_value_heads": 8, "attention_head_dim": 128,
    "intermediate_size": 21504, "mamba_num_heads": 128, "mamba_head_dim": 64,
    "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "vocab_size": 131072,
    "tie_word_embeddings": False, "use_conv_bias": True, "use_bias": False}


NEMOTRON_3_NANO = {**NEMOTRON_H_8B, "hidden_size": 2688,
                   "hybrid_override_pattern":
                       "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
                   "num_key_value_heads": 2, "mamba_num_heads": 64, "n_routed_experts": 128,
                   "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
                   "moe_shared_expert_intermediate_size": 3712}
# Nemotron 3 Super 120B-A12B as NVIDIA/Megatron-LM @0b2ad8fe's release test trains it
# (tests/functional_tests/test_cases/nemotron/nemotron3_super_release_gb200/
# model_config.yaml), in config.json's keys: Mamba-2 heads of 64 and state 128 in 8 groups
NEMOTRON_3_SUPER = {**NEMOTRON_H_8B, "num_hidden_layers": 88,
                    "hybrid_override_pattern":
                        "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*"
                        "EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
                    "num_key_value_heads": 2, "mamba_num_heads": 128, "n_routed_experts": 512,
                    "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
                    "moe_shared_expert_intermediate_size": 5376, "moe_latent_size": 1024}


def test_hf_nemotron_h_counts_each_block(tmp_path: Path) -> None:
    """A hybrid Mamba-2 model is counted block by block, each block one norm of the hidden
    width (weight shapes of Transformers' modeling_nemotron_h.py @008d9e95): a Mamba-2 block
    4,096 x (2 x 8,192 + 2 x 8 x 128 + 128) input projection, 8,192 x 4,096 output
    projection, a 4-tap convolution with bias over 8,192 + 2 x 8 x 128 channels, dt_bias,
    A_log and D per head, an 8,192-wide gated norm; an attention block 4,096 x 128 x (2 x 32
    + 2 x 8); an MLP block 2 x 4,096 x 21,504 (up and down, squared ReLU). Nemotron-H 8B's
    24 Mamba-2, 4 attention and 24 MLP blocks and untied embeddings give 8,100,852,736."""
    shape = shape_from_hf_config(_write(tmp_path, NEMOTRON_H_8B))
    mamba = (4096 * (2 * 8192 + 2 * 8 * 128 + 128) + 8192 * 4096
             + (8192 + 2 * 8 * 128) * (4 + 1) + 3 * 128 + 8192 + 4096)
    attention = 4096 * 128 * (2 * 32 + 2 * 8) + 4096
    mlp = 2 * 4096 * 21504 + 4096
    assert (shape.mamba_layers, shape.attention_layers, shape.mlp_layers) == (24, 4, 24)
    expected = 24 * mamba + 4 * attention + 24 * mlp + 2 * 131072 * 4096 + 4096
    assert count_params(shape).total == expected == 8_100_852_736
    # Nemotron 3 Nano's expert blocks: 128 experts of 1,856 (up and down), a shared expert
    # twice as wide, the router; 23 Mamba-2, 6 attention and 23 expert blocks
    nano = NEMOTRON_3_NANO
    shape = shape_from_hf_config(_write(tmp_path, nano))
    mamba = (2688 * (2 * 4096 + 2 * 8 * 128 + 64) + 4096 * 2688
             + (4096 + 2 * 8 * 128) * 5 + 3 * 64 + 4096 + 2688)
    attention = 2688 * 128 * (2 * 32 + 2 * 2) + 2688
    # (the router's weight and its score-correction bias, one per expert)
    experts = 128 * 2 * 2688 * 1856 + 2 * 2688 * 3712 + 128 * 2688 + 128 + 2688
    expected = 23 * mamba + 6 * attention + 23 * experts + 2 * 131072 * 2688 + 2688
    assert count_params(shape).total == expected == 31_577_940_288
    assert shape.shared_experts == 2 and shape.moe_layers == 23
    # Nemotron 3 Super's latent experts: 512 experts of 2,688 reading and writing 1,024-wide
    # vectors, the projections 4,096 -> 1,024 and back, a shared expert of 5,376 on the
    # hidden state, the router on it too; 40 Mamba-2, 8 attention and 40 expert blocks:
    # 120.7B, NVIDIA's "120B" (12.8B active per token, its "12B")
    shape = shape_from_hf_config(_write(tmp_path, NEMOTRON_3_SUPER))
    mamba = (4096 * (2 * 8192 + 2 * 8 * 128 + 128) + 8192 * 4096
             + (8192 + 2 * 8 * 128) * 5 + 3 * 128 + 8192 + 4096)
    attention = 4096 * 128 * (2 * 32 + 2 * 2) + 4096
    routed = 2 * 1024 * 2688
    experts = 512 * routed + 2 * 4096 * 5376 + 512 * 4096 + 512 + 2 * 4096 * 1024 + 4096
    expected = 40 * mamba + 8 * attention + 40 * experts + 2 * 131072 * 4096 + 4096
    counted = count_params(shape)
    assert counted.total == expected == 120_668_707_840
    assert counted.active(shape) == expected - 40 * (512 - 22) * routed
    assert count_params(preset("nemotron-3-super").shape) == counted
    with pytest.raises(GpuarchError, match="moe_latent: 4096 must be below hidden 4096"):
        shape_from_hf_config(_write(tmp_path, {**NEMOTRON_3_SUPER, "moe_latent_size": 4096}))
    with pytest.raises(GpuarchError, match="hybrid_override_pattern: expected a string"):
        shape_from_hf_config(_write(tmp_path, {**NEMOTRON_H_8B,
                                               "hybrid_override_pattern": 7}))
    without = {k: v for k, v in NEMOTRON_H_8B.items() if k != "intermediate_size"}
    with pytest.raises(GpuarchError, match="missing intermediate_size"):
        shape_from_hf_config(_write(tmp_path, without))  # MLP blocks need their width
    with pytest.raises(GpuarchError, match="num_hidden_layers: 51, but"):
        shape_from_hf_config(_write(tmp_path, {**NEMOTRON_H_8B, "num_hidden_layers": 51}))


# Nemotron 3 Ultra 550B-A55B's config.json lists its blocks by name (layers_block_type, the
# names "mamba", "moe" and "attention" Transformers' NemotronHConfig remaps), attention at
# blocks 7, 14, 23, 32, 39, 48, 57, 64, 73, 82, 89 and 98; the shape as NVIDIA/Megatron-LM
# @453761c5's ModelOpt example loads it (examples/post_training/modelopt/conf/nvidia/
# NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.sh)
ULTRA_PATTERN = ("MEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*"
                 "EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME")
NEMOTRON_3_ULTRA = {
    **{k: v for k, v in NEMOTRON_3_SUPER.items() if k != "hybrid_override_pattern"},
    "hidden_size": 8192, "num_hidden_layers": 108, "num_attention_heads": 64,
    "layers_block_type": [{"M": "mamba", "E": "moe", "*": "attention"}[c]
                          for c in ULTRA_PATTERN],
    "mamba_num_heads": 256, "moe_intermediate_size": 5120,
    "moe_shared_expert_intermediate_size": 10240, "moe_latent_size": 2048}


def test_hf_nemotron_h_reads_the_blocks_by_name(tmp_path: Path) -> None:
    """Nemotron 3 Ultra: 48 Mamba-2 blocks (8,192 -> 2 x 16,384 + 2 x 8 x 128 + 256 input
    projection, 16,384 x 8,192 out, the convolution, per-head dt_bias, A_log and D, the
    gated norm), 12 attention blocks of 64 heads over 2 KV heads of 128, 48 expert blocks of
    512 latent experts of 5,120 over a 2,048 width (top 22) beside a shared expert of 10,240
    on the hidden state, untied embeddings of 131,072: 549.3B, NVIDIA's "550B" (56.1B
    active, its "55B"); the checkpoint's MTP block ('*E': the 2h -> h projection, its
    norms, an attention and an expert block) adds 11.2B. The list names the blocks in
    current or legacy words alike, and the preset is the same shape."""
    shape = shape_from_hf_config(_write(tmp_path, NEMOTRON_3_ULTRA))
    mamba = (8192 * (2 * 16384 + 2 * 8 * 128 + 256) + 16384 * 8192
             + (16384 + 2 * 8 * 128) * 5 + 3 * 256 + 16384 + 8192)
    attention = 8192 * 128 * (2 * 64 + 2 * 2) + 8192
    routed = 2 * 2048 * 5120
    experts = 512 * routed + 2 * 8192 * 10240 + 512 * 8192 + 512 + 2 * 8192 * 2048 + 8192
    expected = 48 * mamba + 12 * attention + 48 * experts + 2 * 131072 * 8192 + 8192
    counted = count_params(shape)
    assert shape.hybrid_pattern == ULTRA_PATTERN and shape.layers == 108
    assert counted.total == expected == 549_308_993_536
    assert counted.active(shape) == expected - 48 * (512 - 22) * routed == 56_058_843_136
    mtp = (2 * 8192 * 8192 + 2 * 8192 + attention + experts - 512 * routed + 8192,
           512 * routed)
    assert mtp_block_params(shape) == mtp and sum(mtp) == 11_215_610_368
    ultra = preset("nemotron-3-ultra").shape
    assert count_params(ultra) == counted
    assert ultra.hybrid_pattern == shape.hybrid_pattern
    current = {**NEMOTRON_3_ULTRA, "layers_block_type": [
        {"M": "linear_attention", "E": "moe", "*": "full_attention"}[c] for c in ULTRA_PATTERN]}
    assert shape_from_hf_config(_write(tmp_path, current)) == shape
    # the list decides the layer count, as Transformers takes it (num_hidden_layers is
    # deprecated there); a name it does not know is refused
    assert shape_from_hf_config(_write(tmp_path, {**NEMOTRON_3_ULTRA,
                                                  "num_hidden_layers": 52})) == shape
    bad = {**NEMOTRON_3_ULTRA, "layers_block_type": ["mamba", "moe", "conv"]}
    with pytest.raises(GpuarchError, match=r"layers_block_type: expected a list of .*\['conv'\]"):
        shape_from_hf_config(_write(tmp_path, bad))


@pytest.mark.parametrize(("change", "message"), [
    ({"hybrid_pattern": "M*X"}, "unknown block 'X'"),
    ({"hybrid_pattern": "M*"}, "2 blocks, but layers is 3"),
    ({"mamba": None}, "recurrent blocks \\(M\\) and the mamba shape go together"),
    ({"sliding_window": 128, "hybrid_pattern": "M-E", "experts": 4,
      "experts_per_token": 1}, "sliding_window: the hybrid_pattern has no attention block"),
    ({"sliding_window": 128, "sliding_layers": 2}, "sliding_layers: 2 exceeds the attention "
                                                   "layers 1"),
    ({"sliding_window": 128, "attention_chunked": True}, "plain sliding windows"),
    ({"dense_layers": 1}, "dense_layers: not with a hybrid_pattern"),
    ({"hybrid_pattern": ""}, "mamba: recurrent \\(Mamba-2 or Gated DeltaNet\\) blocks need a "
                             "hybrid_pattern"),
])
def test_hybrid_shapes_are_checked(change: dict[str, Any], message: str) -> None:
    from gpuarch.workloads.shape import MambaShape
    base = TransformerShape(name="h", layers=3, hidden=256, heads=4, vocab=100,
                            hybrid_pattern="M*-",
                            mamba=MambaShape(heads=4, head_dim=64, state=16, groups=2))
    with pytest.raises(GpuarchError, match=message):
        dataclasses.replace(base, **change)


def test_hybrid_models_train_and_serve(tmp_path: Path) -> None:
    """A hybrid model's training and serving are estimated (tests/test_hybrid_training.py,
    tests/test_hybrid_serving.py); the estimates not yet costed for it refuse it by name
    (disaggregated serving, the serving advisor); nothing half-computed comes back."""
    from gpuarch.catalog import load_catalog
    from gpuarch.estimate import TrainingConfig, estimate_training
    from gpuarch.estimate.inference import estimate_inference
    from gpuarch.estimate.inference_config import InferenceConfig

    catalog = load_catalog()
    shape = shape_from_hf_config(_write(tmp_path, NEMOTRON_H_8B))
    h100 = catalog.product("h100")
    trained = estimate_training(catalog, shape, h100, TrainingConfig(gpus=8, seq_len=4096,
                                                                      global_batch=64))
    assert trained.tokens_per_s > 0
    assert forward_flops_per_token(shape, 4096).mamba > 0
    served = estimate_inference(catalog, shape, h100, InferenceConfig(input_len=100,
                                                                       output_len=10, batch=1))
    assert served.output_tokens_per_s > 0
    from gpuarch.estimate.disagg import PrefillPool, estimate_disaggregated
    split = estimate_disaggregated(catalog, shape, h100, InferenceConfig(
        input_len=100, output_len=10, batch=1), PrefillPool(gpus=1))
    assert split.assumptions["mamba_state_sent_bytes_per_gpu"] > 0


def test_a_preset_mapping_takes_a_mamba_table() -> None:
    """models.toml's keys (and a validation row's) can give a hybrid shape: the mamba table
    is checked key by key like mla's."""
    from gpuarch.workloads.presets import shape_from_mapping
    base = {"name": "h", "layers": 3, "hidden": 256, "heads": 4, "vocab": 100,
            "hybrid_pattern": "M*-"}
    mamba = {"heads": 4, "head_dim": 64, "state": 16, "groups": 2}
    assert shape_from_mapping({**base, "mamba": mamba}, "t").mamba_layers == 1
    with pytest.raises(GpuarchError, match=r"t\.mamba: unknown key 'stat'"):
        shape_from_mapping({**base, "mamba": {**mamba, "stat": 1}}, "t")
    with pytest.raises(GpuarchError, match=r"t\.mamba: expected a table"):
        shape_from_mapping({**base, "mamba": 5}, "t")
    with pytest.raises(GpuarchError, match=r"t\.mamba: .*missing"):
        shape_from_mapping({**base, "mamba": {"heads": 4}}, "t")


@pytest.mark.parametrize(("name", "published", "tolerance", "blocks"), [
    # the Nano 2 Base model cards: 8.89B and 12.31B
    ("nemotron-nano-9b-v2", 8.89e9, 0.005e9, (27, 4, 25)),
    ("nemotron-nano-12b-v2", 12.31e9, 0.005e9, (28, 6, 28)),
    # the Nemotron-H Base-8K model cards: 47B ("just five Attention layers"), 56B (ten)
    ("nemotron-h-47b", 47e9, 0.5e9, (45, 5, 48)),
    ("nemotron-h-56b", 56e9, 0.5e9, (54, 10, 54)),
])
def test_nemotron_h_family_presets_count_to_their_cards(name: str, published: float,
                                                        tolerance: float,
                                                        blocks: tuple[int, int, int]) -> None:
    """The Nemotron-H and Nano 2 presets (Megatron Bridge's providers) count, block by
    block, to the parameters their model cards print, with the Mamba-2, attention and MLP
    blocks the cards and the blog name (the 9B's Mamba-2 inner width, 128 x 80, is not twice
    its hidden size: it was pruned from the 12B)."""
    shape = preset(name).shape
    assert (shape.mamba_layers, shape.attention_layers, shape.mlp_layers) == blocks
    assert abs(count_params(shape).total - published) <= tolerance


@pytest.mark.parametrize(("change", "match"), [
    ({"shared_expert_gate": True, "shared_experts": 0},
     "shared_expert_gate: a gate on the shared experts needs shared_experts > 0"),
])
def test_gate_and_sinks_need_what_they_act_on(change: dict[str, Any], match: str) -> None:
    with pytest.raises(GpuarchError, match=match):
        dataclasses.replace(preset("qwen2-57b-a14b").shape, **change)


def test_sinks_beside_latent_attention_count_a_head() -> None:
    """A sink logit a query head beside latent attention (Hy4's) counts one parameter a
    head a layer; compressed attention (DeepSeek-V4's) counts its own, and refuses the
    flag."""
    mla = MlaShape(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                   qk_rope_head_dim=64, v_head_dim=128)
    base = dataclasses.replace(preset("qwen2-57b-a14b").shape, mla=mla)
    sinks = dataclasses.replace(base, attention_sinks=True)
    assert count_params(sinks).total - count_params(base).total == base.layers * base.heads
    with pytest.raises(GpuarchError, match="attention_sinks: compressed attention counts "
                                           "its own"):
        dataclasses.replace(preset("deepseek-v4-flash").shape, attention_sinks=True)


LLAMA_2_7B_CONFIG = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                     "num_hidden_layers": 32, "num_attention_heads": 32,
                     "num_key_value_heads": 32, "vocab_size": 32000,
                     "tie_word_embeddings": False}


@pytest.mark.parametrize(("model_type", "flag", "per_layer"), [
    # q, k, v and output biases: 4 x 4,096 a layer
    ("llama", "attention_bias", 4 * 4096), ("qwen3", "attention_bias", 4 * 4096),
    ("olmo2", "attention_bias", 4 * 4096), ("granite", "attention_bias", 4 * 4096),
    # gate and up biases of the MLP's width, the down projection's of the hidden
    ("llama", "mlp_bias", 2 * 11008 + 4096), ("granite", "mlp_bias", 2 * 11008 + 4096),
    # the key taken by no projection of these families
    ("mistral", "attention_bias", 0), ("mixtral", "attention_bias", 0),
    ("phi3", "attention_bias", 0), ("qwen3", "mlp_bias", 0), ("mistral", "mlp_bias", 0),
])
def test_hf_bias_keys_add_what_each_family_builds(tmp_path: Path, model_type: str, flag: str,
                                                   per_layer: int) -> None:
    """``attention_bias`` and ``mlp_bias`` add, family by family, the biases Transformers 5.25
    builds for them (each case's count equal to its, scripts/params_vs_transformers.py):
    Llama-style attention biases on all four projections, none at all for Mistral, Mixtral
    and Phi-3, MLP biases for Llama and Granite only."""
    cfg = {**LLAMA_2_7B_CONFIG, "model_type": model_type}
    if model_type == "mixtral":
        cfg |= {"num_local_experts": 8, "num_experts_per_tok": 2}
    base = count_params(shape_from_hf_config(_write(tmp_path, cfg))).total
    flagged = count_params(shape_from_hf_config(_write(tmp_path, {**cfg, flag: True}))).total
    experts = 8 if flag == "mlp_bias" and model_type == "mixtral" else 1
    assert flagged - base == 32 * per_layer * experts
    if per_layer:  # a key the family reads refuses a value that is not true or false
        with pytest.raises(GpuarchError, match=f"{flag}: expected true or false, got 'yes'"):
            shape_from_hf_config(_write(tmp_path, {**cfg, flag: "yes"}))


def test_hf_bias_keys_that_remove_biases(tmp_path: Path) -> None:
    """Keys that take biases away, as Transformers 5.25 builds the models: GPT-NeoX's and
    GPT-OSS's ``attention_bias`` false drops the attention's biases and keeps the MLP's (the
    experts'); Qwen2-MoE's ``qkv_bias`` false drops the QKV biases."""
    neox = {"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
            "num_hidden_layers": 44, "intermediate_size": 24576, "vocab_size": 50432,
            "tie_word_embeddings": False}
    full = count_params(shape_from_hf_config(_write(tmp_path, neox))).total
    bare = shape_from_hf_config(_write(tmp_path, {**neox, "attention_bias": False}))
    assert full - count_params(bare).total == 44 * 4 * 6144 and bare.mlp_bias
    oss = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "num_hidden_layers": 4, "vocab_size": 201088, "num_local_experts": 32,
           "num_experts_per_tok": 4}
    full = count_params(shape_from_hf_config(_write(tmp_path, oss))).total
    bare = shape_from_hf_config(_write(tmp_path, {**oss, "attention_bias": False}))
    assert full - count_params(bare).total == 4 * (64 * 64 + 2 * 8 * 64 + 2880)
    qwen = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
            "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
            "intermediate_size": 5632, "moe_intermediate_size": 1408, "num_experts": 60,
            "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632}
    full = count_params(shape_from_hf_config(_write(tmp_path, qwen))).total
    bare = count_params(shape_from_hf_config(_write(tmp_path, {**qwen, "qkv_bias": False})))
    assert full - bare.total == 24 * 3 * 2048
