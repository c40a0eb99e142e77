"""Published same-kernel timings of a GPU and its sibling (perf/data/sibling_rates.toml) and
what the roofline does with them."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import tomllib
from pathlib import Path

import pytest

from gpuarch.catalog.loader import load_catalog
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.perf.roofline import Attention, Device, Gemm, op_cost
from gpuarch.perf.sibling import (
    PRECISION_PEAKS,
    SIBLING_FILE,
    board_rates,
    sibling_factor,
    sibling_notes,
    sibling_rates,
)
from gpuarch.probe.calibration import Calibration, apply_calibration
from gpuarch.report.estimate_text import render_inference
from gpuarch.validation.gemm_kernels import DEVICES, load_k_rows
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()
OFF = DEFAULT_EFFICIENCY.with_overrides({"sibling_rates": 0})
PLAIN = dataclasses.replace(DEFAULT_EFFICIENCY, gemm_overlap=math.inf)
PLAIN_OFF = dataclasses.replace(OFF, gemm_overlap=math.inf)
"""The plain roofline (a GEMM's time the larger of its math and its memory stream): the
factors' exact effect on compute-bound and memory-bound work, which the overlap exponent
blurs near the ridge."""


def _device(key: str, precision: Precision) -> Device:
    product = CATALOG.product(key)
    return Device.of(product, precision, CATALOG.chip_of(product).sm.tensor_core_generation)


def test_every_comparison_pairs_gpus_with_the_same_datasheet_peak() -> None:
    """The ratio of times is the ratio of sustained fractions only at equal peaks: each
    compared GPU and its sibling are catalog products with the same dense peak at the
    comparison's precision, and every row cites a fixed version of its source (a commit, or
    a release on PyPI)."""
    raw = tomllib.loads(SIBLING_FILE.read_text())
    assert raw["comparison"]
    for row in raw["comparison"]:
        gpu, sibling = CATALOG.product(row["gpu"]), CATALOG.product(row["sibling"])
        key = PRECISION_PEAKS[row["precision"]]
        assert gpu.peak(key) is not None
        assert gpu.peak(key) == sibling.peak(key), (row["gpu"], row["precision"])
        assert len(row["sibling_ms"]) == len(row["gpu_ms"])
        url = row["source_url"]
        assert "/blob/" in url or "/tree/" in url \
            or re.fullmatch(r"https://pypi\.org/project/[\w.-]+/\d[\w.]*/", url), url


def test_gb300_factors_are_the_medians_of_nvidias_published_timings() -> None:
    """Hand-computed from the cited files: the 24 MXFP8 grouped-GEMM pairs (two runs of
    cuDNN frontend's cutedsl_fusion_kernels benchmark, cuDNN fused and Transformer Engine
    unfused) have GB200/GB300 time ratios from 1.063 to 1.192, median 1.138, and with the 64
    dense FP8 GEMMs of aiconfigurator's TensorRT-LLM 1.3.0rc20 tables (M, N, K each 2,048 to
    16,384; median 1.104 alone) 88 pairs, median 1.122; the same tables' 64 BF16 GEMMs give
    1.139 (1.149 over all 4,459 shapes with M, N and K at least 2,048); the cuDNN
    attention benchmark of 24 July 2026 (Llama 3.1 heads, BF16, causal, 2k-32k tokens) gives
    forward ratios 1.195-1.342 (median 1.290, the 8k run at 1.336/1.105 = 1.209) and backward
    1.070-1.179 (median 1.079); with the same run's DeepSeek-V3 heads (forward 1.137-1.229,
    backward 1.013-1.172) the ten pairs' medians are 1.202 forward and 1.078 backward."""
    fp8, bf16 = PRECISION_PEAKS["fp8"], PRECISION_PEAKS["bf16"]
    assert sibling_factor("gb300", "gemm", fp8) == pytest.approx(1.122, abs=5e-4)
    assert sibling_factor("gb300", "gemm", bf16) == pytest.approx(1.139, abs=5e-4)
    assert sibling_factor("gb300", "attention_forward", bf16) == pytest.approx(1.202, abs=5e-4)
    assert sibling_factor("gb300", "attention_backward", bf16) == pytest.approx(1.078, abs=5e-4)
    rate = sibling_rates()[("gb300", "gemm", fp8)]
    assert rate.pairs == 88 and rate.sibling == "gb200"
    assert sibling_rates()[("gb300", "gemm", bf16)].pairs == 64
    # FP4 (a higher peak on GB300, not a same-peak pair) and other GPUs: none
    assert sibling_factor("gb300", "gemm", PeakKey.TENSOR_FP4) == 1.0
    assert sibling_factor("gb200", "attention_forward", bf16) == 1.0


@pytest.mark.parametrize("ultra, sibling", [("gb300", "gb200"), ("b300_sxm", "b200_sxm")])
def test_ultra_nvfp4_gemms_measure_well_short_of_their_datasheet_fp4_ratio(ultra: str,
                                                                          sibling: str
                                                                          ) -> None:
    """Measured and left out (docs, "NVFP4 GEMMs on Blackwell Ultra"): the shipped
    aiconfigurator rows (TensorRT-LLM 1.3.0rc20, M = N = 8,192, K 2,048-16,384) run NVFP4
    GEMMs a median 1.175x as fast on GB300 as on GB200 and 1.148x on HGX B300 as on HGX
    B200, where the catalog's dense FP4 peaks differ by 1.5x; the training runs do not show
    it, so no FP4 factor is entered and the model keeps the peaks' ratio."""
    rows = [r for r in load_k_rows() if r["gemm_dtype"] == "nvfp4" and int(r["k"]) >= 2048]
    times = {(r["device"], int(r["k"])): float(r["latency_ms"]) for r in rows}
    ratios = [times[(sibling, k)] / times[(ultra, k)] for (dev, k) in times if dev == ultra]
    assert len(ratios) == 12
    expected = 1.175 if ultra == "gb300" else 1.148
    assert statistics.median(ratios) == pytest.approx(expected, abs=5e-4)
    peaks = [matmul_peak(CATALOG.product(DEVICES[d]), Precision.NVFP4) for d in (ultra, sibling)]
    assert peaks[0] is not None and peaks[1] is not None
    assert peaks[0].flops / peaks[1].flops == pytest.approx(1.5)
    assert sibling_factor(DEVICES[ultra], "gemm", PeakKey.TENSOR_FP4) == 1.0


def test_b300_factors_are_the_medians_of_the_same_release_on_hgx_b200() -> None:
    """Hand-computed from aiconfigurator's TensorRT-LLM 1.3.0rc20 tables for HGX B300 and
    HGX B200: the 64 dense GEMMs (M, N, K each 2,048 to 16,384) give B200/B300 time ratios of
    0.87-1.44 in BF16, median 1.053, and 0.86-1.30 in FP8, median 1.041; 48 context attention
    passes (BF16, head dim 128, the selection of context-attention-trtllm.csv) 0.99-1.43,
    median 1.148. No backward attention is published for the pair: no factor there."""
    fp8, bf16 = PRECISION_PEAKS["fp8"], PRECISION_PEAKS["bf16"]
    assert sibling_factor("b300", "gemm", bf16) == pytest.approx(1.053, abs=5e-4)
    assert sibling_factor("b300", "gemm", fp8) == pytest.approx(1.041, abs=5e-4)
    assert sibling_factor("b300", "attention_forward", bf16) == pytest.approx(1.148, abs=5e-4)
    assert sibling_factor("b300", "attention_backward", bf16) == 1.0
    # FP8 context attention (FP8 context FMHA), 48 passes each: 1.03-1.36, median 1.252, and
    # GB300 over GB200 1.16-1.35, median 1.253
    assert sibling_factor("b300", "attention_forward", fp8) == pytest.approx(1.252, abs=5e-4)
    assert sibling_factor("gb300", "attention_forward", fp8) == pytest.approx(1.253, abs=5e-4)
    assert sibling_factor("b300", "gemm", PeakKey.TENSOR_FP4) == 1.0
    rates = sibling_rates()
    assert rates[("b300", "gemm", fp8)].pairs == 64 and rates[("b300", "gemm", fp8)].sibling \
        == "b200"
    assert rates[("b300", "attention_forward", bf16)].pairs == 48


@pytest.mark.parametrize("op_name, op", [
    ("gemm", Gemm(8192, 8192, 8192)),
    ("attention_forward", Attention(2, 8192, 8192, 64, 8, 128)),
    ("attention_backward", Attention(2, 8192, 8192, 64, 8, 128, backward=True)),
])
def test_a_compute_bound_op_on_gb300_is_faster_by_exactly_its_factor(op_name: str,
                                                                       op: Gemm | Attention
                                                                       ) -> None:
    """Same peaks, so with the factors off GB300 and GB200 cost the same; with them on the
    GB300's time is the GB200's over the factor (FP8 training: GEMMs at the FP8 peak,
    attention at the 16-bit peak)."""
    gb200, gb300 = _device("gb200", Precision.FP8), _device("gb300", Precision.FP8)
    peak = gb300.matmul.key if op_name == "gemm" else gb300.attention_key
    factor = sibling_factor("gb300", op_name, peak)
    assert factor > 1.05
    assert op_cost(op, gb300, OFF).time_s == pytest.approx(op_cost(op, gb200, OFF).time_s)
    assert op_cost(op, gb300, PLAIN).time_s == pytest.approx(
        op_cost(op, gb200, PLAIN).time_s / factor)
    # with the overlap exponent the memory stream's small share stays: within 0.5%
    assert op_cost(op, gb300, DEFAULT_EFFICIENCY).time_s == pytest.approx(
        op_cost(op, gb200, DEFAULT_EFFICIENCY).time_s / factor, rel=5e-3)


def test_a_gb300_training_estimate_is_faster_and_says_why() -> None:
    """FP8 Llama 3 70B inside one NVL72 rack: GB300 computes faster than GB200 by no more
    than the largest factor, lists the factors it used, and GB200 lists none."""
    shape = preset("llama-3-70b").shape
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=1,
                         precision=Precision.FP8, gpus_per_node=72)
    gb200, gb300 = (estimate_training(CATALOG, shape, CATALOG.product(key), cfg,
                                      system=CATALOG.system(f"{key} nvl72"))
                    for key in ("gb200", "gb300"))
    speedup = gb200.time_breakdown.compute / gb300.time_breakdown.compute
    assert 1.078 < speedup < 1.202
    notes = gb300.assumptions["sibling_rates"]
    # FP8 GEMMs, attention forward and backward at the 16-bit peak (not the BF16 GEMMs'
    # factor, nor FP8 attention's: this estimate runs neither)
    assert len(notes) == 3 and all("gb200" in n for n in notes)
    assert sum("github.com/NVIDIA/cudnn-frontend" in n for n in notes) == 3
    assert sum("aiconfigurator-core" in n for n in notes) == 1  # the FP8 GEMMs, pooled
    assert gb200.assumptions["sibling_rates"] == []


def test_a_calibration_of_the_gpu_itself_switches_the_factors_off() -> None:
    """Measured GEMM rates of a GB300 replace the fitted efficiency the factors would scale,
    so they are not applied on top; an H100 calibration (no factors) says nothing of them."""
    cal = Calibration("cal.json", "2026-11-30", "NVIDIA GB300", "gb300",
                      ({"precision": "bf16", "m": 8192, "n": 8192, "k": 8192,
                        "tflops": 1800.0},), (), ())
    eff, notes = apply_calibration(cal, DEFAULT_EFFICIENCY, CATALOG, CATALOG.product("gb300"))
    assert eff.sibling_rates == 0 and "own measured" in notes["sibling_rates"]
    h100 = Calibration("cal.json", "2026-11-30", "NVIDIA H100", "h100-sxm5-80gb",
                       ({"precision": "bf16", "m": 8192, "n": 8192, "k": 8192,
                         "tflops": 700.0},), (), ())
    eff, notes = apply_calibration(h100, DEFAULT_EFFICIENCY, CATALOG,
                                   CATALOG.product("h100-sxm5-80gb"))
    assert eff.sibling_rates == 1 and "sibling_rates" not in notes


@pytest.mark.parametrize("edit, message", [
    (('op = "gemm"', 'op = "gemmm"'), "op 'gemmm' is not one of"),
    (('precision = "fp8"', 'precision = "fp9"'), "precision 'fp9' is not one of"),
    (("gpu_ms = [1.319,", "gpu_ms = [-1.319,"), "times must be positive"),
    (("gpu_ms = [1.319, 0.740, ", "gpu_ms = ["), "lists of equal length"),
])
def test_a_malformed_file_is_refused_naming_the_row_and_field(tmp_path: Path,
                                                              edit: tuple[str, str],
                                                              message: str) -> None:
    text = SIBLING_FILE.read_text()
    assert edit[0] in text
    bad = tmp_path / "sibling_rates.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(GpuarchError, match="comparison\\[0\\]") as info:
        sibling_rates(bad)
    assert message in str(info.value)


def test_the_factor_lies_within_the_published_ratios() -> None:
    """A median: never outside the range of the pairs it summarises."""
    raw = tomllib.loads(SIBLING_FILE.read_text())
    for (gpu, op, peak), rate in sibling_rates().items():
        ratios = [s / g for row in raw["comparison"]
                  if (row["gpu"], row["op"], PRECISION_PEAKS[row["precision"]]) == (gpu, op, peak)
                  for s, g in zip(row["sibling_ms"], row["gpu_ms"], strict=True)]
        assert min(ratios) <= rate.factor <= max(ratios)
        assert rate.factor == pytest.approx(statistics.median(ratios))


@pytest.mark.parametrize("weights, fp8_context, expected", [
    (QuantFormat.FP8, False, ["attention_forward at bf16", "gemm at fp8"]),
    # FP8 context FMHA: the prompt's attention at the FP8 peak, decode's at the 16-bit one
    (QuantFormat.FP8, True, ["attention_forward at bf16", "attention_forward at fp8",
                             "gemm at fp8"]),
    # FP4 GEMMs (the LM head's too): no same-peak pair
    (QuantFormat.FP4, False, ["attention_forward at bf16"]),
])
def test_a_gb300_serving_estimate_names_only_the_factors_it_uses(
        weights: QuantFormat, fp8_context: bool, expected: list[str]) -> None:
    """Serving runs no backward pass, and each operator uses the factor at the peak it runs
    at only (GB300's BF16 GEMM factor is not one an FP8 or FP4 estimate uses); the text
    output prints what the estimate used, a GB200 estimate prints none."""
    shape = preset("llama-3.1-70b").shape
    cfg = InferenceConfig(input_len=1000, output_len=1000, batch=64, gpus=2, tp=2,
                          quant=QuantScheme(weights, weights, QuantFormat.FP8),
                          fp8_context_attention=fp8_context)
    est = estimate_inference(CATALOG, shape, CATALOG.product("gb300"), cfg)
    notes = est.assumptions["sibling_rates"]
    assert [n.split(":")[0] for n in notes] == expected
    assert all(n.split(":")[0] in render_inference(est) for n in notes)
    gb200 = estimate_inference(CATALOG, shape, CATALOG.product("gb200"), cfg)
    assert gb200.assumptions["sibling_rates"] == []
    assert "sibling" not in render_inference(gb200)
    # same peaks and bandwidth: the compute-bound prefill is faster, the memory-bound decode not
    # (within 0.5%: the math's share of a decode GEMM's time near the ridge,
    # Efficiency.gemm_overlap)
    assert gb200.ttft_s > est.ttft_s and gb200.tpot_s == pytest.approx(est.tpot_s, rel=5e-3)


def test_the_switch_is_on_or_off() -> None:
    """``sibling_rates`` is a switch, not a weight: anything but 0 or 1 is refused by name."""
    with pytest.raises(GpuarchError, match=r"efficiency\.sibling_rates: expected 0 \(off\) or 1 "
                                           r"\(on\), got 0\.5"):
        DEFAULT_EFFICIENCY.with_overrides({"sibling_rates": 0.5})
    assert DEFAULT_EFFICIENCY.with_overrides({"sibling_rates": 0}).sibling_rates == 0


def test_board_factors_are_published_throughput_ratios_over_peak_ratios() -> None:
    """Hand-computed from the cited MLPerf Inference logs: NVIDIA's v3.1 BERT-99 Offline
    runs one H100 PCIe at 5,711 samples/s and one H100 SXM at 9,102.26 (0.6274), against FP8
    peaks of 1,513 and 1,978.9 TFLOPS (0.7646): the PCIe board sustains 0.8206 of the SXM
    board's fraction of its peak. HPE's v4.1 runs give four H100 NVL 23,937.5 (5,984.4 a GPU)
    and eight H100 SXM 71,560.3 (8,945.0 a GPU), 0.6690, against 1,670.5 (half the
    published sparse peak) over 1,978.9: 0.7925. Same-peak GPUs carry no board factor."""
    boards = board_rates()
    assert set(boards) == {"h100-pcie-80gb", "h100-nvl-94gb"}
    pcie, nvl = boards["h100-pcie-80gb"], boards["h100-nvl-94gb"]
    assert pcie.factor == pytest.approx(5711 / 9102.26 * 1978.9 / 1513, abs=5e-4)
    assert pcie.factor == pytest.approx(0.8206, abs=5e-4)
    assert nvl.factor == pytest.approx((23937.5 / 4) / (71560.3 / 8) * 1978.9 / 1670.5,
                                       abs=5e-4)
    assert nvl.factor == pytest.approx(0.7925, abs=5e-4)
    assert pcie.sibling == nvl.sibling == "h100-sxm5-80gb" and pcie.pairs == nvl.pairs == 1
    for row in tomllib.loads(SIBLING_FILE.read_text())["board"]:
        assert "/blob/" in row["source_url"] and "/blob/" in row["sibling_source_url"]


@pytest.mark.parametrize("key", ["h100-pcie-80gb", "h100-nvl-94gb"])
def test_a_board_factor_slows_tensor_core_math_not_memory_reads(key: str) -> None:
    """The board's factor divides the rate of compute-bound Tensor Core work at every
    precision (a large GEMM in FP8 and BF16) and leaves a memory-bound one (a decode GEMM
    of one row) alone; it is listed with the estimate's sibling rates and goes with a
    calibration."""
    factor = board_rates()[key].factor
    for precision in (Precision.FP8, Precision.BF16):
        device = _device(key, precision)
        big, row = Gemm(8192, 8192, 8192), Gemm(1, 8192, 8192)
        on, off = op_cost(big, device, PLAIN), op_cost(big, device, PLAIN_OFF)
        assert on.time_s == pytest.approx(off.time_s / factor, rel=1e-9)
        assert op_cost(row, device, PLAIN).time_s == pytest.approx(
            op_cost(row, device, PLAIN_OFF).time_s, rel=1e-12)
        # the overlap exponent lets the math's small share into the one row's time
        assert op_cost(row, device, DEFAULT_EFFICIENCY).time_s == pytest.approx(
            op_cost(row, device, OFF).time_s, rel=1e-3)
    notes = sibling_notes(key)
    assert len(notes) == 1 and "every Tensor Core operator" in notes[0]
    assert sibling_factor(key, "gemm", None) == 1.0
