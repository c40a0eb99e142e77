"""Weights kept in host memory while serving (``--cpu-offload-gb``, vLLM's and SGLang's
setting): the GPU memory they free, the copy every pass pays over the GPU's link to its CPU,
the errors, the launch flags and the remedy that offers it."""

from __future__ import annotations

import dataclasses

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.estimate.remedies import serving_remedies
from gpuarch.units import Unit, to_si
from gpuarch.workloads import preset

CATALOG = load_catalog()
LLAMA8 = preset("llama-3.1-8b").shape
LLAMA70 = preset("llama-3.1-70b").shape
L40S = CATALOG.product("l40s")  # PCIe Gen4 x16 to its host
RUN = InferenceConfig(input_len=1000, output_len=200, batch=8, executor="cpp")
GEN4_X16 = CATALOG.pcie_generation(4).x16_bandwidth_bytes_s


def _run(gib: float, shape=LLAMA8, product=L40S, **kw: object):  # type: ignore[no-untyped-def]
    cfg = dataclasses.replace(RUN, cpu_offload_gib=gib, **kw)  # type: ignore[arg-type]
    return estimate_inference(CATALOG, shape, product, cfg)


def test_offloaded_weights_leave_the_gpu() -> None:
    base, off = _run(0), _run(6)
    assert base.memory["weights"] - off.memory["weights"] == to_si(6, Unit.GIB)
    assert off.max_batch > base.max_batch  # the room goes to the KV cache


def test_every_decode_step_and_prefill_pass_copies_them_up_by_hand() -> None:
    """6 GiB over PCIe Gen4 x16 a pass: the step, and each prompt's pass, grow by that."""
    base, off = _run(0), _run(6)
    copy = to_si(6, Unit.GIB) / GEN4_X16
    assert off.tpot_s - base.tpot_s == pytest.approx(copy, rel=1e-6)
    assert off.decode_step_parts_s["weight_offload"] == pytest.approx(copy)
    assert off.prefill_parts_s["weight_offload"] == pytest.approx(copy)
    assert "weights kept in host memory" in off.bottleneck_reason["decode"]
    # a pipeline of two stages copies each stage's own share in turn
    two = _run(6, gpus=2, pp=2)
    assert two.decode_step_parts_s["weight_offload"] == pytest.approx(2 * copy)


def test_a_host_link_not_catalogued_counts_no_copy() -> None:
    gb300 = CATALOG.product("gb300")  # its C2C rate is not catalogued
    est = _run(20, shape=LLAMA70, product=gb300)
    assert est.decode_step_parts_s["weight_offload"] == 0.0
    assert "copies are not counted" in est.assumptions["cpu_offload"]


def test_no_offload_remedy_where_the_copies_would_go_uncounted() -> None:
    """Where the GPU's host link has no catalogued rate (GB300's C2C) the estimate counts no
    copy, so a remedy offering host memory would read as free: it is not offered there,
    and is on a board whose PCIe rate is catalogued (Llama 3.1 70B in BF16 on one L40S,
    below)."""
    gb300 = CATALOG.product("gb300")
    cfg = InferenceConfig(input_len=1000, output_len=200, batch=64, executor="cpp")
    shape = preset("deepseek-v3").shape
    assert not estimate_inference(CATALOG, shape, gb300, cfg).fits_in_memory
    changes = [r.change for r in serving_remedies(CATALOG, shape, gb300, cfg)]
    assert changes and not any(c.startswith("--cpu-offload-gb") for c in changes)


@pytest.mark.parametrize("gib, message", [
    (-1.0, "--cpu-offload-gb: expected a size in GiB >= 0, got -1.0"),
    (float("nan"), "--cpu-offload-gb: expected a size in GiB >= 0"),
    (15.0, "--cpu-offload-gb: 15 GiB is not less than the 15.0 GiB of weights per GPU"),
])
def test_errors_name_the_flag(gib: float, message: str) -> None:
    with pytest.raises(GpuarchError) as err:
        _run(gib)
    assert message in str(err.value)


def test_the_remedy_keeps_what_does_not_fit_in_host_memory() -> None:
    """Llama 3.1 70B in BF16 on one 48 GB L40S: the remedies include the GiB of weights
    that do not fit, kept in host memory, and that one fits."""
    cfg = dataclasses.replace(RUN, batch=1)
    remedies = serving_remedies(CATALOG, LLAMA70, L40S, cfg)
    offload = [r for r in remedies if r.change.startswith("--cpu-offload-gb")]
    assert offload and offload[0].fits
    gib = float(offload[0].change.split()[1])
    est = estimate_inference(CATALOG, LLAMA70, L40S,
                             dataclasses.replace(cfg, cpu_offload_gib=gib - 1))
    assert not est.fits_in_memory  # a GiB less would not


def test_cli_and_launch(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "l40s", "--input-len",
            "1000", "--output-len", "200", "--batch", "8", "--cpu-offload-gb", "6"]
    assert main(args) == 0
    assert "CPU offload   6 GiB of each GPU's weights in host memory" in \
        capsys.readouterr().out
    for engine, expected in (("vllm", "--cpu-offload-gb 6"), ("sglang", "--cpu-offload-gb 6"),
                             ("trtllm", "TensorRT-LLM has no such setting here")):
        assert main([*args, "--launch", engine]) == 0
        assert expected in capsys.readouterr().out
    assert main([*args[:-1], "99"]) == 2
    err = capsys.readouterr().err
    assert "--cpu-offload-gb: 99 GiB is not less than" in err and "Traceback" not in err
