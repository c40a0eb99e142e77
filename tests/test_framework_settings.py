"""Naming the training framework family sets how it shards where --zero is not given:
PyTorch FSDP and MaxText shard weights, gradients and optimizer states (ZeRO-3), as every
validation run of those families is entered; Megatron's distributed optimizer (ZeRO-1)
otherwise; an explicit --zero wins."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from gpuarch.cli.main import main
from gpuarch.estimate.training_config import (
    FRAMEWORK_DEFAULTS,
    FRAMEWORK_SETTINGS,
    framework_settings,
)
from gpuarch.validation.bands import FRAMEWORKS, framework_family
from gpuarch.validation.training import TRAINING_FILE

BASE = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
        "--seq-len", "4096", "--global-batch", "64", "--json"]


def _estimate(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main([*BASE, *flags]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_the_table_matches_how_the_published_runs_sharded() -> None:
    assert set(FRAMEWORK_SETTINGS) <= set(FRAMEWORKS)
    with TRAINING_FILE.open("rb") as fh:
        points = tomllib.load(fh)["point"]
    for family in FRAMEWORKS:
        stages = {p.get("zero", 1) for p in points
                  if framework_family(p.get("framework", "")) == family}
        assert stages == {framework_settings(family)["zero"]} or family == "megatron", \
            (family, stages)
    assert framework_settings("") == FRAMEWORK_DEFAULTS == framework_settings("megatron")


@pytest.mark.parametrize(("flags", "zero"), [
    ((), 1), (("--framework", "megatron"), 1), (("--launch", "megatron"), 1),
    (("--framework", "fsdp"), 3), (("--framework", "maxtext"), 3),
    (("--framework", "fsdp", "--zero", "1"), 1), (("--zero", "2"), 2),
])
def test_an_estimate_shards_as_its_framework(capsys: pytest.CaptureFixture[str],
                                             flags: tuple[str, ...], zero: int) -> None:
    doc = _estimate(capsys, *flags)
    assert doc["parallelism"]["zero"] == zero
    assert doc == _estimate(capsys, *flags, "--zero", str(zero))
