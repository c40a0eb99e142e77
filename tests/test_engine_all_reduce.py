"""The serving engines' tensor-parallel all-reduce: their one-shot kernels as NVIDIA's
aiconfigurator measured them (src/gpuarch/validation/data/engine-allreduce.csv names the
source), the model fitted on them (perf/data/engine_all_reduce.toml), and how a serving
estimate takes it: by engine, with NCCL where the kernels cannot run, the ring model where
nothing was measured, and the flag that picks NCCL alone."""

from __future__ import annotations

import json
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig, engine_settings
from gpuarch.perf.collectives import (
    Collective,
    Group,
    collective_time,
    engine_all_reduce_applies,
    engine_all_reduce_time,
    link_for,
    nccl_protocols,
    one_shot_all_reduce,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.collectives import DEVICES, band_of
from gpuarch.validation.engine_all_reduce import ENGINES, band_errors, compare, load_rows
from gpuarch.workloads import preset

CATALOG = load_catalog()
ROWS = compare(CATALOG)

BAND_ERRORS = {"latency": 0.128, "middle": 0.216, "bandwidth": 0.279, "all": 0.204}
"""Mean |ln(model/measured)| per size band over all 3,496 rows, measured on this repository
(``gpuarch validate engine-all-reduce``; docs/performance-model.md, "The engines' all-reduce
kernels")."""


def _group(product_key: str, gpus: int) -> Group:
    product = CATALOG.product(product_key)
    intra, inter = link_for(product, CATALOG.system_for(product), None)
    return Group(gpus, gpus, intra, inter)


def test_rows_load_and_name_known_gpus_engines_and_sizes() -> None:
    rows = load_rows()
    assert len(rows) == len(ROWS) == 3496
    assert {r["device"] for r in rows} == set(DEVICES)
    assert {r["engine"] for r in rows} == set(ENGINES)
    assert {int(r["gpus"]) for r in rows} == {2, 4, 8, 16}
    keys = [(r["device"], r["engine"], r["version"], r["gpus"], r["elements"]) for r in rows]
    assert len(set(keys)) == len(keys)  # the source's repeats dropped, as the header says


def test_small_all_reduces_take_microseconds_not_nccl_rings() -> None:
    """The file's small all-reduces (H100, 8 GPUs, 256 B) take 3-5 us under CUDA graphs,
    where a ring of 14 NCCL steps would take several times that: the rows are the engines'
    one-shot kernels, as the header says."""
    small = {r.engine: r.measured_s for r in ROWS
             if r.device == "h100_sxm" and r.gpus == 8 and r.elements == 128}
    assert set(small) == set(ENGINES)
    assert all(2e-6 < t < 6e-6 for t in small.values())
    ring = collective_time(Collective.ALL_REDUCE, 256, _group("h100", 8), DEFAULT_EFFICIENCY)
    assert ring > 5 * max(small.values())


def test_where_the_model_stands_is_pinned_by_band() -> None:
    """The fitted kernels against every row: no band worse than measured here, and the small
    buffers (the decode step's) closest."""
    errors = band_errors(ROWS)
    for band, bound in BAND_ERRORS.items():
        assert errors[band] <= bound + 0.002, band
    assert errors["latency"] < errors["middle"] < errors["bandwidth"]


@pytest.mark.parametrize("device", ["h100_sxm", "h200_sxm", "b200_sxm"])
@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_small_buffers_within_a_fifth_on_eight_gpu_boards(device: str,
                                                                     engine: str) -> None:
    """Below 128 KiB on H100, H200 and B200 boards, each engine's median model/measured ratio
    over its versions and group sizes is within 20%: the latency per architecture and engine
    is what sets it."""
    ratios = [r.ratio for r in ROWS if r.device == device and r.engine == engine
              and r.gpus <= 8 and band_of(r.elements) == "latency"]
    assert len(ratios) >= 27
    assert 0.85 <= statistics.median(ratios) <= 1.2


def test_engines_differ_as_measured() -> None:
    """TensorRT-LLM's kernel is the quickest to start on Hopper (3 us against vLLM's and
    SGLang's 4.5 us) and on Blackwell (4.75 us against 7-7.25 us), as the measured rows are:
    the fitted latencies keep the order the measurements show."""
    latency = one_shot_all_reduce().latency_s
    for arch in ("hopper", "blackwell"):
        assert latency[arch]["trtllm"] < min(latency[arch]["vllm"], latency[arch]["sglang"])
    def median_small(device: str, engine: str) -> float:
        return statistics.median(r.measured_s for r in ROWS if r.device == device
                                 and r.engine == engine and band_of(r.elements) == "latency"
                                 and r.gpus <= 8)
    for device in ("h100_sxm", "b200_sxm"):
        assert median_small(device, "trtllm") < median_small(device, "vllm")


@settings(max_examples=60, deadline=None)
@given(size=st.floats(1.0, 2.0**30), gpus=st.sampled_from([2, 4, 8]),
       product=st.sampled_from(["a100", "h100", "h200", "b200"]),
       kernels=st.sampled_from(["trtllm", "vllm", "sglang"]))
def test_an_engine_all_reduce_is_never_slower_than_nccl_and_grows_with_size(
        size: float, gpus: int, product: str, kernels: str) -> None:
    """The engine takes the faster of its kernel and NCCL: never above NCCL alone (the
    "nccl" choice), both with the same serving wait, and never shorter for a larger buffer."""
    group, arch = _group(product, gpus), CATALOG.product(product).architecture
    eff = DEFAULT_EFFICIENCY
    own = engine_all_reduce_time(size, group, eff, kernels, arch)
    nccl = engine_all_reduce_time(size, group, eff, "nccl", arch)
    assert own <= nccl
    assert nccl == pytest.approx(eff.all_reduce_wait_s + collective_time(
        Collective.ALL_REDUCE, size, group, eff, nccl_protocols(), nvls=True))
    assert engine_all_reduce_time(2 * size, group, eff, kernels, arch) >= own
    assert engine_all_reduce_time(size, group, eff, kernels, arch, one_shot=False) == nccl


def test_where_the_kernels_apply() -> None:
    """Inside one node of measured GPUs whose NVLink joins every pair (an NVSwitch, or the
    HGX H100 4-GPU board's mesh); not over PCIe (L40S), not on PCIe cards joined in pairs by
    bridges (H100 NVL: no system), not across nodes, not on an architecture nobody measured
    (V100)."""
    dgx = CATALOG.system_for(CATALOG.product("h100"))
    assert engine_all_reduce_applies(_group("h100", 8), "hopper", dgx)
    mesh = CATALOG.system("hgx-h100-4gpu")
    assert engine_all_reduce_applies(_group("h100", 4), "hopper", mesh)
    l40s = CATALOG.product("l40s")
    intra, inter = link_for(l40s, CATALOG.system_for(l40s), 64e9)
    assert not engine_all_reduce_applies(Group(4, 4, intra, inter), "ada",
                                         CATALOG.system_for(l40s))
    nvl = CATALOG.product("h100-nvl-94gb")
    intra, inter = link_for(nvl, CATALOG.system_for(nvl), 64e9)
    assert not engine_all_reduce_applies(Group(2, 2, intra, inter), "hopper", None)
    h100 = _group("h100", 8)
    assert not engine_all_reduce_applies(Group(16, 8, h100.intra, h100.inter), "hopper", dgx)
    assert not engine_all_reduce_applies(h100, "volta", dgx)
    terms = one_shot_all_reduce()
    assert terms.ranks("h100", 8) == 8 and terms.ranks("gb200", 72) == 4


LLAMA_70B = preset("llama-3.1-70b").shape


def _decode(product: str = "h100", **kw: object) -> object:
    cfg = InferenceConfig(**{"input_len": 1024, "output_len": 256, "batch": 16, "tp": 8,
                             "gpus": 8, **kw})  # type: ignore[arg-type]
    return estimate_inference(CATALOG, LLAMA_70B, CATALOG.product(product), cfg)


def test_serving_takes_the_engines_kernels_and_says_so() -> None:
    """Llama-3.1-70B at TP 8 on H100, 16 sequences: 160 small all-reduces a step. With
    TensorRT-LLM's kernel the step is shorter than with vLLM's (3 against 4.5 us each), and
    both shorter than NCCL alone; the assumptions name which ran."""
    trt, vllm, nccl = (_decode(all_reduce=k) for k in ("trtllm", "vllm", "nccl"))
    assert trt.tpot_s < vllm.tpot_s < nccl.tpot_s  # type: ignore[attr-defined]
    parts = [e.decode_step_parts_s["tensor_parallel"] for e in (trt, vllm)]  # type: ignore[attr-defined]
    per_reduce = (parts[1] - parts[0]) / (2 * LLAMA_70B.layers)
    assert per_reduce == pytest.approx(1.5e-6, rel=0.05)
    assert trt.assumptions["tp_all_reduce"] == (  # type: ignore[attr-defined]
        "TensorRT-LLM's one-shot kernel, or NCCL's ring, tree or NVLink SHARP where faster")
    assert nccl.assumptions["tp_all_reduce"] == (  # type: ignore[attr-defined]
        "NCCL's ring, tree or NVLink SHARP, the fastest")
    from gpuarch.report.estimate_text import render_inference
    assert ("  TP all-reduce NCCL's ring, tree or NVLink SHARP, the fastest (--all-reduce "
            "trtllm|vllm|sglang|nccl)") in render_inference(nccl)  # type: ignore[arg-type]
    one = _decode(tp=1, gpus=1)
    assert "TP all-reduce" not in render_inference(one)  # type: ignore[arg-type]


def test_a_rack_wide_group_and_pcie_keep_their_paths() -> None:
    """GB200 at TP 8 spans two compute trays: NCCL alone (the one-shot kernels join one
    tray's 4 GPUs). L40S over PCIe: the ring model, whatever the engine."""
    gb = _decode("gb200")
    assert gb.assumptions["tp_all_reduce"].startswith("NCCL's ")  # type: ignore[attr-defined]
    assert _decode("gb200", all_reduce="nccl").tpot_s == gb.tpot_s  # type: ignore[attr-defined]
    l40s = [_decode("l40s", tp=4, gpus=4, all_reduce=k, input_len=256) for k in ("vllm", "nccl")]
    assert l40s[0].tpot_s == l40s[1].tpot_s  # type: ignore[attr-defined]
    assert l40s[0].assumptions["tp_all_reduce"] == "ring or tree"  # type: ignore[attr-defined]


def test_naming_an_engine_picks_its_kernels() -> None:
    assert engine_settings("vllm")["all_reduce"] == "vllm"
    assert engine_settings("sglang")["all_reduce"] == "sglang"
    assert engine_settings("")["all_reduce"] == engine_settings("nim")["all_reduce"] == "trtllm"
    assert engine_settings("lmdeploy")["all_reduce"] == "nccl"  # TurboMind: 8 ranks or NCCL


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_flag_launch_lines_and_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    """--all-reduce nccl puts NCCL-only on the server's command line (vLLM's and SGLang's
    --disable-custom-all-reduce, TensorRT-LLM's allreduce_strategy); a misspelt value is a
    usage error that names the flag and the word meant."""
    base = ("estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "8",
            "--input-len", "1024", "--output-len", "256", "--batch", "16", "--json")
    status, out, _ = _cli(capsys, *base, "--launch", "vllm", "--all-reduce", "nccl")
    assert status == 0
    doc = json.loads(out)
    assert "--disable-custom-all-reduce" in doc["launch"]["command"]
    assert doc["assumptions"]["tp_all_reduce"].startswith("NCCL")
    status, out, _ = _cli(capsys, *base, "--launch", "vllm")
    assert status == 0
    default = json.loads(out)
    assert "--disable-custom-all-reduce" not in default["launch"]["command"]
    assert default["assumptions"]["tp_all_reduce"].startswith("vLLM's one-shot kernel")
    assert default["tpot_s"] < doc["tpot_s"]
    status, out, _ = _cli(capsys, *base, "--launch", "trtllm", "--all-reduce", "nccl")
    assert status == 0 and "allreduce_strategy: NCCL" in out
    status, _, err = _cli(capsys, *base, "--all-reduce", "ncl")
    assert status == 2
    assert "--all-reduce" in err and "'ncl'" in err and "nccl" in err
    assert "Traceback" not in err


def test_validate_engine_all_reduce_command(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "validate", "engine-all-reduce", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["all_reduces"] == 3496
    assert doc["mean_abs_log_ratio_by_band"]["all"] == pytest.approx(band_errors(ROWS)["all"],
                                                               abs=1e-6)
    status, out, _ = _cli(capsys, "validate", "engine-all-reduce")
    assert status == 0 and "h100_sxm" in out and "latency" in out
