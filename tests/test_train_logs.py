"""A training log as a measured run: ``estimate train ... --as-point --measured LOG``
(validation/train_logs.py, docs/your-measurements.md). The logs here are written in each
framework's line format; their figures are made up for the test, not measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.validation.train_logs import read_training_log
from tests.test_cli import run

RUN = ("--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--seq-len", "4096",
       "--global-batch", "64")


def _megatron(step: int, ms: float, batch: int = 64, avg: bool = False) -> str:
    time = f"{ms:.1f}/{ms:.1f}" if avg else f"{ms:.1f}"
    return (f" [2026-11-30 10:00:00] iteration {step:8d}/     500 | consumed samples: "
            f"{step * batch:12d} | elapsed time per iteration (ms): {time} | throughput per "
            f"GPU (TFLOP/s/GPU): 400.0 | learning rate: 1.000000E-04 | global batch size: "
            f"{batch:5d} | lm loss: 7.1E+00 | loss scale: 1.0 | grad norm: 1.0 |\n")


def _nemo(rank: int, step: int, seconds: float) -> str:
    return (f"{rank}: Training epoch 0, iteration {step}/99 | lr: 1e-05 | global_batch_size: "
            f"64 | global_step: {step} | reduced_train_loss: 11.9 | train_step_timing in s: "
            f"{seconds} | consumed_samples: {step * 64}\n")


def _titan(step: int, tps: str) -> str:
    return (f"[rank0]:[titan] 2026-11-30 10:00:00,000 - root - INFO - \x1b[31mstep: {step:2}  "
            f"\x1b[32mloss: 7.1234  \x1b[33mmemory: 60.10GiB(75.95%)  \x1b[34mtps: {tps}  "
            f"\x1b[36mtflops: 360.12  \x1b[35mmfu: 36.41%\x1b[39m\n")


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.log"
    path.write_text(text)
    return path


def test_megatron_the_median_after_the_warm_up_at_the_runs_batch(tmp_path: Path) -> None:
    """The first tenth of the records (at least one) is warm-up; records of a batch-size
    ramp and validation lines are left out; the median of the rest is the step time."""
    lines = [_megatron(10, 9000.0, batch=32), _megatron(20, 30000.0)]
    lines += [_megatron(step, 1500.0 + step) for step in range(30, 130, 10)]
    lines.append(" validation loss at iteration 120 | lm loss value: 6.9 |\n")
    log = read_training_log(_log(tmp_path, "".join(lines)), 64)
    assert log.framework == "Megatron-LM log" and log.figure == "step_time_s"
    assert log.skipped == 1 and log.kept == 10 and log.steps == (30, 120)
    assert log.value == pytest.approx(1.575)  # the median of 1.53 ... 1.62 s
    assert (log.low, log.high) == (pytest.approx(1.53), pytest.approx(1.62))


def test_megatrons_newer_instant_and_average_form(tmp_path: Path) -> None:
    text = "".join(_megatron(step, 2000.0, avg=True) for step in range(1, 6))
    assert read_training_log(_log(tmp_path, text), 64).value == pytest.approx(2.0)


def test_nemo_keeps_the_first_rank_of_a_multi_rank_log(tmp_path: Path) -> None:
    text = "".join(_nemo(0, s, 20.0 if s == 1 else 6.08) + _nemo(1, s, 9.9)
                   for s in range(1, 11))
    log = read_training_log(_log(tmp_path, text), 64)
    assert log.framework == "NeMo log" and log.value == pytest.approx(6.08)


def test_torchtitan_gives_tokens_per_gpu(tmp_path: Path) -> None:
    text = _titan(1, "1,234") + "".join(_titan(s, "7,812") for s in range(10, 60, 10))
    log = read_training_log(_log(tmp_path, text), 64)
    assert log.figure == "tokens_per_s_per_gpu" and log.value == 7812
    # its 2024 releases printed the same figure as wps
    log = read_training_log(_log(tmp_path, text.replace("tps:", "wps:")), 64)
    assert log.framework == "torchtitan log" and log.value == 7812


def test_a_logged_run_is_compared_as_its_estimate(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """The point carries the run's settings and the log's median step time, with where it
    came from; validate --data reads the step time as tokens/s per GPU (64 x 4,096 tokens
    over the step over 8 GPUs) beside the estimate's."""
    lines = [_megatron(step, 16000.0 if step == 10 else 15800.0) for step in range(10, 110, 10)]
    log = str(_log(tmp_path, "".join(lines)))
    status, text, err = run(capsys, "estimate", "train", *RUN, "--as-point", "mine",
                            "--measured", log)
    assert status == 0 and err == "", err
    assert "step_time_s = 15.8" in text and 'where = "train.log: Megatron-LM log' in text
    assert "framework" not in text  # (a framework would turn on the TP-overlap default)
    data = tmp_path / "runs.toml"
    data.write_text(text)
    status, out, err = run(capsys, "validate", "training", "--data", str(data), "--json")
    assert status == 0 and err == "", err
    (row,) = json.loads(out)["points"]
    assert row["published"] == pytest.approx(64 * 4096 / 15.8 / 8, rel=1e-4)
    status, out, _ = run(capsys, "estimate", "train", *RUN, "--json")
    assert row["predicted"] == pytest.approx(json.loads(out)["tokens_per_s_per_gpu"], rel=1e-5)


@pytest.mark.parametrize(("text", "message"), [
    ("nothing a framework prints\n", "no step lines of Megatron-LM"),
    ("".join(_megatron(s, 1500.0) for s in (10, 20, 30)),
     "3 logged step(s) at global batch 64; after the first 1 (warm-up) at least 3"),
    ("".join(_megatron(s, 1500.0, batch=128) for s in range(10, 100, 10)),
     "every logged step ran a global batch of 128, not --global-batch 64"),
])
def test_a_log_that_cannot_stand_for_the_run_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str) -> None:
    status, out, err = run(capsys, "estimate", "train", *RUN, "--as-point", "--measured",
                           str(_log(tmp_path, text)))
    assert status == 2 and out == "" and message in err and "train.log" in err, err


def test_measured_needs_a_point_and_a_file(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    status, out, err = run(capsys, "estimate", "train", *RUN, "--measured",
                           str(_log(tmp_path, _megatron(1, 1.0))))
    assert status == 2 and out == "" and "give --as-point" in err
    status, out, err = run(capsys, "estimate", "train", *RUN, "--as-point", "--measured",
                           str(tmp_path / "nowhere.log"))
    assert status == 2 and out == "" and "--measured: no such file" in err
