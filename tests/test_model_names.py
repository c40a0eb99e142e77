"""What a user may type for --model: a preset's name or alias, its Hugging Face repository
id, and an instruction- or chat-tuned checkpoint's name for its base model's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError, UnknownNameError
from gpuarch.workloads.presets import load_presets, preset


@pytest.mark.parametrize(("typed", "name"), [
    ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),  # the preset's own source page
    ("META-LLAMA/llama-3.1-70b", "llama-3.1-70b"),  # case and separators ignored
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
    ("Qwen/Qwen3-8B", "qwen3-8b"),  # hf_repos: the family's shared source is one size's
    ("Qwen/Qwen3-32B", "qwen3-32b"),
    ("openai/gpt-oss-20b", "gpt-oss-20b"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("google/gemma-3-1b-pt", "gemma-3-1b"),  # the pretrained repositories the source names
    ("google/gemma-2-27b", "gemma-2-27b"),
    ("nvidia/Nemotron-H-56B-Base-8K", "nemotron-h-56b"),  # Megatron Bridge's mapping
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nemotron-3-super-120b-a12b"),
    ("Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b"),
])
def test_a_hugging_face_repository_id_finds_its_preset(typed: str, name: str) -> None:
    assert preset(typed).shape.name == name


@pytest.mark.parametrize(("typed", "name"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("llama-3.1-70b-instruct", "llama-3.1-70b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"),
    ("google/gemma-3-27b-it", "gemma-3-27b"),
    ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
])
def test_a_tuned_checkpoint_finds_its_base_shape(typed: str, name: str) -> None:
    assert preset(typed).shape == preset(name).shape


@pytest.mark.parametrize(("typed", "base"), [
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "llama-3.1-405b"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b"),
    ("Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b"),
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b"),
    ("someorg/Foo-7B-AWQ", None),  # no preset under the words: unknown
])
def test_a_quantized_checkpoint_is_refused_with_its_base(typed: str, base: str | None
                                                         ) -> None:
    """Its formats differ from the preset's, so the name finds no preset; the error names
    the base and the flags (or config.json) that give its formats."""
    with pytest.raises(GpuarchError) as info:
        preset(typed)
    if base is None:
        assert isinstance(info.value, UnknownNameError)
    else:
        assert f"a quantized checkpoint of {base}?" in str(info.value)
        assert "--weight-precision" in str(info.value)


@pytest.mark.parametrize("typed", [
    "llama-9-instruct",
])
def test_other_names_stay_unknown(typed: str) -> None:
    with pytest.raises(UnknownNameError):
        preset(typed)
    with pytest.raises(GpuarchError, match="ambiguous"):  # a word many names share
        preset("instruct")


def test_a_shared_source_page_names_no_preset() -> None:
    """A page several presets cite (a family's config) is no alias of any of them, so each
    repository id points at one shape."""
    seen: dict[str, str] = {}
    for item in load_presets().by_name.values():
        for alias in item.aliases:
            if "/" in alias:
                assert alias not in seen, (alias, seen.get(alias), item.shape.name)
                seen[alias] = item.shape.name
    assert seen["Qwen/Qwen3-8B"] == "qwen3-8b"
    assert len(seen) >= 30


def test_the_cli_takes_a_repository_id(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "infer", "--gpu", "h100", "--input-len", "1000", "--output-len", "100",
            "--batch", "8"]
    assert main([*argv, "--model", "meta-llama/Llama-3.1-8B-Instruct"]) == 0
    assert capsys.readouterr().out.startswith("llama-3.1-8b on 1 x H100")
    assert main([*argv, "--model", "meta-llama/Llama-3.1-8B-Instruct-FP8"]) == 2
    assert "a quantized checkpoint of llama-3.1-8b?" in capsys.readouterr().err


def test_a_checkpoints_directory_reads_its_config(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """--model DIR reads DIR/config.json (a downloaded checkpoint), as --model
    DIR/config.json does; a serve command loads the directory; a directory without one is a
    usage error naming it."""
    checkpoint = tmp_path / "My-Llama"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "vocab_size": 128256, "max_position_embeddings": 131072,
        "tie_word_embeddings": False, "hidden_act": "silu"}))
    argv = ["estimate", "infer", "--gpu", "h100", "--input-len", "1000", "--output-len",
            "100", "--batch", "8", "--json"]
    assert main([*argv, "--model", str(checkpoint)]) == 0
    by_dir = json.loads(capsys.readouterr().out)
    assert main([*argv, "--model", str(checkpoint / "config.json")]) == 0
    assert json.loads(capsys.readouterr().out)["tpot_s"] == by_dir["tpot_s"]
    assert main([*argv, "--model", str(checkpoint), "--launch", "vllm"]) == 0
    assert str(checkpoint) in json.loads(capsys.readouterr().out)["launch"]["argv"]
    assert main([*argv, "--model", str(tmp_path)]) == 2
    assert "a directory with no config.json" in capsys.readouterr().err


def test_only_recipe_and_paper_presets_lack_a_repository() -> None:
    """A served model loads its preset's Hugging Face repository (--launch): every preset
    has one recorded but those whose shapes come from a training recipe or a paper, for
    which no checkpoint in Transformers' format is published (the README says which)."""
    missing = {name for name, item in load_presets().by_name.items() if not item.hf_repos}
    assert missing == {"gpt3-5b", "gpt3-20b", "gpt3-175b", "nemotron-8b", "nemotron-22b",
                       "nemotron-4-15b", "nemotron-4-340b"}
