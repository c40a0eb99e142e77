"""The KV cache format a GPU keeps (perf/kv_formats.py): the one asked for where an engine
stores it on that compute capability, else the next wider one with the reason.

Facts pinned, from the sources in perf/data/kv_cache_formats.toml: TensorRT-LLM's hardware
support matrix (docs/source/features/quantization.md) marks the FP8 KV cache for Ampere and
newer and the NVFP4 KV cache for Blackwell sm100/103 only (not sm120, not Hopper); LMDeploy
stores INT8 and INT4 KV caches from Volta (sm70) on (docs/en/quantization/kv_quant.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuarch.advise.serving_options import CHECKPOINT_SCHEME, in_gpu_formats
from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.kv_formats import KV_FORMATS_FILE, kv_cache_run, kv_format_rules
from gpuarch.perf.quant import QuantFormat as F
from gpuarch.perf.quant import QuantScheme
from gpuarch.workloads import preset

CATALOG = load_catalog()
STORABLE = (F.FP4, F.FP8, F.INT8, F.INT4, F.BF16, F.FP16)


@pytest.mark.parametrize(("gpu", "asked", "kept"), [
    ("b200", F.FP4, F.FP4),                # sm100
    ("gb300", F.FP4, F.FP4),               # sm103
    ("h100", F.FP4, F.FP8),                # Hopper: no NVFP4 KV cache
    ("rtx-5090", F.FP4, F.FP8),            # sm120: not in the matrix
    ("a100-sxm4-80gb", F.FP4, F.FP8),
    ("a100-sxm4-80gb", F.FP8, F.FP8),      # the matrix's Ampere row: FP8 KV cache 'Y'
    ("v100-sxm2-32gb", F.FP8, F.INT8),     # before Ampere: LMDeploy's INT8, the same byte
    ("v100-sxm2-32gb", F.INT4, F.INT4),    # LMDeploy from sm70
    ("v100-sxm2-32gb", F.BF16, F.FP16),    # no BF16 before Ampere
    ("tesla-p100-sxm2-16gb", F.INT8, F.FP16),
    ("tesla-p100-sxm2-16gb", F.FP4, F.FP16),
    ("h100", F.INT4, F.INT4),
])
def test_kept_format(gpu: str, asked: F, kept: F) -> None:
    run = kv_cache_run(CATALOG, CATALOG.product(gpu), asked)
    assert run.format is kept
    assert (run.reason is None) == (asked is kept)


def test_reason_names_the_gpu_and_both_formats() -> None:
    run = kv_cache_run(CATALOG, CATALOG.product("h100"), F.FP4)
    assert run.reason is not None
    assert "H100" in run.reason and "9.0" in run.reason
    assert "NVFP4" in run.reason and run.reason.endswith("kept in FP8, not FP4")
    # a chain of two falls names each step once
    v100 = kv_cache_run(CATALOG, CATALOG.product("v100-sxm2-32gb"), F.FP4).reason
    assert v100 is not None and "NVFP4" in v100 and "before Ampere" in v100
    p100 = kv_cache_run(CATALOG, CATALOG.product("tesla-p100-sxm2-16gb"), F.INT4).reason
    assert p100 is not None and p100.count("sm70") == 1


def test_mxfp4_is_refused_by_flag() -> None:
    with pytest.raises(GpuarchError, match=r"^--kv-precision: .*mxfp4.*fp8"):
        kv_cache_run(CATALOG, CATALOG.product("b200"), F.MXFP4)


@pytest.mark.parametrize("product", CATALOG.products, ids=lambda p: p.key)
def test_every_gpu_keeps_a_stored_format_no_narrower(product: object) -> None:
    """Whatever is asked of any GPU in the catalog, the format kept is one the GPU keeps as
    is (asking for it again changes nothing) and never narrower than the one asked for."""
    for asked in STORABLE:
        run = kv_cache_run(CATALOG, product, asked)  # type: ignore[arg-type]
        assert run.format.bytes >= asked.bytes
        again = kv_cache_run(CATALOG, product, run.format)  # type: ignore[arg-type]
        assert again.format is run.format and again.reason is None


def test_rules_carry_sources() -> None:
    rules = kv_format_rules()
    assert set(rules) == {F.FP8, F.INT8, F.INT4, F.FP4}
    for rule in rules.values():
        assert rule.source_url.startswith("https://")


@pytest.mark.parametrize(("text", "message"), [
    ('format = "fp8"\nmin_compute_capability = "8.0"\nfalls_back_to = "int8"\n',
     "neither a format with a row"),
    ('format = "fp8"\nmin_compute_capability = "8.0"\ncompute_capabilities = ["9.0"]\n'
     'falls_back_to = "16-bit"\n', "exactly one of"),
    ('format = "fp8"\nmin_compute_capability = "eight"\nfalls_back_to = "16-bit"\n',
     "compute capability"),
    ('format = "bf16"\nmin_compute_capability = "8.0"\nfalls_back_to = "16-bit"\n',
     "16-bit"),
    ('format = "fp8"\nmin_compute_capability = "8.0"\nfalls_back_to = "16-bit"\ncolour = 1\n',
     "unknown key"),
])
def test_bad_rule_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "kv.toml"
    common = 'engines = "x"\nwhere_not = "y"\nsource_title = "t"\nsource_url = "https://z"\n'
    path.write_text("[[format]]\n" + text + common)
    with pytest.raises(GpuarchError, match=message):
        kv_format_rules(path)


def test_fallbacks_that_loop_are_refused(tmp_path: Path) -> None:
    common = 'engines = "x"\nwhere_not = "y"\nsource_title = "t"\nsource_url = "https://z"\n'
    path = tmp_path / "kv.toml"
    path.write_text(
        '[[format]]\nformat = "fp8"\nmin_compute_capability = "8.0"\nfalls_back_to = "int8"\n'
        + common + '[[format]]\nformat = "int8"\nmin_compute_capability = "7.0"\n'
        'falls_back_to = "fp8"\n' + common)
    with pytest.raises(GpuarchError, match="loop"):
        kv_format_rules(path)
    assert KV_FORMATS_FILE.exists()


def test_library_refuses_a_format_the_gpu_does_not_keep() -> None:
    """The estimate is not made with a KV cache no engine keeps on the GPU: the caller
    resolves it first, as the CLI and the advisor do."""
    cfg = InferenceConfig(input_len=1000, output_len=100, batch=8,
                          quant=QuantScheme(F.BF16, F.BF16, F.FP4))
    with pytest.raises(GpuarchError, match=r"^--kv-precision: .*give fp8"):
        estimate_inference(CATALOG, preset("llama-3.1-8b").shape, CATALOG.product("h100"), cfg)


def _infer(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    try:
        status = main(["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "1000",
                       "--output-len", "200", *flags])
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_falls_back_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _infer(capsys, "--gpu", "h100", "--batch", "64", "--kv-precision", "fp4",
                            "--json")
    assert status == 0
    doc = json.loads(out)
    a = doc["assumptions"]
    assert a["formats"]["kv_cache"] == "fp8"
    assert "NVFP4" in a["kv_cache_fallback"]
    # the same estimate as asking for FP8 outright
    status, out, _ = _infer(capsys, "--gpu", "h100", "--batch", "64", "--kv-precision", "fp8",
                            "--json")
    fp8 = json.loads(out)
    assert fp8["assumptions"]["kv_cache_fallback"] is None
    assert doc["tpot_s"] == fp8["tpot_s"]
    assert doc["memory_per_gpu_gib"] == fp8["memory_per_gpu_gib"]
    # on datacenter Blackwell the cache is NVFP4: fewer bytes than FP8
    status, out, _ = _infer(capsys, "--gpu", "b200", "--batch", "64", "--kv-precision", "fp4",
                            "--json")
    b200 = json.loads(out)["assumptions"]
    assert b200["formats"]["kv_cache"] == "fp4" and b200["kv_cache_fallback"] is None
    # the text says it under the formats
    status, out, _ = _infer(capsys, "--gpu", "h100", "--batch", "64", "--kv-precision", "fp4")
    assert status == 0 and "KV cache fp8" in out and "kept in FP8, not FP4" in out


def test_cli_refuses_mxfp4(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _infer(capsys, "--gpu", "b200", "--batch", "8", "--kv-precision",
                              "mxfp4")
    assert status == 2 and not out
    assert "--kv-precision" in err and "mxfp4" in err and "Traceback" not in err


def test_disaggregated_prefill_gpu_sets_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    """An H100 prefill pool cannot write the NVFP4 cache a B200 decode pool could keep: both
    pools hold FP8, and the estimate says so."""
    status, out, _ = _infer(capsys, "--gpu", "b200", "--gpus", "2", "--kv-precision", "fp4",
                            "--prefill-gpus", "2", "--prefill-gpu", "h100", "--batch", "max",
                            "--json")
    assert status == 0
    a = json.loads(out)["assumptions"]
    assert a["formats"]["kv_cache"] == "fp8"
    assert "H100" in a["kv_cache_fallback"]


def test_advisor_stores_a_checkpoints_cache_as_the_gpu_can() -> None:
    scheme = QuantScheme(F.INT8, F.BF16, F.FP8)  # a checkpoint declaring an FP8 KV cache
    _, on_v100 = in_gpu_formats(CATALOG, CATALOG.product("v100-sxm2-32gb"), CHECKPOINT_SCHEME,
                                scheme)
    assert on_v100.kv_cache is F.INT8
    _, on_h100 = in_gpu_formats(CATALOG, CATALOG.product("h100"), CHECKPOINT_SCHEME, scheme)
    assert on_h100.kv_cache is F.FP8


def test_a_changed_copy_of_a_product_is_worked_out_afresh() -> None:
    """The answers are memoised by the product object, not its name: an H100 given
    Blackwell's chip keeps an NVFP4 cache though the real H100 does not."""
    import dataclasses

    h100 = CATALOG.product("h100")
    assert kv_cache_run(CATALOG, h100, F.FP4).format is F.FP8
    as_blackwell = dataclasses.replace(h100, chip=CATALOG.product("b200").chip)
    assert kv_cache_run(CATALOG, as_blackwell, F.FP4).format is F.FP4
    assert kv_cache_run(CATALOG, h100, F.FP4).format is F.FP8


def test_memory_remedy_offers_the_8_bit_cache_the_gpu_keeps() -> None:
    """A run that does not fit is offered an 8-bit KV cache: INT8 on a V100, where no
    engine keeps FP8, FP8 on an A100."""
    from gpuarch.estimate.remedies import serving_remedies

    shape = preset("llama-3.1-70b").shape
    for gpu, flag in (("v100-sxm2-32gb", "--kv-precision int8"),
                      ("a100-sxm4-40gb", "--kv-precision fp8")):
        product = CATALOG.product(gpu)
        sixteen = F.FP16 if gpu.startswith("v100") else F.BF16
        cfg = InferenceConfig(input_len=2000, output_len=500, batch=200, gpus=8, tp=8,
                              quant=QuantScheme(sixteen, sixteen, sixteen))
        flags = [r.change for r in serving_remedies(CATALOG, shape, product, cfg)]
        assert flag in flags, flags
        assert not any("fp8" in f for f in flags if gpu.startswith("v100"))

