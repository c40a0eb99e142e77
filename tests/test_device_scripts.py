"""The GPU check scripts (scripts/device_op_check.py, scripts/device_fp8_check.py) run on
the CPU with tiny shapes, so a change that breaks them shows here, not on a lent GPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_op_check_times_each_operator_and_models_it() -> None:
    """Every operator kind is timed and set beside the model's time for the named GPU."""
    pytest.importorskip("torch")
    result = _load("device_op_check").run("h200-sxm-141gb", quick=True)
    rows = result["rows"]
    assert not [r for r in rows if "error" in r]
    kinds = {r["kind"] for r in rows}
    assert {"gemm", "gemm_decode", "grouped_gemm", "attention_fwd", "attention_fwd_bwd",
            "attention_decode", "elementwise"} <= kinds
    for r in rows:
        assert r["measured_us"] > 0
        assert r["model_us"] > 0
        assert r["model_over_measured"] == pytest.approx(r["model_us"] / r["measured_us"])
    assert set(result["summary"]) == kinds


def test_op_check_writes_a_file_the_validation_reads(tmp_path: Path) -> None:
    """What the script writes is a gpuarch op-check file: `gpuarch validate ops --file`
    recomputes the same model times from it."""
    import json

    from gpuarch.catalog import load_catalog
    from gpuarch.units import Unit, from_si
    from gpuarch.validation.ops import validate_ops

    pytest.importorskip("torch")
    result = _load("device_op_check").run("h200-sxm-141gb", quick=True)
    path = tmp_path / "ops.json"
    path.write_text(json.dumps(result))
    summary = validate_ops(load_catalog(), path=path)
    written = {(r["kind"], r["label"]): r["model_us"] for r in result["rows"]}
    assert len(summary.rows) == len(result["rows"])
    for row, modelled in summary.rows:
        assert modelled is not None
        assert from_si(modelled, Unit.US) == pytest.approx(written[row.kind, row.label])


def test_fp8_check_compares_emulation_with_torch() -> None:
    """The FP8 check's emulation and torch's FP8 scaled matmul agree closely on the CPU."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("torch has no _scaled_mm")
    result = _load("device_fp8_check").run([64])
    for row in result["rows"]:
        assert row["emulation_vs_torch"] < 1e-3
        assert 0.01 < row["emulation_vs_fp64"] < 0.1
