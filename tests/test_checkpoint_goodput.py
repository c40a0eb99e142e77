"""A run's time with checkpoints, interruptions and restarts (estimate/reliability.py):
Young's optimum interval, the first-order expected wall time, and the CLI around them."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.reliability import (
    INTERRUPTIONS_PER_GPU_DAY,
    CheckpointPlan,
    goodput,
)
from gpuarch.workloads import preset

DAY = 86_400.0


def test_hand_computed_run() -> None:
    """1,024 GPUs at the Llama 3 rate (419 in 54 days on 16,384): one interruption every
    16,384 x 54 / 419 / 1,024 days = 2.062 days. A 1 TB checkpoint at 50 GB/s stops
    training 20 s; Young's interval sqrt(2 x 20 x M); each interruption loses half of an
    interval and a save, 10 minutes and the 20 s load."""
    g = goodput(CheckpointPlan(write_bytes_s=50e9, restart_s=600.0), gpus=1024,
                time_s=100 * DAY, step_s=1.0, checkpoint_bytes=1e12)
    mtbi = 16_384 * 54 / 419 / 1024 * DAY
    assert g.mean_time_between_interruptions_s == pytest.approx(mtbi, rel=1e-12)
    assert g.save_s == pytest.approx(20.0) and g.load_s == pytest.approx(20.0)
    interval = math.ceil(math.sqrt(2 * 20.0 * mtbi))  # whole one-second steps
    assert g.interval_s == pytest.approx(interval)
    lost = (interval + 20.0) / 2 + 600.0 + 20.0
    wall = 100 * DAY * (1 + 20.0 / interval) / (1 - lost / mtbi)
    assert g.wall_s == pytest.approx(wall, rel=1e-12)
    assert g.goodput == pytest.approx(100 * DAY / wall, rel=1e-12)
    assert 0.98 < g.goodput < 0.99


@settings(max_examples=40, deadline=None)
@given(gpus=st.integers(8, 32_768), save=st.floats(1.0, 600.0),
       factor=st.sampled_from([0.25, 0.5, 2.0, 4.0]))
def test_youngs_interval_is_near_the_best(gpus: int, save: float, factor: float) -> None:
    """Young's interval is the first-order optimum: another interval costs at least what it
    does, to first order (within 1% of the wall time, whatever the scale)."""
    mtbi = DAY / INTERRUPTIONS_PER_GPU_DAY / gpus
    if (math.sqrt(2 * save * mtbi) * factor + save) / 2 + save >= 0.5 * mtbi:
        return  # too many interruptions for a first-order model to mean anything
    size = save * 1e9

    def wall(interval: float | None) -> float:
        return goodput(CheckpointPlan(write_bytes_s=1e9, interval_s=interval), gpus=gpus,
                       time_s=10 * DAY, step_s=1e-3, checkpoint_bytes=size).wall_s

    best = goodput(CheckpointPlan(write_bytes_s=1e9), gpus=gpus, time_s=10 * DAY,
                   step_s=1e-3, checkpoint_bytes=size)
    assert wall(best.interval_s * factor) >= best.wall_s * 0.99


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(8, 4096), restart=st.floats(0.0, 3600.0),
       size=st.floats(1e9, 1e13))
def test_more_gpus_and_slower_restarts_never_help(gpus: int, restart: float, size: float
                                                  ) -> None:
    def run(n: int, r: float) -> float:
        try:
            return goodput(CheckpointPlan(write_bytes_s=100e9, restart_s=r), gpus=n,
                           time_s=30 * DAY, step_s=5.0, checkpoint_bytes=size).goodput
        except GpuarchError:
            return 0.0  # never finishes

    assert run(2 * gpus, restart) <= run(gpus, restart)
    assert run(gpus, restart + 600.0) <= run(gpus, restart)


def test_async_saves_stop_only_for_the_host_copy() -> None:
    """An asynchronous save stops training for the copy to host memory; the write runs
    behind it and must end before the next, so the interval is at least the write."""
    plan = CheckpointPlan(write_bytes_s=10e9, asynchronous=True)
    g = goodput(plan, gpus=64, time_s=DAY, step_s=2.0, checkpoint_bytes=1e12,
                host_copy_s=0.25)
    assert g.save_s == 0.25 and g.write_s == pytest.approx(100.0)
    assert g.interval_s >= 100.0 and g.interval_s % 2.0 == pytest.approx(0.0)
    sync = goodput(CheckpointPlan(write_bytes_s=10e9), gpus=64, time_s=DAY, step_s=2.0,
                   checkpoint_bytes=1e12)
    assert g.goodput > sync.goodput
    with pytest.raises(GpuarchError, match="--checkpoint-async: the GPU's link"):
        goodput(plan, gpus=64, time_s=DAY, step_s=2.0, checkpoint_bytes=1e12)


def test_a_run_that_cannot_outpace_its_interruptions_is_refused() -> None:
    with pytest.raises(GpuarchError, match="the run never finishes"):
        goodput(CheckpointPlan(write_bytes_s=1e6), gpus=16_384, time_s=DAY, step_s=1.0,
                checkpoint_bytes=1e13)
    with pytest.raises(GpuarchError, match=r"--restart-min: expected a number >= 0, got -1"):
        CheckpointPlan(write_bytes_s=1e9, restart_s=-1.0).validate()


def test_the_checkpoint_is_weights_and_optimizer_state() -> None:
    """Llama 3.1 8B in BF16 with FP32 master weights and Adam moments: 2 + 12 bytes for
    each of its 8,030,261,248 parameters (gradients are not saved)."""
    catalog = load_catalog()
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=512)
    est = estimate_training(catalog, preset("llama-3.1-8b").shape, catalog.product("h100"),
                            cfg, system=catalog.system("dgx h100"), tokens=1e12,
                            checkpointing=CheckpointPlan(write_bytes_s=20e9))
    assert est.total is not None
    c = est.total["checkpointing"]
    assert c["checkpoint_bytes"] == 8_030_261_248 * 14
    assert c["save_s"] == pytest.approx(8_030_261_248 * 14 / 20e9)
    assert c["time_s"] > est.total["time_s"] and 0 < c["goodput"] < 1
    assert "checkpointing" in est.assumptions


ARGV = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "64",
        "--system", "dgx h100", "--seq-len", "8192", "--global-batch", "512"]


def test_cli_text_json_and_scaling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGV, "--tokens", "1T", "--checkpoint-write-gb-s", "20",
                 "--restart-min", "15"]) == 0
    out = capsys.readouterr().out
    assert "with restarts" in out and "goodput" in out and "15 min to restart" in out
    assert main([*ARGV, "--tokens", "1T", "--checkpoint-write-gb-s", "20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["checkpointing"]["restart_s"] == 0
    scaling = [*ARGV[:7], "64,512", *ARGV[8:], "--tokens", "1T",
               "--checkpoint-write-gb-s", "20"]
    assert main(scaling) == 0
    assert "Goodput" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--checkpoint-write-gb-s", "20"], "--checkpoint-write-gb-s: prices a whole run's"),
    (["--tokens", "1T", "--restart-min", "5"], "--restart-min: needs --checkpoint-write-gb-s"),
    (["--tokens", "1T", "--checkpoint-async"], "--checkpoint-async: needs --checkpoint-write"),
    (["--tokens", "1T", "--checkpoint-write-gb-s", "0"],
     "--checkpoint-write-gb-s: expected a finite number > 0"),
    (["--tokens", "1T", "--checkpoint-write-gb-s", "5", "--restart-min", "-3"],
     "--restart-min: expected a finite number >= 0"),
])
def test_usage_errors_name_the_flag(capsys: pytest.CaptureFixture[str], extra: list[str],
                                    message: str) -> None:
    try:
        status = main([*ARGV, *extra])
    except SystemExit as exc:  # argparse's own type errors
        status = int(exc.code or 0)
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_advisor_ranks_by_the_time_with_restarts() -> None:
    """With a checkpoint write rate every option's days are its wall time with saves, lost
    work and restarts: the best option's equal what estimate train gives its configuration
    with the same checkpointing, and each option takes longer than without."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config

    catalog = load_catalog()
    shape = preset("llama-3.1-8b").shape
    plan = CheckpointPlan(write_bytes_s=5e9, restart_s=900.0)
    base = TrainingSearch(tokens=2e12, max_gpus=256, gpus=("h100",), top=3)
    with_ckpt = dataclasses.replace(base, checkpointing=plan)
    plain = advise_training(catalog, shape, base, load_prices())
    adv = advise_training(catalog, shape, with_ckpt, load_prices())
    assert "checkpointing" in adv.assumptions
    best = adv.top[0]
    system = catalog.system("dgx h100")
    est = estimate_training(catalog, shape, catalog.product(best.gpu),
                            option_config(with_ckpt, best, system, shape), system=system,
                            tokens=2e12, checkpointing=plan)
    assert est.total is not None
    assert best.time_days == pytest.approx(est.total["checkpointing"]["time_days"], rel=1e-6)
    assert best.time_days > est.total["time_days"]
    assert adv.top[0].time_days > plain.top[0].time_days


def test_the_advisor_rules_out_runs_that_never_finish() -> None:
    from gpuarch.advise import TrainingSearch, advise_training, load_prices

    # a 112 GB checkpoint written at 100 kB/s takes 13 days: the larger jobs, interrupted
    # more often than that, never finish and are ruled out; small ones still run
    search = TrainingSearch(tokens=2e11, max_gpus=64, gpus=("h100",), top=3,
                            checkpointing=CheckpointPlan(write_bytes_s=1e5))
    adv = advise_training(load_catalog(), preset("llama-3.1-8b").shape, search,
                          load_prices())
    assert adv.rejected.get("interruptions", 0) > 0
    assert all(math.isfinite(o.time_days) and o.gpus < 64 for o in adv.top)
