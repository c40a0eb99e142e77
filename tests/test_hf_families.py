"""The decoder families read from one table (``workloads/data/hf_families.toml``, read by
``workloads/hf_families.py``): Seed-OSS, SmolLM3, ERNIE 4.5, Helium, Ministral, InternLM3,
Jais 2, OLMo 3, EXAONE 4.0, GLM-4, Arcee, StarCoder2, Cohere, OLMoE, Phi-3.5-MoE, Granite
MoE, Hunyuan 1 and 3, K-EXAONE, Solar Open, dots.llm1, Arcee Trinity, GLM-4.7-Flash, Phi-2,
StableLM, Apertus and DBRX.
Parameter counts are pinned to the models Hugging Face Transformers 5.25.0 builds from the
same configs (``scripts/params_vs_transformers.py``, on PyTorch's meta device); window
layers and expert layers to what its config classes derive; one count is also worked out
by hand."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads import hf_family_table
from gpuarch.workloads.hf import SUPPORTED_MODEL_TYPES
from gpuarch.workloads.hf_family_table import FAMILIES_FILE, family_traits
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import FfnKind, NormKind, QkNorm
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()

# ByteDance's Seed-OSS-36B as its config.json gives the shape (Transformers 5.25 builds
# 36,151,104,512 parameters: "36B")
SEED_OSS_36B = {"model_type": "seed_oss", "hidden_size": 5120, "num_hidden_layers": 64,
                "intermediate_size": 27648, "num_attention_heads": 80,
                "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 155136,
                "attention_bias": True, "attention_out_bias": False, "mlp_bias": False,
                "tie_word_embeddings": False}
# Baidu's ERNIE-4.5-21B-A3B (experts in layers 1-27, two shared widths, e_score_correction
# _bias a parameter): 21,825,437,888, Baidu's "21B total"
ERNIE45_21B = {"model_type": "ernie4_5_moe", "hidden_size": 2560, "intermediate_size": 12288,
               "moe_intermediate_size": 1536, "num_hidden_layers": 28,
               "num_attention_heads": 20, "num_key_value_heads": 4, "vocab_size": 103424,
               "use_bias": False, "tie_word_embeddings": True, "moe_num_experts": 64,
               "moe_num_shared_experts": 2, "moe_k": 6, "moe_layer_start_index": 1,
               "moe_layer_end_index": 27, "moe_layer_interval": 1}
# a small Mistral 4 (latent attention, 8 experts of 256 and one shared, no dense layer; no
# num_key_value_heads: Mistral4Config's default, 32, is not read)
TINY_MISTRAL4 = {"model_type": "mistral4", "hidden_size": 512, "num_hidden_layers": 4,
                 "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 1024,
                 "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2,
                 "kv_lora_rank": 64, "q_lora_rank": 128, "qk_rope_head_dim": 32,
                 "qk_nope_head_dim": 32, "v_head_dim": 64}
# a small A.X K2 (latent attention gated through its query projection, an indexer of 4
# heads, gated norms of rank 8, a dense first layer)
TINY_AXK2 = {"model_type": "axk2", "vocab_size": 1000, "hidden_size": 512,
             "intermediate_size": 1536, "moe_intermediate_size": 128, "num_hidden_layers": 3,
             "num_attention_heads": 8, "n_shared_experts": 2, "n_routed_experts": 8,
             "kv_lora_rank": 64, "q_lora_rank": 96, "qk_rope_head_dim": 16, "v_head_dim": 40,
             "qk_nope_head_dim": 48, "num_experts_per_tok": 2,
             "mlp_layer_types": ["dense", "sparse", "sparse"], "index_topk": 2048,
             "index_head_dim": 32, "index_n_heads": 4,
             "layer_types": ["indexed_attention"] * 3, "gated_norm_rank": 8}
# a small Flint (8 experts of 128, a shared MLP of two expert widths, windows of 64)
TINY_FLINT = {"model_type": "flint", "hidden_size": 512, "num_hidden_layers": 6,
              "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
              "intermediate_size": 1024, "moe_intermediate_size": 128, "num_experts": 8,
              "num_experts_per_tok": 2, "shared_expert_intermediate_size": 256,
              "vocab_size": 1000, "sliding_window": 64}
# rednote's dots.llm1 (128 experts, top 6, two shared, the first layer dense): 142.8B in
# all and 14.0B a token, its model card's "142B total, 14B activated"
DOTS1 = {"model_type": "dots1", "hidden_size": 4096, "intermediate_size": 10944,
         "moe_intermediate_size": 1408, "num_hidden_layers": 62, "num_attention_heads": 32,
         "num_key_value_heads": 32, "vocab_size": 152064, "n_routed_experts": 128,
         "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
         "tie_word_embeddings": False}
# GLM-4.7-Flash's shape (Transformers' Glm4MoeLiteConfig defaults): latent attention of 20
# heads on a 2,048-wide model, 64 experts of 1,536 and one shared
GLM47_FLASH = {"model_type": "glm4_moe_lite", "vocab_size": 154880, "hidden_size": 2048,
               "intermediate_size": 10240, "moe_intermediate_size": 1536,
               "num_hidden_layers": 47, "num_attention_heads": 20, "num_key_value_heads": 20,
               "n_shared_experts": 1, "n_routed_experts": 64, "kv_lora_rank": 512,
               "q_lora_rank": 768, "qk_rope_head_dim": 64, "v_head_dim": 256,
               "qk_nope_head_dim": 192, "num_experts_per_tok": 4,
               "tie_word_embeddings": False}
TINY_COHERE = {"model_type": "cohere", "hidden_size": 256, "intermediate_size": 512,
               "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
               "vocab_size": 1000, "use_qk_norm": True, "attention_bias": True}
TINY_GLM4 = {"model_type": "glm4", "hidden_size": 256, "intermediate_size": 512,
             "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
             "head_dim": 32, "vocab_size": 1000, "attention_bias": True}
TINY_STARCODER2 = {"model_type": "starcoder2", "hidden_size": 256, "intermediate_size": 1024,
                   "num_hidden_layers": 2, "num_attention_heads": 8,
                   "num_key_value_heads": 2, "vocab_size": 1000, "sliding_window": 64}
TINY_AFMOE = {"model_type": "afmoe", "hidden_size": 256, "intermediate_size": 512,
              "moe_intermediate_size": 64, "num_hidden_layers": 4, "num_dense_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
              "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
              "num_shared_experts": 1, "global_attn_every_n_layers": 2, "sliding_window": 128}
# expert layers every second layer from 2 to 6 (layers 3 and 5), the rest dense; two shared
# expert widths by the config class's default
TINY_ERNIE_INTERVAL = {"model_type": "ernie4_5_moe", "hidden_size": 256,
                       "intermediate_size": 512, "moe_intermediate_size": 64,
                       "num_hidden_layers": 8, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "vocab_size": 1000, "moe_num_experts": 8,
                       "moe_k": 2, "moe_layer_start_index": 2, "moe_layer_end_index": 6,
                       "moe_layer_interval": 2, "tie_word_embeddings": False}
TINY_PHIMOE = {"model_type": "phimoe", "hidden_size": 256, "intermediate_size": 128,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 1000, "num_local_experts": 4, "num_experts_per_tok": 2,
               "attention_bias": True, "lm_head_bias": True}

TINY_PHI = {"model_type": "phi", "hidden_size": 256, "intermediate_size": 1024,
            "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000,
            "qk_layernorm": True}
TINY_STABLELM = {"model_type": "stablelm", "hidden_size": 256, "intermediate_size": 512,
                 "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                 "vocab_size": 1000, "use_qkv_bias": True, "use_parallel_residual": True}
TINY_HUNYUAN_MOE = {"model_type": "hunyuan_v1_moe", "hidden_size": 256,
                    "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                    "vocab_size": 1000, "num_experts": 8, "moe_topk": 2}

TINY_APERTUS = {"model_type": "apertus", "hidden_size": 256, "intermediate_size": 1024,
                "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                "vocab_size": 1000}
# DBRX keeps its sizes under its own names and in nested tables
TINY_DBRX = {"model_type": "dbrx", "d_model": 256, "n_heads": 8, "n_layers": 2,
             "max_seq_len": 512, "vocab_size": 1000,
             "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 500000.0},
             "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2}}

# Granite with sliding windows and a learned sink a head (granite_swa, granitemoe_swa)
TINY_GRANITE_SWA = {"model_type": "granite_swa", "hidden_size": 1024,
                    "intermediate_size": 2048, "num_hidden_layers": 6,
                    "num_attention_heads": 16, "num_key_value_heads": 4,
                    "attention_bias": True, "mlp_bias": True, "vocab_size": 1000,
                    "tie_word_embeddings": False}
TINY_GRANITEMOE_SWA = {"model_type": "granitemoe_swa", "hidden_size": 1024,
                       "intermediate_size": 512, "shared_intermediate_size": 1024,
                       "num_hidden_layers": 5, "num_attention_heads": 16,
                       "num_key_value_heads": 4, "num_local_experts": 8,
                       "num_experts_per_tok": 2, "vocab_size": 1000,
                       "layer_types": ["full_attention", "sliding_attention",
                                       "sliding_attention", "full_attention",
                                       "sliding_attention"]}

# Cohere's MoE: parallel layers, a dense prefix of its own width and window pattern, shared
# experts
TINY_COHERE2_MOE = {"model_type": "cohere2_moe", "hidden_size": 1024,
                    "intermediate_size": 512, "prefix_dense_intermediate_size": 3072,
                    "first_k_dense_replace": 3, "num_hidden_layers": 10,
                    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                    "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 2,
                    "attention_bias": True, "vocab_size": 1000,
                    "prefix_dense_sliding_window_pattern": 2, "sliding_window_pattern": 3}


# Cohere's North text model: Cohere2's parallel layers, windows by layer_types only; the
# sizes third-party ports of North-Micro-Vision-Instruct give its language model (three
# window layers to a full one, tied embeddings)
TINY_COHERE_COMPASS = {"model_type": "cohere_compass_text", "hidden_size": 512,
                       "intermediate_size": 1024, "num_hidden_layers": 4,
                       "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
                       "sliding_window": 128,
                       "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
NORTH_MICRO_TEXT = {"model_type": "cohere_compass_text", "vocab_size": 262144,
                    "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                    "tie_word_embeddings": True, "sliding_window": 4096,
                    "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 7}


@pytest.mark.parametrize(("cfg", "total"), [
    # Transformers 5.25.0 on the meta device, each
    (SEED_OSS_36B, 36_151_104_512),
    (ERNIE45_21B, 21_825_437_888),
    (DOTS1, 142_774_373_888),
    (GLM47_FLASH, 29_943_390_976),
    ({**GLM47_FLASH, "q_lora_rank": None}, 30_177_449_472),  # null: no query LoRA
    (TINY_COHERE, 1_931_072),
    (TINY_GLM4, 2_187_648),
    (TINY_STARCODER2, 1_638_656),
    (TINY_AFMOE, 3_291_928),
    (TINY_ERNIE_INTERVAL, 5_435_664),
    (TINY_PHIMOE, 1_698_792),
    (TINY_PHI, 2_092_264),
    (TINY_STABLELM, 1_628_416),
    (TINY_HUNYUAN_MOE, 2_680_320),
    (TINY_APERTUS, 2_676_870),
    (TINY_DBRX, 1_629_440),
    ({"model_type": "granite_swa"}, 2_144_463_840),  # GraniteSWAConfig's defaults
    ({"model_type": "granitemoe_swa"}, 37_039_117_312),
    (TINY_GRANITE_SWA, 55_584_864),
    (TINY_GRANITEMOE_SWA, 93_850_704),
    ({"model_type": "cohere2_moe"}, 190_004_928_512),  # Cohere2MoeConfig's defaults
    (TINY_COHERE2_MOE, 165_744_640),
    # the config classes' defaults of seven more rows, and a variant of each
    ({"model_type": "exaone"}, 7_818_448_896),
    ({"model_type": "exaone", "num_layers": 4, "hidden_size": 1024, "intermediate_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 1000,
      "attention_bias": True, "mlp_bias": True}, 37_739_520),  # EXAONE's own layer key
    ({"model_type": "hyperclovax"}, 6_738_677_760),  # with use_post_norm: four norms
    ({"model_type": "hyperclovax", "hidden_size": 1024, "intermediate_size": 2048,
      "num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 4,
      "vocab_size": 1000, "use_post_norm": False}, 28_793_856),
    # OLMo 1 (its LayerNorms without weights): OlmoConfig's defaults (OLMo-7B's sizes), OLMo-1B
    # as its config.json gives it ("1.18B"), attention biases on a small variant
    ({"model_type": "olmo"}, 6_888_095_744),
    ({"model_type": "olmo", "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 16, "tie_word_embeddings": True},
     1_176_764_416),
    ({"model_type": "olmo", "attention_bias": True, "hidden_size": 1024,
      "intermediate_size": 2816, "num_hidden_layers": 4, "num_attention_heads": 8,
      "num_key_value_heads": 2, "vocab_size": 1000}, 47_147_008),
    ({"model_type": "flex_olmo"}, 33_270_665_216),
    ({"model_type": "flex_olmo", "hidden_size": 1024, "intermediate_size": 512,
      "num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 4,
      "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000}, 28_809_984),
    ({"model_type": "youtu"}, 1_961_560_064),  # latent attention, dense MLPs
    ({"model_type": "youtu", "hidden_size": 1024, "intermediate_size": 2048,
      "num_hidden_layers": 3, "num_attention_heads": 16, "kv_lora_rank": 128,
      "q_lora_rank": None, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
      "v_head_dim": 32, "vocab_size": 1000}, 24_673_664),
    ({"model_type": "minicpm3"}, 4_073_875_968),
    ({"model_type": "minicpm3", "hidden_size": 1024, "intermediate_size": 2048,
      "num_hidden_layers": 3, "num_attention_heads": 16, "kv_lora_rank": 128,
      "q_lora_rank": 256, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
      "v_head_dim": 32, "vocab_size": 1000, "attention_bias": True, "mlp_bias": True},
     23_711_024),
    ({"model_type": "sarvam_moe"}, 32_152_648_064),  # GLM-4.5's layers
    ({"model_type": "sarvam_moe", "hidden_size": 1024, "intermediate_size": 2048,
      "moe_intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 16,
      "num_key_value_heads": 4, "head_dim": 64, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 2,
      "use_qk_norm": False, "attention_bias": True, "vocab_size": 1000}, 39_304_192),
    ({"model_type": "param2moe"}, 17_151_124_096),
    ({"model_type": "minicpm5_moe"}, 15_002_552_320),  # a gate a query channel, experts
    ({"model_type": "minicpm5_moe", "hidden_size": 1024, "intermediate_size": 2048,
      "moe_intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 16,
      "num_key_value_heads": 4, "head_dim": 64, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "n_shared_experts": 2, "attention_bias": True,
      "vocab_size": 1000, "first_k_dense_replace": 2}, 45_079_552),
    ({"model_type": "vaultgemma"}, 2_614_222_080),  # Gemma 2 without its post-norms
    ({"model_type": "vaultgemma", "hidden_size": 1024, "intermediate_size": 2048,
      "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 2,
      "head_dim": 128, "vocab_size": 1000, "attention_bias": True}, 45_612_544),
    ({**TINY_COHERE2_MOE, "first_k_dense_replace": None, "num_hidden_layers": 4,
      "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "num_shared_experts": 0,
      "prefix_dense_intermediate_size": None, "num_experts": 4, "num_experts_per_tok": 1,
      "attention_bias": False,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                      "full_attention"],
      "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]}, 32_998_400),
    # Mistral 4: Mistral4Config's defaults, the sizes of Mistral-Small-4-119B-2603 (the
    # checkpoint its docstring names; Mistral's "119B"); latent attention whose config class
    # defaults num_key_value_heads to 32 whatever the heads (not read); leading dense layers,
    # two shared widths and attention biases; no query LoRA, tied; in Mistral 3's wrapper
    ({"model_type": "mistral4"}, 118_972_826_624),
    ({**TINY_MISTRAL4, "first_k_dense_replace": 2, "attention_bias": True,
      "n_shared_experts": 2}, 14_016_640),
    ({**TINY_MISTRAL4, "q_lora_rank": None, "tie_word_embeddings": True}, 17_179_392),
    ({"model_type": "mistral3", "tie_word_embeddings": False,
      "text_config": {**TINY_MISTRAL4, "tie_word_embeddings": False},
      "vision_config": {"model_type": "pixtral", "hidden_size": 64}}, 17_167_616),
    # Mellum 2, Kolibri-1, A.X K1, Flint, Beam: the config classes' defaults (JetBrains'
    # Mellum2-12B-A2.5B; Aleph Alpha's "78B"; SK Telecom's "519B"; Reflection's
    # Beam-1.0-501B-A23B) and a variant of each
    ({"model_type": "mellum"}, 12_149_923_072),
    ({"model_type": "mellum", "hidden_size": 512, "num_hidden_layers": 4,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
      "intermediate_size": 1024, "moe_intermediate_size": 128, "num_experts": 8,
      "num_experts_per_tok": 2, "vocab_size": 1000, "attention_bias": True,
      "tie_word_embeddings": True, "mlp_layer_types": ["dense", "sparse", "sparse", "dense"],
      "layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 128},
     9_443_328),
    ({"model_type": "kolibri1"}, 78_103_055_360),
    # A.X K2: AXK2Config's defaults (A.X K2 Light's sizes), a gated query projection and
    # gated norms beside DeepSeek-V3.2's indexer; two small variants (Transformers' counts)
    ({"model_type": "axk2"}, 20_314_494_976),
    (TINY_AXK2, 8_837_280),
    ({**TINY_AXK2, "hidden_size": 512, "intermediate_size": 1024, "moe_intermediate_size": 64,
      "num_hidden_layers": 5, "num_attention_heads": 4, "n_shared_experts": 1,
      "n_routed_experts": 16, "kv_lora_rank": 32, "q_lora_rank": 128, "qk_rope_head_dim": 32,
      "v_head_dim": 32, "qk_nope_head_dim": 32, "n_group": 4, "topk_group": 2,
      "num_experts_per_tok": 4, "tie_word_embeddings": True, "attention_bias": True,
      "mlp_layer_types": ["dense", "sparse", "dense", "sparse", "sparse"],
      "layer_types": ["indexed_attention"] * 5, "index_head_dim": 64, "index_n_heads": 2,
      "gated_norm_rank": 24}, 10_505_568),
    ({"model_type": "axk1"}, 518_983_052_288),  # a norm after each of 60 expert layers
    ({"model_type": "flint"}, 39_785_287_456),
    ({**TINY_FLINT, "decoder_sparse_step": 2, "mlp_only_layers": [0]}, 15_592_752),
    ({**TINY_FLINT, "mlp_only_layers": []}, 16_784_688),
    ({"model_type": "beam"}, 501_267_599_808),  # a gate bias a head: 48 x 52
    ({"model_type": "beam", "hidden_size": 512, "num_hidden_layers": 4,
      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 32,
      "intermediate_size": 1024, "moe_intermediate_size": 128, "num_experts": 16,
      "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "vocab_size": 1000,
      "sliding_window": None, "mlp_layer_types": ["sparse"] * 4}, 17_318_720),
    # CodeGen, Persimmon, XGLM: the config classes' defaults and variants (CodeGen's MLP
    # 4 x n_embd where n_inner is null, as its configs write it)
    ({"model_type": "codegen"}, 6_050_882_784),
    ({"model_type": "codegen", "n_embd": 512, "n_head": 8, "n_layer": 4, "n_positions": 512,
      "n_inner": 1536, "rotary_dim": 16, "vocab_size": 1000, "tie_word_embeddings": True},
     11_012_072),
    ({"model_type": "codegen", "n_embd": 512, "n_head": 8, "n_layer": 3, "n_positions": 1024,
      "n_inner": None, "rotary_dim": 32, "vocab_size": 1000}, 10_473_960),
    ({"model_type": "persimmon"}, 9_397_175_296),
    ({"model_type": "persimmon", "hidden_size": 512, "num_attention_heads": 8,
      "num_hidden_layers": 3, "intermediate_size": 1024, "vocab_size": 1000,
      "qk_layernorm": False}, 7_333_376),
    ({"model_type": "xglm"}, 564_463_616),
    ({"model_type": "xglm", "d_model": 512, "attention_heads": 16, "num_layers": 2,
      "ffn_dim": 2048, "vocab_size": 1000, "activation_function": "relu",
      "tie_word_embeddings": True}, 6_817_792),
    # nanochat: NanoChatConfig's defaults, nanochat-d32's sizes by its depth rule (hidden 64 x
    # 32 layers, 16 heads, an MLP of 4 x hidden, a 65,536-token vocabulary), and biases with
    # two KV heads on a small one; its RMSNorms hold no weights
    ({"model_type": "nanochat"}, 256_573_440),
    ({"model_type": "nanochat", "hidden_size": 2048, "num_hidden_layers": 32,
      "num_attention_heads": 16, "intermediate_size": 8192, "vocab_size": 65536},
     1_879_048_192),
    ({"model_type": "nanochat", "hidden_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
      "intermediate_size": 2048, "vocab_size": 1000, "attention_bias": True}, 6_006_784),
    # CWM: CwmConfig's defaults (Meta's CWM, "32B"), and an MLP bias on a small variant
    ({"model_type": "cwm"}, 32_581_097_472),
    ({"model_type": "cwm", "hidden_size": 512, "num_hidden_layers": 6,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
      "intermediate_size": 1024, "sliding_window": 128, "mlp_bias": True,
      "tie_word_embeddings": True}, 13_903_360),
    # Cohere's North: CohereCompassTextConfig's defaults (Cohere2Config's sizes), a small one,
    # attention biases with a head width of its own, untied; no layer_types (all full);
    # North-Micro-Vision-Instruct's language model, alone and in its multimodal wrapper
    # (the vision tower not counted)
    ({"model_type": "cohere_compass_text"}, 34_980_831_232),
    (TINY_COHERE_COMPASS, 9_427_456),
    ({**TINY_COHERE_COMPASS, "num_attention_heads": 16, "num_key_value_heads": 4,
      "head_dim": 48, "attention_bias": True, "tie_word_embeddings": False}, 11_256_832),
    ({**TINY_COHERE_COMPASS, "num_hidden_layers": 3, "num_key_value_heads": None,
      "layer_types": None, "sliding_window_pattern": 2}, 8_378_368),
    (NORTH_MICRO_TEXT, 1_946_216_448),
    ({"model_type": "cohere_compass", "tie_word_embeddings": True,
      "text_config": NORTH_MICRO_TEXT,
      "vision_config": {"model_type": "cohere_compass_vision", "out_hidden_size": 2048}},
     1_946_216_448),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_cohere_counted_by_hand(tmp_path: Path) -> None:
    # 256 wide, 8 heads of 32, 2 KV heads; attention and MLP side by side on one LayerNorm
    # without bias (a weight a channel); use_qk_norm: a norm a head over queries and keys,
    # weights heads x head size; attention_bias on q, k, v and o; embeddings tied
    s = _read(tmp_path, TINY_COHERE)
    assert s.parallel_attention and s.shared_norm and s.norm is NormKind.RMSNORM
    assert s.qk_norm is QkNorm.FULL and s.tied_embeddings
    attention = 256 * 256 + 2 * 256 * 64 + 256 * 256 + (256 + 64 + 64) + 256
    qk_norms = 256 + 64
    mlp = 3 * 256 * 512
    layer = attention + qk_norms + mlp + 256
    assert count_params(s).total == 3 * layer + 256 + 1000 * 256 == 1_931_072


def test_apertus_counted_by_hand(tmp_path: Path) -> None:
    # 256 wide, 4 heads of 64, 2 KV heads; a query and key norm a head; an up and a down
    # projection with xIELU, whose two learned scalars (alpha_p, alpha_n) are parameters too
    s = _read(tmp_path, TINY_APERTUS)
    assert s.ffn_kind is FfnKind.XIELU and s.qk_norm is QkNorm.HEAD
    layer = (2 * 256 * 256 + 2 * 256 * 128) + (64 + 64) + (2 * 256 * 1024 + 2) + 2 * 256
    assert count_params(s).total == 3 * layer + 256 + 2 * 1000 * 256 == 2_676_870


def test_granite_swa_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, TINY_GRANITE_SWA)
    attention = (1024 * 1024 + 1024) + 2 * (1024 * 256 + 256) + (1024 * 1024 + 1024)
    sinks = 16  # one a query head
    mlp = 3 * 1024 * 2048 + 2 * 2048 + 1024  # with mlp_bias
    norms = 2 * 1024
    assert count_params(s).total == 6 * (attention + sinks + mlp + norms) + 1024 \
        + 2 * 1000 * 1024
    # all but the first of every four layers attend within the window (0 and 4 do not)
    assert (s.sliding_window, s.sliding_layers, s.attention_sinks) == (128, 4, True)


def test_cohere2_moe_counted_by_hand(tmp_path: Path) -> None:
    s = _read(tmp_path, TINY_COHERE2_MOE)
    assert (s.dense_layers, s.d_ffn, s.moe_ffn_hidden, s.shared_experts) == (3, 3072, 512, 2)
    attention = 2 * (1024 * 1024 + 1024) + 2 * (1024 * 256 + 256)  # with attention_bias
    dense = 3 * 1024 * 3072  # the prefix's own width
    experts = 8 * 3 * 1024 * 512 + 8 * 1024 + 3 * 1024 * 2 * 512  # and the router, shared
    norm = 1024  # one a layer (parallel), a weight a channel
    assert count_params(s).total == 3 * (attention + dense + norm) \
        + 7 * (attention + experts + norm) + 1024 + 1000 * 1024
    # windows: the prefix every other layer (pattern 2), the rest all but every third
    assert (s.sliding_window, s.sliding_layers) == (4096, 3 - 1 + 7 - 2)


def test_dbrx_reads_its_nested_keys(tmp_path: Path) -> None:
    s = _read(tmp_path, TINY_DBRX)
    assert (s.hidden, s.heads, s.n_kv_heads, s.layers) == (256, 8, 2, 2)
    assert (s.experts, s.experts_per_token, s.d_expert, s.moe_layers) == (4, 2, 128, 2)


def test_shapes_read_as_their_families(tmp_path: Path) -> None:
    glm4 = _read(tmp_path, TINY_GLM4)
    assert glm4.sandwich_norms and glm4.qkv_bias and not glm4.out_bias
    star = _read(tmp_path, TINY_STARCODER2)
    assert star.ffn_kind is FfnKind.GELU and star.norm is NormKind.LAYERNORM
    assert star.qkv_bias and star.out_bias and star.mlp_bias and star.tied_embeddings
    phimoe = _read(tmp_path, TINY_PHIMOE)
    assert phimoe.lm_head_bias and phimoe.experts == 4 and phimoe.moe_layers == 2
    afmoe = _read(tmp_path, TINY_AFMOE)
    assert afmoe.attention_gate and afmoe.sandwich_norms and afmoe.router_bias
    assert afmoe.qk_norm is QkNorm.HEAD and afmoe.dense_layers == 1
    assert afmoe.shared_experts == 1
    glm = _read(tmp_path, GLM47_FLASH)
    assert glm.mla is not None and glm.dense_layers == 1 and glm.shared_experts == 1
    phi = _read(tmp_path, TINY_PHI)
    assert phi.parallel_attention and phi.shared_norm and phi.lm_head_bias
    assert phi.qk_norm is QkNorm.HEAD and phi.ffn_kind is FfnKind.GELU
    stable = _read(tmp_path, TINY_STABLELM)
    assert stable.parallel_attention and stable.qkv_bias and not stable.out_bias
    assert not _read(tmp_path, {**TINY_STABLELM, "use_parallel_residual": False}
                     ).parallel_attention
    hunyuan = _read(tmp_path, TINY_HUNYUAN_MOE)
    assert (hunyuan.experts, hunyuan.experts_per_token, hunyuan.shared_experts) == (8, 2, 1)
    assert hunyuan.moe_layers == 2 and hunyuan.qk_norm is QkNorm.HEAD
    arcee = _read(tmp_path, {"model_type": "arcee", "hidden_size": 64,
                             "intermediate_size": 256, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "vocab_size": 100})
    assert arcee.ffn_kind is FfnKind.RELU2


def test_dots1_active_parameters(tmp_path: Path) -> None:
    s = _read(tmp_path, DOTS1)
    counted = count_params(s)
    assert (s.dense_layers, s.moe_layers) == (1, 61)
    assert 13.9e9 < counted.active(s) < 14.1e9  # "14B activated"


@pytest.mark.parametrize(("cfg", "window", "windowed"), [
    # as Transformers 5.25's config classes derive layer_types
    ({"model_type": "olmo3", "num_hidden_layers": 32, "sliding_window": 4096}, 4096, 24),
    ({"model_type": "olmo3", "num_hidden_layers": 32}, 0, 0),
    ({"model_type": "exaone4", "num_hidden_layers": 32, "sliding_window": 4096,
      "sliding_window_pattern": 3}, 4096, 22),
    ({"model_type": "exaone4", "num_hidden_layers": 32}, 0, 0),
    ({"model_type": "cohere2", "num_hidden_layers": 40, "sliding_window": 4096,
      "sliding_window_pattern": 6}, 4096, 34),
    ({"model_type": "cohere2", "num_hidden_layers": 40, "sliding_window": 4096}, 4096, 30),
    ({"model_type": "afmoe", "num_hidden_layers": 32, "sliding_window": 1024,
      "global_attn_every_n_layers": 2, "num_experts": 8, "num_experts_per_tok": 2,
      "moe_intermediate_size": 64}, 1024, 16),
    ({"model_type": "smollm3", "num_hidden_layers": 36, "sliding_window": 4096,
      "use_sliding_window": True}, 4096, 9),
    ({"model_type": "smollm3", "num_hidden_layers": 36, "sliding_window": 4096,
      "use_sliding_window": True, "no_rope_layer_interval": 3}, 4096, 12),
    ({"model_type": "smollm3", "num_hidden_layers": 36, "sliding_window": 4096}, 0, 0),
    ({"model_type": "dots1", "num_hidden_layers": 20, "max_window_layers": 12}, 4096, 8),
    ({"model_type": "dots1", "num_hidden_layers": 62}, 0, 0),
    ({"model_type": "starcoder2", "num_hidden_layers": 30, "sliding_window": 4096}, 4096, 30),
    ({"model_type": "ministral", "num_hidden_layers": 36, "sliding_window": 32768}, 32768,
     36),
    ({"model_type": "seed_oss", "num_hidden_layers": 8, "sliding_window": 4096}, 0, 0),
    ({"model_type": "seed_oss", "num_hidden_layers": 4, "sliding_window": 256,
      "layer_types": ["sliding_attention", "full_attention"] * 2}, 256, 2),
    # granite_swa: full where i % 4 == 0 (the class's default; 6 of 24, 3 of 9)
    ({"model_type": "granite_swa", "num_hidden_layers": 24}, 128, 18),
    ({"model_type": "granitemoe_swa", "num_hidden_layers": 9, "num_local_experts": 4,
      "intermediate_size": 64}, 128, 6),
    ({"model_type": "granite_swa", "num_hidden_layers": 8, "sliding_window": None}, 0, 0),
    # vaultgemma: every other layer windowed from the first (3 of 5)
    ({"model_type": "vaultgemma", "num_hidden_layers": 5}, 4096, 3),
    # cwm: full where i % 4 == 0 (CwmConfig's default; 16 of 64), else by layer_types
    ({"model_type": "cwm", "num_hidden_layers": 64}, 8192, 48),
    ({"model_type": "cwm", "num_hidden_layers": 6, "sliding_window": 128,
      "layer_types": ["sliding_attention", "full_attention"] * 3}, 128, 3),
    # kolibri1: all but every fifth (40 of 50); beam: as many full layers as every sixth
    # from the first (Transformers: every sixth and the last, 9 of 52)
    ({"model_type": "kolibri1", "num_hidden_layers": 50, "num_experts": 8}, 513, 40),
    ({"model_type": "beam", "num_hidden_layers": 52, "num_experts": 8, "n_group": 1,
      "topk_group": 1}, 512, 43),
    ({"model_type": "beam", "num_hidden_layers": 48, "num_experts": 8, "n_group": 1,
      "topk_group": 1}, 512, 40),
    # cohere_compass_text: every layer full where layer_types is absent, whatever
    # sliding_window_pattern says
    ({"model_type": "cohere_compass_text", "num_hidden_layers": 40, "sliding_window": 4096,
      "sliding_window_pattern": 4}, 0, 0),
    ({"model_type": "cohere_compass_text", "num_hidden_layers": 28,
      "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 7}, 4096, 21),
    # cohere2_moe's default: no dense prefix, all but every fourth of 40
    ({"model_type": "cohere2_moe", "num_hidden_layers": 40, "num_experts": 4,
      "intermediate_size": 64}, 4096, 30),
])
def test_window_layers(tmp_path: Path, cfg: dict[str, Any], window: int,
                       windowed: int) -> None:
    base = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 1000}
    s = _read(tmp_path, {**base, **cfg})
    assert s.sliding_window == window
    assert (s.sliding_layers or s.layers if s.sliding_window else 0) == windowed


@pytest.mark.parametrize(("cfg", "dense", "moe"), [
    (TINY_ERNIE_INTERVAL, 6, 2),
    ({**TINY_ERNIE_INTERVAL, "moe_layer_end_index": -1, "moe_layer_start_index": 0,
      "moe_layer_interval": 1}, 0, 8),
    ({**GLM47_FLASH, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 44}, 3, 44),
    ({"model_type": "exaone_moe", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
      "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
      "first_k_dense_replace": 3}, 3, 5),
    ({"model_type": "hy_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
      "first_k_dense_replace": 3}, 1, 7),  # HY-V3 reads mlp_layer_types only
    ({**TINY_ERNIE_INTERVAL, "moe_layer_start_index": 8}, 8, 0),  # no layer routes
    # Qwen2-MoE's placement (Flint): the listed layers, and those whose number from 1 is no
    # multiple of the sparse step; a null list the class's default, the first two
    (TINY_FLINT, 2, 4),
    ({**TINY_FLINT, "mlp_only_layers": None}, 2, 4),
    ({**TINY_FLINT, "mlp_only_layers": [0], "decoder_sparse_step": 2}, 3, 3),
    ({**TINY_FLINT, "mlp_only_layers": [], "decoder_sparse_step": 3}, 4, 2),
    # A.X K1: mlp_layer_types, else from first_k_dense_replace on
    ({"model_type": "axk1", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
      "kv_lora_rank": 32, "q_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
      "v_head_dim": 32, "n_routed_experts": 8, "n_group": 1, "topk_group": 1,
      "num_experts_per_tok": 2, "vocab_size": 1000, "first_k_dense_replace": 2}, 2, 4),
])
def test_expert_layers(tmp_path: Path, cfg: dict[str, Any], dense: int, moe: int) -> None:
    s = _read(tmp_path, cfg)
    assert (s.layers - s.moe_layers, s.moe_layers) == (dense, moe)
    assert s.is_moe == bool(moe)


def test_class_defaults_fill_left_out_keys(tmp_path: Path) -> None:
    # GLM-4's config class defaults to 2 KV heads and attention biases; ERNIE 4.5 MoE's to
    # two shared expert widths (what Transformers builds when a config leaves them out)
    glm = _read(tmp_path, {"model_type": "glm", "hidden_size": 256,
                           "intermediate_size": 512, "num_hidden_layers": 2,
                           "num_attention_heads": 8, "vocab_size": 1000})
    assert glm.kv_heads == 2 and glm.qkv_bias
    ernie = _read(tmp_path, {k: v for k, v in TINY_ERNIE_INTERVAL.items()
                             if k != "moe_num_shared_experts"})
    assert ernie.shared_experts == 2


@pytest.mark.parametrize(("cfg", "message"), [
    ({**ERNIE45_21B, "use_bias": True}, r"use_bias: true is not read for ERNIE 4\.5 MoE"),
    ({**TINY_AFMOE, "attention_bias": True}, r"attention_bias: true is not read for Arcee"),
    ({**TINY_ERNIE_INTERVAL, "moe_layer_interval": 0},
     r"moe_layer_interval: expected a positive integer, got 0"),
    ({**GLM47_FLASH, "mlp_layer_types": ["dense", "moe"]},
     r"mlp_layer_types: expected 47 entries"),
    ({**TINY_STARCODER2, "layer_types": ["sliding_attention", "global"]},
     r"layer_types: expected 2 entries"),
    ({"model_type": "granitemoeshared", "hidden_size": 256, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
      "num_local_experts": 4, "num_experts_per_tok": 2, "shared_intermediate_size": 200},
     r"shared_intermediate_size: expected a multiple of intermediate_size \(128\), got 200"),
    ({"model_type": "exaone4", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
      "sliding_window": 64, "sliding_window_pattern": 0},
     r"sliding_window_pattern: expected a positive integer, got 0"),
    ({**TINY_COHERE, "intermediate_size": "512"}, r"intermediate_size: expected an integer"),
    ({**TINY_STABLELM, "qk_layernorm": True}, r"qk_layernorm: true is not read for StableLM"),
    ({**TINY_HUNYUAN_MOE, "num_experts": [8, 8]}, r"num_experts: expected an integer"),
    ({**TINY_DBRX, "ffn_config": {**TINY_DBRX["ffn_config"], "moe_num_experts": "4"}},
     r"ffn_config\.moe_num_experts: expected an integer, got '4'"),
    ({**TINY_APERTUS, "hidden_act": "gelu"},
     r"hidden_act: only 'xielu' is read for Apertus, got 'gelu'"),
])
def test_refusals_name_the_key(tmp_path: Path, cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_cli_refusal_exits_2_without_traceback(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, {**ERNIE45_21B, "use_bias": True})
    assert main(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert "use_bias: true is not read" in err and "Traceback" not in err


@pytest.mark.parametrize(("model_type", "hint"), [
    ("Qwen3MoE", "; did you mean 'qwen3_moe'? Supported: "),
    ("deepseek-v3", "; did you mean 'deepseek_v3'? Supported: "),
    ("olmo_1b", " is not supported; supported: "),  # near olmo in spelling, not a respelling
])
def test_unknown_model_type_suggests_only_a_respelling(tmp_path: Path, model_type: str,
                                                     hint: str) -> None:
    with pytest.raises(GpuarchError) as err:
        _read(tmp_path, {"model_type": model_type})
    assert hint in str(err.value) and "seed_oss" in str(err.value)


def test_read_by_architectures(tmp_path: Path) -> None:
    cfg = {**TINY_GLM4, "model_type": "my_glm4_fork", "architectures": ["Glm4ForCausalLM"]}
    assert count_params(_read(tmp_path, cfg)).total == 2_187_648


@pytest.mark.parametrize("cfg", [TINY_COHERE, TINY_GLM4, TINY_STARCODER2, TINY_AFMOE,
                                 TINY_ERNIE_INTERVAL, TINY_PHIMOE, TINY_PHI, TINY_STABLELM,
                                 TINY_HUNYUAN_MOE, TINY_APERTUS, TINY_DBRX, TINY_GRANITE_SWA,
                                 TINY_GRANITEMOE_SWA, TINY_COHERE2_MOE,
                                 TINY_COHERE_COMPASS])
def test_estimates_run(tmp_path: Path, cfg: dict[str, Any]) -> None:
    s = _read(tmp_path, cfg)
    gpu = CATALOG.product("h100")
    train = estimate_training(CATALOG, s, gpu, TrainingConfig(seq_len=1024, global_batch=16,
                                                              micro_batch=1, gpus=2, tp=2))
    assert train.step_time_s > 0 and 0 < train.mfu < 1
    infer = estimate_inference(CATALOG, s, gpu, InferenceConfig(input_len=512, output_len=64,
                                                                batch=4, gpus=2, tp=2))
    assert infer.tpot_s > 0 and infer.ttft_s > 0


def test_table_families_are_supported_and_sourced() -> None:
    traits = family_traits()
    assert len(traits) >= 25
    for model_type, t in traits.items():
        assert model_type in SUPPORTED_MODEL_TYPES
        assert t.source.startswith("Transformers 5.25.0 models/")
        # (none where the checkpoints' own class name was not at hand: Sarvam's, Param-2's;
        # nor for a language model no causal-LM class of its own builds: Hy4 VL's)
        assert t.architecture.endswith("ForCausalLM") or (
            not t.architecture and model_type in ("sarvam_moe", "param2moe", "hy_v4_vl_text"))


@pytest.mark.parametrize(("row", "message"), [
    ({"name": "x", "source": "y", "qkv_biass": True}, r"unknown keys qkv_biass"),
    ({"name": "x", "source": "y", "ffn": "swiglu2"}, r"ffn: expected one of swiglu"),
    ({"name": "x", "source": "y", "norms": 3}, r"norms: expected 1, 2 or 4"),
    ({"name": "x", "source": "y", "qkv_bias": "attention_bias"},
     r"qkv_bias: expected true, false or a list"),
    ({"name": "x", "source": "y", "windows": "pattern"}, r"needs window_pattern"),
    ({"name": "x", "source": "y", "windows": "pattern_first"}, r"needs window_pattern"),
    ({"name": "x", "source": "y", "sinks": 1}, r"sinks: expected true or false, got 1"),
    ({"source": "y"}, r"name: expected a non-empty string"),
    ({"name": "x", "source": "y", "keys": {"hidden_size": ""}},
     r"keys: expected a table of config key paths"),
    ({"name": "x", "source": "y", "head_vocab_key": 7}, r"head_vocab_key: expected a config key"),
    ({"name": "x", "source": "y", "sandwich_key": ""}, r"sandwich_key: expected a config key"),
    ({"name": "x", "source": "y", "expert_layer_norms": -1},
     r"expert_layer_norms: expected a whole number, got -1"),
    ({"name": "x", "source": "y", "gate_head_bias": True},
     r"gate_head_bias needs attention_gate"),
    ({"name": "x", "source": "y", "dense": "mlp_only"}, r"dense: expected one of none"),
    ({"name": "x", "source": "y", "hyper_connections": "mhc"},
     r"hyper_connections: expected one of none, independent"),
    ({"name": "x", "source": "y", "indexer_every": 4}, r"indexer_every needs indexer"),
    ({"name": "x", "source": "y", "mla": True, "indexer": True, "indexer_every": -4},
     r"indexer_every: expected a whole number, got -4"),
    ({"name": "x", "source": "y", "glu_limit_key": ""}, r"glu_limit_key: expected a config key"),
])
def test_table_rows_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                row: dict[str, Any], message: str) -> None:
    def toml(value: Any) -> str:
        if isinstance(value, dict):
            return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
        return json.dumps(value)  # strings, numbers, lists and booleans read the same

    path = tmp_path / "families.toml"
    path.write_text("[bad]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in row.items()))
    assert tomllib.loads(path.read_text())["bad"] == row
    monkeypatch.setattr(hf_family_table, "FAMILIES_FILE", path)
    family_traits.cache_clear()
    try:
        with pytest.raises(GpuarchError, match=message):
            family_traits()
    finally:
        family_traits.cache_clear()
    assert FAMILIES_FILE.name == "hf_families.toml"


def test_olmo_norms_hold_no_parameters(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """OLMo 1's LayerNorms have no weight or bias (Transformers' OlmoLayerNorm): the same
    sizes read as a model with RMSNorms count two hidden-wide vectors a layer and one at the
    end more; the models display names them, and Megatron's command, which has no such norm,
    says so."""
    from gpuarch.report.launch import megatron_launch

    cfg = {"model_type": "olmo", "hidden_size": 1024, "intermediate_size": 2816,
           "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000}
    olmo = _read(tmp_path, cfg)
    llama = _read(tmp_path, {**cfg, "model_type": "llama"})
    assert olmo.norm is NormKind.LAYERNORM_NO_AFFINE
    assert count_params(llama).total - count_params(olmo).total == (2 * 4 + 1) * 1024
    launch = megatron_launch(olmo, TrainingConfig(gpus=8, seq_len=2048, global_batch=16))
    assert "--normalization" not in launch.argv
    assert any("LayerNorms without weights (OLMo 1's)" in n for n in launch.notes)
    path = write_config(tmp_path, cfg)
    assert main(["models", str(path)]) == 0
    assert "2 LayerNorms without weights a layer" in capsys.readouterr().out


# Apertus 1.5's language model: Apertus's layers over a vocabulary of 266,752 with the LM
# head pruned to its text tokens (output_vocab_size); counts are Transformers 5.25.0's on
# the meta device (scripts/params_vs_transformers.py)
@pytest.mark.parametrize(("cfg", "total", "rows"), [
    ({"model_type": "apertus1p5_text"}, 8_091_086_912, 0),  # Apertus1p5TextConfig's defaults
    ({"model_type": "apertus1p5_text", "output_vocab_size": 131072}, 7_535_341_632, 131072),
    # a full-width output_vocab_size is the unpruned head, as the config class takes it
    ({"model_type": "apertus1p5_text", "output_vocab_size": 266752, "hidden_size": 1024,
      "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 4096},
     571_479_556, 0),
    ({"model_type": "apertus1p5_text", "output_vocab_size": 1000, "vocab_size": 5000,
      "hidden_size": 512, "num_hidden_layers": 3, "num_attention_heads": 8,
      "num_key_value_heads": 2, "intermediate_size": 1024, "attention_bias": True},
     8_191_622, 1000),
    # the multimodal checkpoint's wrapper: its language model read
    ({"model_type": "apertus1p5", "text_config": {
        "model_type": "apertus1p5_text", "output_vocab_size": 131072, "hidden_size": 2048,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
        "intermediate_size": 8192}}, 990_923_784, 131072),
])
def test_apertus_1_5_prunes_its_head(tmp_path: Path, cfg: dict[str, Any], total: int,
                                     rows: int) -> None:
    shape = _read(tmp_path, cfg)
    assert count_params(shape).total == total
    assert shape.head_vocab == rows


def test_a_pruned_head_prices_its_rows(tmp_path: Path) -> None:
    """The head's rows, not the vocabulary, set its parameters, its GEMM's FLOPs and the
    logits a sequence holds; the embedding keeps every row."""
    from gpuarch.workloads.flops import forward_flops_per_token

    base = {"model_type": "apertus1p5_text", "hidden_size": 1024, "num_hidden_layers": 2,
            "num_attention_heads": 8, "intermediate_size": 4096, "vocab_size": 200_000}
    whole = _read(tmp_path, base)
    pruned = _read(tmp_path, {**base, "output_vocab_size": 50_000})
    assert count_params(whole).lm_head - count_params(pruned).lm_head == 150_000 * 1024
    assert count_params(whole).embedding == count_params(pruned).embedding
    assert forward_flops_per_token(whole, 1024).lm_head \
        == 4 * forward_flops_per_token(pruned, 1024).lm_head
    h100 = load_catalog().product("h100")
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=64)
    assert estimate_inference(load_catalog(), pruned, h100, cfg).tpot_s \
        < estimate_inference(load_catalog(), whole, h100, cfg).tpot_s


@pytest.mark.parametrize(("extra", "message"), [
    ({"output_vocab_size": 300_000}, "head_vocab: the LM head's 300,000 rows exceed the "
                                     "vocabulary's 266,752"),
    ({"output_vocab_size": 1000, "tie_word_embeddings": True},
     "head_vocab: a pruned LM head is a matrix of its own"),
])
def test_a_pruned_head_is_checked(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {"model_type": "apertus1p5_text", **extra})


def test_axk1_norms_after_its_expert_blocks(tmp_path: Path) -> None:
    """A.X K1's expert layers each end in a norm of their own (post_mlp_layernorm): the
    default's 60 expert layers hold 60 x 7168 more than the same layers without it."""
    s = _read(tmp_path, {"model_type": "axk1"})
    assert (s.moe_layers, s.expert_layer_norms) == (60, 1)
    without = dataclasses.replace(s, expert_layer_norms=0)
    assert count_params(s).total - count_params(without).total == 60 * 7168


def test_beam_gate_bias_by_hand(tmp_path: Path) -> None:
    """Beam's output gate: its own projection without bias and one bias a head, whatever
    attention_bias says; the query projection alone carries attention_bias's query bias
    (against a gate made by the query projection, whose bias would cover the gate's
    channels too)."""
    cfg = {"model_type": "beam", "hidden_size": 512, "num_hidden_layers": 2,
           "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 32,
           "intermediate_size": 1024, "vocab_size": 1000, "num_experts": 0}
    for bias in (False, True):
        s = _read(tmp_path, {**cfg, "attention_bias": bias})
        fused = dataclasses.replace(s, gate_head_bias=False)
        difference = count_params(s).total - count_params(fused).total
        # a bias a head, less the gate channels' biases a fused projection would carry
        assert difference == 2 * (16 - (16 * 32 if bias else 0))
    with pytest.raises(GpuarchError, match="gate_head_bias: a bias a head on the channel"):
        dataclasses.replace(s, attention_gate=False)


@pytest.mark.parametrize(("model_type", "why"), [
    ("kolibri1_1", "pooled-key indexer"), ("qwen4_exp_text", "n-gram"),
])
def test_families_not_read_yet_say_what_they_lack(tmp_path: Path, model_type: str,
                                                  why: str) -> None:
    with pytest.raises(GpuarchError, match=rf"'{model_type}' is not read yet: .*{why}"):
        _read(tmp_path, {"model_type": model_type, "hidden_size": 512})
    # a multimodal wrapper around one is refused for it too
    with pytest.raises(GpuarchError, match=rf"'wrapper_x' \(its text_config's '{model_type}'\) "
                                           rf"is not read yet: .*{why}"):
        _read(tmp_path, {"model_type": "wrapper_x", "text_config": {"model_type": model_type}})


def test_nanochat_norms_hold_no_weights(tmp_path: Path) -> None:
    """nanochat's RMSNorms (and its per-head query and key norms) have no weight: the
    same model with weighted RMSNorms counts 2 x 768 a layer, the final norm's 768 and 2 x 128
    a layer for the query and key norms more; Megatron's launch says what it cannot build."""
    s = _read(tmp_path, {"model_type": "nanochat"})
    assert s.norm is NormKind.RMSNORM_NO_WEIGHT
    weighted = dataclasses.replace(s, norm=NormKind.RMSNORM)
    assert count_params(weighted).total - count_params(s).total == \
        12 * (2 * 768 + 2 * 128) + 768
    from gpuarch.report.launch import megatron_launch

    launch = megatron_launch(s, TrainingConfig(gpus=8, seq_len=2048, global_batch=16))
    assert "RMSNorm" in launch.argv[launch.argv.index("--normalization") + 1]
    assert any("RMSNorms without weights (nanochat's)" in note for note in launch.notes)


def test_axk2_gated_queries_and_norms_by_hand(tmp_path: Path) -> None:
    """A.X K2's query up-projection reads the latent beside its norm (2 x 384) and writes the
    queries and a gate a value channel (32 heads x (96 + 64)), where DeepSeek-V3.2's writes
    the queries from the latent alone (384 to 32 x 96); its norm before attention in all 48
    layers and before the experts in the 47 expert layers carries a rank-16 gate, 2 x 2048 x
    16 each: against the same shape without them, 138,346,496 more, as Transformers builds
    it. Its indexer and its "indexed_attention" layers are DeepSeek Sparse Attention's."""
    s = _read(tmp_path, {"model_type": "axk2"})
    assert s.mla is not None and s.mla.q_gate and s.mla.sparse and s.gated_norm_rank == 16
    assert (s.layers - s.moe_layers, s.sliding_window) == (1, 0)
    plain = dataclasses.replace(s, mla=dataclasses.replace(s.mla, q_gate=False),
                                gated_norm_rank=0)
    gates = 48 * (2 * 384 * 32 * (96 + 64) - 384 * 32 * 96)
    norms = (48 + 47) * 2 * 2048 * 16
    assert count_params(s).total - count_params(plain).total == gates + norms == 138_346_496
    with pytest.raises(GpuarchError, match="q_gate: the gated query projection is the latent"):
        dataclasses.replace(s, head_gate=True)
    with pytest.raises(GpuarchError, match="gated_norm_rank: 4096"):
        dataclasses.replace(s, gated_norm_rank=4096)


@pytest.mark.parametrize(("model_type", "text"), [
    ("gemma4_unified", "gemma4_unified_text"), ("emu3", "emu3_text_model"),
    ("cohere_compass", "cohere_compass_text"), ("qwen3_vl", "qwen3_vl_text"),
])
def test_a_wrapper_without_its_text_config_says_so(tmp_path: Path, model_type: str,
                                                   text: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuarchError, match=rf"'{model_type}' is a multimodal checkpoint whose "
                                           rf"language model \('{text}'\) is read from its "
                                           "text_config, which this config lacks"):
        _read(tmp_path, {"model_type": model_type})
    path = write_config(tmp_path, {"model_type": model_type})
    assert main(["models", str(path)]) == 2
    assert "Traceback" not in capsys.readouterr().err
