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
])
def test_a_hugging_face_repository_id_finds_its_preset(typed: str, name: str) -> None:
    assert preset(typed).shape.name == name


@pytest.mark.parametrize(("typed", "name"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("llama-3.1-70b-instruct", "llama-3.1-70b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"),
    ("google/gemma-3-27b-it", "gemma-3-27b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
])
def test_a_tuned_checkpoint_finds_its_base_shape(typed: str, name: str) -> None:
    assert preset(typed).shape == preset(name).shape


@pytest.mark.parametrize("typed", [
    "meta-llama/Llama-3.1-405B-Instruct-FP8",  # a quantized checkpoint: other formats
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
    assert "unknown model" in capsys.readouterr().err


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
