"""Optimizer CPU offload (``--optimizer-offload F``, Megatron-Core's HybridDeviceOptimizer):
the GPU memory it frees, the step time it adds, and its errors.

Megatron Bridge measured it on Qwen3-30B-A3B at TP 2, PP 2, EP 4 on two nodes of H100
(NVIDIA-NeMo/Megatron-Bridge docs/training/cpu-offloading.md @b00deab6): 3.8 GB freed per
quarter of the optimizer offloaded, 15.3 GB at all of it; the step 1.9x, 2.5x, 3.2x and 4.2x as long
at a quarter, half, three quarters and all of it, 3.9x at all of it with the copies
overlapped. ``Efficiency.cpu_adam_elements_per_s`` is set on the 4.2x; the rest test it."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate.training import moment_bytes, offload_sharing
from gpuarch.workloads import preset

CATALOG = load_catalog()
QWEN3_30B = preset("qwen3-30b-a3b").shape
H100 = CATALOG.product("h100")
SYSTEM = CATALOG.system_for(H100)
# the measured layout; the global batch of 8 and micro-batch of 1 of the page's example
RUN = TrainingConfig(gpus=16, seq_len=4096, global_batch=8, micro_batch=1, tp=2, pp=2, ep=4,
                     zero=1, sequence_parallel=True)


def _run(fraction: float, overlap: bool = False, **kw: object):  # type: ignore[no-untyped-def]
    cfg = dataclasses.replace(RUN, optimizer_offload=fraction,
                              optimizer_offload_overlap=overlap, **kw)  # type: ignore[arg-type]
    return estimate_training(CATALOG, QWEN3_30B, H100, cfg, system=SYSTEM)


BASE = _run(0.0)


def test_memory_freed_matches_megatron_bridge() -> None:
    """The two FP32 moments of the GPU's optimizer elements: 15.3 GB at all of them
    (measured 15.3 GB), 3.8 GB a quarter (measured 3.8 GB)."""
    for fraction, measured in ((0.25, 3.8), (1.0, 15.3)):
        freed = BASE.memory.optimizer - _run(fraction).memory.optimizer
        assert freed / 1e9 == pytest.approx(measured, abs=0.1)  # bytes


@pytest.mark.parametrize("fraction, overlap, measured", [
    (0.25, False, 1.9), (0.5, False, 2.5), (0.75, False, 3.2), (1.0, False, 4.2),
    (1.0, True, 3.9)])
def test_step_time_against_megatron_bridge(fraction: float, overlap: bool, measured: float
                                           ) -> None:
    ratio = _run(fraction, overlap).step_time_s / BASE.step_time_s
    assert ratio == pytest.approx(measured, abs=0.25)


def test_the_step_adds_copies_and_the_cpus_update_by_hand() -> None:
    """All of it offloaded, copies in turn: the step grows by the GPU's Adam saved, less two
    4-byte copies of each element over the host link and each element's update at the
    host's rate shared by its 8 GPUs."""
    full = _run(1.0)
    text = full.assumptions["optimizer_offload"]
    assert "1.91 billion on this GPU" in text and "shared by its 8 GPU(s)" in text
    assert "at 63 GB/s" in text and "one after another" in text
    moved = 1.91e9
    link = 63e9
    cpu = moved * 8 / 7.0e9
    added = full.step_time_s - BASE.step_time_s
    gpu_adam = BASE.assumptions["other_breakdown_s"]["optimizer"]
    assert added == pytest.approx(2 * moved * 4 / link + cpu - gpu_adam, rel=0.02)


@settings(max_examples=12, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_more_offload_frees_memory_and_costs_time(a: float, b: float) -> None:
    low, high = sorted((a, b))
    one, more = _run(low), _run(high)
    assert more.memory.total <= one.memory.total + 1e-6
    assert more.step_time_s >= one.step_time_s - 1e-12
    if high:
        assert _run(high, True).step_time_s <= more.step_time_s


def test_bf16_moments_move_half_as_much() -> None:
    assert moment_bytes(dataclasses.replace(RUN, bf16_optimizer=True)) == 4.0
    assert moment_bytes(RUN) == 8.0


def test_a_grace_shares_its_cpu_with_its_two_gpus() -> None:
    assert offload_sharing(CATALOG.product("gb200"), dataclasses.replace(RUN, gpus=72)) == 2
    assert offload_sharing(H100, RUN) == 8
    assert offload_sharing(H100, dataclasses.replace(RUN, gpus=4, gpus_per_node=8)) == 4


@pytest.mark.parametrize("change, message", [
    ({"optimizer_offload": 1.5}, "--optimizer-offload: expected a fraction from 0 to 1, "
                                 "got 1.5"),
    ({"optimizer_offload": 1.0, "zero": 0}, "needs the distributed optimizer (--zero 1 or "
                                            "higher), got --zero 0"),
    ({"optimizer_offload_overlap": True}, "--optimizer-offload-overlap: needs "
                                          "--optimizer-offload"),
])
def test_errors_name_the_flag(change: dict[str, object], message: str) -> None:
    with pytest.raises(GpuarchError) as err:
        estimate_training(CATALOG, QWEN3_30B, H100,
                          dataclasses.replace(RUN, **change),  # type: ignore[arg-type]
                          system=SYSTEM)
    assert message in str(err.value)


def test_cli_and_megatron_launch(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16",
            "--tp", "2", "--pp", "2", "--ep", "4", "--seq-len", "4096", "--global-batch", "8",
            "--zero", "1", "--sequence-parallel", "--optimizer-offload", "0.5"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parallelism"]["optimizer_offload"] == 0.5
    assert main(args) == 0
    assert "0.5 of the optimizer on the CPU" in capsys.readouterr().out
    assert main([*args, "--optimizer-offload-overlap", "--launch", "megatron"]) == 0
    out = capsys.readouterr().out
    for flag in ("--optimizer-cpu-offload", "--optimizer-offload-fraction 0.5",
                 "--use-precision-aware-optimizer", "--overlap-cpu-optimizer-d2h-h2d"):
        assert flag in out
    assert main([*args[:-5], "--zero", "0", "--optimizer-offload", "1"]) == 2
    err = capsys.readouterr().err
    assert "--optimizer-offload: needs the distributed optimizer" in err
    assert "Traceback" not in err


def test_the_advisor_searches_with_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Llama 3.1 70B on at most 8 H100: nothing fits without offload; with the whole
    optimizer offloaded the search finds options, each a distributed optimizer's, and each
    row is what the scalar estimate of its configuration gives."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config

    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\ngpu = "h100-sxm5-80gb"\nusd_per_gpu_hour = 3.0\n')
    prices = load_prices(path)
    shape = preset("llama-3.1-70b").shape
    base = TrainingSearch(tokens=1e9, max_gpus=8, gpus=("h100",), top=12)
    assert not advise_training(CATALOG, shape, base, prices).top
    search = dataclasses.replace(base, optimizer_offload=1.0)
    advice = advise_training(CATALOG, shape, search, prices)
    assert advice.top and advice.assumptions["optimizer_offload"] == 1.0
    for o in advice.top:
        cfg = option_config(search, o, SYSTEM)
        assert o.zero >= 1 and cfg.optimizer_offload == 1.0
        est = estimate_training(CATALOG, shape, H100, cfg, system=SYSTEM)
        assert est.fits_in_memory
        assert est.step_time_s == pytest.approx(o.step_time_s, rel=1e-9)
