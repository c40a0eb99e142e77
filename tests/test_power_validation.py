"""The power model against node power metered during MLPerf Training runs
(src/gpuarch/validation/data/power.toml names the sources): the meter's readings are
averaged as MLPerf's result summarizer averages them, the model's node power is the power
model at the run's measured pace, bad rows are refused by name, and where the model stands
on the shipped runs is pinned, so a change that moves it shows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import NODE_OVERHEAD, gpu_power_w
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.validation.inference import load_inference_points
from gpuarch.validation.power import (
    compare_run,
    compare_serving,
    load_power_runs,
    load_readings,
    load_serving_power,
    load_user_power_runs,
    mean_power_w,
    serving_prompt_len,
    serving_summary,
    validate_power,
)
from gpuarch.validation.training import estimate_point
from gpuarch.workloads.params import count_params
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()
RUNS = {r.id: r for r in load_power_runs()}
LENOVO = "mlperf50-lenovo-b200-llama2-70b-lora-r0"
DELL = "mlperf41-dell-h100-llama2-70b-lora-64"


def test_mean_is_the_summarizers() -> None:
    # each reading holds since the one before it (the window's start for the first):
    # 100 W for 1 s, 200 W for 1 s, 400 W for 2 s -> 1,100 J over 4 s
    readings = [(1000, 100.0), (2000, 200.0), (4000, 400.0)]
    assert mean_power_w(readings, (0, 4000)) == pytest.approx(275.0)
    # from 1 s on, the 100 W reading is at the start and holds for nothing
    assert mean_power_w(readings, (1000, 4000)) == pytest.approx(1_000_000 / 3000)
    # a repeated line (the Dell logs have them) adds nothing; order does not matter
    assert mean_power_w([*readings, (2000, 200.0)][::-1], (0, 4000)) == pytest.approx(275.0)
    with pytest.raises(GpuarchError, match="no meter reading in the window"):
        mean_power_w(readings, (5000, 6000))


@given(st.lists(st.tuples(st.integers(1, 10**6), st.floats(100.0, 2e4)), min_size=1,
                max_size=40))
def test_mean_stays_within_the_readings(readings: list[tuple[int, float]]) -> None:
    mean = mean_power_w(readings, (0, 10**6))
    watts = [w for _, w in readings]
    assert min(watts) * (1 - 1e-12) <= mean <= max(watts) * (1 + 1e-12)


def test_shipped_readings_are_whole() -> None:
    # Lenovo's result_0 power log holds 624 readings from 1745519751000 to 1745520408000
    # (power_measurement_start 1745519750000, stop 1745520408000); Dell's eight node logs
    # 281-288 lines each (repeated lines kept)
    lenovo = load_readings(RUNS[LENOVO].readings)
    assert list(lenovo) == ["0"]
    assert len(lenovo["0"]) == 624
    assert (lenovo["0"][0][0], lenovo["0"][-1][0]) == (1745519751000, 1745520408000)
    dell = load_readings(RUNS[DELL].readings)
    assert sorted(dell) == [str(k) for k in range(8)]
    assert all(281 <= len(r) <= 288 for r in dell.values())


def test_lenovo_mean_over_the_official_window() -> None:
    # the summarizer's mean over the power window, 9,572.46 W: the node's energy MLPerf
    # counts is this x 0.94 (conversion_eff) x the 655.908 s run, 5.90 MJ
    row = compare_run(CATALOG, RUNS[LENOVO])
    assert row.measured_w == pytest.approx(9572.46, abs=0.01)
    assert row.node_spread_w is None


def test_model_is_the_power_model_at_the_measured_pace() -> None:
    run = RUNS[DELL]
    row = compare_run(CATALOG, run)
    est = estimate_point(CATALOG, run.training, DEFAULT_EFFICIENCY).estimate
    hfu = est.hfu * est.step_time_s / run.step_time_s
    assert row.hfu == pytest.approx(hfu)
    tdp = CATALOG.product("h100-sxm5-80gb").tdp_w
    assert tdp == 700
    assert row.gpu_power_w == pytest.approx(float(gpu_power_w(tdp, hfu)))
    assert row.model_w == pytest.approx(row.gpu_power_w * (1 + NODE_OVERHEAD) * 8)
    # the eight nodes' means straddle theirs
    assert row.node_spread_w is not None
    assert row.node_spread_w[0] <= row.measured_w <= row.node_spread_w[1]


@pytest.mark.parametrize("layout", [{"tp": 8, "cp": 1}, {"tp": 2, "cp": 4},
                                    {"tp": 4, "cp": 1, "pp": 2}])
def test_the_assumed_layout_does_not_move_the_utilisation(layout: dict[str, int]) -> None:
    # Dell's 8-node config is not stored (TP 4 x CP 2 taken): the LoRA step's FLOPs, and so
    # the utilisation at the measured step time, are the same at any layout of the 64 GPUs
    run = RUNS[DELL]
    other = dataclasses.replace(run, training=dataclasses.replace(
        run.training, raw={**run.training.raw, **layout}))
    assert compare_run(CATALOG, other).hfu == pytest.approx(compare_run(CATALOG, run).hfu)


def test_a_slower_step_never_draws_more() -> None:
    run = RUNS[LENOVO]
    fast = compare_run(CATALOG, run)
    slow = compare_run(CATALOG, dataclasses.replace(run, step_time_s=2 * run.step_time_s))
    assert slow.hfu == pytest.approx(fast.hfu / 2)
    assert slow.model_w < fast.model_w
    assert slow.measured_w == fast.measured_w


def test_where_the_model_stands() -> None:
    # docs/advisor.md, "Power against metered runs": out of sample for the power curve
    # (fitted on H100 serving power), the model 13% above the water-cooled B200 node and
    # 13.3% below the air-cooled H100 nodes (8.5% with the curve fitted on output tokens
    # alone, which had their GPUs at full power)
    rows = {r.id: r for r in validate_power(CATALOG)}
    assert set(rows) == set(RUNS)
    assert rows[LENOVO].error == pytest.approx(0.128, abs=0.005)
    assert rows[DELL].error == pytest.approx(-0.133, abs=0.005)


RUN = """
[[source]]
id = "s"
title = "t"
url = "u"

[[run]]
id = "r"
source = "s"
point = "mlperf50-b200-llama2-70b-lora"
step_time_s = 1.5
nodes = 1
meter = "node-ac"
readings = "power-mlperf50-lenovo-b200-lora-r0.csv"
window_ms = [1745519750000, 1745520408000]
"""


@pytest.mark.parametrize(("change", "message"), [
    (("meter = \"node-ac\"", "meter = \"node-acc\""), "meter.*'node-acc'.*did you mean"),
    (("point = \"mlperf50-b200-llama2-70b-lora\"", "point = \"nope\""),
     "unknown training point 'nope'"),
    (("source = \"s\"\npoint", "source = \"x\"\npoint"), "source 's' is cited by no point"),
    (("nodes = 1", "nodes = 1\nnode = 2"), "unknown key 'node'.*did you mean 'nodes'"),
    (("window_ms = [1745519750000, 1745520408000]", "window_ms = [2, 1]"),
     r"window_ms must be \[start, end\]"),
    (("step_time_s = 1.5\n", ""), "step_time_s .* required"),
    (("readings = \"power-mlperf50-lenovo-b200-lora-r0.csv\"", "readings = \"nope.csv\""),
     "readings file 'nope.csv' not found beside it"),
])
def test_bad_rows_are_refused_by_name(tmp_path: Path, change: tuple[str, str],
                                      message: str) -> None:
    path = tmp_path / "power.toml"
    (tmp_path / "power-mlperf50-lenovo-b200-lora-r0.csv").write_text(
        RUNS[LENOVO].readings.read_text())
    path.write_text(RUN.replace(*change))
    with pytest.raises(GpuarchError, match=message):
        load_power_runs(path)


def test_nodes_must_match_the_readings(tmp_path: Path) -> None:
    path = tmp_path / "power.toml"
    (tmp_path / "power-mlperf50-lenovo-b200-lora-r0.csv").write_text(
        RUNS[LENOVO].readings.read_text())
    path.write_text(RUN.replace("nodes = 1", "nodes = 2\ngpus = 16\ndp = 8\ncp = 2"))
    (run,) = load_power_runs(path)
    with pytest.raises(GpuarchError, match="holds 1 nodes' readings, not the run's 2"):
        compare_run(CATALOG, run)


def test_serving_rows_are_the_leaderboards() -> None:
    # public/data/models/meta-llama__Llama-3.1-8B-Instruct__lm-arena-chat.json, H100,
    # max_num_seqs 128: avg_batch_size 127.62, output_throughput_tokens_per_sec 7036.53,
    # avg_power_watts 669.244
    table, rows = load_serving_power()
    assert len(rows) == 328 and table["source"] == "ml-energy-leaderboard-v3"
    (row,) = [r for r in rows if r.model_id == "meta-llama/Llama-3.1-8B-Instruct"
              and r.gpu == "h100-sxm5-80gb" and r.max_num_seqs == 128]
    assert (row.batch, row.output_tokens_per_s, row.power_w) == (127.62, 7036.53, 669.244)
    # every model is a preset of this catalog (an unknown name raises)
    assert len({preset(r.preset).shape.name for r in rows}) == 16


def test_serving_model_is_the_serving_energy_models_utilisation() -> None:
    _, rows = load_serving_power()
    row = next(r for r in rows if r.preset == "llama-3.1-70b" and r.gpus == 4)
    (got,) = compare_serving(CATALOG, [row])
    shape = preset("llama-3.1-70b").shape
    h100 = CATALOG.product("h100-sxm5-80gb")
    peak = matmul_peak(h100, Precision.BF16)
    assert peak is not None
    # its output and a prompt a request (one a mean answer) of the prompts' mean length,
    # fitted by the serving validation on the same runs
    (prompt_len,) = {p.get("input_len") for p in load_inference_points()
                     if p.source == "mlenergy-v3-lm-arena-chat"}
    assert serving_prompt_len(load_serving_power()[0]) == prompt_len
    tokens = row.output_tokens_per_s * (1 + prompt_len / row.output_len)
    assert got.prompt_tokens_per_s == pytest.approx(tokens - row.output_tokens_per_s)
    busy = tokens * 2 * count_params(shape).active(shape) / peak.flops / 4
    assert got.utilisation == pytest.approx(busy)
    assert got.model_w == pytest.approx(float(gpu_power_w(700, busy)))
    assert got.measured_w == pytest.approx(row.power_w / 4)


def test_where_the_serving_model_stands() -> None:
    # docs/advisor.md, "Power against metered runs": the curve is fitted on the H100 rows
    # (scripts/fit_power.py); over all 328 the mean error is -2.6%, mean |error| 12.4% (-3.1%
    # and 12.3% with output tokens only), and the B200 rows, out of sample, read below the
    # model at every batch
    total = serving_summary(compare_serving(CATALOG))
    assert total["compared"] == 328
    assert total["mean_error"] == pytest.approx(-0.026, abs=0.005)
    assert total["mean_abs_error"] == pytest.approx(0.124, abs=0.005)
    assert all(cell["mean_error"] < 0 for cell in total["by_gpu_and_batch"]["b200"].values())


def test_validate_power_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "power", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["compared"] == len(RUNS) == len(doc["runs"])
    assert {"measured_w", "model_w", "hfu", "error", "meter"} <= set(doc["runs"][0])
    assert len(doc["serving"]["configurations"]) == 328
    assert {"model_w_per_gpu", "measured_w_per_gpu", "utilisation", "error",
            "prompt_tokens_per_s"} <= set(doc["serving"]["configurations"][0])
    assert doc["serving"]["prompt_len"] == 400
    assert main(["validate", "power", "--match", "h100"]) == 0
    out = capsys.readouterr().out
    assert DELL in out and LENOVO not in out and "1 run:" in out
    assert "Llama-3.1-8B-Instruct" in out
    assert main(["validate", "power", "--match", "maverick"]) == 0
    out = capsys.readouterr().out
    assert "Training:" not in out and "Maverick" in out
    assert main(["validate", "power", "--match", "tpu"]) == 2
    assert "--match: no run has all of 'tpu'" in capsys.readouterr().err


USER_RUN = """
[[run]]
id = "mine"
preset = "llama-2-70b"
gpu = "b200"
gpus = 8
seq_len = 8192
global_batch = 8
precision = "fp8"
fp8_params = true
lora_rank = 16
lora_modules = ["linear_qkv", "linear_proj"]
step_time_s = 1.5243
nodes = 1
meter = "node-ac"
readings = "node.csv"
window_ms = [1745519750000, 1745520408000]
"""


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    """A user's file of one metered run: Lenovo's result_0 with its layout written out."""
    (tmp_path / "node.csv").write_text(RUNS[LENOVO].readings.read_text())
    path = tmp_path / "mine.toml"
    path.write_text(USER_RUN)
    return path


def test_a_users_run_reads_as_the_shipped_one(user_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (mine,) = _compare_users(user_file)
    shipped = compare_run(CATALOG, RUNS[LENOVO])
    assert (mine.measured_w, mine.model_w) == pytest.approx((shipped.measured_w,
                                                              shipped.model_w))
    # naming a shipped training point instead of the layout gives the same
    user_file.write_text(USER_RUN + USER_RUN.replace('id = "mine"', 'id = "by-point"').replace(
        'preset = "llama-2-70b"\ngpu = "b200"', 'point = "mlperf50-b200-llama2-70b-lora"'))
    assert main(["validate", "power", "--data", str(user_file), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in doc["runs"]] == ["mine", "by-point"]
    assert doc["runs"][0]["error"] == pytest.approx(doc["runs"][1]["error"])
    assert doc["serving"]["configurations"] == []


def _compare_users(path: Path) -> list[Any]:
    """A user's file's runs beside the model."""
    return validate_power(CATALOG, runs=load_user_power_runs(path))


@pytest.mark.parametrize(("change", "message"), [
    (('meter = "node-ac"', 'meter = "nodeac"'), "meter: .*did you mean 'node-ac'"),
    (("gpus = 8", "gpus = 8\ngpuz = 1"), "unknown key 'gpuz'; did you mean 'gpu'"),
    (("step_time_s = 1.5243\n", ""), r"give step_time_s \(a step time in seconds > 0\)"),
    (("step_time_s = 1.5243", 'step_time_s = "x"'), "step_time_s = 'x': expected a step time"),
    (("nodes = 1", "nodes = 0"), "nodes = 0: expected a whole number >= 1"),
    (('preset = "llama-2-70b"\n', ""), "give the model"),
    (('preset = "llama-2-70b"', 'point = "mlperf50-b200-llama2-70b-lor"'),
     "not a shipped training point; did you mean 'mlperf50-b200-llama2-70b-lora'"),
    (("lora_rank = 16", 'lora_rank = "a"'), "lora_rank = 'a': expected a whole number"),
    (('readings = "node.csv"', 'readings = "none.csv"'), "'none.csv' not found beside it"),
    (('id = "mine"', "id = 3"), "run 1 has no id"),
])
def test_a_users_bad_run_is_refused_by_name(user_file: Path, change: tuple[str, str],
                                            message: str) -> None:
    user_file.write_text(USER_RUN.replace(*change))
    with pytest.raises(GpuarchError, match=message):
        _compare_users(user_file)


@pytest.mark.parametrize(("text", "message"), [
    ("node,time_ms\n0,1\n", "row 1 .*expected the columns node, time_ms, watts"),
    ("node,time_ms,watts\n0,1,-3\n", "row 1: watts = '-3': expected a power >= 0"),
    ("node,time_ms,watts\n", "no readings"),
])
def test_a_users_bad_readings_are_refused_by_row(user_file: Path, text: str,
                                                 message: str) -> None:
    (user_file.parent / "node.csv").write_text(text)
    with pytest.raises(GpuarchError, match=message):
        _compare_users(user_file)


def test_the_node_overhead_is_the_users(capsys: pytest.CaptureFixture[str]) -> None:
    # the air-cooled H100 nodes read within 4% at half the GPUs' power for the rest
    row = compare_run(CATALOG, RUNS[DELL], node_overhead=0.5)
    node = float(gpu_power_w(700, row.hfu)) * 8 * 1.5
    assert row.model_w == pytest.approx(node)
    assert row.error == pytest.approx(-0.037, abs=0.005)
    assert main(["validate", "power", "--match", "dell", "--node-overhead", "0.5",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["node_overhead"] == 0.5 and doc["runs"][0]["model_w"] == pytest.approx(node)


def test_data_flag_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "power", "--data", str(tmp_path / "none.toml")]) == 2
    assert "--data: no such file" in capsys.readouterr().err
    # a name no file system takes is a usage error too, here and in validate training's
    # --data (both read a user's file through files.read_input_text)
    for what in ("power", "training"):
        assert main(["validate", what, "--data", "x" * 300]) == 2
        assert "--data: cannot read" in capsys.readouterr().err
    (tmp_path / "x.toml").write_text("x = 1\n")
    assert main(["validate", "power", "--data", str(tmp_path / "x.toml")]) == 2
    assert "unknown key or table 'x'" in capsys.readouterr().err
