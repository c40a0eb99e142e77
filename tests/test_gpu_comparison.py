"""estimate train|infer --gpu a,b,...: the same run on each GPU in one table; each GPU's
JSON document is what a single estimate on it prints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuarch.cli.main import main

SERVE = ["estimate", "infer", "--model", "llama-3.1-70b", "--tp", "4", "--input-len", "2048",
         "--output-len", "512", "--batch", "32"]
TRAIN = ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "16", "--tp", "2",
         "--sequence-parallel", "--seq-len", "4096", "--global-batch", "64"]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("argv", "gpus"), [
    (SERVE, ["h100", "h200", "b200"]),
    (TRAIN, ["a100", "h100", "gb200"]),
])
def test_each_gpus_document_is_its_own_estimate(capsys: pytest.CaptureFixture[str],
                                                argv: list[str], gpus: list[str]) -> None:
    doc = _json(capsys, [*argv, "--gpu", ",".join(gpus)])
    assert doc["gpus"] == gpus and len(doc["estimates"]) == len(gpus)
    for name, compared in zip(gpus, doc["estimates"], strict=True):
        assert compared == _json(capsys, [*argv, "--gpu", name])


def test_the_table_has_a_row_per_gpu_with_its_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SERVE, "--gpu", "h100,b200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llama-3.1-70b: the same serving run on 2 GPUs (TP4")
    rows = [line for line in out.splitlines() if line.startswith(("H100", "B200"))]
    assert len(rows) == 2 and " 1.00x " in rows[0]
    h100 = _json(capsys, [*SERVE, "--gpu", "h100"])["output_tokens_per_s"]
    b200 = _json(capsys, [*SERVE, "--gpu", "b200"])["output_tokens_per_s"]
    assert f" {b200 / h100:.2f}x " in rows[1]
    assert main([*TRAIN, "--gpu", "h100,b200", "--tokens", "1T"]) == 0
    out = capsys.readouterr().out
    assert "the same training step on 2 GPUs" in out and "Days" in out


@pytest.mark.parametrize("extra", [
    ["--system", "dgx h100"], ["--launch", "vllm"], ["--as-point"], ["--simulate", "100",
                                                                      "--rate", "1"],
    ["--batch", "1,8"], ["--prefill-gpus", "4"],
])
def test_a_list_refuses_what_is_one_runs(capsys: pytest.CaptureFixture[str],
                                         extra: list[str]) -> None:
    assert main([*SERVE, "--gpu", "h100,h200", *extra]) == 2
    err = capsys.readouterr().err
    assert "--gpu: a list compares one run on each GPU" in err and "Traceback" not in err


def test_a_list_of_gpu_counts_or_a_bad_name_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a if a != "16" else "16,32" for a in TRAIN]
    assert main([*argv, "--gpu", "h100,h200"]) == 2
    assert "not with a --gpus list" in capsys.readouterr().err
    assert main([*SERVE, "--gpu", "h100,,b200"]) == 2
    assert "an empty name" in capsys.readouterr().err
    assert main([*SERVE, "--gpu", "h100,h2000"]) == 2
    assert "did you mean" in capsys.readouterr().err
