"""Checkpoint formats read from a Hugging Face config.json (and ModelOpt's
hf_quant_config.json), as the public checkpoints declare them, and their use by
``estimate infer --model config.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.workloads import count_params
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.hf_quant import checkpoint_formats, module_role

LLAMA_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "tie_word_embeddings": False, "hidden_act": "silu"}


def _config(tmp_path: Path, quant: dict[str, Any] | None, **extra: Any) -> Path:
    cfg: dict[str, Any] = {**LLAMA_8B, **extra}
    if quant is not None:
        cfg["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _ct_group(weights: tuple[int, str], acts: tuple[int, str] | None) -> dict[str, Any]:
    group: dict[str, Any] = {"targets": ["Linear"],
                             "weights": {"num_bits": weights[0], "type": weights[1]}}
    group["input_activations"] = ({"num_bits": acts[0], "type": acts[1]} if acts else None)
    return group


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        # DeepSeek-V3's config.json: block-scaled FP8 weights and dynamic FP8 activations
        ({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
          "weight_block_size": [128, 128]}, ("fp8", "fp8", None)),
        # GPT-OSS's config.json: MXFP4 covers the routed experts only (checked below);
        # the rest of the model stays 16-bit
        ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
         ("bf16", "bf16", None)),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"},
         ("int4", "bf16", None)),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, ("int8", "bf16", None)),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"},
         ("fp4", "fp4", "fp8")),
        ({"quant_method": "compressed-tensors",
          "config_groups": {"group_0": _ct_group((8, "float"), (8, "float"))},
          "kv_cache_scheme": {"num_bits": 8, "type": "float"}}, ("fp8", "fp8", "fp8")),
        ({"quant_method": "compressed-tensors",
          "config_groups": {"group_0": _ct_group((4, "int"), None)}}, ("int4", "bf16", None)),
    ],
)
def test_declared_formats_are_read(tmp_path: Path, quant: dict[str, Any],
                                   expected: tuple[str, str, str | None]) -> None:
    got = checkpoint_formats(_config(tmp_path, quant))
    assert got is not None
    assert (got.weights, got.activations, got.kv_cache) == expected
    assert got.origin.startswith("config.json quantization_config")


@pytest.mark.parametrize(("quant", "blocks"), [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, True),  # DeepSeek-V3's
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, False),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, False),  # NVIDIA's per-tensor FP8
    ({"quant_method": "modelopt", "quant_algo": "FP8_BLOCK_SCALES"}, True),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, False),
])
def test_fp8_weight_blocks_are_read(tmp_path: Path, quant: dict[str, Any], blocks: bool
                                    ) -> None:
    """A checkpoint that scales its FP8 weights per 128 x 128 block says so, and an
    estimate of it runs its fine-grained experts at the block-scaled rate."""
    got = checkpoint_formats(_config(tmp_path, quant))
    assert got is not None and got.fp8_blocks is blocks


def test_fp8_scaling_follows_the_checkpoint_unless_told(
        capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3's published checkpoint is block-scaled FP8: its experts run at the
    block-scaled rate (moe_gemm_fp8_block, slower than per-tensor FP8, as TensorRT-LLM's
    measured layers on Hopper are); --fp8-scaling tensor (NVIDIA ModelOpt's per-tensor FP8)
    is faster; the same FP8 given by flags is per-tensor unless told; a bad value is a
    usage error with a suggestion."""
    run = ["--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ep", "8",
           "--input-len", "1024", "--output-len", "1024", "--batch", "256",
           "--batching", "continuous", "--json"]
    status, out, _ = _infer(capsys, *run)
    assert status == 0
    block = json.loads(out)
    assert block["assumptions"]["fp8_scaling"] == "block"
    status, out, _ = _infer(capsys, *run[:-1])
    assert "FP8 weights scaled per 128 x 128 block" in out
    status, out, _ = _infer(capsys, *run, "--fp8-scaling", "tensor")
    tensor = json.loads(out)
    assert tensor["assumptions"]["fp8_scaling"] == "tensor"
    assert tensor["output_tokens_per_s"] > block["output_tokens_per_s"] * 1.02
    status, out, _ = _infer(capsys, *run, "--weight-precision", "fp8")
    assert json.loads(out)["assumptions"]["fp8_scaling"] == "tensor"
    status, out, err = _infer(capsys, *run, "--fp8-scaling", "blok")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--fp8-scaling" in err and "did you mean 'block'" in err
    status, out, _ = _infer(capsys, "--model", "llama-3.1-8b", "--json")
    assert json.loads(out)["assumptions"]["fp8_scaling"] is None


def test_modelopt_hf_quant_config_beside_the_config(tmp_path: Path) -> None:
    """ModelOpt checkpoints that keep config.json 16-bit declare their formats in
    hf_quant_config.json; none at all means a 16-bit checkpoint."""
    path = _config(tmp_path, None)
    assert checkpoint_formats(path) is None
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"},
         "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    got = checkpoint_formats(path)
    assert got is not None and (got.weights, got.activations, got.kv_cache) == \
        ("fp8", "fp8", "fp8")
    assert got.origin.startswith("hf_quant_config.json quantization")


@pytest.mark.parametrize(
    ("quant", "message"),
    [
        ({"quant_method": "bitsandbytes", "load_in_4bit": True},
         r"quant_method 'bitsandbytes' is not one gpuarch reads"),
        ({"quant_method": "awq", "bits": 3}, r"awq with bits 3; gpuarch reads 4 or 8"),
        ({"quant_method": "modelopt", "quant_algo": "INT3_AWQ"},
         r"quant_algo 'INT3_AWQ' is not one gpuarch reads"),
        ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"},
         r"MIXED_PRECISION without quantized_layers"),
        ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
          "quantized_layers": {"model.layers.0.mlp.up_proj": {"quant_algo": "INT3"}}},
         r"quantized_layers 'model.layers.0.mlp.up_proj': quant_algo 'INT3' is not one"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": "lm_head"},
         r"exclude_modules: expected a list of module names, got 'lm_head'"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP6"},
         r"kv_cache_quant_algo 'FP6' is not a KV cache format gpuarch reads"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4",
          "kv_cache_scheme": {"num_bits": [8], "type": "float"}},
         r"kv_cache_scheme \"\[8\] bits of 'float'\" is not a KV cache format"),
        ({"quant_method": "compressed-tensors",
          "config_groups": {"a": _ct_group((8, "float"), None),
                            "b": _ct_group((4, "int"), None)}},
         r"groups of different formats"),
        ({"quant_method": "compressed-tensors",
          "config_groups": {"a": _ct_group((2, "int"), None)}},
         r"num_bits 2 and type 'int' is not a format gpuarch reads"),
    ],
)
def test_unreadable_declarations_are_refused_by_name(tmp_path: Path, quant: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        checkpoint_formats(_config(tmp_path, quant))


def _infer(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(["estimate", "infer", "--gpu", "h100", "--input-len", "1024",
                       "--output-len", "128", "--batch", "8", *argv])
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_estimate_infer_takes_the_checkpoints_formats(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """An FP8 checkpoint's config.json is estimated at FP8 (half the 16-bit weight memory,
    but for the embedding table and the LM head, which stay 16-bit) and says where the
    formats came from; --weight-precision overrides the checkpoint, and --kv-precision
    changes only the KV cache."""
    fp8 = _config(tmp_path, {"quant_method": "fp8", "weight_block_size": [128, 128]})
    status, out, _ = _infer(capsys, "--model", str(fp8), "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["assumptions"]["formats"] == {"weights": "fp8", "activations": "fp8",
                                             "kv_cache": "bf16"}
    assert "quant_method fp8" in doc["assumptions"]["formats_origin"]
    status, out16, _ = _infer(capsys, "--model", str(fp8), "--weight-precision", "bf16",
                              "--json")
    doc16 = json.loads(out16)
    assert doc16["assumptions"]["formats_origin"] is None
    pc = count_params(shape_from_hf_config(fp8))
    ends_gib = (pc.embedding + pc.lm_head) * 2 / 2**30
    assert ends_gib > 1.5  # Llama 3.1 8B's 128,256 x 4,096 table and head
    assert doc["memory_per_gpu_gib"]["weights"] == pytest.approx(
        (doc16["memory_per_gpu_gib"]["weights"] + ends_gib) / 2, rel=1e-4)  # JSON rounds
    status, out, _ = _infer(capsys, "--model", str(fp8), "--kv-precision", "fp8")
    assert status == 0 and "KV cache fp8" in out
    assert "from config.json quantization_config: quant_method fp8" in out
    bad = _config(tmp_path, {"quant_method": "bitsandbytes"})
    status, out, err = _infer(capsys, "--model", str(bad))
    assert status == 2 and out == ""
    assert "quant_method 'bitsandbytes' is not one gpuarch reads" in err
    assert "Traceback" not in err


GPT_OSS_SMALL = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
                 "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                 "num_hidden_layers": 4, "num_local_experts": 32, "num_experts_per_tok": 4,
                 "vocab_size": 201088, "tie_word_embeddings": False}
MXFP4 = {"quant_method": "mxfp4",
         "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                    "model.embed_tokens", "lm_head"]}


def test_mxfp4_quantizes_the_experts_alone(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """GPT-OSS's MXFP4 checkpoint keeps attention, router, embeddings and LM head in 16 bits:
    the estimate streams the experts at 4.25 bits a weight and everything else at 16, and
    says so; the expert flags override the checkpoint's expert format; a dense model that
    declares MXFP4 has no experts to keep apart, so all its weights are 4-bit."""
    got = checkpoint_formats(_config(tmp_path, MXFP4))
    assert got is not None and got.expert_weights == "mxfp4"
    path = tmp_path / "gpt-oss" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**GPT_OSS_SMALL, "quantization_config": MXFP4}))
    status, out, _ = _infer(capsys, "--model", str(path), "--json")
    assert status == 0
    doc = json.loads(out)
    a = doc["assumptions"]
    assert a["formats"]["weights"] == "bf16"
    assert a["expert_formats"]["weights"] == "mxfp4"
    assert a["expert_formats"]["activations"] == "bf16"
    assert a["expert_formats"]["weights_dequantized"] is True
    status, out16, _ = _infer(capsys, "--model", str(path), "--expert-weight-precision",
                              "bf16", "--json")
    doc16 = json.loads(out16)
    assert doc16["assumptions"]["expert_formats"] is None
    saved = doc16["memory_per_gpu_gib"]["weights"] - doc["memory_per_gpu_gib"]["weights"]
    experts = count_params(shape_from_hf_config(path)).mlp_experts
    # 16 bits minus MXFP4's 4.25 (4 bits and an 8-bit scale per 32 weights)
    assert saved * 2**30 == pytest.approx(experts * (2.0 - 4.25 / 8), rel=1e-3)
    status, out, _ = _infer(capsys, "--model", str(path), "--expert-activation-precision",
                            "fp8", "--gpu", "b200")
    assert status == 0 and "experts       weights mxfp4, activations fp8" in out
    dense = _config(tmp_path, MXFP4)
    status, out, _ = _infer(capsys, "--model", str(dense), "--json")
    assert status == 0
    assert json.loads(out)["assumptions"]["formats"]["weights"] == "mxfp4"


def test_presets_published_quantized_default_to_their_checkpoint(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A preset whose published checkpoint is quantized is estimated as published unless
    the flags say otherwise: GPT-OSS-120B's MXFP4 experts (the gpt-oss model card: the
    120b model runs on a single 80 GB GPU) fit one H100, in BF16 they do not; DeepSeek-V3's
    config.json declares FP8 with 128 x 128 weight blocks; a 16-bit preset stays BF16."""
    status, out, _ = _infer(capsys, "--model", "gpt-oss-120b", "--json")
    assert status == 0
    doc = json.loads(out)
    a = doc["assumptions"]
    assert a["formats"]["weights"] == "bf16" and a["expert_formats"]["weights"] == "mxfp4"
    assert a["formats_origin"].startswith("preset gpt-oss-120b's published checkpoint")
    assert doc["fits_in_memory"] is True
    status, out, _ = _infer(capsys, "--model", "gpt-oss-120b", "--weight-precision", "bf16",
                            "--json")
    doc16 = json.loads(out)
    assert doc16["assumptions"]["expert_formats"] is None
    assert doc16["assumptions"]["formats_origin"] is None
    assert doc16["fits_in_memory"] is False
    status, out, _ = _infer(capsys, "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8")
    assert status == 0
    assert "weights fp8, activations fp8, KV cache bf16" in out
    assert "quant_method fp8, weight blocks [128, 128]" in out
    status, out, _ = _infer(capsys, "--model", "llama-3.1-8b", "--json")
    a = json.loads(out)["assumptions"]
    assert a["formats"]["weights"] == "bf16" and a["formats_origin"] is None


def test_a_presets_unreadable_quantization_is_refused_by_name(tmp_path: Path) -> None:
    from gpuarch.workloads.presets import load_presets

    models = tmp_path / "models.toml"
    models.write_text('[[source]]\nid = "s"\ntitle = "t"\nurl = "u"\n\n[[model]]\n'
                      'name = "tiny"\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 100\n'
                      'ffn_hidden = 128\nsource = "s"\n\n[model.quantization_config]\n'
                      'quant_method = "bitsandbytes"\n')
    with pytest.raises(GpuarchError, match=r"preset tiny's published checkpoint .*"
                                           r"quant_method 'bitsandbytes' is not one"):
        load_presets(models)


# NVIDIA's ModelOpt checkpoints, as their hf_quant_config.json and config.json declare them
# (the nvidia/*-NVFP4 repositories; the files as NVIDIA aiconfigurator-core 0.12.0's
# model_configs/ ships them): the modules left out, and MIXED_PRECISION's module by module
QWEN3_MOE_SMALL = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                   "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                   "num_hidden_layers": 48, "num_experts": 128, "num_experts_per_tok": 8,
                   "moe_intermediate_size": 768, "vocab_size": 151936,
                   "tie_word_embeddings": False}


def _modelopt_checkpoint(tmp_path: Path, quantization: dict[str, Any],
                         model: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model or QWEN3_MOE_SMALL))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": quantization}))
    return path


def _formats(path: Path) -> tuple[Any, ...]:
    got = checkpoint_formats(path)
    assert got is not None
    return (got.weights, got.activations, got.kv_cache, got.expert_weights,
            got.expert_activations)


@pytest.mark.parametrize(("name", "role"), [
    ("model.layers.7.self_attn*", "attention"),  # GLM-5.1-NVFP4
    ("model.layers.0.self_attn.kv_a_proj_with_mqa", "attention"),  # DeepSeek-V3.1-NVFP4
    ("model.layers.3.self_attn.indexer*", "attention"),
    ("*.attn.*", "attention"),  # DeepSeek-V4-NVFP4
    ("model.language_model.layers.4.linear_attn.in_proj_qkv", "attention"),  # Qwen3.6
    ("backbone.layers.0.mixer.in_proj", "attention"),  # Nemotron-H's Mamba-2 mixer
    ("backbone.layers.5.mixer.q_proj", "attention"),
    ("model.language_model.layers.0.mlp.down_proj", "mlp"),
    ("model.language_model.layers.4.mlp*", "mlp"),  # Gemma 4 26B-A4B's dense MLP
    ("backbone.layers.1.mixer.experts.0.down_proj", "experts"),
    ("model.language_model.layers.0.mlp.experts", "experts"),
    ("language_model.model.layers.2.block_sparse_moe.experts.7.w1", "experts"),
    ("model.layers.10.mlp.shared_experts*", "shared"),
    ("model.language_model.layers.3.mlp.shared_expert.up_proj", "shared"),
    ("model.layers.0*", "layer"), ("model.layers.1.*", "layer"),
    ("model.layers.10.mlp.gate", None), ("backbone.layers.3.mixer.gate", None),
    ("model.language_model.layers.0.mlp.shared_expert_gate", None),
    ("model.language_model.layers.0.router*", None), ("backbone.layers.0.mixer.conv1d", None),
    ("lm_head", None), ("head", None), ("model.embed_tokens", None), ("mtp.layers.0*", None),
    ("model.vision_tower*", None), ("model.visual*", None),
])
def test_modelopt_module_roles(name: str, role: str | None) -> None:
    assert module_role(name) == role


def test_modelopt_modules_left_out(tmp_path: Path) -> None:
    """NVFP4 with attention left out in every layer (GLM-5-NVFP4, MiniMax-M2.5-NVFP4, Kimi
    K2.6-NVFP4): an MoE model's attention stays 16-bit and its routed experts are W4A4; a
    dense model's MLP is 4-bit and its 16-bit attention is named; attention left out in one
    layer of 48 leaves it 4-bit; a pattern naming no layer covers them all."""
    every = [f"model.layers.{i}.self_attn*" for i in range(48)]
    quant = {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
             "exclude_modules": ["lm_head", "model.layers.0*", *every,
                                 *(f"model.layers.{i}.mlp.gate" for i in range(48))]}
    path = _modelopt_checkpoint(tmp_path, quant)
    assert _formats(path) == ("bf16", "bf16", "fp8", "fp4", "fp4")
    got = checkpoint_formats(path)
    assert got is not None and "attention Wbf16Abf16; routed experts Wfp4Afp4" in got.origin
    dense = {**LLAMA_8B, "num_hidden_layers": 48}
    path = _modelopt_checkpoint(tmp_path, quant, dense)
    assert _formats(path) == ("fp4", "fp4", "fp8", None, None)
    got = checkpoint_formats(path)
    assert got is not None and "also attention Wbf16Abf16, priced at the MLP" in got.origin
    one = {**quant, "exclude_modules": ["lm_head", "model.layers.47.self_attn*"]}
    assert _formats(_modelopt_checkpoint(tmp_path, one)) == ("fp4", "fp4", "fp8", None, None)
    glob = {**quant, "exclude_modules": ["*.attn.*", "*.ffn.shared_experts.*", "head"]}
    assert _formats(_modelopt_checkpoint(tmp_path, glob)) == \
        ("bf16", "bf16", "fp8", "fp4", "fp4")


def test_modelopt_mixed_precision(tmp_path: Path) -> None:
    """MIXED_PRECISION lists each quantized module's algorithm, the rest unquantized:
    Qwen3.6-35B-A3B-NVFP4's FP8 attention with weight-only NVFP4 experts and shared experts;
    Nemotron 3.5 Lightning's experts in 23 of its 52 layers (a hybrid: the others are
    Mamba-2 or attention blocks) still read as the experts' format; the dense Qwen3.6-27B's
    weight-only NVFP4 MLP beside FP8 attention."""
    listed: dict[str, Any] = {}
    for i in range(48):
        listed[f"model.language_model.layers.{i}.mlp.experts"] = {"quant_algo": "W4A16_NVFP4"}
        listed[f"model.language_model.layers.{i}.mlp.shared_expert.up_proj"] = \
            {"quant_algo": "W4A16_NVFP4"}
        for proj in ("q", "k", "v", "o"):
            listed[f"model.language_model.layers.{i}.self_attn.{proj}_proj"] = \
                {"quant_algo": "FP8"}
    listed["lm_head"] = {"quant_algo": "W4A16_NVFP4"}
    quant = {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
             "quantized_layers": listed, "exclude_modules": ["mtp*"]}
    path = _modelopt_checkpoint(tmp_path, quant)
    assert _formats(path) == ("fp8", "fp8", "fp8", "fp4", "bf16")
    got = checkpoint_formats(path)
    assert got is not None and "also shared experts Wfp4Abf16" in got.origin
    hybrid = {f"backbone.layers.{i}.mixer.experts.{e}.up_proj": {"quant_algo": "W4A16_NVFP4"}
              for i in range(1, 47, 2) for e in range(4)}
    hybrid |= {f"backbone.layers.{i}.mixer.in_proj": {"quant_algo": "FP8"}
               for i in range(0, 46, 2)}
    mixed = {**quant, "quantized_layers": hybrid,
             "exclude_modules": [f"backbone.layers.{i}.mixer.{p}_proj"
                                 for i in (5, 12, 19, 26, 33, 42) for p in "qkvo"]}
    nemotron = {**QWEN3_MOE_SMALL, "num_hidden_layers": 52}
    assert _formats(_modelopt_checkpoint(tmp_path, mixed, nemotron)) == \
        ("fp8", "fp8", "fp8", "fp4", "bf16")
    dense = {f"model.language_model.layers.{i}.{kind}": {"quant_algo": algo}
             for i in range(64) for kind, algo in (("mlp.up_proj", "W4A16_NVFP4"),
                                                   ("linear_attn.out_proj", "FP8"))}
    path = _modelopt_checkpoint(tmp_path, {**quant, "quantized_layers": dense},
                                {**LLAMA_8B, "num_hidden_layers": 64})
    assert _formats(path) == ("fp4", "bf16", "fp8", None, None)


def test_modelopt_over_an_fp8_checkpoint(tmp_path: Path) -> None:
    """NVIDIA's DeepSeek-V4-Flash-NVFP4: its config.json keeps DeepSeek's quant_method fp8
    (128 x 128 blocks) and adds ModelOpt's MIXED_PRECISION with NVFP4 routed experts: the
    experts are W4A4 NVFP4, not the MXFP4 its expert_dtype names; what ModelOpt left out
    stays FP8. ModelOpt's hf_quant_config.json beside a config.json that copies ModelOpt's
    declaration is read first (it carries the KV cache's format); a declaration by
    ModelOpt's producer that names no method is ModelOpt's."""
    experts = {f"layers.{i}.ffn.experts": {"quant_algo": "NVFP4", "group_size": 16}
               for i in range(48)}
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3",
             "quant_algo": "MIXED_PRECISION", "quantized_layers": experts,
             "ignore": ["*.attn.*", "*.ffn.shared_experts.*", "head", "mtp.*"],
             "producer": {"name": "modelopt"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN3_MOE_SMALL, "expert_dtype": "fp4",
                                "quantization_config": quant}))
    got = checkpoint_formats(path)
    assert got is not None and got.fp8_blocks
    assert _formats(path) == ("fp8", "fp8", None, "fp4", "fp4")
    copy = {"quant_method": "modelopt", "quant_algo": "NVFP4",
            "ignore": [f"model.layers.{i}.self_attn*" for i in range(48)]}
    path.write_text(json.dumps({**QWEN3_MOE_SMALL, "quantization_config": copy}))
    assert _formats(path) == ("bf16", "bf16", None, "fp4", "fp4")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {**copy, "kv_cache_quant_algo": "FP8",
                          "exclude_modules": copy["ignore"]}}))
    assert _formats(path) == ("bf16", "bf16", "fp8", "fp4", "fp4")
    (tmp_path / "hf_quant_config.json").unlink()
    unnamed = {"quant_algo": "FP8", "kv_cache_scheme": "FP8", "producer": {"name": "modelopt"},
               "ignore": ["lm_head"]}
    assert _formats(_config(tmp_path, unnamed)) == ("fp8", "fp8", "fp8", None, None)


def test_estimate_infer_runs_nvfp4_experts_as_the_checkpoint_stores_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An MoE checkpoint with 16-bit attention and NVFP4 experts is estimated so: on B200
    the experts W4A4 at the FP4 rate; on H200, which has no FP4 Tensor Cores, dequantized
    with 16-bit activations; given expert flags override it; it decodes slower than the
    same model read as 4-bit throughout, whose attention weights are a quarter the bytes."""
    quant = {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
             "exclude_modules": [f"model.layers.{i}.self_attn*" for i in range(48)]}
    path = str(_modelopt_checkpoint(tmp_path, quant))
    run = ("--model", path, "--gpu", "b200", "--json")
    status, out, _ = _infer(capsys, *run)
    assert status == 0
    doc = json.loads(out)["assumptions"]
    assert doc["formats"]["weights"] == "bf16"
    assert (doc["expert_formats"]["weights"], doc["expert_formats"]["activations"]) == \
        ("fp4", "fp4")
    status, out, _ = _infer(capsys, "--model", path, "--gpu", "h200", "--json")
    doc = json.loads(out)["assumptions"]
    assert (doc["expert_formats"]["weights"], doc["expert_formats"]["activations"]) == \
        ("fp4", "bf16")
    status, out, _ = _infer(capsys, *run, "--expert-weight-precision", "fp8")
    doc = json.loads(out)["assumptions"]
    assert (doc["expert_formats"]["weights"], doc["expert_formats"]["activations"]) == \
        ("fp8", "bf16")
    status, mixed, _ = _infer(capsys, *run)
    status, whole, _ = _infer(capsys, *run, "--weight-precision", "fp4")
    assert json.loads(mixed)["tpot_s"] > json.loads(whole)["tpot_s"]
