"""The probe's microbenchmarks, run for real on the CPU (tiny sizes; skipped without torch)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuarch.probe.bench import (
    BenchResults,
    bench_collectives,
    bench_gemm,
    bench_memory,
    bus_bandwidth,
    run_benchmarks,
    terminal_progress,
    time_fn,
)

SRC = Path(__file__).resolve().parents[1] / "src"

WORKER = textwrap.dedent(
    """
    import dataclasses, json, sys
    import torch.distributed as dist
    from gpuarch.probe.bench import bench_collectives

    out = sys.argv[1]
    dist.init_process_group("gloo")
    try:
        results, skipped = bench_collectives((2**12, 2**16), warmup=1, repeats=3)
        with open(out, "w") as f:
            json.dump(
                {
                    "results": [dataclasses.asdict(r) for r in results],
                    "skipped": [list(s) for s in skipped],
                },
                f,
            )
    finally:
        dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_time_fn_counts_calls_and_returns_positive_median() -> None:
    """time_fn calls fn warmup + repeats times and returns a positive median."""
    pytest.importorskip("torch")
    calls = []

    def fn() -> None:
        calls.append(1)
        sum(range(1000))

    seconds = time_fn(fn, device="cpu", warmup=2, repeats=5, min_run_s=0.0)
    assert seconds > 0
    assert len(calls) == 7


def test_time_fn_calls_a_short_fn_back_to_back_and_divides() -> None:
    """A call shorter than min_run_s is repeated within each timed run and the run's time is
    divided by the count: per-call time, not the run's."""
    pytest.importorskip("torch")
    calls = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.001)

    seconds = time_fn(fn, device="cpu", warmup=2, repeats=3, min_run_s=0.008)
    per_run = (len(calls) - 2) / 3
    assert 2 <= per_run <= 8  # about 8 ms / (1 ms + sleep overshoot) calls per run
    assert 0.001 <= seconds < 0.004


def test_time_fn_rejects_zero_repeats() -> None:
    """time_fn refuses repeats < 1 rather than returning a meaningless median."""
    pytest.importorskip("torch")
    with pytest.raises(ValueError):
        time_fn(lambda: None, device="cpu", repeats=0)


def test_bench_gemm_cpu_measures_fp32_and_skips_cuda_only_modes() -> None:
    """CPU GEMMs give fp32 FLOP/s and list tf32/int8 (and anything unsupported) as skips."""
    pytest.importorskip("torch")
    results, skipped = bench_gemm("cpu", sizes=(64, 128), warmup=1, repeats=3)
    fp32 = [r for r in results if r.precision == "fp32"]
    assert [r.m for r in fp32] == [64, 128]
    for r in results:
        assert r.m == r.n == r.k
        assert r.seconds > 0
        assert r.flops_per_s == pytest.approx(2 * r.m * r.n * r.k / r.seconds)
    reasons = dict(skipped)
    assert "gemm tf32" in reasons and "gemm int8" in reasons
    assert all(reason for reason in reasons.values())
    measured = {r.precision for r in results}
    for p in ("fp32", "tf32", "fp16", "bf16", "fp8", "int8"):
        assert (p in measured) != (f"gemm {p}" in reasons), p


def test_bench_gemm_skips_sizes_over_budget() -> None:
    """A zero time budget skips every size, with the estimate as the reason."""
    pytest.importorskip("torch")
    results, skipped = bench_gemm(
        "cpu", precisions=("fp32",), sizes=(32, 64), warmup=1, repeats=2, budget_s=0.0
    )
    assert results == []
    assert [what for what, _ in skipped] == ["gemm fp32 32", "gemm fp32 64"]
    assert all("budget" in reason for _, reason in skipped)


def test_bench_gemm_restores_tf32_setting() -> None:
    """The global TF32 switch is left as it was found."""
    torch = pytest.importorskip("torch")
    before = torch.backends.cuda.matmul.allow_tf32
    bench_gemm("cpu", precisions=("fp32",), sizes=(32,), warmup=0, repeats=1)
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_bench_memory_cpu_copy_and_cuda_only_skips() -> None:
    """A CPU device copy counts read + write bytes; the CUDA-only transfers are skipped."""
    pytest.importorskip("torch")
    size = 1 << 20
    results, skipped = bench_memory("cpu", size_bytes=size, warmup=1, repeats=3)
    assert [r.kind for r in results] == ["device_copy"]
    copy = results[0]
    assert copy.bytes == 2 * size
    assert copy.seconds > 0 and copy.bytes_per_s == pytest.approx(copy.bytes / copy.seconds)
    reasons = dict(skipped)
    assert set(reasons) == {"host_to_device", "device_to_host", "peer_to_peer"}
    assert all(reasons.values())


def test_bench_collectives_without_torchrun_is_skipped() -> None:
    """Without an initialized process group, collectives are a skip that says how to launch."""
    pytest.importorskip("torch")
    results, skipped = bench_collectives(sizes=(1024,))
    assert results == []
    assert len(skipped) == 1
    what, reason = skipped[0]
    assert what == "collectives"
    assert "not launched under torchrun" in reason and "torchrun --nproc-per-node" in reason


def test_bench_collectives_two_gloo_processes(tmp_path: Path) -> None:
    """Two real gloo ranks measure all_reduce with busbw = algbw * 2(n-1)/n."""
    pytest.importorskip("torch")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ)
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(rank),
            WORLD_SIZE="2",
            LOCAL_RANK=str(rank),
            OMP_NUM_THREADS="1",
            PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
        )
        out = tmp_path / f"rank{rank}.json"
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(out)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=60)[0])
    except subprocess.TimeoutExpired:
        pytest.fail("gloo workers hung (timeout)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log

    for rank in range(2):
        data = json.loads((tmp_path / f"rank{rank}.json").read_text())
        results = data["results"]
        all_reduce = [r for r in results if r["op"] == "all_reduce"]
        assert [r["bytes"] for r in all_reduce] == [2**12, 2**16]
        for r in results:
            assert r["ranks"] == 2
            assert r["bytes"] > 0 and r["seconds"] > 0 and r["algbw"] > 0 and r["busbw"] > 0
            assert r["algbw"] == pytest.approx(r["bytes"] / r["seconds"])
        for r in all_reduce:
            assert r["busbw"] == pytest.approx(r["algbw"] * 2 * (2 - 1) / 2)
        for r in results:
            if r["op"] in ("all_gather", "reduce_scatter"):
                assert r["busbw"] == pytest.approx(r["algbw"] * (2 - 1) / 2)
        measured = {r["op"] for r in results}
        skipped = {what for what, _ in data["skipped"]}
        assert measured | skipped == {"all_reduce", "all_gather", "reduce_scatter"}


def test_run_benchmarks_quick_on_cpu() -> None:
    """run_benchmarks(quick=True) on the CPU returns BenchResults for device 'cpu'."""
    pytest.importorskip("torch")
    seen: list[tuple[int, int, str]] = []
    res = run_benchmarks(device="cpu", quick=True, progress=lambda d, t, s: seen.append((d, t, s)))
    assert isinstance(res, BenchResults)
    assert res.device == "cpu"
    assert any(g.precision == "fp32" for g in res.gemm)
    assert [b.kind for b in res.bandwidth] == ["device_copy"]
    assert res.collectives == ()
    assert "collectives" in dict(res.skipped)
    assert seen and seen[-1][0] == seen[-1][1]
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)


def test_bus_bandwidth_follows_nccl_tests() -> None:
    """busbw factors: 2(n-1)/n for all_reduce, (n-1)/n for all_gather and reduce_scatter."""
    pytest.importorskip("torch")
    assert bus_bandwidth("all_reduce", 100.0, 8) == pytest.approx(175.0)
    assert bus_bandwidth("all_gather", 100.0, 8) == pytest.approx(87.5)
    assert bus_bandwidth("reduce_scatter", 100.0, 4) == pytest.approx(75.0)
    with pytest.raises(ValueError):
        bus_bandwidth("broadcast", 1.0, 2)


def test_terminal_progress_only_draws_on_a_tty() -> None:
    """terminal_progress is None off a terminal and redraws one line with \\r on one."""
    pytest.importorskip("torch")
    assert terminal_progress(io.StringIO()) is None

    class FakeTty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTty()
    show = terminal_progress(stream)
    assert show is not None
    show(1, 2, "gemm fp32 64")
    show(2, 2, "done")
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "1/2 gemm fp32 64" in text and "2/2 done" in text


def test_bench_rows_set_the_model_fraction_beside_the_measured() -> None:
    """Each large GEMM and the device copy show the fraction of the peak the performance
    model assumes for that work, so a user sees whether the machine delivers it; small
    outputs, INT8 and sparse GEMMs (which the model does not price) show none."""
    from types import SimpleNamespace

    from gpuarch.cli.probe_cmds import _bench_rows
    from gpuarch.perf import DEFAULT_EFFICIENCY
    from gpuarch.probe.bench import BandwidthResult, BenchResults, GemmResult
    from gpuarch.report.probe_text import render_bench

    report = SimpleNamespace(gpus=[SimpleNamespace(product_key="h200-sxm-141gb")])
    bench = BenchResults(
        device="cuda",
        gemm=(GemmResult("bf16", 8192, 8192, 8192, 1.6e-3, 700e12),
              GemmResult("bf16", 1024, 1024, 1024, 1.8e-5, 120e12),
              GemmResult("int8", 8192, 8192, 8192, 1.2e-3, 900e12)),
        bandwidth=(BandwidthResult("device_copy", 2.0 * 2**30, 5e-4, 4.2e12),),
        collectives=(), skipped=())
    rows = _bench_rows(report, bench)
    # (within 0.1%: the memory stream's share of an 8,192-cubed GEMM, Efficiency.gemm_overlap)
    assert rows[0]["model_fraction"] == pytest.approx(DEFAULT_EFFICIENCY.gemm_by_generation[3],
                                                      rel=1e-3)
    assert rows[1]["model_fraction"] is None and rows[2]["model_fraction"] is None
    assert rows[3]["model_fraction"] == DEFAULT_EFFICIENCY.memory
    text = render_bench(rows, [])
    assert "Model" in text and "74%" in text and "--calibration FILE" in text
