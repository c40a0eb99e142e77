"""Error bands: the shipped file matches the model, regimes fall back when thin, and an
estimate's band turns into a range of published values around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.validation.bands import (
    ENGINES,
    FRAMEWORKS,
    MIN_FIGURES,
    Band,
    band_for,
    compute_bands,
    engine_family,
    framework_family,
    load_bands,
    model_kind,
    regime_keys,
    render_bands,
    write_bands,
)
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()


def test_shipped_bands_match_the_model() -> None:
    """data/error_bands.json is what the validation gives today: a change to the model or
    to the data that moves a band fails here until scripts/error_bands.py is rerun."""
    fresh = compute_bands(CATALOG)
    shipped = load_bands()
    assert set(fresh) == set(shipped)
    for key, band in fresh.items():
        assert shipped[key] == band, key


def test_bands_count_every_throughput_figure() -> None:
    """The task bands hold every training point and every serving throughput figure, and
    each regime's figures add up to its broader regime's, down to a GPU's by format."""
    shipped = load_bands()
    bands = {k: b for k, b in shipped.items() if "@" not in k}  # (engines': the next test)
    assert bands["training"].figures >= 100
    assert bands["serving"].figures >= 300
    for task in ("training", "serving"):
        kinds = [b for k, b in bands.items() if k.count("/") == 1 and k.startswith(task)]
        assert sum(b.figures for b in kinds) == bands[task].figures
        for kind in kinds:
            archs = [b for k, b in bands.items()
                     if k.startswith(kind.key + "/") and k.count("/") == 2]
            assert sum(b.figures for b in archs) == kind.figures
            for arch in archs:
                gpus = [b for k, b in bands.items()
                        if k.startswith(arch.key + "/") and k.count("/") == 3]
                assert sum(b.figures for b in gpus) == arch.figures
                for gpu in gpus:  # and each GPU's figures by format
                    formats = [b for k, b in bands.items() if k.startswith(gpu.key + "/")]
                    assert formats and sum(b.figures for b in formats) == gpu.figures
    for band in bands.values():
        assert band.p10_error <= band.median_error <= band.p90_error
        assert 0 <= band.out_of_sample <= band.figures


def test_every_figure_counts_in_its_engines_or_frameworks_regimes_too() -> None:
    """Every serving row names an engine and every training point a framework family
    (``engine_family``, ``framework_family`` of the framework text; a new row naming none
    fails here), and each regime down to the architecture splits exactly into its
    engines' (frameworks') regimes."""
    from gpuarch.validation.inference import load_inference_points
    from gpuarch.validation.training import load_training_points

    unnamed = [p.id for p in load_inference_points()
               if not engine_family(str(p.get("framework") or ""))]
    unnamed += [p.id for p in load_training_points()
                if not framework_family(str(p.get("framework") or ""))]
    assert unnamed == []
    bands = load_bands()
    for task, names in (("serving", ENGINES), ("training", FRAMEWORKS)):
        pooled = [k for k in bands
                  if "@" not in k and k.startswith(f"{task}/") and k.count("/") >= 2]
        assert pooled
        for key in pooled:
            split = [b for k, b in bands.items() if k.partition("@")[0] == key and "@" in k]
            assert {b.engine for b in split} <= set(names), key
            assert sum(b.figures for b in split) == bands[key].figures, key


def test_engine_family_reads_the_framework_text() -> None:
    """NVIDIA's MLPerf harness runs TensorRT-LLM engines; a GuideLLM client drove vLLM; the
    most specific name wins; a text naming no engine gives none."""
    cases = {"TensorRT 10.8, CUDA 12.8 (NVIDIA's MLPerf harness, TensorRT-LLM engines)":
             "trtllm",
             "vLLM 0.7.2, GuideLLM (emulated prompts of fixed length)": "vllm",
             "SGLang 0.5.8 (TP 8, EP 8; the FP8 checkpoint)": "sglang",
             "LMDeploy v0.1.0a1 (TurboMind engine), CUDA 11.8": "lmdeploy",
             "NVIDIA NIM llama-3.3-70b-instruct 1.8.0 (AIPerf client)": "nim",
             "a homegrown server": ""}
    for text, engine in cases.items():
        assert engine_family(text) == engine, text


def test_an_estimate_naming_its_engine_takes_that_engines_band() -> None:
    """On one B200 in BF16 the dense figures are all vLLM's (ML.ENERGY): a vLLM estimate
    gets that regime with its engine's label; a TensorRT-LLM one has no BF16 runs of its
    engine there and takes its engine's B200 band (FP4 runs) before any pooled one; without
    an engine the pooled regime, as before."""
    shape, b200 = preset("llama-3.1-8b").shape, CATALOG.product("b200")
    pooled = band_for("serving", shape, b200, precision="bf16")
    vllm = band_for("serving", shape, b200, precision="bf16", engine="vllm")
    trtllm = band_for("serving", shape, b200, precision="bf16", engine="trtllm")
    assert pooled is not None and vllm is not None and trtllm is not None
    assert pooled.key == "serving/dense/blackwell/b200/bf16" and pooled.engine == ""
    assert vllm.key == "serving/dense/blackwell/b200/bf16@vllm"
    assert vllm.label.endswith("in bf16 with vLLM")
    assert trtllm.key == "serving/dense/blackwell/b200@trtllm"
    assert trtllm.median_error != vllm.median_error
    # an engine with too few runs anywhere on the architecture falls back to the pooled
    thin = band_for("serving", shape, CATALOG.product("h100"), precision="fp8", engine="nim")
    assert thin is not None and thin.engine == ""


def test_a_training_estimate_takes_the_framework_it_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    """estimate train --framework fsdp takes PyTorch FSDP's runs' band (llm-foundry's and
    TorchTitan's on H100 in BF16); --launch megatron names Megatron; without either the
    pooled band; a bad --framework is a usage error."""
    base = ("estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "4096", "--global-batch", "64", "--json")
    regimes = {}
    for extra in ((), ("--framework", "fsdp", "--zero", "3"), ("--launch", "megatron")):
        status, out = _run(capsys, *base, *extra)
        assert status == 0
        v = json.loads(out)["validation"]
        regimes[extra[:2]] = (v["regime"], v["engine"])
    assert regimes[()] == ("training/dense/hopper/h100-sxm5-80gb/bf16", None)
    assert regimes[("--framework", "fsdp")] == (
        "training/dense/hopper/h100-sxm5-80gb/bf16@fsdp", "fsdp")
    assert regimes[("--launch", "megatron")] == (
        "training/dense/hopper/h100-sxm5-80gb/bf16@megatron", "megatron")
    assert band_for("training", preset("llama-3.1-8b").shape, CATALOG.product("h100"),
                    precision="bf16", engine="fsdp").label.endswith("with PyTorch FSDP")
    status = main([*base, "--framework", "fdsp"])
    err = capsys.readouterr().err
    assert status == 2 and "--framework" in err and "did you mean 'fsdp'" in err


def test_the_table_lists_an_engines_regime_only_beside_another_engines() -> None:
    """A regime whose runs are all one engine's is not listed twice."""
    bands = load_bands()
    text = render_bands(bands)
    assert "serving/dense/blackwell/b200/bf16@vllm " not in text  # all of b200/bf16's
    assert "serving/dense/blackwell/b200@vllm " in text  # beside TensorRT-LLM's FP4 runs
    assert "serving/dense/blackwell/b200@trtllm " in text


def test_model_kinds() -> None:
    assert model_kind(preset("llama-3.1-8b").shape) == "dense"
    assert model_kind(preset("mixtral-8x7b").shape) == "coarse-moe"
    assert model_kind(preset("deepseek-v3").shape) == "fine-moe"
    assert regime_keys("serving", preset("mixtral-8x7b").shape, "hopper") == (
        "serving/coarse-moe/hopper", "serving/coarse-moe", "serving")
    assert regime_keys("training", preset("llama-3.1-8b").shape, "blackwell", "gb300") == (
        "training/dense/blackwell/gb300", "training/dense/blackwell", "training/dense",
        "training")
    with pytest.raises(GpuarchError, match="task: expected one of training, serving"):
        regime_keys("inference", preset("llama-3.1-8b").shape, "hopper")


def test_a_thin_regime_falls_back_to_the_broader_one() -> None:
    """A regime with fewer than MIN_FIGURES figures gives way to task/kind, then task."""
    shape = preset("llama-3.1-8b").shape
    h100 = CATALOG.product("h100")
    bands = {
        "training/dense/hopper": Band("training/dense/hopper", MIN_FIGURES - 1, 0,
                                      0.0, -0.1, 0.1),
        "training/dense": Band("training/dense", MIN_FIGURES, 0, 0.02, -0.1, 0.2),
        "training": Band("training", 50, 0, 0.0, -0.2, 0.2),
    }
    assert band_for("training", shape, h100, bands).key == "training/dense"
    del bands["training/dense"]
    assert band_for("training", shape, h100, bands).key == "training"
    assert band_for("training", shape, h100, {}) is None
    # the shipped file: Volta dense training has too few points of its own
    v100 = CATALOG.product("v100-sxm2-32gb")
    assert load_bands()["training/dense/volta"].figures < MIN_FIGURES
    assert band_for("training", shape, v100).key == "training/dense"
    assert band_for("serving", preset("deepseek-v3").shape, h100).key == \
        "serving/fine-moe/hopper/h100-sxm5-80gb"
    assert band_for("serving", preset("deepseek-v3").shape, h100, per_gpu=False).key == \
        "serving/fine-moe/hopper"


def test_a_gpu_with_enough_figures_gets_its_own_band() -> None:
    """Within one architecture the GPUs can sit on different sides of the model: the
    shipped file gives GB300's dense training runs their own band, and it is the one a
    GB300 estimate carries, while a GPU with fewer than MIN_FIGURES runs (H200's dense
    training) falls back to its architecture's. Advice that
    compares architectures keeps the architecture's band."""
    from gpuarch.validation.bands import bands_by_architecture

    shape = preset("llama-3.1-70b").shape
    bands = load_bands()
    own = bands["training/dense/blackwell/gb300"]
    assert own.figures >= MIN_FIGURES
    assert band_for("training", shape, CATALOG.product("gb300")) == own
    assert own.label == "dense training on gb300 (Blackwell)"
    assert bands["training/dense/hopper/h200-sxm-141gb"].figures < MIN_FIGURES
    assert band_for("training", shape, CATALOG.product("h200")).key == \
        "training/dense/hopper"
    by_arch = bands_by_architecture("training", shape, [CATALOG.product("gb300")])
    assert by_arch["blackwell"]["regime"] == "training/dense/blackwell"


def test_a_format_with_enough_figures_on_a_gpu_gets_its_own_band(
        capsys: pytest.CaptureFixture[str]) -> None:
    """INT4 weight-only decode on H100 reads far from the 16-bit runs there (Neural Magic's
    vLLM 0.7.2 cards: the model 17-25% above the published rates, the 16-bit runs within a
    few percent), so an INT4 estimate on H100 carries that format's band, not the GPU's, as
    MXFP4 fine-grained MoE serving on H100 does since InferenceMAX's GPT-OSS runs; a format
    with too few figures on a GPU (dense FP8 serving on B200) falls back to the GPU's band."""
    dense, moe = preset("llama-3.1-8b").shape, preset("gpt-oss-120b").shape
    h100 = CATALOG.product("h100")
    bands = load_bands()
    int4 = band_for("serving", dense, h100, precision="int4")
    assert int4 is not None and int4.key == "serving/dense/hopper/h100-sxm5-80gb/int4"
    gpu = bands["serving/dense/hopper/h100-sxm5-80gb"]
    assert int4.figures >= MIN_FIGURES and int4.median_error > gpu.median_error + 0.1
    assert int4.label == "dense serving on h100-sxm5-80gb (Hopper) in int4"
    assert band_for("serving", dense, h100) == gpu
    assert bands["serving/fine-moe/hopper/h100-sxm5-80gb/mxfp4"].figures >= MIN_FIGURES
    assert band_for("serving", moe, h100, precision="mxfp4").key == \
        "serving/fine-moe/hopper/h100-sxm5-80gb/mxfp4"
    b200 = CATALOG.product("b200")
    assert bands["serving/dense/blackwell/b200/fp8"].figures < MIN_FIGURES
    assert band_for("serving", dense, b200, precision="fp8").key == \
        "serving/dense/blackwell/b200"
    assert main(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100",
                 "--input-len", "1024", "--output-len", "1024", "--batch", "1",
                 "--weight-precision", "int4", "--engine", "vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["validation"]["regime"] == f"{int4.key}@vllm"  # the same figures, vLLM's
    # the card's own run (vLLM 0.7.2, so its loop), 1,024 tokens in 5.7 s, lies inside the
    # range the band gives
    low, high = doc["validation"]["likely_range"]
    assert low <= 1024 / 5.7 <= high


@given(st.floats(1.0, 1e7), st.floats(-0.5, 0.0), st.floats(0.0, 2.0))
def test_likely_range_brackets_the_prediction_corrected_by_its_median(
        predicted: float, low: float, high: float) -> None:
    """The range runs from predicted / (1 + p90) to predicted / (1 + p10), and the value
    the median error implies lies inside it."""
    median = (low + high) / 2
    band = Band("serving", 20, 0, median, low, high)
    lo, hi = band.likely_range(predicted)
    assert lo == pytest.approx(predicted / (1 + high))
    assert hi == pytest.approx(predicted / (1 + low))
    assert lo <= predicted / (1 + median) * (1 + 1e-12)
    assert predicted / (1 + median) <= hi * (1 + 1e-12)


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    bands = {"serving": Band("serving", 12, 3, 0.031, -0.149, 0.447)}
    path = tmp_path / "bands.json"
    write_bands(bands, path)
    assert load_bands(path) == bands
    assert not list(tmp_path.glob("*.tmp"))
    assert json.loads(path.read_text())["percentiles"] == [10.0, 50.0, 90.0]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    out, _ = capsys.readouterr()
    return status, out


def test_estimates_carry_their_band(capsys: pytest.CaptureFixture[str]) -> None:
    """estimate infer/train print the band's range and put it in the JSON; the range
    brackets what the median error implies for the prediction."""
    status, out = _run(capsys, "estimate", "infer", "--model", "qwen3-30b-a3b", "--gpu",
                       "h100", "--input-len", "1000", "--output-len", "1000", "--batch",
                       "max", "--json")
    assert status == 0
    doc = json.loads(out)
    v = doc["validation"]
    # H100's own band in its format: 27 BF16 figures (ML.ENERGY's vLLM sweeps gave it more
    # than the 10 a format's own band needs)
    assert v["regime"] == "serving/fine-moe/hopper/h100-sxm5-80gb/bf16"
    assert v["metric"] == "output_tokens_per_s"
    implied = doc["output_tokens_per_s"] / (1 + v["median_error"])
    assert v["likely_range"][0] <= implied <= v["likely_range"][1]
    status, out = _run(capsys, "estimate", "train", "--model", "llama-3.1-8b", "--gpu",
                       "h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
                       "--micro-batch", "1", "--tp", "1", "--pp", "1")
    assert status == 0
    assert "error band" in out
    assert "published figures of dense training on h100-sxm5-80gb (Hopper)" in out


def test_an_estimate_takes_the_engine_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    """--engine (or --launch's engine) narrows the band to that engine's runs, in the JSON
    and the text, and the nearest published runs say whose they were; a bad --engine is a
    usage error that suggests the name; a batch list takes the engine's band too."""
    base = ("estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "b200", "--input-len",
            "2048", "--output-len", "256", "--batching", "continuous")
    status, out = _run(capsys, *base, "--batch", "64", "--engine", "trtllm", "--json")
    assert status == 0
    v = json.loads(out)["validation"]
    assert (v["regime"], v["engine"]) == ("serving/dense/blackwell/b200@trtllm", "trtllm")
    status, out = _run(capsys, *base, "--batch", "64", "--launch", "vllm")
    assert status == 0
    assert "in bf16 with vLLM (10th-90th percentile" in out
    assert ", vLLM\n" in out  # a nearest run's engine
    status, out = _run(capsys, *base, "--batch", "8,64", "--engine", "trtllm", "--json")
    assert status == 0
    assert json.loads(out)["validation"]["engine"] == "trtllm"
    status = main([*base, "--batch", "64", "--engine", "vlm"])
    err = capsys.readouterr().err
    assert status == 2 and "--engine" in err and "did you mean 'vllm'" in err


def test_a_calibrated_estimate_has_no_band(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """The bands measure the fitted efficiencies; --calibration replaces them."""
    cal = {"schema": "gpuarch-calibration", "version": 1, "created": "2026-11-29T00:00:00Z",
           "device": {"name": "NVIDIA H100 80GB HBM3", "product": "h100-sxm5-80gb"},
           "gemm": [{"precision": "bf16", "m": 8192, "n": 8192, "k": 8192,
                     "tflops": 700.0}],
           "bandwidth": [{"kind": "device_copy", "gb_s": 3000.0}], "collectives": []}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal))
    status, out = _run(capsys, "estimate", "train", "--model", "llama-3.1-8b", "--gpu",
                       "h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
                       "--micro-batch", "1", "--tp", "1", "--pp", "1", "--calibration",
                       str(path), "--json")
    assert status == 0
    assert json.loads(out)["validation"] is None


_KINDS = {"dense": "dense", "coarse MoE": "coarse-moe", "fine-grained MoE": "fine-moe"}


def _pct(text: str) -> float:
    return float(text.strip().rstrip("%")) / 100


def test_documented_bands_are_the_shipped_ones() -> None:
    """The tables in docs/performance-model.md and the README quote the data file."""
    root = Path(__file__).resolve().parents[1]
    bands = load_bands()
    seen = 0
    doc = (root / "docs" / "performance-model.md").read_text(encoding="utf-8")
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith(("training, ", "serving, ")):
            task, kind, arch = (c.strip() for c in cells[0].split(","))
            band = bands[f"{task}/{_KINDS[kind]}/{arch.lower()}"]
            assert (int(cells[1]), int(cells[2])) == (band.figures, band.out_of_sample), line
            got = tuple(_pct(c) for c in cells[3:])
            assert got == pytest.approx((band.p10_error, band.median_error,
                                         band.p90_error), abs=6e-4), line
            seen += 1
    readme = (root / "README.md").read_text(encoding="utf-8")
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].endswith(("Hopper", "Blackwell", "Ampere", "Ada")) \
                and (" training, " in cells[0] or " serving, " in cells[0]):
            what, arch = (c.strip() for c in cells[0].split(","))
            kind, task = what.rsplit(" ", 1)
            band = bands[f"{task}/{_KINDS[kind]}/{arch.lower()}"]
            assert int(cells[1]) == band.figures, line
            assert tuple(_pct(c) for c in cells[2:]) == pytest.approx(
                (band.p10_error, band.median_error, band.p90_error), abs=6e-4), line
            seen += 1
    assert seen >= 15


def test_validate_bands_command(capsys: pytest.CaptureFixture[str]) -> None:
    """validate bands prints the shipped table (or a fresh one with --fresh)."""
    status, out = _run(capsys, "validate", "bands")
    assert status == 0
    assert "serving/fine-moe/hopper" in out and "(too few: the broader band is used)" in out
    status, out = _run(capsys, "validate", "bands", "--fresh", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["training/dense/hopper"] == load_bands()["training/dense/hopper"].as_json()


def test_a_median_that_rounds_to_zero_has_no_sign() -> None:
    band = Band("serving/dense", 200, 100, -0.002, -0.16, 0.22)
    text = band.describe(1000.0, "output tokens/s")
    assert "median 0%: no clear bias" in text and "-16% to +22%" in text
