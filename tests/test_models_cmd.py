"""``gpuarch models``: every preset listed with counted parameters and its published
checkpoint's formats; one preset in full; JSON that matches the library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.cli.main import main
from gpuarch.workloads.params import count_params
from gpuarch.workloads.presets import load_presets, preset


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["models", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_every_preset_is_listed_with_its_counts(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys)
    assert status == 0
    names = [line.split()[0] for line in out.splitlines()[2:] if line.strip()
             and not line.startswith("Parameters")]
    assert names == list(load_presets().by_name)
    row = next(line.split() for line in out.splitlines() if line.startswith("mixtral-8x7b "))
    counted = count_params(preset("mixtral-8x7b").shape)
    # Mixtral-8x7B: 46.7B total, 12.9B active (Mistral AI's announcement)
    assert row[1:3] == ["46.7", "12.9"]
    assert counted.active(preset("mixtral-8x7b").shape) / 1e9 == pytest.approx(12.9, abs=0.05)
    gpt_oss = next(line for line in out.splitlines() if line.startswith("gpt-oss-120b "))
    assert gpt_oss.endswith("Wbf16 experts Wmxfp4")
    assert next(line for line in out.splitlines()
                if line.startswith("deepseek-v3 ")).endswith("Wfp8 Afp8")


def test_one_preset_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "llama-2-7b")
    # the exact count of the Llama-2-7B safetensors index, counted and published
    assert status == 0 and "6,738,415,616 counted" in out
    assert "published: 6,738,415,616" in out
    assert "https://huggingface.co/meta-llama/Llama-2-7b-hf" in out
    assert "context       4,096 tokens configured" in out
    status, out, _ = _run(capsys, "DeepSeek V3")
    assert status == 0 and "multi-head latent: KV rank 512" in out
    assert "quant_method fp8, weight blocks [128, 128]" in out
    assert "256 (top 8 from 4 of 8 groups) +1 shared" in out


def test_json_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--json")
    assert status == 0
    models = {m["name"]: m for m in json.loads(out)["models"]}
    assert set(models) == set(load_presets().by_name)
    for name, m in models.items():
        p = preset(name)
        counted = count_params(p.shape)
        assert m["params_counted"]["total"] == counted.total
        assert m["params_counted"]["by_component"]["mlp_experts"] == counted.mlp_experts
        assert m["shape"]["layers"] == p.shape.layers
        assert (m["checkpoint"] is None) == (p.checkpoint is None)
    assert models["gpt-oss-20b"]["checkpoint"]["expert_weights"] == "mxfp4"
    assert models["kimi-k2"]["checkpoint"]["weights"] == "fp8"
    assert models["llama-3.1-70b"]["checkpoint"] is None


def test_an_unknown_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, "lama-3.1-8b")
    assert status == 2 and out == ""
    assert "unknown model 'lama-3.1-8b'" in err and "did you mean" in err
    assert "Traceback" not in err


def test_a_local_config_json_is_shown_like_a_preset(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """``gpuarch models config.json`` reads the file as ``--model`` does: Phi-3-mini's
    config.json counts its published 3,821,079,552 parameters (keras-hub's Phi-3 presets);
    a family it cannot read is a usage error naming the type, without a traceback."""
    cfg = {"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
           "vocab_size": 32064, "sliding_window": 2047, "max_position_embeddings": 4096,
           "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    status, out, _ = _run(capsys, str(path))
    assert status == 0 and "3,821,079,552 counted" in out and "a local config.json" in out
    status, out, _ = _run(capsys, str(path), "--json")
    assert json.loads(out)["models"][0]["params_counted"]["total"] == 3821079552
    path.write_text(json.dumps({"model_type": "a_new_family"}))
    status, _, err = _run(capsys, str(path))
    assert status == 2 and "model_type 'a_new_family' is not supported" in err
    assert "Traceback" not in err


def test_a_hybrid_config_is_counted_trained_served_and_refused_where_not_modelled(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A Nemotron-H config.json shows its blocks and counted parameters; 'estimate train'
    and 'estimate infer' on it run, with the Mamba-2 scan in their breakdowns; a pipeline
    that does not split its 52 blocks evenly and disaggregated serving are usage errors
    (exit 2) that say why, without a traceback; an even one runs."""
    from tests.test_workloads import NEMOTRON_H_8B

    path = tmp_path / "config.json"
    path.write_text(json.dumps(NEMOTRON_H_8B))
    status, out, _ = _run(capsys, str(path))
    assert status == 0 and "8,100,852,736 counted" in out
    assert "hybrid: 24 Mamba-2, 4 attention and 24 MLP blocks" in out
    status = main(["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "8",
                   "--seq-len", "4096", "--global-batch", "64"])
    out, _ = capsys.readouterr()
    assert status == 0 and "recurrent scan" in out
    status = main(["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "8",
                   "--seq-len", "4096", "--global-batch", "64", "--pp", "8"])
    _, err = capsys.readouterr()
    assert status == 2 and "--pp: 8 must divide the 52 blocks" in err and "Traceback" not in err
    status = main(["estimate", "train", "--model", str(path), "--gpu", "h100", "--gpus", "8",
                   "--seq-len", "4096", "--global-batch", "64", "--pp", "4"])
    out, _ = capsys.readouterr()
    assert status == 0 and "PP4" in out
    status = main(["estimate", "infer", "--model", str(path), "--gpu", "h100",
                   "--input-len", "100", "--output-len", "10", "--batch", "1"])
    out, _ = capsys.readouterr()
    assert status == 0 and "recurrent scan" in out and "of Mamba-2 state per sequence" in out
    status = main(["estimate", "infer", "--model", str(path), "--gpu", "h100",
                   "--input-len", "100", "--output-len", "10", "--batch", "1",
                   "--prefill-gpus", "1"])
    out, _ = capsys.readouterr()
    assert status == 0 and "KV and Mamba-2 state hand-off" in out


def test_a_leading_show_or_list_is_read_as_other_tools_use_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'models show NAME' prints what 'models NAME' does, 'models list' what 'models' does;
    two names at once are a usage error naming them (status 2, no traceback)."""
    assert _run(capsys, "show", "llama-2-7b")[:2] == _run(capsys, "llama-2-7b")[:2]
    assert _run(capsys, "list")[:2] == _run(capsys)[:2]
    status, out, err = _run(capsys, "show", "llama-2-7b", "mixtral-8x7b")
    assert status == 2 and out == ""
    assert "one preset at a time, got 'llama-2-7b mixtral-8x7b'" in err
    assert "Traceback" not in err
