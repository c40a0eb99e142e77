"""The GPU checks (gpuarch.probe.opcheck, behind `gpuarch probe --ops` and
scripts/device_op_check.py; scripts/device_fp8_check.py) run on the CPU with tiny shapes, so a
change that breaks them shows here, not on a lent GPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.units import Unit, from_si
from gpuarch.validation.ops import validate_ops

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


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
    from gpuarch.probe.opcheck import run_op_check

    result = run_op_check("h200-sxm-141gb", quick=True)
    rows = result["rows"]
    assert not [r for r in rows if "error" in r]
    kinds = {r["kind"] for r in rows}
    assert {"gemm", "gemm_decode", "gemm_shard", "grouped_gemm", "serve_grouped",
            "attention_fwd", "attention_fwd_bwd", "attention_decode", "gqa_decode",
            "elementwise"} <= kinds
    # a grouped-query decode three ways: read once a group, once a query head, or copied
    gqa = [r["op"] for r in rows if r["kind"] == "gqa_decode"]
    assert [(o["kv_heads"], o.get("kv_head_reads", 1)) for o in gqa] == [
        (2, 1), (2, 1), (2, 2), (4, 1), (4, 1)]
    # each latency-bound forward GEMM comes with its two backward GEMMs
    shard = [r["op"] for r in rows if r["kind"] == "gemm_shard"]
    fwd = shard[0]
    assert [(o["m"], o["n"], o["k"]) for o in shard] == [
        (fwd["m"], fwd["n"], fwd["k"]), (fwd["m"], fwd["k"], fwd["n"]),
        (fwd["n"], fwd["k"], fwd["m"])]
    for r in rows:
        assert r["measured_us"] > 0
        assert r["model_us"] > 0
        assert r["model_over_measured"] == pytest.approx(r["model_us"] / r["measured_us"])
    assert set(result["summary"]) == kinds


def test_op_check_writes_a_file_the_validation_reads(tmp_path: Path) -> None:
    """What the check writes is a gpuarch op-check file: `gpuarch validate ops --file`
    recomputes the same model times from it."""
    pytest.importorskip("torch")
    from gpuarch.probe.opcheck import run_op_check

    result = run_op_check("h200-sxm-141gb", quick=True)
    path = tmp_path / "ops.json"
    path.write_text(json.dumps(result))
    summary = validate_ops(load_catalog(), path=path)
    written = {(r["kind"], r["label"]): r["model_us"] for r in result["rows"]}
    assert len(summary.rows) == len(result["rows"])
    for row, modelled in summary.rows:
        assert modelled is not None
        assert from_si(modelled, Unit.US) == pytest.approx(written[row.kind, row.label])


def test_op_check_script_writes_its_file(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "ops.json"
    done = subprocess.run([sys.executable, str(SCRIPTS / "device_op_check.py"), "--quick",
                           "--out", str(out)], capture_output=True, text=True, check=True)
    assert f"written to {out}" in done.stdout
    assert json.loads(out.read_text())["schema"] == "gpuarch-op-check"


def test_probe_ops_needs_a_cuda_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    """`gpuarch probe --ops FILE` on a machine without a usable CUDA GPU is a usage error that
    says so, and writes nothing."""
    from gpuarch.cli.main import main

    out = tmp_path / "ops.json"
    assert main(["probe", "--fake", "demo", "--ops", str(out)]) == 2
    assert "--ops times operators on a CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def test_fp8_check_compares_emulation_with_torch() -> None:
    """The FP8 check's emulation and torch's FP8 scaled matmul agree closely on the CPU."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("torch has no _scaled_mm")
    result = _load("device_fp8_check").run([64])
    for row in result["rows"]:
        assert row["emulation_vs_torch"] < 1e-3
        assert 0.01 < row["emulation_vs_fp64"] < 0.1


def test_probe_ops_writes_the_file_and_prints_the_comparison(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a usable GPU (here the demo machine's H100s, torch said to see CUDA, the check
    run with its CPU shapes), `probe --ops FILE` writes the op-check file and prints each
    operator beside the model's time for the matched product."""
    pytest.importorskip("torch")
    import dataclasses

    import gpuarch.cli.probe_cmds as probe_cmds
    import gpuarch.probe.opcheck as opcheck
    from gpuarch.cli.main import main

    real_report, real_run = probe_cmds._report, opcheck.run_op_check

    def report(args: object) -> object:
        r = real_report(args)
        return dataclasses.replace(r, torch=dataclasses.replace(r.torch, cuda_available=True))

    monkeypatch.setattr(probe_cmds, "_report", report)
    monkeypatch.setattr(opcheck, "run_op_check",
                        lambda key, quick=False: real_run(key, quick=True))
    out = tmp_path / "ops.json"
    assert main(["probe", "--fake", "demo", "--ops", str(out)]) == 0
    text = capsys.readouterr().out
    assert "beside the model's times" in text and f"Operator times written to {out}" in text
    assert json.loads(out.read_text())["catalog_product"] == "h100-sxm5-80gb"
