"""Call every flag of gpuarch's commands with odd values, and every key of a few model
families' config.json with values of the wrong kind, and report what a user should never
see: a traceback, an exit status other than 0, 1 or 2, or a call that runs past a time
limit. Not a test (it takes a while): run it after changing how input is read.

    python scripts/fuzz_cli.py              # the estimate, roofline, catalog and numerics
                                            # commands, config.json, --data (and
                                            # load runs and their writer), --measured
                                            # (benchmark results, training logs),
                                            # --calibration, validate ops --file and
                                            # probe --fake files (a few minutes)
    python scripts/fuzz_cli.py --advisors   # the two advisors and --prices files too
                                            # (longer)

Exit status 1 when anything turned up, each finding printed with the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import itertools
import json
import re
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuarch.cli.main import main
from gpuarch.validation.run_points import toml_value

ODD_VALUES = ("", "-1", "0", "nan", "inf", "1e400", "abc", str(10**20), "0.5", "1,2", "h100",
              ":", "gemm:1,2", "x" * 300)
"""Values every flag gets, one at a time: empty, negative, zero, not finite, past float64
and int64, not a number, a fraction, a list, a GPU's name, a malformed op, a name longer
than a file system allows."""

COMMANDS: dict[str, list[str]] = {
    "estimate train": ["--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--seq-len",
                       "4096", "--global-batch", "64", "--micro-batch", "1"],
    "estimate infer": ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1000",
                       "--output-len", "100", "--batch", "8"],
    "roofline": ["--gpu", "h100"],
    "show": ["h100"],
    "compare": ["h100", "a100"],
    "list": [],
    "evolution": [],
    "numerics formats": [],
    "numerics matmul": [],
    "numerics recipe-sim": [],
    "numerics sparsity": ["--gpu", "h100"],
    "models": [],
    "validate power": [],
    "validate training": [],
    "validate inference": [],
}
ADVISORS: dict[str, list[str]] = {
    "advise train": ["--model", "llama-3.1-8b", "--tokens", "1e9", "--max-gpus", "64"],
    "advise infer": ["--model", "llama-3.1-8b"],
}

_DEEPSEEK_V3: dict[str, Any] = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_group": 8, "topk_group": 4}

CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "intermediate_size": 14336, "max_position_embeddings": 131072,
              "tie_word_embeddings": False},
    "deepseek_v3": _DEEPSEEK_V3,
    "deepseek_v32": {**_DEEPSEEK_V3, "model_type": "deepseek_v32", "index_n_heads": 64,
                     "index_head_dim": 128, "index_topk": 2048},
    "glm_moe_dsa": {**_DEEPSEEK_V3, "model_type": "glm_moe_dsa", "index_n_heads": 32,
                    "index_head_dim": 128, "index_topk": 2048, "index_topk_freq": 4,
                    "index_skip_topk_offset": 3},
    # DeepSeek-V4 Flash's keys (compressed attention, hyper-connections)
    "deepseek_v4": {"model_type": "deepseek_v4", "hidden_size": 4096, "num_hidden_layers": 43,
                    "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
                    "vocab_size": 129280, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
                    "o_groups": 8, "o_lora_rank": 1024, "moe_intermediate_size": 2048,
                    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 6,
                    "num_hash_layers": 3, "hc_mult": 4, "sliding_window": 128,
                    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
                    "compress_ratios": [0, 0, *[4, 128] * 20, 4, 0], "expert_dtype": "fp4",
                    "quantization_config": {"quant_method": "fp8",
                                            "weight_block_size": [128, 128]}},
    "gpt_oss": {"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 24,
                "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                "vocab_size": 201088, "intermediate_size": 2880, "num_local_experts": 32,
                "num_experts_per_tok": 4, "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 12,
                "swiglu_limit": 7.0},
    "qwen2_moe": {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
                  "intermediate_size": 5632, "moe_intermediate_size": 1408,
                  "num_experts": 60, "num_experts_per_tok": 4,
                  "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 2,
                  "mlp_only_layers": [0]},
    "gpt2": {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
             "vocab_size": 50257, "n_positions": 1024},
    "gemma2": {"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
               "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
               "head_dim": 256, "sliding_window": 4096, "vocab_size": 256000},
    "gemma3": {"model_type": "gemma3",
               "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                               "intermediate_size": 10240, "num_hidden_layers": 34,
                               "sliding_window": 1024, "sliding_window_pattern": 6}},
    "gemma3_text": {"model_type": "gemma3_text", "hidden_size": 1152,
                    "intermediate_size": 6912, "num_hidden_layers": 26,
                    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
                    "sliding_window": 512, "sliding_window_pattern": 6,
                    "layer_types": ["sliding_attention"] * 5 + ["full_attention"]},
    "olmo2": {"model_type": "olmo2", "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 100352},
    "apertus1p5_text": {"model_type": "apertus1p5_text", "hidden_size": 1024,
                        "num_hidden_layers": 4, "num_attention_heads": 8,
                        "intermediate_size": 4096, "output_vocab_size": 131072},
    "gemma3n": {"model_type": "gemma3n", "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 1024, "num_hidden_layers": 10,
        "intermediate_size": [4096] * 10, "num_kv_shared_layers": 4, "vocab_size": 5000,
        "vocab_size_per_layer_input": 4000, "hidden_size_per_layer_input": 64,
        "altup_num_inputs": 4, "laurel_rank": 32}},
    "bailing_hybrid": {"model_type": "bailing_hybrid", "hidden_size": 512,
                       "num_hidden_layers": 6, "num_attention_heads": 8, "head_dim": 64,
                       "num_local_experts": 16, "num_experts_per_tok": 4,
                       "moe_intermediate_size": 128, "n_shared_experts": 2, "n_group": 4,
                       "topk_group": 2, "first_k_dense_replace": 1, "intermediate_size": 1024,
                       "vocab_size": 3000, "kv_lora_rank": 128, "qk_nope_head_dim": 32,
                       "qk_rope_head_dim": 16, "v_head_dim": 32, "layer_group_size": 3},
    "laguna": {"model_type": "laguna", "hidden_size": 1024, "num_hidden_layers": 8,
               "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
               "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 2,
               "num_attention_heads_per_layer": [24, 24, 24, 16] * 2, "num_experts": 16,
               "num_experts_per_tok": 4, "moe_intermediate_size": 256,
               "shared_expert_intermediate_size": 256, "intermediate_size": 2048,
               "vocab_size": 5000},
    "olmo": {"model_type": "olmo", "hidden_size": 2048, "intermediate_size": 8192,
             "num_hidden_layers": 16, "num_attention_heads": 16, "clip_qkv": 8.0,
             "tie_word_embeddings": True},
    "nemotron_h": {"model_type": "nemotron_h", "hidden_size": 2688, "num_hidden_layers": 8,
                   "hybrid_override_pattern": "MEM*EM-E", "num_attention_heads": 32,
                   "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 1856,
                   "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128,
                   "n_groups": 8, "conv_kernel": 4, "n_routed_experts": 128,
                   "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
                   "moe_shared_expert_intermediate_size": 3712, "vocab_size": 131072,
                   "mamba_ssm_cache_dtype": "float32"},
    "qwen3_vl": {"model_type": "qwen3_vl", "tie_word_embeddings": True,
                 "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 2048,
                                 "intermediate_size": 6144, "num_hidden_layers": 28,
                                 "num_attention_heads": 16, "num_key_value_heads": 8,
                                 "head_dim": 128, "vocab_size": 151936}},
    "by_architectures": {"model_type": "a_finetune", "architectures": ["Qwen2ForCausalLM"],
                         "hidden_size": 3584, "intermediate_size": 18944,
                         "num_hidden_layers": 28, "num_attention_heads": 28,
                         "num_key_value_heads": 4, "vocab_size": 152064},
    "gemma4_text": {"model_type": "gemma4_text", "hidden_size": 2816, "intermediate_size": 2112,
                    "num_hidden_layers": 6, "num_attention_heads": 16,
                    "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
                    "num_global_key_value_heads": 2, "attention_k_eq_v": True,
                    "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
                    "sliding_window": 1024, "enable_moe_block": True, "num_experts": 16,
                    "top_k_experts": 2, "moe_intermediate_size": 704,
                    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                    "vocab_size": 262144},
    "mimo_v2_flash": {"model_type": "mimo_v2_flash", "hidden_size": 4096,
                      "num_hidden_layers": 6, "num_attention_heads": 64,
                      "num_key_value_heads": 4, "swa_num_key_value_heads": 8,
                      "head_dim": 192, "v_head_dim": 128, "intermediate_size": 16384,
                      "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0],
                      "moe_layer_freq": [0, 1, 1, 1, 1, 1], "n_routed_experts": 16,
                      "num_experts_per_tok": 2, "moe_intermediate_size": 2048,
                      "sliding_window_size": 128, "add_swa_attention_sink_bias": True,
                      "vocab_size": 152576},
    "nemotron-nas": {"model_type": "nemotron-nas", "hidden_size": 4096,
                     "num_hidden_layers": 3, "num_attention_heads": 32,
                     "vocab_size": 128256, "block_configs": [
                         {"attention": {"n_heads_in_group": 8}, "ffn": {"ffn_mult": 2.625}},
                         {"attention": {"no_op": True}, "ffn": {"ffn_mult": 1.0}},
                         {"attention": {"n_heads_in_group": 8}, "ffn": {"no_op": True}}]},
    "minimax_m3": {"model_type": "minimax_m3", "hidden_size": 2048, "num_hidden_layers": 4,
                   "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
                   "intermediate_size": 1024, "shared_intermediate_size": 1024,
                   "dense_intermediate_size": 4096, "num_local_experts": 8,
                   "num_experts_per_tok": 2, "moe_layer_freq": [0, 1, 1, 1],
                   "swiglu_limit": 7.0, "vocab_size": 200064, "sparse_attention_config": {
                       "sparse_attention_freq": [0, 1, 1, 1], "sparse_num_index_heads": 4,
                       "sparse_index_dim": 128, "sparse_block_size": 128,
                       "sparse_topk_blocks": 16, "sparse_local_block": 1}},
    "kimi_linear": {"model_type": "kimi_linear", "hidden_size": 2304, "num_hidden_layers": 4,
                    "num_attention_heads": 32, "kv_lora_rank": 512, "q_lora_rank": None,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "intermediate_size": 9216, "moe_intermediate_size": 1024,
                    "num_experts": 16, "num_experts_per_token": 4, "num_shared_experts": 1,
                    "first_k_dense_replace": 1, "vocab_size": 163840, "mla_use_nope": True,
                    "linear_attn_config": {"full_attn_layers": [4], "kda_layers": [1, 2, 3],
                                           "num_heads": 32, "head_dim": 128,
                                           "short_conv_kernel_size": 4}},
    # Kimi K3's text model: latent experts, a gated latent attention, full-rank KDA gates,
    # block attention residuals
    "kimi_k3_text": {"model_type": "kimi_linear", "hidden_size": 7168, "num_hidden_layers": 4,
                     "num_attention_heads": 96, "kv_lora_rank": 512, "q_lora_rank": 1536,
                     "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                     "intermediate_size": 33792, "moe_intermediate_size": 3072,
                     "routed_expert_hidden_size": 3584, "latent_moe_use_norm": True,
                     "mla_use_output_gate": True, "attn_res_block_size": 2,
                     "num_experts": 16, "num_experts_per_token": 4, "num_shared_experts": 2,
                     "first_k_dense_replace": 1, "vocab_size": 163840,
                     "linear_attn_config": {"full_attn_layers": [4], "kda_layers": [1, 2, 3],
                                            "num_heads": 96, "head_dim": 128,
                                            "use_full_rank_gate": True}},
    "step3p7": {"model_type": "step3p7", "num_hidden_layers": 4, "hidden_size": 4096,
                "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
                "vocab_size": 128896, "intermediate_size": 11264, "sliding_window": 512,
                "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                                "sliding_attention", "full_attention"],
                "num_nextn_predict_layers": 1, "n_routed_experts": 16,
                "num_experts_per_tok": 4, "moe_intermediate_size": 1280,
                "share_expert_dim": 1280, "moe_layers_enum": "2,3,4",
                "attention_other_setting": {"num_attention_heads": 96}},
    # Gemma 4 E2B-style: per-layer inputs, the last layers KV-shared with wide MLPs
    "gemma4_e2b": {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 10,
                   "intermediate_size": 6144, "num_attention_heads": 8, "head_dim": 256,
                   "global_head_dim": 512, "num_key_value_heads": 1,
                   "num_kv_shared_layers": 4, "hidden_size_per_layer_input": 256,
                   "vocab_size_per_layer_input": 262144, "vocab_size": 262144,
                   "sliding_window": 512, "use_double_wide_mlp": True,
                   "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2},
    # families of the table (data/hf_families.toml): ERNIE 4.5 MoE's expert-layer range,
    # Arcee Trinity's window pattern and gate, Cohere's parallel layers, GLM-4.7-Flash's
    # latent attention, SmolLM3's windows on its NoPE layers, dots.llm1's window start
    "ernie4_5_moe": {"model_type": "ernie4_5_moe", "hidden_size": 1024,
                     "intermediate_size": 4096, "moe_intermediate_size": 512,
                     "num_hidden_layers": 4, "num_attention_heads": 16,
                     "num_key_value_heads": 8, "vocab_size": 32000, "moe_num_experts": 8,
                     "moe_k": 2, "moe_num_shared_experts": 1, "moe_layer_start_index": 1,
                     "moe_layer_end_index": 3, "moe_layer_interval": 1,
                     "tie_word_embeddings": True},
    "afmoe": {"model_type": "afmoe", "hidden_size": 1024, "intermediate_size": 4096,
              "moe_intermediate_size": 512, "num_hidden_layers": 4, "num_dense_layers": 1,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64,
              "vocab_size": 32000, "num_experts": 8, "num_experts_per_tok": 2,
              "num_shared_experts": 1, "global_attn_every_n_layers": 2,
              "sliding_window": 512},
    "cohere2": {"model_type": "cohere2", "hidden_size": 1024, "intermediate_size": 4096,
                "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
                "vocab_size": 32000, "sliding_window": 512, "sliding_window_pattern": 4,
                "use_qk_norm": True, "attention_bias": True},
    "glm4_moe_lite": {"model_type": "glm4_moe_lite", "vocab_size": 32000,
                      "hidden_size": 1024, "intermediate_size": 4096,
                      "moe_intermediate_size": 512, "num_hidden_layers": 4,
                      "num_attention_heads": 16, "num_key_value_heads": 16,
                      "n_shared_experts": 1, "n_routed_experts": 8, "kv_lora_rank": 512,
                      "q_lora_rank": 768, "qk_rope_head_dim": 64, "v_head_dim": 128,
                      "qk_nope_head_dim": 128, "num_experts_per_tok": 2,
                      "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]},
    "smollm3": {"model_type": "smollm3", "hidden_size": 1024, "intermediate_size": 4096,
                "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
                "vocab_size": 32000, "use_sliding_window": True, "sliding_window": 512,
                "no_rope_layers": [1, 1, 1, 0]},
    "dots1": {"model_type": "dots1", "hidden_size": 1024, "intermediate_size": 4096,
              "moe_intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 16,
              "num_key_value_heads": 8, "vocab_size": 32000, "n_routed_experts": 8,
              "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
              "sliding_window": 512, "max_window_layers": 2},
    "hunyuan_v1_moe": {"model_type": "hunyuan_v1_moe", "hidden_size": 1024,
                       "intermediate_size": 512, "num_hidden_layers": 4,
                       "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64,
                       "vocab_size": 32000, "num_experts": 8, "moe_topk": 2},
    "stablelm": {"model_type": "stablelm", "hidden_size": 1024, "intermediate_size": 4096,
                 "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
                 "vocab_size": 32000, "use_qkv_bias": True, "use_parallel_residual": True},
    "apertus": {"model_type": "apertus", "hidden_size": 1024, "intermediate_size": 4096,
                "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
                "vocab_size": 32000, "hidden_act": "xielu"},
    "dbrx": {"model_type": "dbrx", "d_model": 1024, "n_heads": 16, "n_layers": 4,
             "max_seq_len": 4096, "vocab_size": 32000,
             "attn_config": {"kv_n_heads": 8, "clip_qkv": 8.0},
             "ffn_config": {"ffn_hidden_size": 512, "moe_num_experts": 8, "moe_top_k": 2}},
    # Falcon-H1: Mamba-2 and attention side by side, one B/C group (held whole a GPU)
    "falcon_h1": {"model_type": "falcon_h1", "vocab_size": 32000, "hidden_size": 1024,
                  "intermediate_size": 4096, "num_hidden_layers": 4,
                  "num_attention_heads": 16, "num_key_value_heads": 8, "mamba_d_ssm": 2048,
                  "mamba_n_heads": 64, "mamba_n_groups": 1, "mamba_d_state": 128,
                  "mamba_d_conv": 4, "mamba_rms_norm": True},
    # Mamba-1: Jamba's mixers beside attention and experts; Falcon Mamba's whole model
    "jamba": {"model_type": "jamba", "hidden_size": 1024, "intermediate_size": 2048,
              "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
              "num_experts": 8, "num_experts_per_tok": 2, "attn_layer_period": 4,
              "attn_layer_offset": 2, "expert_layer_period": 2, "expert_layer_offset": 1,
              "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
              "mamba_dt_rank": 64, "vocab_size": 32000},
    "falcon_mamba": {"model_type": "falcon_mamba", "hidden_size": 1024,
                     "intermediate_size": 2048, "num_hidden_layers": 4, "state_size": 16,
                     "time_step_rank": 64, "vocab_size": 32000, "tie_word_embeddings": False},
    # lightning attention beside softmax attention, experts in every layer (MiniMax-01)
    "minimax": {"model_type": "minimax", "hidden_size": 1024, "intermediate_size": 2048,
                "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                "head_dim": 64, "num_local_experts": 8, "num_experts_per_tok": 2,
                "vocab_size": 32000, "block_size": 256,
                "layer_types": ["linear_attention"] * 3 + ["full_attention"]},
    # Bamba: Mamba-2 or attention layers by index, each with an MLP
    "bamba": {"model_type": "bamba", "attn_layer_indices": [1], "hidden_size": 1024,
              "intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
              "num_key_value_heads": 4, "mamba_n_heads": 32, "mamba_n_groups": 2,
              "mamba_d_state": 64, "mamba_expand": 2, "vocab_size": 32000},
    # Granite with sliding windows, a learned sink a head and experts (a table row)
    "granitemoe_swa": {"model_type": "granitemoe_swa", "hidden_size": 1024,
                       "intermediate_size": 512, "shared_intermediate_size": 1024,
                       "num_hidden_layers": 4, "num_attention_heads": 16,
                       "num_key_value_heads": 4, "num_local_experts": 8,
                       "num_experts_per_tok": 2, "vocab_size": 32000, "sliding_window": 256},
    # Cohere's MoE: parallel layers, a dense prefix of its own width and window pattern
    "cohere2_moe": {"model_type": "cohere2_moe", "hidden_size": 1024,
                    "intermediate_size": 512, "prefix_dense_intermediate_size": 2048,
                    "first_k_dense_replace": 1, "num_hidden_layers": 4,
                    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                    "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 1,
                    "vocab_size": 32000, "sliding_window": 512,
                    "prefix_dense_sliding_window_pattern": 1, "sliding_window_pattern": 4},
    # Cohere's North's text model: Cohere2's parallel layers, windows by layer_types (a
    # table row)
    "cohere_compass_text": {"model_type": "cohere_compass_text", "hidden_size": 1024,
                            "intermediate_size": 2048, "num_hidden_layers": 4,
                            "num_attention_heads": 16, "num_key_value_heads": 4,
                            "vocab_size": 32000, "sliding_window": 512,
                            "layer_types": ["sliding_attention"] * 3 + ["full_attention"]},
    # LFM2: gated short convolutions beside attention; LFM2-MoE with experts
    "lfm2": {"model_type": "lfm2", "hidden_size": 1024, "intermediate_size": 4096,
             "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8,
             "vocab_size": 32000, "conv_L_cache": 3, "block_multiple_of": 256,
             "block_ffn_dim_multiplier": 1.0, "full_attn_idxs": [1]},
    "lfm2_moe": {"model_type": "lfm2_moe", "hidden_size": 1024, "intermediate_size": 4096,
                 "moe_intermediate_size": 512, "num_experts": 8, "num_experts_per_tok": 2,
                 "num_dense_layers": 1, "num_hidden_layers": 4, "num_attention_heads": 16,
                 "num_key_value_heads": 8, "vocab_size": 32000,
                 "layer_types": ["conv", "full_attention", "conv", "conv"]},
    # table rows: latent attention with dense MLPs (Youtu), GLM-4.5's layers (Sarvam MoE)
    "youtu": {"model_type": "youtu", "hidden_size": 1024, "intermediate_size": 2048,
              "num_hidden_layers": 4, "num_attention_heads": 16, "kv_lora_rank": 128,
              "q_lora_rank": 256, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
              "v_head_dim": 32, "vocab_size": 32000},
    "sarvam_moe": {"model_type": "sarvam_moe", "hidden_size": 1024, "intermediate_size": 2048,
                   "moe_intermediate_size": 256, "num_hidden_layers": 4,
                   "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                   "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
                   "first_k_dense_replace": 1, "use_qk_norm": True, "vocab_size": 32000},
    "vaultgemma": {"model_type": "vaultgemma", "hidden_size": 1024, "intermediate_size": 2048,
                   "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
                   "head_dim": 128, "vocab_size": 32000, "sliding_window": 512},
    # the GPT-2-era families: OPT, MPT, GPTBigCode, GPT-Neo
    "opt": {"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 4,
            "num_attention_heads": 16, "ffn_dim": 4096, "word_embed_proj_dim": 1024,
            "max_position_embeddings": 2048, "vocab_size": 50272, "enable_bias": True},
    "mpt": {"model_type": "mpt", "d_model": 1024, "n_heads": 16, "n_layers": 4,
            "max_seq_len": 2048, "vocab_size": 50368, "expansion_ratio": 4, "no_bias": True,
            "attn_config": {"alibi": True, "attn_type": "multihead_attention"}},
    "gpt_bigcode": {"model_type": "gpt_bigcode", "n_embd": 1024, "n_layer": 4, "n_head": 16,
                    "n_positions": 2048, "vocab_size": 49152, "multi_query": True},
    "gpt_neo": {"model_type": "gpt_neo", "hidden_size": 1024, "num_layers": 4,
                "num_heads": 16, "max_position_embeddings": 2048, "vocab_size": 50257,
                "window_size": 256, "attention_types": [[["global", "local"], 2]]},
    "mistral3": {"model_type": "mistral3",
                 "text_config": {"model_type": "mistral", "hidden_size": 5120,
                                 "intermediate_size": 32768, "num_hidden_layers": 40,
                                 "num_attention_heads": 32, "num_key_value_heads": 8,
                                 "head_dim": 128, "vocab_size": 131072}},
    "mistral4": {"model_type": "mistral3", "text_config": {
        "model_type": "mistral4", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 16, "intermediate_size": 2048, "moe_intermediate_size": 256,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "first_k_dense_replace": 1, "kv_lora_rank": 128, "q_lora_rank": 256,
        "qk_rope_head_dim": 32, "qk_nope_head_dim": 32, "v_head_dim": 64, "vocab_size": 32000}},
    "cwm": {"model_type": "cwm", "hidden_size": 1024, "num_hidden_layers": 4,
            "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
            "intermediate_size": 2048, "vocab_size": 32000, "sliding_window": 256},
    "olmo_hybrid": {"model_type": "olmo_hybrid", "hidden_size": 1024, "num_hidden_layers": 4,
                    "num_attention_heads": 16, "intermediate_size": 2048, "vocab_size": 32000,
                    "linear_num_key_heads": 8, "linear_key_head_dim": 64},
    "lfm3": {"model_type": "lfm3", "hidden_size": 1024, "num_hidden_layers": 6,
             "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
             "intermediate_size": 2048, "vocab_size": 32000, "sliding_window": 128,
             "conv_L_cache": 5,
             "layer_types": ["conv", "sliding_attention", "full_attention"] * 2},
    "lara_mini": {"model_type": "lara_mini", "hidden_size": 1024, "num_hidden_layers": 5,
                  "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                  "vocab_size": 32000, "moe_intermediate_size": 256, "num_experts": 8,
                  "num_experts_per_tok": 2, "shared_expert_intermediate_size": 512,
                  "linear_num_key_heads": 4, "linear_num_value_heads": 8,
                  "sliding_window": 128},
    # LongCat-Flash-Chat's published sizes: its mean of real experts a token is read
    "longcat_flash_chat": {"model_type": "longcat_flash", "hidden_size": 6144,
                           "num_layers": 28, "n_routed_experts": 512, "zero_expert_num": 256,
                           "moe_topk": 12, "expert_ffn_hidden_size": 2048},
    "longcat_flash": {"model_type": "longcat_flash", "hidden_size": 1024, "num_layers": 2,
                      "num_attention_heads": 16, "ffn_hidden_size": 2048,
                      "expert_ffn_hidden_size": 256, "n_routed_experts": 16,
                      "zero_expert_num": 8, "moe_topk": 4, "q_lora_rank": 256,
                      "kv_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 32,
                      "v_head_dim": 64, "vocab_size": 32000},
    "mellum": {"model_type": "mellum", "hidden_size": 1024, "num_hidden_layers": 4,
               "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
               "intermediate_size": 2048, "moe_intermediate_size": 256, "num_experts": 8,
               "num_experts_per_tok": 2, "vocab_size": 32000,
               "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
               "layer_types": ["sliding_attention", "full_attention"] * 2,
               "sliding_window": 256},
    "kolibri1": {"model_type": "kolibri1", "hidden_size": 1024, "num_hidden_layers": 5,
                 "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                 "moe_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2,
                 "shared_expert_intermediate_size": 256, "vocab_size": 32000},
    "axk1": {"model_type": "axk1", "hidden_size": 1024, "num_hidden_layers": 4,
             "num_attention_heads": 16, "intermediate_size": 2048, "moe_intermediate_size": 256,
             "n_routed_experts": 8, "n_group": 2, "topk_group": 1, "num_experts_per_tok": 2,
             "kv_lora_rank": 128, "q_lora_rank": 256, "qk_rope_head_dim": 32,
             "qk_nope_head_dim": 32, "v_head_dim": 64, "vocab_size": 32000},
    "zaya": {"model_type": "zaya", "hidden_size": 1024, "num_hidden_layers": 3,
             "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
             "vocab_size": 32000, "num_experts": 8, "moe_intermediate_size": 512,
             "router_hidden_size": 128, "cca_time0": 2, "cca_time1": 3,
             "layer_types": ["hybrid", "hybrid_sliding", "hybrid"], "sliding_window": 256},
    "axk2": {"model_type": "axk2", "vocab_size": 32000, "hidden_size": 1024,
             "intermediate_size": 2048, "moe_intermediate_size": 256, "num_hidden_layers": 3,
             "num_attention_heads": 8, "n_shared_experts": 1, "n_routed_experts": 8,
             "kv_lora_rank": 64, "q_lora_rank": 96, "qk_rope_head_dim": 16, "v_head_dim": 40,
             "qk_nope_head_dim": 48, "num_experts_per_tok": 2, "index_topk": 512,
             "index_head_dim": 32, "index_n_heads": 4, "gated_norm_rank": 8,
             "layer_types": ["indexed_attention"] * 3},
    "bitnet": {"model_type": "bitnet", "hidden_size": 1024, "intermediate_size": 2816,
               "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
               "vocab_size": 32000, "hidden_act": "relu2", "attention_bias": False,
               "quantization_config": {"quant_method": "bitnet",
                                       "quantization_mode": "online"}},
    "hy_v4": {"model_type": "hy_v4", "vocab_size": 32000, "hidden_size": 1024,
              "intermediate_size": 2048, "moe_intermediate_size": 256, "num_hidden_layers": 6,
              "num_attention_heads": 8, "n_routed_experts": 8, "num_experts_per_tok": 2,
              "q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 64,
              "qk_rope_head_dim": 32, "v_head_dim": 64, "index_n_heads": 4,
              "index_head_dim": 64, "index_topk": 512, "hc_mult": 4},
    # dots3-note in its released layout: window layers of 8 heads and KV rank 256 beside
    # full layers of 16 heads, KV rank 128 and an indexer
    "dots3_note": {"model_type": "dots3_note", "vocab_size": 32000, "hidden_size": 1024,
                   "intermediate_size": 2048, "moe_intermediate_size": 256,
                   "num_hidden_layers": 6, "num_attention_heads": 16,
                   "num_key_value_heads": 16, "q_lora_rank": 256, "kv_lora_rank": 128,
                   "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
                   "swa_num_attention_heads": 8, "swa_num_key_value_heads": 8,
                   "swa_kv_lora_rank": 256, "swa_head_dim": 128, "swa_qk_nope_head_dim": 96,
                   "swa_v_head_dim": 64, "n_routed_experts": 8, "num_experts_per_tok": 2,
                   "index_n_heads": 4, "index_head_dim": 64, "index_topk": 512,
                   "sliding_window_size": 256},
    "ergo": {"model_type": "ergo", "vocab_size": 32000, "hidden_size": 1024,
             "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
             "first_dense_intermediate_size": 4096, "moe_intermediate_size": 256,
             "shared_intermediate_size": 512, "num_experts": 8, "num_experts_per_tok": 2,
             "sliding_window": 256, "global_attention_every_n_layers": 2},
    "zamba2": {"model_type": "zamba2", "hidden_size": 1024, "num_hidden_layers": 8,
               "num_attention_heads": 16, "n_mamba_heads": 32, "mamba_ngroups": 2,
               "num_mem_blocks": 2, "use_shared_attention_adapter": True, "adapter_rank": 64,
               "use_mem_rope": True, "vocab_size": 32000,
               "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "mamba", "mamba",
                                     "hybrid", "mamba"]},
    "inkling": {"model_type": "inkling_mm_model", "mtp_config": {"num_nextn_predict_layers": 1},
                "text_config": {"model_type": "inkling_text", "hidden_size": 1024,
                                "num_hidden_layers": 6, "num_attention_heads": 16,
                                "num_key_value_heads": 2, "head_dim": 64,
                                "swa_num_attention_heads": 16, "swa_num_key_value_heads": 4,
                                "swa_head_dim": 64, "intermediate_size": 2048,
                                "moe_intermediate_size": 512, "n_routed_experts": 16,
                                "num_experts_per_tok": 2, "n_shared_experts": 1,
                                "dense_mlp_idx": 1, "d_rel": 16, "rel_extent": 1024,
                                "sliding_window_size": 512, "vocab_size": 32000}},
    "inkling2": {"model_type": "inkling2_text", "hidden_size": 1024, "num_hidden_layers": 6,
                 "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                 "swa_num_attention_heads": 16, "swa_num_key_value_heads": 4,
                 "swa_head_dim": 64, "moe_intermediate_size": 512, "n_routed_experts": 16,
                 "num_experts_per_tok": 2, "d_rel": 16, "rel_extent": 1024,
                 "sliding_window_size": 512, "n_layers_per_attn_res_block": 3,
                 "vocab_size": 32000, "unpadded_vocab_size": 31900},
    "inkling2_loop": {"model_type": "inkling2_loop", "vision_config": {"text_hidden_size": 1024},
                      "text_config": {"model_type": "inkling2_loop_text", "hidden_size": 1024,
                                      "num_hidden_layers": 9, "num_attention_heads": 16,
                                      "num_key_value_heads": 4, "head_dim": 64,
                                      "swa_num_attention_heads": 16,
                                      "swa_num_key_value_heads": 4, "swa_head_dim": 64,
                                      "moe_intermediate_size": 512, "n_routed_experts": 16,
                                      "num_experts_per_tok": 2, "d_rel": 16,
                                      "rel_extent": 1024, "sliding_window_size": 512,
                                      "n_layers_per_attn_res_block": 3,
                                      "loop_config": {"core_start": 3, "core_end": 6,
                                                      "num_passes": 2, "gate_rank": 32},
                                      "vocab_size": 32000, "unpadded_vocab_size": 31900}},
    "doge": {"model_type": "doge", "hidden_size": 1024, "intermediate_size": 2048,
             "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
             "sliding_window": 1024, "keep_window_size": 512, "vocab_size": 32000},
    "rwkv": {"model_type": "rwkv", "hidden_size": 1024, "num_hidden_layers": 4,
             "attention_hidden_size": 1024, "intermediate_size": 4096, "context_length": 4096,
             "vocab_size": 32000},
    "xlstm": {"model_type": "xlstm", "hidden_size": 1024, "num_hidden_layers": 4,
              "num_heads": 4, "qk_dim_factor": 0.5, "v_dim_factor": 1.0, "chunk_size": 64,
              "ffn_proj_factor": 2.667, "vocab_size": 32000},
    "jetmoe": {"model_type": "jetmoe", "hidden_size": 1024, "num_hidden_layers": 4,
               "num_key_value_heads": 8, "kv_channels": 64, "intermediate_size": 1408,
               "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000},
    "zamba": {"model_type": "zamba", "hidden_size": 1024, "num_hidden_layers": 9,
              "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 2816,
              "n_mamba_heads": 2, "vocab_size": 32000},
    "diffllama": {"model_type": "diffllama", "hidden_size": 1024, "intermediate_size": 2816,
                  "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                  "vocab_size": 32000},
    "gpt_neox_japanese": {"model_type": "gpt_neox_japanese", "hidden_size": 1024,
                          "num_hidden_layers": 4, "num_attention_heads": 16,
                          "intermediate_multiple_size": 4, "vocab_size": 32000},
    "flint": {"model_type": "flint", "hidden_size": 1024, "num_hidden_layers": 4,
              "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
              "intermediate_size": 2048, "moe_intermediate_size": 256, "num_experts": 8,
              "num_experts_per_tok": 2, "shared_expert_intermediate_size": 512,
              "mlp_only_layers": [0], "decoder_sparse_step": 1, "vocab_size": 32000},
    "beam": {"model_type": "beam", "hidden_size": 1024, "num_hidden_layers": 6,
             "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
             "intermediate_size": 2048, "moe_intermediate_size": 256, "num_experts": 8,
             "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "vocab_size": 32000},
    "codegen": {"model_type": "codegen", "n_embd": 1024, "n_head": 16, "n_layer": 4,
                "n_positions": 2048, "n_inner": None, "rotary_dim": 32, "vocab_size": 32000},
    "persimmon": {"model_type": "persimmon", "hidden_size": 1024, "num_attention_heads": 16,
                  "num_hidden_layers": 4, "intermediate_size": 4096, "vocab_size": 32000},
    "xglm": {"model_type": "xglm", "d_model": 1024, "attention_heads": 16, "num_layers": 4,
             "ffn_dim": 4096, "vocab_size": 32000},
    "nanochat": {"model_type": "nanochat", "hidden_size": 1024, "num_hidden_layers": 4,
                 "num_attention_heads": 8, "intermediate_size": 4096, "vocab_size": 32000},
    "gemma4_unified_text": {"model_type": "gemma4_unified_text", "hidden_size": 1024,
                            "num_hidden_layers": 6, "num_attention_heads": 8,
                            "num_key_value_heads": 4, "head_dim": 128,
                            "intermediate_size": 2048, "vocab_size": 32000,
                            "per_layer_config": {"5": {"num_key_value_heads": 1,
                                                       "head_dim": 256}}},
    "emu3": {"model_type": "emu3", "text_config": {
        "model_type": "emu3_text_model", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2048,
        "vocab_size": 32000}},
}
"""One config.json per family the importer reads differently; every key gets every value
of ``WRONG_KINDS`` in turn."""

WRONG_KINDS: tuple[Any, ...] = (None, "x", -1, 0, 1.5, [], {}, True, 10**30)


class _TimedOut(Exception):
    pass


def run(argv: list[str], seconds: int) -> tuple[str, str] | None:
    """``None`` when ``gpuarch argv`` ends as a user may see it; else (what, detail)."""
    def alarm(*_: Any) -> None:
        raise _TimedOut

    out, err = io.StringIO(), io.StringIO()
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status: Any = main(argv)
            except SystemExit as exc:
                status = exc.code
    except _TimedOut:
        return "ran past the limit", ""
    except BaseException:  # what the user would see as a traceback
        return "traceback", traceback.format_exc()[-1500:]
    finally:
        signal.alarm(0)
    text = out.getvalue() + err.getvalue()
    if "Traceback" in text:
        return "traceback printed", text[-1500:]
    if status not in (0, 1, 2, None):
        return f"exit status {status!r}", text[-500:]
    return None


def flags(command: list[str]) -> list[str]:
    """The options ``gpuarch command --help`` lists (not --help or --json)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*command, "--help"])
    return sorted(set(re.findall(r"(--[a-z][a-z0-9-]+)", out.getvalue()))
                  - {"--help", "--json"})


def flag_calls(commands: dict[str, list[str]]) -> Iterator[list[str]]:
    for name, base in commands.items():
        for flag in flags(name.split()):
            for value in ODD_VALUES:
                yield [*name.split(), *base, flag, value]


SMALL_SIZES = ("1", "2", "3", "5", "7")
"""Model widths and counts below a tensor-parallel size of 8: a rank's share of them rounds
down to nothing unless the model refuses the split or pads it."""

MODEL_SIZE_FLAGS = ("--layers", "--hidden", "--heads", "--kv-heads", "--ffn-hidden", "--vocab",
                    "--experts", "--experts-per-token")


def small_dimension_calls() -> Iterator[list[str]]:
    """Each model size flag at a few values below TP 8, in training and in serving."""
    train = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
             "--tp", "8", "--seq-len", "2048", "--global-batch", "64"]
    infer = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
             "--tp", "8", "--input-len", "100", "--output-len", "10", "--batch", "4"]
    for flag in MODEL_SIZE_FLAGS:
        for value in SMALL_SIZES:
            yield [*train, flag, value]
            yield [*infer, flag, value]


MEASURED_RUNS: dict[str, dict[str, Any]] = {
    "training": {"id": "run", "preset": "llama-3.1-8b", "gpu": "h100", "gpus": 8,
                 "seq_len": 4096, "global_batch": 64, "tokens_per_s_per_gpu": 9000},
    "inference": {"id": "run", "preset": "llama-3.1-8b", "gpu": "h100", "gpus": 1,
                  "input_len": 1000, "output_len": 100, "batch": 8, "tpot_s": 0.01},
    "load": {"id": "run", "preset": "llama-3.1-8b", "gpu": "h100", "gpus": 1,
             "input_len": 1000, "output_len": 100, "rate_per_s": 2, "tpot_mean_s": 0.01},
}
"""One measured run of each kind, the base of the ``--data`` files below."""

VALIDATE_FLAGS = {"load": ["--requests", "200"]}
"""What each kind's validate call adds to ``--data FILE`` (a short replay for load runs)."""

FIELD_VALUES: tuple[Any, ...] = ("x", -1, 0, 1.5, True, ["x"], 10**30)
"""Values each field of a measured run gets in turn: text, negative, zero, a fraction, a
boolean, a list, past int64 (TOML has no null)."""


def measured_run_calls(folder: Path) -> Iterator[list[str]]:
    """``validate training|inference --data FILE`` on one run with each field the file may
    carry set, in turn, to each of ``FIELD_VALUES`` (a file of your own measurements is read
    strictly: every such call should end in a table or a usage error)."""
    from gpuarch.validation.user_data import field_types

    path = folder / "runs.toml"
    for kind, base in MEASURED_RUNS.items():
        for key in sorted(field_types(kind)):  # type: ignore[arg-type]
            for value in FIELD_VALUES:
                run_ = {**base, key: value}
                path.write_text("[[point]]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                                         for k, v in run_.items()))
                yield ["validate", kind, "--data", str(path), *VALIDATE_FLAGS.get(kind, [])]


POWER_RUN: dict[str, Any] = {
    "id": "node", "preset": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "seq_len": 4096,
    "global_batch": 64, "step_time_s": 2.0, "nodes": 1, "meter": "node-ac",
    "readings": "readings.csv", "window_ms": [0, 3000]}
"""One metered training run, the base of the ``validate power --data`` files below."""

POWER_READINGS = ("node,time_ms,watts\n0,1000,7000\n0,2000,7100\n0,3000,7200\n",
                  "node,time_ms\n0,1000\n", "node,time_ms,watts\n0,x,7000\n",
                  "node,time_ms,watts\n0,1000,-5\n", "node,time_ms,watts\n0,1000,nan\n",
                  "node,time_ms,watts\n", "\xff\xfe")
"""A readings file as it should be, then without watts, with a time that is not one, a
negative and a not-a-number power, no rows, and bytes that are not text."""


def power_run_calls(folder: Path) -> Iterator[list[str]]:
    """``validate power --data FILE`` on one metered run with each key it may carry set, in
    turn, to each of ``FIELD_VALUES``, then with each of ``POWER_READINGS`` as its
    readings."""
    from gpuarch.validation.power import RUN_KEYS
    from gpuarch.validation.user_data import field_types

    path, readings = folder / "power.toml", folder / "readings.csv"

    def write(run_: dict[str, Any], text: str = POWER_READINGS[0]) -> list[str]:
        readings.write_bytes(text.encode("utf-8", "surrogateescape")
                             if text.isascii() else text.encode("latin-1"))
        path.write_text("[[run]]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                               for k, v in run_.items()))
        return ["validate", "power", "--data", str(path)]

    for key in sorted(RUN_KEYS | set(field_types("training"))):
        for value in FIELD_VALUES:
            yield write({**POWER_RUN, key: value})
    for text in POWER_READINGS:
        yield write(POWER_RUN, text)


BENCH_RESULT: dict[str, Any] = {
    "backend": "vllm", "request_rate": 4.0, "burstiness": 1.0, "max_concurrency": None,
    "completed": 100, "total_input_tokens": 100000, "total_output_tokens": 10000,
    "output_throughput": 400.0, "mean_ttft_ms": 50.0, "median_ttft_ms": 45.0,
    "p99_ttft_ms": 120.0, "mean_tpot_ms": 12.0, "p99_tpot_ms": 15.0, "mean_e2el_ms": 1300.0,
    "input_lens": [1000] * 100, "output_lens": [100] * 100,
    "server_info": {"enable_mixed_chunk": False, "kv_cache_dtype": "auto", "tp_size": 1,
                    "dp_size": 1, "enable_dp_attention": False, "ep_size": 1, "pp_size": 1,
                    "max_running_requests": None, "quantization": None,
                    "enable_two_batch_overlap": False, "ep_num_redundant_experts": 0,
                    "moe_a2a_backend": "none", "speculative_algorithm": None,
                    "speculative_num_draft_tokens": None}}
"""A saved ``vllm bench serve`` result (with SGLang's server_info), the base of the
``--measured`` files below."""

BENCH_VALUES: tuple[Any, ...] = (*FIELD_VALUES, None, "inf", float("nan"), [], {})
"""What each key of a saved result gets in turn: FIELD_VALUES, null, the text a rate of
inf is saved as, NaN (Python's JSON writes it), an empty list and object."""


def bench_result_calls(folder: Path) -> Iterator[list[str]]:
    """``estimate infer --as-point --measured FILE`` with each key of a saved benchmark
    result set, in turn, to each of ``BENCH_VALUES``, or left out."""
    path = folder / "result.json"
    base = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "1000", "--output-len", "100", "--as-point", "--measured", str(path)]
    server = BENCH_RESULT["server_info"]
    for key in (*BENCH_RESULT, *(("server_info", k) for k in server)):
        for value in (*BENCH_VALUES, "<left out>"):
            result = json.loads(json.dumps(BENCH_RESULT))
            # a key of the result, or of its saved server settings
            table, name = (result["server_info"], key[1]) if isinstance(key, tuple) \
                else (result, key)
            table.pop(name)
            if value != "<left out>":
                table[name] = value
            path.write_text(json.dumps(result))
            yield base


AIPERF_RESULT: dict[str, Any] = {
    "schema_version": "1.2",
    "time_to_first_token": {"unit": "ms", "avg": 50.0, "p50": 45.0, "p99": 120.0},
    "inter_token_latency": {"unit": "ms", "avg": 12.0, "p90": 14.0},
    "request_latency": {"unit": "ms", "avg": 1300.0, "p99": 1500.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 400.0},
    "input_sequence_length": {"unit": "tokens", "avg": 1000.0, "std": 10.0},
    "output_sequence_length": {"unit": "tokens", "avg": 100.0, "std": 5.0},
    "request_count": {"unit": "requests", "avg": 100.0},
    "input_config": {"loadgen": {"request_rate": 4.0, "request_rate_mode": "poisson"},
                     "phases": [{"name": "profiling", "type": "poisson", "rate": 4.0,
                                 "concurrency": None, "requests": 100}]},
}
"""An AIPerf ``profile_export_aiperf.json``, both settings layouts (each fuzzed alone: the
phases are dropped while the loadgen table is, and kept while the phases are)."""


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value (and to each table and list) of a JSON document."""
    if path:
        yield path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) \
        if isinstance(doc, list) else ()
    for key, value in items:
        yield from _leaves(value, (*path, key))


def _json_leaf_calls(path: Path, doc: dict[str, Any], argv: list[str],
                     prepare: Callable[[dict[str, Any], tuple[Any, ...]], None] | None = None
                     ) -> Iterator[list[str]]:
    """``argv`` on ``path`` holding ``doc`` with each of its values (tables, lists) set, in
    turn, to each of ``BENCH_VALUES``, or left out; ``prepare`` first shapes the copy for
    the value's path (a leaf it removes is skipped)."""
    for leaf in _leaves(doc):
        for value in (*BENCH_VALUES, "<left out>"):
            result = json.loads(json.dumps(doc))
            if prepare is not None:
                prepare(result, leaf)
            node = result
            for key in leaf[:-1]:
                node = node[key]
            if leaf[-1] not in (node if isinstance(node, dict) else range(len(node))):
                continue
            if value == "<left out>":
                node.pop(leaf[-1])
            else:
                node[leaf[-1]] = value
            path.write_text(json.dumps(result))
            yield argv


def _one_aiperf_layout(result: dict[str, Any], leaf: tuple[Any, ...]) -> None:
    """Keep one of AIPerf's settings layouts: the phases for a value under them, else the
    loadgen table."""
    settings = result["input_config"]
    del settings["phases" if leaf[:2] != ("input_config", "phases") else "loadgen"]


TRTLLM_REPORT: dict[str, Any] = {
    "engine": {"backend": "Pytorch", "kv_cache_dtype": "FP8", "quantization": "FP8"},
    "world_info": {"tp_size": 1, "pp_size": 1, "ep_size": 1, "max_batch_size": 64,
                   "max_num_tokens": 2048, "issue_rate": 10.0},
    "request_info": {"num_requests": 100, "avg_num_concurrent_requests": 30.0,
                     "avg_input_length": 1000.0, "avg_output_length": 100.0},
    "performance": {"avg_request_latency_ms": 900.0, "system_output_throughput_tok_s": 400.0,
                    "request_latency_percentiles_ms": {"p50": 890.0, "p99": 990.0,
                                                       "average": 900.0}},
    "streaming_metrics": {"avg_ttft_ms": 50.0, "avg_tpot_ms": 9.0,
                          "ttft_percentiles": {"p90": 70.0, "average": 50.0}},
    "decoding_stats": {"num_draft_tokens_percentiles": {"average": 3.0},
                       "acceptance_length_percentiles": {"average": 2.0}},
}
"""A trtllm-bench --report_json at a concurrency, streaming, with speculative decoding."""


def _guidellm_summary(mean: float) -> dict[str, Any]:
    return {"successful": {"mean": mean, "median": mean, "std_dev": mean / 10,
                           "percentiles": {"p90": mean, "p99": mean}}}


GUIDELLM_REPORT: dict[str, Any] = {"benchmarks": [{
    "config": {"strategy": {"type_": "constant", "rate": 4.0, "max_concurrency": None}},
    "metrics": {"request_totals": {"successful": 100},
                "time_to_first_token_ms": _guidellm_summary(50.0),
                "inter_token_latency_ms": _guidellm_summary(9.0),
                "request_latency": _guidellm_summary(1.0),
                "prompt_token_count": _guidellm_summary(1000.0),
                "output_token_count": _guidellm_summary(100.0),
                "output_tokens_per_second": {"total": {"mean": 400.0}}}}]}
"""A GuideLLM report of one constant-rate benchmark (the statistics the reader takes)."""


SAVED_REPORTS: tuple[tuple[str, dict[str, Any], tuple[str, ...], Any], ...] = (
    ("profile_export_aiperf.json", AIPERF_RESULT, (), _one_aiperf_layout),
    ("report.json", TRTLLM_REPORT,
     ("--weight-precision", "fp8", "--kv-precision", "fp8", "--max-batch-size", "64",
      "--max-num-tokens", "2048", "--speculative-tokens", "3", "--acceptance-length", "2",
      "--batch", "32", "--batching", "continuous"), None),
    ("benchmarks.json", GUIDELLM_REPORT, (), None),
)
"""Each other tool's saved result: its file name, the document, the flags its run needs and
how a copy is shaped for a value's path (AIPerf's two settings layouts)."""


def saved_report_calls(folder: Path) -> Iterator[list[str]]:
    """``estimate infer --as-point --measured FILE`` on AIPerf, trtllm-bench and GuideLLM
    results, each value of each document odd or left out in turn."""
    for name, doc, flags, prepare in SAVED_REPORTS:
        path = folder / name
        yield from _json_leaf_calls(
            path, doc,
            ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
             "1000", "--output-len", "100", *flags, "--as-point", "--measured", str(path)],
            prepare)


LOG_LINES = (
    " iteration {step}/ 100 | elapsed time per iteration (ms): {value} | global batch size: 64 |",
    "Training epoch 0, iteration {step}/99 | global_batch_size: 64 | train_step_timing in s: "
    "{value} |",
    "step: {step}  loss: 7.0  tps: {value}  mfu: 30%",
)
"""One step's line of each training log the reader knows (Megatron-LM, NeMo, torchtitan)."""

LOG_VALUES = ("0", "-1", "nan", "inf", "1e400", "1,2", "", "9" * 400, "0.0000001", "x")
"""What a logged figure (and, in turn, a step's number) is written as."""


def training_log_calls(folder: Path) -> Iterator[list[str]]:
    """``estimate train --as-point --measured LOG`` on logs of ten steps, one of whose
    figures or step numbers takes each of ``LOG_VALUES``."""
    path = folder / "train.log"
    base = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "4096", "--global-batch", "64", "--as-point", "--measured", str(path)]
    for line in LOG_LINES:
        for value in LOG_VALUES:
            for odd in ("value", "step"):
                steps = [line.format(step=step if odd == "value" or step != 5 else value,
                                     value=value if odd == "value" and step == 5 else "1500")
                         for step in range(1, 11)]
                path.write_text("\n".join(steps) + "\n")
                yield base


LOAD_POINT_FLAGS = ("--rate", "--input-len-cv", "--schedule", "--as-point", "--simulate",
                    "--max-batch-size", "--output-len-cv")


def load_point_calls() -> Iterator[list[str]]:
    """``estimate infer --rate R --as-point``, the writer of a load run, with each flag that
    shapes the run at each odd value."""
    base = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "1000", "--output-len", "100", "--rate", "5", "--simulate", "100", "--as-point"]
    for flag in LOAD_POINT_FLAGS:
        for value in ODD_VALUES:
            yield [*base, flag, value]


DISAGGREGATED_FLAGS = ("--prefill-gpus", "--prefill-tp", "--prefill-ep",
                       "--prefill-max-num-tokens", "--concurrency", "--max-num-tokens",
                       "--max-batch-size", "--prefill-gpu", "--rate", "--batch", "--as-point")


def disaggregated_calls() -> Iterator[list[str]]:
    """``estimate infer --prefill-gpus`` for a client's closed loop (``--concurrency``), and
    its ``--as-point`` writer, with each flag that shapes the two pools at each odd value."""
    base = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "2",
            "--input-len", "1000", "--output-len", "100", "--prefill-gpus", "2",
            "--concurrency", "16"]
    for tail in ([], ["--as-point"]):
        for flag in DISAGGREGATED_FLAGS:
            for value in ODD_VALUES:
                yield [*base, *tail, flag, value]


CALIBRATION: dict[str, Any] = {
    "schema": "gpuarch-calibration", "version": 1, "created": "2026-12-05T00:00:00Z",
    "device": {"name": "NVIDIA H100 80GB HBM3", "product": "h100-sxm5-80gb"},
    "gemm": [{"precision": "bf16", "m": 8192, "n": 8192, "k": 8192, "tflops": 700.0}],
    "bandwidth": [{"kind": "device_copy", "gb_s": 3000.0}],
    "collectives": [{"op": "all_reduce", "bytes": 2**26, "ranks": 8, "busbw_gb_s": 360.0}]}
"""A probe's calibration file (``gpuarch probe --bench --save``), the base of the
``--calibration`` files below."""


def calibration_calls(folder: Path) -> Iterator[list[str]]:
    """``estimate train --calibration FILE`` with each value of a calibration file set, in
    turn, to each of ``FIELD_VALUES`` (and to null, which JSON has)."""
    path = folder / "calibration.json"
    train = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
             "--seq-len", "4096", "--global-batch", "64", "--calibration", str(path)]
    for section in ("device", "gemm", "bandwidth", "collectives"):
        row = CALIBRATION[section] if section == "device" else CALIBRATION[section][0]
        for key in row:
            for value in (*FIELD_VALUES, None):
                doc = copy.deepcopy(CALIBRATION)
                target = doc[section] if section == "device" else doc[section][0]
                target[key] = value
                path.write_text(json.dumps(doc))
                yield train


def op_check_calls(folder: Path) -> Iterator[list[str]]:
    """``validate ops --file FILE`` on one row of each operator type of the shipped op check,
    with each of the row's fields and its operator's set, in turn, to each of
    ``FIELD_VALUES`` (and null)."""
    from gpuarch.validation.ops import OP_CHECK_FILE

    path = folder / "op_check.json"
    doc = json.loads(OP_CHECK_FILE.read_text())
    firsts = {}
    for row in doc["rows"]:
        if isinstance(row.get("op"), dict):
            firsts.setdefault(row["op"].get("type"), row)
    for row in firsts.values():
        for key in [*row, *(f"op.{k}" for k in row["op"])]:
            for value in (*FIELD_VALUES, None):
                changed = copy.deepcopy(row)
                if key.startswith("op."):
                    changed["op"][key[3:]] = value
                else:
                    changed[key] = value
                path.write_text(json.dumps({**doc, "rows": [changed]}))
                yield ["validate", "ops", "--file", str(path)]


def fake_machine_calls(folder: Path) -> Iterator[list[str]]:
    """``probe`` and ``doctor --fake FILE`` with each field of the demo machine's first GPU,
    and each top-level field, set in turn to each of ``FIELD_VALUES`` (and null)."""
    from gpuarch.cli.probe_cmds import DEMO_MACHINE

    path = folder / "machine.json"
    demo = json.loads(DEMO_MACHINE.read_text())
    for key in [*(f"gpu.{k}" for k in demo["gpus"][0]), *demo]:
        for value in (*FIELD_VALUES, None):
            doc = copy.deepcopy(demo)
            if key.startswith("gpu."):
                doc["gpus"][0][key[4:]] = value
            else:
                doc[key] = value
            path.write_text(json.dumps(doc))
            yield ["probe", "--fake", str(path)]
            yield ["doctor", "--fake", str(path)]


def price_calls(folder: Path) -> Iterator[list[str]]:
    """``advise train --prices FILE`` with each field of one price set, in turn, to each of
    ``FIELD_VALUES`` (advisor calls, so with ``--advisors`` only)."""
    path = folder / "prices.toml"
    base = {"gpu": "h100", "usd_per_gpu_hour": 2.5, "kind": "on-demand"}
    advise = ["advise", "train", "--model", "llama-3.1-8b", "--tokens", "1e9", "--max-gpus",
              "16", "--prices", str(path)]
    for key in base:
        for value in FIELD_VALUES:
            row = {**base, key: value}
            path.write_text("[[price]]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                                     for k, v in row.items()))
            yield advise


def config_calls(folder: Path) -> Iterator[list[str]]:
    path = folder / "config.json"
    train = ["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "8",
             "--seq-len", "2048", "--global-batch", "64"]
    infer = ["estimate", "infer", "--model", str(path), "--gpu", "h100", "--gpus", "8",
             "--tp", "8", "--input-len", "100", "--output-len", "10", "--batch", "4"]
    for base in CONFIGS.values():
        for key in base:
            if key == "model_type":
                continue
            for value in WRONG_KINDS:
                config = copy.deepcopy(base)
                config[key] = value
                path.write_text(json.dumps(config))
                yield train
                yield infer
                yield ["models", str(path)]
                # and the run as a point of a measured-runs file (written or refused)
                yield [*train, "--as-point"]
                yield [*infer, "--as-point"]


MODELOPT_MODEL = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                  "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                  "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 768, "vocab_size": 151936}
MODELOPT_QUANT = {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
                  "quantized_layers": {f"model.layers.{i}.mlp.experts": {"quant_algo": "NVFP4"}
                                       for i in range(4)},
                  "exclude_modules": [f"model.layers.{i}.self_attn*" for i in range(4)]}
"""A ModelOpt checkpoint (config.json and hf_quant_config.json beside it) whose declaration's
every key, and one quantized module's entry, gets every value of ``WRONG_KINDS``."""


def modelopt_calls(folder: Path) -> Iterator[list[str]]:
    checkpoint = folder / "modelopt"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "config.json").write_text(json.dumps(MODELOPT_MODEL))
    infer = ["estimate", "infer", "--model", str(checkpoint), "--gpu", "b200",
             "--input-len", "100", "--output-len", "10", "--batch", "4"]
    first = next(iter(MODELOPT_QUANT["quantized_layers"]))  # type: ignore[call-overload]
    for key in (*MODELOPT_QUANT, "quantized_layers entry"):
        for value in WRONG_KINDS:
            quant = copy.deepcopy(MODELOPT_QUANT)
            if key == "quantized_layers entry":
                quant["quantized_layers"][first] = value  # type: ignore[index]
            else:
                quant[key] = value
            (checkpoint / "hf_quant_config.json").write_text(json.dumps(
                {"producer": {"name": "modelopt"}, "quantization": quant}))
            yield infer
            yield ["models", str(checkpoint)]


def main_(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--advisors", action="store_true", help="the two advisors too")
    p.add_argument("--seconds", type=int, default=30, help="limit per call (default 30)")
    args = p.parse_args(argv)
    commands = {**COMMANDS, **(ADVISORS if args.advisors else {})}
    found = calls = 0
    with tempfile.TemporaryDirectory() as tmp:
        # lazily: each file (config.json, a --data, --calibration, op-check, fake machine or
        # price file) is written just before the calls that read it
        for call in itertools.chain(flag_calls(commands), small_dimension_calls(),
                                    measured_run_calls(Path(tmp)), load_point_calls(),
                                    disaggregated_calls(),
                                    power_run_calls(Path(tmp)),
                                    bench_result_calls(Path(tmp)),
                                    saved_report_calls(Path(tmp)),
                                    training_log_calls(Path(tmp)),
                                    calibration_calls(Path(tmp)), op_check_calls(Path(tmp)),
                                    fake_machine_calls(Path(tmp)),
                                    config_calls(Path(tmp)), modelopt_calls(Path(tmp)),
                                    price_calls(Path(tmp)) if args.advisors else ()):
            calls += 1
            outcome = run(call, args.seconds)
            if outcome is not None:
                found += 1
                what, detail = outcome
                print(f"{what}: gpuarch {' '.join(call)}"[:400])
                if detail:  # where it ended: the traceback's last frame and the error
                    print("   " + "\n   ".join(detail.strip().splitlines()[-3:]))
    print(f"{calls:,} calls, {found} finding(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main_())
