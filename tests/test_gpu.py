"""Checks that need a real NVIDIA GPU (marker ``gpu``; skipped elsewhere with the reason).
scripts/gpu_check.sh runs them on a lent GPU machine."""

from __future__ import annotations

import importlib.util

import pytest

from gpuarch.catalog import load_catalog


def _gpu_available() -> tuple[bool, str]:
    if importlib.util.find_spec("torch") is None:
        return False, "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA GPU on this machine"
    if importlib.util.find_spec("pynvml") is None:
        return False, "nvidia-ml-py is not installed"
    return True, ""


OK, WHY = _gpu_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not OK, reason=WHY or "GPU present")]


def test_probe_finds_and_matches_the_gpus() -> None:
    """NVML lists the GPUs and each is matched to a catalog product."""
    from gpuarch.probe.run import run_probe

    report = run_probe(load_catalog())
    assert report.gpus
    for g in report.gpus:
        assert g.product_key, g.match_note


def test_bf16_gemm_reaches_a_sane_fraction_of_peak() -> None:
    """A large BF16 GEMM runs at 40-100% of the catalog's dense peak."""
    from gpuarch.probe.bench import bench_gemm
    from gpuarch.probe.run import run_probe

    catalog = load_catalog()
    product = catalog.product(run_probe(catalog).gpus[0].product_key or "")
    results, _ = bench_gemm("cuda", precisions=("bf16",), sizes=(8192,))
    from gpuarch.catalog.peaks import PeakKey

    peak = product.peak(PeakKey.TENSOR_BF16)
    assert peak and 0.4 <= results[0].flops_per_s / peak <= 1.0


def test_device_copy_reaches_a_sane_fraction_of_bandwidth() -> None:
    """A device-to-device copy runs at 50-100% of the datasheet bandwidth."""
    from gpuarch.probe.bench import bench_memory
    from gpuarch.probe.run import run_probe

    catalog = load_catalog()
    product = catalog.product(run_probe(catalog).gpus[0].product_key or "")
    results, _ = bench_memory("cuda")
    copy = next(r for r in results if r.kind == "device_copy")
    assert 0.5 <= copy.bytes_per_s / product.memory_bandwidth_bytes_s <= 1.0
