"""The energy model (estimate/energy.py): the GPU power curve's shape, the facility around
the GPUs (--node-overhead, --pue) scaling energy and the power cap, and bad values refused
by name. How far the curve is from measured power is tests/test_power_validation.py's."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import (
    DEFAULT_FACILITY,
    FULL_POWER_HFU,
    LOW_LOAD_SHARE,
    Facility,
    energy_kwh,
    facility_power_w,
    gpu_power_w,
    serving_energy_kwh,
)

TRAIN = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
         "--seq-len", "4096", "--global-batch", "64", "--tokens", "1e9", "--json"]
INFER = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "100",
         "--output-len", "100", "--batch", "8", "--json"]


@given(st.floats(0, 1), st.floats(0, 1))
def test_power_rises_with_utilisation_within_the_board_power(a: float, b: float) -> None:
    low, high = sorted((a, b))
    p_low, p_high = gpu_power_w(700.0, low), gpu_power_w(700.0, high)
    assert LOW_LOAD_SHARE * 700 - 1e-9 <= p_low <= p_high <= 700.0


def test_the_curve_reaches_the_board_power_at_its_full_power_utilisation() -> None:
    assert gpu_power_w(1000.0, 0.0) == pytest.approx(1000 * LOW_LOAD_SHARE)
    assert gpu_power_w(1000.0, FULL_POWER_HFU) == pytest.approx(1000.0)
    assert gpu_power_w(1000.0, 0.9) == pytest.approx(1000.0)


def test_the_facility_multiplies_gpu_power() -> None:
    # 8 GPUs at 700 W for an hour: 5.6 kWh of GPU energy, x 1.35 x 1.25 by default
    assert energy_kwh(700.0, 1.0, 8, 3600.0) == pytest.approx(5.6 * 1.35 * 1.25)
    site = Facility(node_overhead=0.2, pue=1.1)
    assert energy_kwh(700.0, 1.0, 8, 3600.0, site) == pytest.approx(5.6 * 1.2 * 1.1)
    assert facility_power_w(700.0, 8, site) == pytest.approx(5600 * 1.2 * 1.1)
    assert serving_energy_kwh(700.0, 8, 0.0, 1e-12, 3600.0, site) == pytest.approx(
        5.6 * LOW_LOAD_SHARE * 1.2 * 1.1)
    assert DEFAULT_FACILITY.factor == pytest.approx(1.35 * 1.25)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"pue": 0.9}, "--pue: expected a power usage effectiveness of 1 or more"),
    ({"pue": math.nan}, "--pue"),
    ({"node_overhead": -0.1}, "--node-overhead: expected a fraction"),
    ({"node_overhead": math.inf}, "--node-overhead"),
])
def test_a_bad_facility_is_refused_by_name(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        Facility(**kwargs)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_estimates_take_the_sites_facility(capsys: pytest.CaptureFixture[str]) -> None:
    ratio = (1.5 * 1.1) / (1.35 * 1.25)
    base = _json(TRAIN, capsys)
    site = _json([*TRAIN, "--node-overhead", "0.5", "--pue", "1.1"], capsys)
    assert site["total"]["energy_kwh"] == pytest.approx(base["total"]["energy_kwh"] * ratio)
    assert "plus 50% for the rest of the node, times a PUE of 1.1" in \
        site["assumptions"]["power_model"]
    base = _json(INFER, capsys)
    site = _json([*INFER, "--node-overhead", "0.5", "--pue", "1.1"], capsys)
    assert site["cost"]["kwh_per_million_output_tokens"] == pytest.approx(
        base["cost"]["kwh_per_million_output_tokens"] * ratio, rel=1e-4)


@pytest.mark.parametrize(("flag", "value"), [("--pue", "0.9"), ("--pue", "nan"),
                                             ("--node-overhead", "-1"), ("--pue", "abc")])
def test_bad_flags_exit_2_naming_them(flag: str, value: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*TRAIN, flag, value])
    assert exc.value.code == 2
    assert f"argument {flag}: expected a number from" in capsys.readouterr().err


def test_the_advisor_caps_power_at_the_sites_facility(
        capsys: pytest.CaptureFixture[str]) -> None:
    # eight H100s at their board power: 9.45 kW at the default facility (x 1.35 x 1.25),
    # 7.39 kW at a site with 20% node overhead and a PUE of 1.1; a cap of 8 kW rules them
    # out only at the first
    argv = ["advise", "infer", "--gpu", "h100", "--max-gpus", "8", "--max-power-kw", "8",
            "--json"]
    base = _json(argv, capsys)
    site = _json([*argv, "--node-overhead", "0.2", "--pue", "1.1"], capsys)
    assert (site["assumptions"]["node_overhead"], site["assumptions"]["pue"]) == (0.2, 1.1)
    assert (base["assumptions"]["node_overhead"], base["assumptions"]["pue"]) == (0.35, 1.25)
    assert base["rejected"]["power"] > 0
    assert "power" not in site["rejected"]
    assert site["feasible"] > base["feasible"]
    assert all(o["power_kw"] <= 8 for o in site["top"])
