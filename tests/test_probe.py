"""The probe on a fake NVML: inventory, catalog matching, topology, missing readings,
calibration files."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.perf import DEFAULT_EFFICIENCY
from gpuarch.probe.calibration import REFERENCE_DIR, apply_calibration, load_calibration
from gpuarch.probe.fake_nvml import FakeNvml
from gpuarch.probe.readings import LinkKind
from gpuarch.probe.run import run_probe

CATALOG = load_catalog()
DEMO = Path(__file__).resolve().parents[1] / "src/gpuarch/probe/data/dgx-h100.json"
GIB = 2**30


def gpu(name: str, cc: tuple[int, int], gib: float, power_w: float, **extra: Any
        ) -> dict[str, Any]:
    return {"name": name, "cc": list(cc), "memory_total": gib * GIB,
            "power_default_mw": power_w * 1000, "power_limit_mw": power_w * 1000,
            "power_range_mw": [100000, power_w * 1000], **extra}


@pytest.mark.parametrize(
    ("name", "cc", "gib", "power", "expected"),
    [
        # names as nvidia-smi prints them, with the memory NVML reports
        ("NVIDIA H100 80GB HBM3", (9, 0), 79.6, 700, "h100-sxm5-80gb"),
        ("NVIDIA H100 PCIe", (9, 0), 79.6, 350, "h100-pcie-80gb"),
        ("NVIDIA H200", (9, 0), 140.4, 700, "h200-sxm-141gb"),
        ("NVIDIA A100-SXM4-80GB", (8, 0), 80.0, 400, "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4-40GB", (8, 0), 40.0, 400, "a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", (8, 0), 80.0, 300, "a100-pcie-80gb"),
        ("Tesla V100-SXM2-32GB", (7, 0), 32.0, 300, "v100-sxm2-32gb"),
        ("Tesla T4", (7, 5), 15.0, 70, "tesla-t4"),
        ("NVIDIA GeForce RTX 4090", (8, 9), 24.0, 450, "rtx-4090"),
        ("NVIDIA L40S", (8, 9), 44.5, 350, "l40s"),
        ("NVIDIA B200", (10, 0), 179.0, 1000, "b200"),
    ],
)
def test_nvml_names_match_catalog_products(name: str, cc: tuple[int, int], gib: float,
                                           power: float, expected: str) -> None:
    """Each GPU is matched by name, compute capability, memory and power limit."""
    report = run_probe(CATALOG, FakeNvml({"gpus": [gpu(name, cc, gib, power)]}))
    assert report.gpus[0].product_key == expected, report.gpus[0].match_note


def test_unknown_gpu_is_reported_not_guessed() -> None:
    """A GPU the catalog lacks is left unmatched, with the reason."""
    report = run_probe(CATALOG, FakeNvml({"gpus": [gpu("NVIDIA Mystery 9000", (13, 0), 12,
                                                       100)]}))
    assert report.gpus[0].product_key is None
    assert "no catalog product matches" in (report.gpus[0].match_note or "")


def test_demo_machine_inventory_and_nvlink_topology() -> None:
    """The built-in demo: two H100 SXM5 joined by four NVLinks, full Gen5 x16, idle."""
    report = run_probe(CATALOG, FakeNvml.from_file(DEMO))
    assert report.driver_version == "550.54.15" and report.cuda_driver_version == "12.4"
    g = report.gpus[0]
    assert g.compute_capability == "9.0" and g.power_limit_w == 700
    assert g.pcie is not None and (g.pcie.generation, g.pcie.width) == (5, 16)
    assert g.throttle_reasons == ("gpu_idle",)
    assert g.pci_device_id == 0x2330
    (link,) = report.topology
    assert link.kind is LinkKind.NVLINK and link.nvlinks == 4 and link.label == "NV4"


@pytest.mark.parametrize(("level", "label"), [(10, "PIX"), (20, "PXB"), (30, "PHB"),
                                              (40, "NODE"), (50, "SYS")])
def test_pcie_paths(level: int, label: str) -> None:
    """Without NVLink the PCIe common ancestor gives nvidia-smi topo -m's labels."""
    machine = {"gpus": [gpu("NVIDIA L40S", (8, 9), 44.5, 350, bus_id=f"0000:{i}1:00.0")
                        for i in range(2)], "common_ancestor": {"0-1": level}}
    (link,) = run_probe(CATALOG, FakeNvml(machine)).topology
    assert link.label == label


def test_missing_readings_are_listed_not_raised() -> None:
    """A GPU that supports almost nothing still yields a reading and a list of gaps."""
    report = run_probe(CATALOG, FakeNvml({"gpus": [{"name": "NVIDIA A10"}]}))
    g = report.gpus[0]
    assert g.memory_total_bytes is None and g.ecc_enabled is None and g.mig is None
    gaps = {u.what for u in report.unavailable}
    assert {"GPU 0 memory", "GPU 0 ECC mode", "driver version"} <= gaps


def test_no_driver() -> None:
    """No driver: no GPUs, and the reason."""
    report = run_probe(CATALOG, FakeNvml({"no_driver": True}))
    assert report.gpus == () and report.unavailable[-1].what == "NVML"
    assert "Driver Not Loaded" in report.unavailable[-1].reason


def _calibration(tmp_path: Path, **over: Any) -> Path:
    doc = {"schema": "gpuarch-calibration", "version": 1, "created": "2026-11-29T00:00:00Z",
           "device": {"name": "NVIDIA H100 80GB HBM3", "product": "h100-sxm5-80gb"},
           "gemm": [{"precision": "bf16", "m": 8192, "n": 8192, "k": 8192, "tflops": 700.0},
                    {"precision": "fp8", "m": 8192, "n": 8192, "k": 8192, "tflops": 1200.0}],
           "bandwidth": [{"kind": "device_copy", "gb_s": 3000.0}],
           "collectives": [{"op": "all_reduce", "bytes": 2**26, "ranks": 8,
                            "busbw_gb_s": 360.0}]}
    doc.update(over)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


def test_calibration_replaces_efficiencies(tmp_path: Path) -> None:
    """Measured GEMM, copy and all-reduce rates become the model's efficiencies."""
    cal = load_calibration(_calibration(tmp_path))
    h100 = CATALOG.product("h100")
    eff, notes = apply_calibration(cal, DEFAULT_EFFICIENCY, CATALOG, h100, 450e9, "nvlink")
    assert eff.gemm_by_generation[3] == pytest.approx(700 / 989.4, rel=1e-3)
    assert eff.gemm_fp8 == pytest.approx((1200 / 1978.9) / (700 / 989.4), rel=1e-3)
    assert eff.memory == pytest.approx(3000 / 3352, rel=1e-3)
    # an all-reduce over 8 GPUs reaches 1 - nvlink_small_group / 8 of the full-node share
    share_of_8 = 1 - DEFAULT_EFFICIENCY.nvlink_small_group / 8
    assert eff.nvlink_bus == pytest.approx(360 / 450 / share_of_8)
    assert set(notes) == {"gemm_by_generation", "gemm_fp8", "memory", "nvlink_bus"}


def test_a_gpu_without_bf16_is_calibrated_from_its_fp16_gemms(tmp_path: Path) -> None:
    """A V100 (no BF16: Volta's Tensor Cores take FP16) whose probe also timed BF16 GEMMs,
    which PyTorch runs there on a slower path: the Volta GEMM efficiency and the size curve
    come from the FP16 GEMMs (the square one and the K sweep), not the BF16 ones; and the
    probe's K sweep runs FP16 on such a GPU."""
    from gpuarch.probe.bench import sweep_precision

    fp16 = [{"precision": "fp16", "m": 8192, "n": 8192, "k": k, "tflops": t}
            for k, t in ((8192, 100.0), (2048, 92.0), (1024, 84.0), (512, 70.0))]
    bf16 = [{"precision": "bf16", "m": 8192, "n": 8192, "k": 8192, "tflops": 14.0}]
    path = _calibration(tmp_path, device={"name": "Tesla V100-SXM2-32GB",
                                          "product": "v100-sxm2-32gb"}, gemm=bf16 + fp16)
    v100 = CATALOG.product("v100-sxm2-32gb")
    eff, notes = apply_calibration(load_calibration(path), DEFAULT_EFFICIENCY, CATALOG, v100,
                                   use_reference=False)
    assert "size curve fitted to 4 measured fp16 GEMM sizes" in notes["gemm_half_dim"]
    assert 0.75 <= eff.gemm_by_generation[0] <= 1.0  # about 100 of 125 TFLOP/s
    assert sweep_precision((7, 0)) == sweep_precision((7, 5)) == "fp16"
    assert sweep_precision((8, 0)) == sweep_precision((10, 0)) == "bf16"
    assert sweep_precision(None) == "bf16"


def test_calibration_errors_name_the_problem(tmp_path: Path) -> None:
    """Wrong schema, version, missing keys or another GPU's file are refused clearly."""
    with pytest.raises(GpuarchError, match="not a gpuarch calibration file"):
        load_calibration(_calibration(tmp_path, schema="other"))
    with pytest.raises(GpuarchError, match="version 2 is not supported"):
        load_calibration(_calibration(tmp_path, version=2))
    with pytest.raises(GpuarchError, match=r"gemm\[0\] lacks 'tflops'"):
        load_calibration(_calibration(tmp_path, gemm=[{"precision": "bf16"}]))
    cal = load_calibration(_calibration(tmp_path))
    with pytest.raises(GpuarchError, match="was measured on h100-sxm5-80gb, not"):
        apply_calibration(cal, DEFAULT_EFFICIENCY, CATALOG, CATALOG.product("a100"))


@pytest.mark.parametrize(("over", "message"), [
    ({"gemm": [{"precision": "bf16", "m": 8192, "tflops": "fast"}]},
     r"gemm\[0\]: tflops = 'fast': expected a measured rate above zero"),
    ({"bandwidth": [{"kind": "device_copy", "gb_s": -5}]},
     r"bandwidth\[0\]: gb_s = -5: expected a measured rate above zero"),
    # a zero bus bandwidth divided a collective's bytes by zero in the estimate
    ({"collectives": [{"op": "all_reduce", "ranks": 8, "busbw_gb_s": 0}]},
     r"collectives\[0\]: busbw_gb_s = 0: expected a measured rate above zero"),
    ({"collectives": [{"op": "all_reduce", "ranks": 1.5, "busbw_gb_s": 360}]},
     r"collectives\[0\]: ranks = 1.5: expected a whole number above zero"),
    ({"gemm": [{"precision": "bf17", "tflops": 700}]},
     r"gemm\[0\]: precision: expected one of .*got 'bf17'; did you mean 'bf16'\?"),
])
def test_calibration_values_are_checked(tmp_path: Path, over: dict[str, Any],
                                        message: str) -> None:
    """A calibration value the models cannot use is refused naming the row and key (a
    string rate was a ValueError traceback, a zero bus bandwidth a ZeroDivisionError, a
    negative copy rate an error about an efficiency the file does not name)."""
    with pytest.raises(GpuarchError, match=message):
        load_calibration(_calibration(tmp_path, **over))


def test_calibrated_estimate_says_what_was_measured(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """estimate train --calibration lists the measured parameters in its assumptions."""
    from gpuarch.cli.main import main

    status = main(["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus",
                   "8", "--seq-len", "4096", "--global-batch", "64", "--calibration",
                   str(_calibration(tmp_path)), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert status == 0
    assert doc["assumptions"]["efficiency_origin"] == "calibrated or overridden"
    assert "gemm_by_generation" in doc["assumptions"]["measured_parameters"]
    main(["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
          "--seq-len", "4096", "--global-batch", "64", "--calibration",
          str(_calibration(tmp_path))])
    text = capsys.readouterr().out
    assert "efficiencies measured on" in text and "gemm_by_generation: measured bf16" in text
    assert "fitted defaults (--json" in text  # the rest
    main(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "512",
          "--output-len", "64", "--batch", "8", "--calibration", str(_calibration(tmp_path))])
    text = capsys.readouterr().out
    assert "efficiencies measured on" in text and "memory: measured device copy" in text


H200_CALIBRATION = REFERENCE_DIR / "reference-h200-sxm-141gb.json"
"""The probe's calibration file from run 3 on an H200 SXM (docs/measured/h200-2026-11-30),
shipped as the reference for that product."""


def _op_check_gemms() -> list[tuple[tuple[int, int, int], float]]:
    """(M, N, K) and measured seconds of the BF16 GEMMs timed on an H200 by
    scripts/device_op_check.py (the shipped validation/data/ops-h200-sxm-141gb.json)."""
    from gpuarch.perf.roofline import Gemm
    from gpuarch.validation.ops import load_op_check

    _, rows = load_op_check()
    return [((r.op.m, r.op.n, r.op.k), r.measured_s) for r in rows
            if r.kind == "gemm" and isinstance(r.op, Gemm)]


def test_calibration_fits_the_gemm_size_curve_of_a_measured_h200() -> None:
    """The probe's calibration file from an H200 (H200_CALIBRATION): the size
    curve is fitted to the large-output GEMMs only (the 1,024^3 GEMM, 12% of peak, is left
    out), and the calibrated model then times 17 other measured GEMM shapes (transformer
    layers, tensor-parallel shards, short K, partial waves) within 8% on average, each
    within 20%."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, Gemm, op_cost

    h200 = CATALOG.product("h200")
    cal = load_calibration(H200_CALIBRATION)
    eff, notes = apply_calibration(cal, DEFAULT_EFFICIENCY, CATALOG, h200, use_reference=False)
    assert "size curve fitted to 6 measured bf16 GEMM sizes" in notes["gemm_half_dim"]
    # 765 TFLOP/s best of 990; 0.698 fitted since the roofline's GEMMs carry the memory
    # stream's share near the ridge (Efficiency.gemm_overlap), 0.70-0.78 before
    assert 0.69 <= eff.gemm_by_generation[3] <= 0.78
    assert 64 <= eff.gemm_half_dim <= 1024
    device = Device.of(h200, Precision.BF16, 4)
    errors = [op_cost(Gemm(*shape), device, eff).time_s / seconds - 1
              for shape, seconds in _op_check_gemms()]
    assert len(errors) == 17
    assert statistics.fmean(abs(e) for e in errors) <= 0.08
    assert max(abs(e) for e in errors) <= 0.20


def test_a_machine_like_the_reference_keeps_the_fitted_efficiencies() -> None:
    """Against the shipped reference H200 (the same measurements), every ratio is 1: the
    fitted efficiencies stay, and the notes say what they were scaled by."""
    h200 = CATALOG.product("h200")
    cal = load_calibration(H200_CALIBRATION)
    eff, notes = apply_calibration(cal, DEFAULT_EFFICIENCY, CATALOG, h200)
    assert eff == DEFAULT_EFFICIENCY
    assert set(notes) == {"gemm_by_generation", "gemm_fp8", "memory"}
    assert all("scaled by 1.000" in n for n in notes.values())


def test_a_slower_machine_is_estimated_slower_by_its_measured_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An H200 whose large BF16 and FP8 GEMMs measure 10% below the reference and whose copy
    measures 20% below: the Hopper GEMM efficiency drops 10%, the FP8 multiplier stays (FP8
    lost what BF16 lost) and the memory efficiency drops 20%; a training estimate slows."""
    from gpuarch.cli.main import main

    doc = json.loads((H200_CALIBRATION).read_text())
    for g in doc["gemm"]:
        g["tflops"] *= 0.9
    for b in doc["bandwidth"]:
        b["gb_s"] *= 0.8
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(doc))
    eff, notes = apply_calibration(load_calibration(path), DEFAULT_EFFICIENCY, CATALOG,
                                   CATALOG.product("h200"))
    hopper = DEFAULT_EFFICIENCY.gemm_by_generation[3]
    assert eff.gemm_by_generation[3] == pytest.approx(0.9 * hopper)
    assert eff.gemm_fp8 == pytest.approx(DEFAULT_EFFICIENCY.gemm_fp8)
    assert eff.memory == pytest.approx(0.8 * DEFAULT_EFFICIENCY.memory)
    assert "90% of a reference NVIDIA H200" in notes["gemm_by_generation"]
    steps = []
    for extra in ([], ["--calibration", str(path)]):
        assert main(["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus",
                     "8", "--seq-len", "4096", "--global-batch", "64", "--json", *extra]) == 0
        steps.append(json.loads(capsys.readouterr().out)["step_time_s"])
    assert 1.05 < steps[1] / steps[0] < 1.12  # mostly GEMM time, 10% slower


def test_fitted_gemm_efficiency_agrees_with_the_measured_h200() -> None:
    """The default Hopper GEMM efficiency, fitted to published end-to-end training and
    serving figures, times the 17 BF16 GEMM shapes measured on an H200 within 10% on
    average (a per-operator check the end-to-end fit never saw)."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, Gemm, op_cost

    device = Device.of(CATALOG.product("h200"), Precision.BF16, 4)
    errors = [op_cost(Gemm(*shape), device, DEFAULT_EFFICIENCY).time_s / seconds - 1
              for shape, seconds in _op_check_gemms()]
    assert statistics.fmean(abs(e) for e in errors) <= 0.10


def test_matching_prefers_the_pci_device_id() -> None:
    """A product listing a PCI device id is matched by it, whatever the name says."""
    listed = [p for p in CATALOG.products if len(p.pci_device_ids) == 1]
    if not listed:
        pytest.skip("no product in the catalog lists a PCI device id yet")
    p = listed[0]
    chip = CATALOG.chip_of(p)
    machine = {"gpus": [gpu("Some Renamed Board", tuple(int(x) for x in
                                                    chip.compute_capability.split(".")),
                            p.memory_bytes / GIB, p.tdp_w or 300,
                            device_id=int(p.pci_device_ids[0], 16),
                            bus_id="00000000:01:00.0")]}
    report = run_probe(CATALOG, FakeNvml(machine))
    assert report.gpus[0].product_key == p.key
    assert "PCI device id" in (report.gpus[0].match_note or "")


def test_doctor_reports_a_machine_slower_than_the_reference(tmp_path: Path) -> None:
    """A calibration whose large BF16 GEMMs measure 80% of the reference H200's is a
    warning naming the ratio; the reference itself (the same measurements) is no finding;
    a product without reference measurements gets an info saying so."""
    from gpuarch.probe.doctor import Severity, compare_with_reference

    same = load_calibration(H200_CALIBRATION)
    assert compare_with_reference(same) == []
    doc = json.loads((H200_CALIBRATION).read_text())
    for g in doc["gemm"]:
        if g["precision"] == "bf16":
            g["tflops"] *= 0.8
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(doc))
    (finding,) = compare_with_reference(load_calibration(slow))
    assert finding.severity is Severity.WARNING and finding.rule == "slower-than-reference"
    assert "large bf16 GEMMs at 80%" in finding.title and "fp8" not in finding.title
    (info,) = compare_with_reference(load_calibration(_calibration(tmp_path)))
    assert info.severity is Severity.INFO and "h100-sxm5-80gb" in info.title


def test_doctor_cli_takes_a_calibration_of_this_machines_gpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuarch.cli.main import main

    assert main(["doctor", "--fake", "demo", "--calibration", str(_calibration(tmp_path))]) == 0
    assert "No reference measurements of h100-sxm5-80gb" in capsys.readouterr().out
    status = main(["doctor", "--fake", "demo", "--calibration",
                   str(H200_CALIBRATION)])
    err = capsys.readouterr().err
    assert status == 2 and "measured on h200-sxm-141gb, this machine has h100-sxm5-80gb" in err


@settings(max_examples=25, deadline=None)
@given(gemm=st.floats(0.3, 1.0), copy=st.floats(0.3, 1.0))
def test_a_machine_slower_than_the_reference_is_never_estimated_faster(gemm: float,
                                                                       copy: float) -> None:
    """Property: scaling the reference H200's measured rates down by any factors never raises
    an efficiency above the fitted one nor shortens a training or serving estimate."""
    from gpuarch.estimate.inference import estimate_inference
    from gpuarch.estimate.inference_config import InferenceConfig
    from gpuarch.estimate.training import estimate_training
    from gpuarch.estimate.training_config import TrainingConfig
    from gpuarch.probe.calibration import Calibration
    from gpuarch.workloads.presets import preset

    ref = load_calibration(H200_CALIBRATION)
    slow = Calibration(ref.path, ref.created, ref.device_name, ref.product,
                       tuple({**g, "tflops": g["tflops"] * gemm} for g in ref.gemm),
                       tuple({**b, "gb_s": b["gb_s"] * copy} for b in ref.bandwidth), ())
    h200 = CATALOG.product("h200")
    eff, _ = apply_calibration(slow, DEFAULT_EFFICIENCY, CATALOG, h200)
    assert eff.gemm_by_generation[3] <= DEFAULT_EFFICIENCY.gemm_by_generation[3] + 1e-12
    assert eff.memory <= DEFAULT_EFFICIENCY.memory + 1e-12
    shape = preset("llama-3.1-8b").shape
    train = TrainingConfig(seq_len=4096, global_batch=64, micro_batch=1, gpus=8)
    assert estimate_training(CATALOG, shape, h200, train, efficiency=eff).step_time_s >= \
        estimate_training(CATALOG, shape, h200, train).step_time_s * (1 - 1e-9)
    serve = InferenceConfig(input_len=1024, output_len=256, batch=16)
    assert estimate_inference(CATALOG, shape, h200, serve, efficiency=eff).tpot_s >= \
        estimate_inference(CATALOG, shape, h200, serve).tpot_s * (1 - 1e-9)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["gpus"][0].update(memory_total="80GB"),
     r"gpus\[0\]\.memory_total = '80GB': expected a whole number >= 0"),
    (lambda d: d["gpus"][0].update(memory_used=None),
     r"gpus\[0\]\.memory_used = None: expected a whole number >= 0"),
    (lambda d: d["gpus"][0].update(clocks={"sm": "fast"}),
     r"gpus\[0\]\.clocks = \{'sm': 'fast'\}: expected whole numbers >= 0"),
    (lambda d: d.update(gpus=2), r"gpus: expected a list of objects"),
])
def test_a_fake_machine_nvml_could_not_describe_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, message: str) -> None:
    """probe --fake FILE refuses a value of a kind NVML never returns, naming the GPU and
    key (a text memory size was a ValueError traceback, a number for the GPU list a
    TypeError: found by sweeping the demo machine's fields)."""
    from gpuarch.cli.main import main

    doc = json.loads(DEMO.read_text())
    change(doc)
    path = tmp_path / "machine.json"
    path.write_text(json.dumps(doc))
    assert main(["probe", "--fake", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert f"--fake: {path.name}: " in err and re.search(message, err), err
