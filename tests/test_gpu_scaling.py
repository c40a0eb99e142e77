"""Training at several GPU counts (``estimate train --gpus 64,128,...``): each row is the
single estimate at that count with the layout and global batch kept, counts the layout
cannot take are listed with the reason, and bad lists are usage errors."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.scaling import MAX_SCALING_POINTS, scale_gpus
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.workloads.presets import preset
from tests.test_cli import run

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
DGX = CATALOG.system("dgx h100")
LLAMA70 = preset("llama-3.1-70b").shape
CFG = TrainingConfig(gpus=32, seq_len=8192, global_batch=256, tp=4, pp=4,
                     sequence_parallel=True, recompute=Recompute.SELECTIVE)


def test_each_row_is_the_single_estimate() -> None:
    """Every row is estimate_training at its count (same layout, same global batch), the
    counts ascending; the smallest sets the scaling base (100%)."""
    scaling = scale_gpus(CATALOG, LLAMA70, H100, CFG, [128, 32, 64], system=DGX,
                         tokens=1e12)
    assert [p.gpus for p in scaling.points] == [32, 64, 128]
    for p in scaling.points:
        single = estimate_training(CATALOG, LLAMA70, H100, dataclasses.replace(CFG, gpus=p.gpus),
                                   system=DGX, tokens=1e12)
        assert p.estimate is not None and p.estimate.as_json() == single.as_json()
        assert p.estimate.parallelism["dp"] == p.gpus // 16
    assert scaling.efficiency(scaling.points[0]) == 1.0
    last = scaling.points[-1].estimate
    assert last is not None
    assert scaling.efficiency(scaling.points[-1]) == pytest.approx(
        last.tokens_per_s_per_gpu / scaling.base.tokens_per_s_per_gpu)


def test_counts_that_cannot_run_carry_the_reason() -> None:
    """A count the layout cannot take is listed with the estimate's own error; when none
    can run, the first error is raised naming --gpus; too many counts is a usage error."""
    scaling = scale_gpus(CATALOG, LLAMA70, H100, CFG, [40, 64], system=DGX)
    bad, good = scaling.points
    assert bad.estimate is None and bad.error is not None and "divisible" in bad.error
    assert good.estimate is not None and scaling.base_point is good
    assert scaling.as_json()["scaling"][0] == {"gpus": 40, "error": bad.error}
    with pytest.raises(GpuarchError, match="--gpus: no count can run this layout"):
        scale_gpus(CATALOG, LLAMA70, H100, CFG, [40, 50], system=DGX)
    with pytest.raises(GpuarchError, match="at most"):
        scale_gpus(CATALOG, LLAMA70, H100, CFG, range(16, 16 * (MAX_SCALING_POINTS + 2), 16))


@settings(max_examples=10, deadline=None)
@given(counts=st.sets(st.sampled_from([16, 32, 48, 64, 128, 256, 512, 1024]), min_size=1,
                      max_size=4))
def test_scaling_invariants(counts: set[int]) -> None:
    """For any counts: one row each, ascending; the global batch is the same at every count;
    more data-parallel ranks never give a rank more micro-batches; the tokens a step holds
    are the same, so tokens/s is tokens per step over the step time."""
    if counts == {48}:  # 3 data-parallel ranks do not divide the global batch of 256
        with pytest.raises(GpuarchError, match="no count can run"):
            scale_gpus(CATALOG, LLAMA70, H100, CFG, sorted(counts), system=DGX)
        return
    scaling = scale_gpus(CATALOG, LLAMA70, H100, CFG, sorted(counts), system=DGX)
    assert [p.gpus for p in scaling.points] == sorted(counts)
    assert all((p.estimate is None) == (p.gpus == 48) for p in scaling.points)
    micro = [p.estimate.parallelism["micro_batches"] for p in scaling.points if p.estimate]
    assert micro == sorted(micro, reverse=True)
    for p in scaling.points:
        if p.estimate is None:
            continue
        assert p.estimate.tokens_per_s == pytest.approx(
            CFG.global_batch * CFG.seq_len / p.estimate.step_time_s)



TRAIN = ("estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "4",
         "--pp", "4", "--seq-len", "8192", "--global-batch", "256")


def test_cli_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The text table has a row per count (the one that cannot run says why) and the totals
    with --tokens; --json gives 'scaling' rows with the single estimate's keys and the
    scaling efficiency."""
    status, out, _ = run(capsys, *TRAIN, "--gpus", "32,64,100", "--tokens", "1T")
    assert status == 0
    assert "strong scaling" in out and "Scaling" in out and "GPU-hours" in out
    assert "cannot run: --gpus: 100 is not divisible" in out
    status, out, _ = run(capsys, *TRAIN, "--gpus", "32,64", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["global_batch"] == 256
    rows = doc["scaling"]
    assert [r["gpus"] for r in rows] == [32, 64] and rows[0]["scaling_efficiency"] == 1.0
    assert {"step_time_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_gib"} <= set(rows[1])


@pytest.mark.parametrize(("gpus", "extra", "message"), [
    ("0,64", (), "--gpus: expected >= 1, got 0"),
    ("64,x", (), "--gpus: expected a number or a comma-separated list of them, got 'x'"),
    ("40,50", (), "--gpus: no count can run this layout"),
    ("32,64", ("--launch", "megatron"), "--launch: gives one run's command"),
])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], gpus: str,
                          extra: tuple[str, ...], message: str) -> None:
    status, out, err = run(capsys, *TRAIN, "--gpus", gpus, *extra)
    assert status == 2 and message in err and "Traceback" not in err and out == ""


def test_cli_plot(capsys: pytest.CaptureFixture[str], tmp_path: pytest.TempPathFactory) -> None:
    """--plot with a --gpus list draws the chart and still prints the table; without a list
    it is a usage error naming --plot, and nothing is written."""
    pytest.importorskip("matplotlib")
    from pathlib import Path

    target = Path(str(tmp_path)) / "scaling.svg"
    status, out, _ = run(capsys, *TRAIN, "--gpus", "32,64,128", "--plot", str(target))
    assert status == 0 and "Scaling" in out
    assert "ideal" in target.read_text()
    other = Path(str(tmp_path)) / "one.svg"
    status, _, err = run(capsys, *TRAIN, "--gpus", "64", "--plot", str(other))
    assert status == 2 and "--plot: draws a scaling table" in err and not other.exists()
