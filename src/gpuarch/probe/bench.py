"""The probe's microbenchmarks: GEMM throughput, memory bandwidth and collectives.

Everything here is measured, not looked up: results are SI (seconds, FLOP/s, bytes, bytes/s).
torch is imported inside the functions, so this module imports (and the rest of gpuarch works)
where torch is not installed. Anything a device cannot run is returned as a ``(what, reason)``
pair in ``skipped`` instead of raising.

Collective bus bandwidth follows the NCCL-tests convention (``PERFORMANCE.md`` there):
all_reduce busbw = algbw * 2(n-1)/n; all_gather and reduce_scatter busbw = algbw * (n-1)/n,
where the byte count is the full (gathered / pre-scatter) buffer.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from gpuarch.units import Unit, to_si

__all__ = [
    "BANDWIDTH_KINDS",
    "COLLECTIVE_OPS",
    "GEMM_BUDGET_S",
    "GEMM_PRECISIONS",
    "K_SWEEP",
    "MIN_RUN_S",
    "NOT_LAUNCHED_REASON",
    "BandwidthResult",
    "BenchResults",
    "CollectiveResult",
    "GemmResult",
    "Progress",
    "bench_collectives",
    "bench_gemm",
    "bench_gemm_k_sweep",
    "bench_memory",
    "bus_bandwidth",
    "run_benchmarks",
    "terminal_progress",
    "time_fn",
]

GEMM_PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8",
                                     "fp16_sparse")
"""``fp16_sparse``: A pruned to 2:4 and stored semi-structured (torch.sparse), times dense B;
its FLOPs are counted as the dense equivalent 2mnk, as NVIDIA quotes sparse peaks."""
BANDWIDTH_KINDS: tuple[str, ...] = (
    "device_copy",
    "host_to_device",
    "device_to_host",
    "peer_to_peer",
)
COLLECTIVE_OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")
NOT_LAUNCHED_REASON = (
    "not launched under torchrun; run: torchrun --nproc-per-node N -m gpuarch probe --bench"
)

# Longest one (precision, size) GEMM measurement may take in run_benchmarks; GPUs never come
# near it, CPUs hit it at large sizes (and for fp16, which many CPUs run in plain C++).
GEMM_BUDGET_S = 20.0

K_SWEEP: tuple[int, tuple[int, ...]] = (8192, (256, 512, 1024, 2048))
"""16-bit GEMMs of an 8,192 x 8,192 output at these reduction lengths (run_benchmarks on a
GPU): with the square sizes they give the calibration's size curve several K values."""


def sweep_precision(capability: tuple[int, int] | None) -> str:
    """The 16-bit format the K sweep runs in on a GPU of compute ``capability`` (None: not
    a CUDA device): BF16 from Ampere (8.0) on, FP16 before it, whose Tensor Cores take no
    BF16 (PyTorch runs BF16 there on a slower path, which would fit the size curve to a
    rate the GPU's own format does not have)."""
    return "fp16" if capability is not None and capability < (8, 0) else "bf16"

_GIB = 2**30
_MIB = 2**20

Skip = tuple[str, str]


class Progress(Protocol):
    """Called after each benchmark step: ``progress(done, total, label)``."""

    def __call__(self, done: int, total: int, label: str) -> None: ...


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GemmResult:
    """One square GEMM: C[m,n] = A[m,k] @ B[k,n]; FLOPs counted as 2*m*n*k."""

    precision: str
    m: int
    n: int
    k: int
    seconds: float  # median time of one GEMM
    flops_per_s: float


@dataclass(frozen=True)
class BandwidthResult:
    """One memory transfer: ``bytes`` moved (read + write for a device copy) in ``seconds``."""

    kind: str  # one of BANDWIDTH_KINDS
    bytes: float
    seconds: float
    bytes_per_s: float


@dataclass(frozen=True)
class CollectiveResult:
    """One collective over ``ranks`` processes; algbw = bytes/seconds, busbw per NCCL-tests."""

    op: str  # one of COLLECTIVE_OPS
    bytes: float
    ranks: int
    seconds: float
    algbw: float  # bytes/s
    busbw: float  # bytes/s


@dataclass(frozen=True)
class BenchResults:
    """Everything one benchmark run measured, and what it skipped (what, reason)."""

    device: str
    gemm: tuple[GemmResult, ...]
    bandwidth: tuple[BandwidthResult, ...]
    collectives: tuple[CollectiveResult, ...]
    skipped: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _is_cuda(device: str) -> bool:
    return device == "cuda" or device.startswith("cuda:")


def _report(progress: Progress | None, done: int, total: int, label: str) -> None:
    if progress is not None:
        progress(done, total, label)


def _reason(exc: BaseException) -> str:
    """A one-line reason from an exception (first line of its message)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def bus_bandwidth(op: str, algbw: float, ranks: int) -> float:
    """Bus bandwidth from algorithm bandwidth, by the NCCL-tests convention."""
    if ranks <= 0:
        raise ValueError(f"ranks must be positive, got {ranks}")
    if op == "all_reduce":
        return algbw * 2.0 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter"):
        return algbw * (ranks - 1) / ranks
    raise ValueError(f"unknown collective {op!r}; expected one of {COLLECTIVE_OPS}")


MIN_RUN_S = 1e-3
"""Shortest timed run: a kernel shorter than this is called back to back until a run lasts
this long, so that the launch gap between two events does not count as its time."""


def time_fn(
    fn: Callable[[], object],
    *,
    device: str,
    warmup: int = 3,
    repeats: int = 10,
    min_run_s: float = MIN_RUN_S,
) -> float:
    """Median seconds per call of ``fn()`` over ``repeats`` timed runs, after ``warmup``
    untimed calls.

    Each run calls ``fn`` back to back as often as it takes to last ``min_run_s`` (the count
    is set from the last warmup call's time), and its time is divided by that count: a 1,024^3
    GEMM takes a few microseconds on an H200, less than the gap between launching two
    kernels, so one call between two events would time the launch, not the kernel. On CUDA
    each run is bracketed by timing events on the current stream; on the CPU
    ``time.perf_counter`` is used.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be non-negative, got {warmup}")
    cuda = _is_cuda(device)
    if cuda:
        import torch

        event: Any = torch.cuda.Event  # untyped constructor in torch's stubs

    def run(calls: int) -> float:
        if cuda:
            start: Any = event(enable_timing=True)
            end: Any = event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return to_si(float(start.elapsed_time(end)), Unit.MS) / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls

    for _ in range(warmup - 1):
        fn()
    if cuda:
        torch.cuda.synchronize()
    one = run(1) if warmup > 0 else min_run_s
    calls = max(1, min(1000, math.ceil(min_run_s / one))) if one > 0 else 1000
    return statistics.median(run(calls) for _ in range(repeats))


# --------------------------------------------------------------------------------------------
# GEMM
# --------------------------------------------------------------------------------------------


def _fp8_unavailable(torch: Any, device: str) -> str | None:
    """Why FP8 GEMMs cannot run on ``device`` (None = try them)."""
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm"
    if _is_cuda(device):
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        if (major, minor) < (8, 9):
            return (
                f"FP8 tensor cores need compute capability 8.9 or newer; "
                f"this GPU is {major}.{minor}"
            )
    return None


def _gemm_operands(torch: Any, precision: str, a: Any, b: Any, cache: dict[str, Any]) -> Any:
    """The (A, B, extra) operands for ``precision``, cast once per size and cached."""
    if precision in cache:
        return cache[precision]
    if precision in ("fp32", "tf32"):
        ops: Any = (a, b)
    elif precision == "fp16":
        ops = (a.to(torch.float16), b.to(torch.float16))
    elif precision == "bf16":
        ops = (a.to(torch.bfloat16), b.to(torch.bfloat16))
    elif precision == "fp8":
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm wants
        one = torch.tensor(1.0, dtype=torch.float32, device=a.device)
        ops = (a8, b8, one)
    elif precision == "int8":
        ops = (
            torch.randint(-64, 64, a.shape, dtype=torch.int8, device=a.device),
            # B column-major, the layout cuBLASLt's integer kernels take directly
            torch.randint(-64, 64, b.shape, dtype=torch.int8, device=a.device).t(),
        )
    elif precision == "fp16_sparse":
        keep = torch.tensor([1, 1, 0, 0], dtype=torch.float16, device=a.device)
        pruned = a.to(torch.float16) * keep.repeat(a.shape[1] // 4)
        ops = (torch.sparse.to_sparse_semi_structured(pruned), b.to(torch.float16))
    else:
        raise ValueError(f"unknown precision {precision!r}; expected one of {GEMM_PRECISIONS}")
    cache[precision] = ops
    return ops


def _gemm_fn(torch: Any, precision: str, ops: Any) -> Callable[[], object]:
    if precision == "fp8":
        a8, b8, one = ops

        def run_fp8() -> object:
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return run_fp8
    a, b = ops
    if precision == "int8":

        def run_int8() -> object:
            return torch._int_mm(a, b)

        return run_int8

    def run_mm() -> object:
        return torch.mm(a, b)

    return run_mm


def _trial_seconds(torch: Any, fn: Callable[[], object], cuda: bool) -> float:
    """Wall time of one untimed-by-events call (also the first warmup call)."""
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def bench_gemm(
    device: str,
    precisions: Sequence[str] = GEMM_PRECISIONS,
    sizes: Sequence[int] = (1024, 4096, 8192),
    progress: Progress | None = None,
    *,
    warmup: int = 3,
    repeats: int = 10,
    budget_s: float | None = None,
) -> tuple[list[GemmResult], list[tuple[str, str]]]:
    """Square GEMM throughput for each precision and size; unsupported precisions are skipped.

    tf32 is fp32 with ``torch.backends.cuda.matmul.allow_tf32`` on, fp32 with it off (the
    previous setting is restored). fp8 uses ``torch._scaled_mm`` (e4m3 inputs, B column-major,
    unit FP32 scales, bf16 output); int8 uses ``torch._int_mm`` (CUDA only).

    ``budget_s`` caps the estimated time of one (precision, size) measurement, all calls
    included: the estimate comes from the previous size (scaled by size cubed) or from one
    trial call; over budget, that size is skipped with the estimate as its reason. This keeps
    slow paths (fp16 on many CPUs runs at ~1 GFLOP/s) from running for hours.
    """
    import torch

    for p in precisions:
        if p not in GEMM_PRECISIONS:
            raise ValueError(f"unknown precision {p!r}; expected one of {GEMM_PRECISIONS}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    cuda = _is_cuda(device)
    calls = max(warmup, 1) + repeats  # the trial call counts as the first warmup call
    results: list[GemmResult] = []
    skipped: list[Skip] = []
    dead: dict[str, str] = {}  # precision -> reason, once it is known not to run
    anchor: dict[str, tuple[int, float]] = {}  # precision -> (size, seconds per call)

    # Reasons known before running anything.
    for p in precisions:
        if p == "tf32" and not cuda:
            dead[p] = "TF32 is a CUDA tensor-core mode; not applicable on " + device
        elif p == "int8" and not cuda:
            dead[p] = "torch._int_mm is benchmarked on CUDA only; device is " + device
        elif p == "fp16_sparse":
            if not cuda:
                dead[p] = "2:4 sparse GEMMs need a CUDA GPU with sparse Tensor Cores"
            elif torch.cuda.get_device_capability(torch.device(device)) < (8, 0):
                dead[p] = "2:4 sparse Tensor Cores need compute capability 8.0 or newer"
        elif p == "fp8":
            why = _fp8_unavailable(torch, device)
            if why is not None:
                dead[p] = why

    def over_budget(size: int, per_call: float) -> str | None:
        estimate = per_call * calls
        if budget_s is None or estimate <= budget_s:
            return None
        rate = 2.0 * size**3 / per_call / 1e9
        return (
            f"estimated {estimate:.0f} s ({rate:.1f} GFLOP/s) exceeds the "
            f"{budget_s:g} s budget per measurement on {device}"
        )

    total = len(precisions) * len(sizes)
    done = 0
    saved_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    try:
        for size in sizes:
            gen = torch.Generator(device=device).manual_seed(size)
            a = torch.randn(size, size, device=device, dtype=torch.float32, generator=gen)
            b = torch.randn(size, size, device=device, dtype=torch.float32, generator=gen)
            cache: dict[str, Any] = {}
            for p in precisions:
                done += 1
                label = f"gemm {p} {size}"
                if p in dead:
                    _report(progress, done, total, label)
                    continue
                if p in anchor:
                    prev_size, prev_s = anchor[p]
                    why = over_budget(size, prev_s * (size / prev_size) ** 3)
                    if why is not None:
                        skipped.append((f"gemm {p} {size}", why))
                        _report(progress, done, total, label)
                        continue
                seconds = 0.0
                try:
                    if cuda:
                        torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
                    ops = _gemm_operands(torch, p, a, b, cache)
                    fn = _gemm_fn(torch, p, ops)
                    trial = _trial_seconds(torch, fn, cuda)
                    why = over_budget(size, trial)
                    if why is None:
                        seconds = time_fn(
                            fn, device=device, warmup=max(warmup - 1, 0), repeats=repeats
                        )
                except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
                    dead[p] = _reason(exc)
                    cache.pop(p, None)
                    _report(progress, done, total, label)
                    continue
                finally:
                    if cuda:
                        torch.backends.cuda.matmul.allow_tf32 = saved_tf32
                if why is not None:
                    anchor[p] = (size, trial)
                    skipped.append((f"gemm {p} {size}", why))
                    cache.pop(p, None)
                    _report(progress, done, total, label)
                    continue
                anchor[p] = (size, seconds)
                flops = 2.0 * size * size * size
                results.append(GemmResult(p, size, size, size, seconds, flops / seconds))
                _report(progress, done, total, label)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved_tf32
    for p in precisions:
        if p in dead:
            skipped.append((f"gemm {p}", dead[p]))
    return results, skipped


def bench_gemm_k_sweep(
    device: str,
    output: int,
    ks: Sequence[int],
    precision: str = "bf16",
    progress: Progress | None = None,
    *,
    warmup: int = 3,
    repeats: int = 10,
) -> tuple[list[GemmResult], list[Skip]]:
    """GEMMs with a large square output (``output`` x ``output``) at several reduction lengths
    K: what the calibration's size curve is fitted to (the efficiency lost to a short K, as
    a tensor-parallel shard has), apart from the idle SMs of a small output."""
    import torch

    results: list[GemmResult] = []
    for i, k in enumerate(ks, 1):
        gen = torch.Generator(device=device).manual_seed(k)
        a = torch.randn(output, k, device=device, dtype=torch.float32, generator=gen)
        b = torch.randn(k, output, device=device, dtype=torch.float32, generator=gen)
        try:
            fn = _gemm_fn(torch, precision, _gemm_operands(torch, precision, a, b, {}))
            seconds = time_fn(fn, device=device, warmup=warmup, repeats=repeats)
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
            return results, [(f"gemm {precision} K sweep", _reason(exc))]
        finally:
            _report(progress, i, len(ks), f"gemm {precision} {output}x{output}x{k}")
        flops = 2.0 * output * output * k
        results.append(GemmResult(precision, output, output, k, seconds, flops / seconds))
    return results, []


# --------------------------------------------------------------------------------------------
# Memory bandwidth
# --------------------------------------------------------------------------------------------


def _time_device_copy(torch: Any, device: str, size: int, warmup: int, repeats: int) -> float:
    src = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return time_fn(lambda: dst.copy_(src), device=device, warmup=warmup, repeats=repeats)


def _time_host_transfers(
    torch: Any, device: str, size: int, warmup: int, repeats: int
) -> tuple[float, float]:
    """(host->device, device->host) seconds for ``size`` bytes through pinned host memory."""
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
    dev = torch.empty(size, dtype=torch.uint8, device=device)
    h2d = time_fn(
        lambda: dev.copy_(host, non_blocking=True), device=device, warmup=warmup, repeats=repeats
    )
    d2h = time_fn(
        lambda: host.copy_(dev, non_blocking=True), device=device, warmup=warmup, repeats=repeats
    )
    return h2d, d2h


def _time_peer_copy(torch: Any, size: int, warmup: int, repeats: int) -> float:
    """GPU 0 -> GPU 1 copy; torch runs it on GPU 0's stream, so GPU 0's events time it."""
    with torch.cuda.device(0):
        src = torch.empty(size, dtype=torch.uint8, device="cuda:0").fill_(1)
        dst = torch.empty(size, dtype=torch.uint8, device="cuda:1")
        seconds = time_fn(
            lambda: dst.copy_(src, non_blocking=True),
            device="cuda:0",
            warmup=warmup,
            repeats=repeats,
        )
        torch.cuda.synchronize(1)
    return seconds


def bench_memory(
    device: str,
    size_bytes: int | None = None,
    progress: Progress | None = None,
    *,
    warmup: int = 3,
    repeats: int = 10,
) -> tuple[list[BandwidthResult], list[tuple[str, str]]]:
    """Device copy, pinned host<->device and GPU0->GPU1 peer bandwidth.

    The device copy uses a buffer well beyond any last-level cache (1 GiB on CUDA, 256 MiB on
    the CPU by default) and counts 2 x size bytes (it reads and writes each byte).
    """
    import torch

    cuda = _is_cuda(device)
    size = int(size_bytes) if size_bytes is not None else (_GIB if cuda else 256 * _MIB)
    if size <= 0:
        raise ValueError(f"size_bytes must be positive, got {size}")
    results: list[BandwidthResult] = []
    skipped: list[Skip] = []
    total = len(BANDWIDTH_KINDS)

    def add(kind: str, moved: float, seconds: float) -> None:
        results.append(BandwidthResult(kind, moved, seconds, moved / seconds))

    # device copy
    try:
        add("device_copy", 2.0 * size, _time_device_copy(torch, device, size, warmup, repeats))
    except (RuntimeError, MemoryError) as exc:
        skipped.append(("device_copy", _reason(exc)))
    _report(progress, 1, total, "memory device_copy")

    # host <-> device, pinned
    if not cuda:
        for kind in ("host_to_device", "device_to_host"):
            skipped.append((kind, "needs a CUDA device (pinned host memory transfers)"))
    else:
        try:
            h2d, d2h = _time_host_transfers(torch, device, size, warmup, repeats)
            add("host_to_device", float(size), h2d)
            add("device_to_host", float(size), d2h)
        except (RuntimeError, MemoryError) as exc:
            for kind in ("host_to_device", "device_to_host"):
                skipped.append((kind, _reason(exc)))
    _report(progress, 3, total, "memory host<->device")

    # peer to peer, GPU 0 -> GPU 1
    if not cuda:
        skipped.append(("peer_to_peer", "needs 2 or more CUDA devices"))
    elif torch.cuda.device_count() < 2:
        skipped.append(("peer_to_peer", "needs 2 or more GPUs; found 1"))
    elif not torch.cuda.can_device_access_peer(0, 1):
        skipped.append(("peer_to_peer", "GPU 0 cannot access GPU 1 directly (no P2P path)"))
    else:
        try:
            add("peer_to_peer", float(size), _time_peer_copy(torch, size, warmup, repeats))
        except (RuntimeError, MemoryError) as exc:
            skipped.append(("peer_to_peer", _reason(exc)))
    _report(progress, 4, total, "memory peer_to_peer")
    if cuda:
        torch.cuda.empty_cache()
    return results, skipped


# --------------------------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------------------------


def _collective_device(torch: Any, backend: str) -> Any:
    if "nccl" in backend:
        local = os.environ.get("LOCAL_RANK")
        index = int(local) if local is not None else torch.cuda.current_device()
        return torch.device("cuda", index)
    return torch.device("cpu")


def _collective_fn(dist: Any, op: str, full: Any, part: Any) -> Callable[[], object]:
    """One call of ``op``: ``full`` is the whole buffer, ``part`` one rank's share of it."""
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    # torch 2.13 renamed the tensor variants (*_single); older releases only have the old names.
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(full, part)
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(part, full)
    raise ValueError(f"unknown collective {op!r}; expected one of {COLLECTIVE_OPS}")


def bench_collectives(
    sizes: Sequence[int] = (2**20, 2**24, 2**26),
    progress: Progress | None = None,
    *,
    warmup: int = 2,
    repeats: int = 10,
) -> tuple[list[CollectiveResult], list[tuple[str, str]]]:
    """all_reduce, all_gather and reduce_scatter over the current process group.

    Needs an initialized ``torch.distributed`` group (torchrun: NCCL on GPUs, gloo on CPUs).
    ``sizes`` are bytes of the full buffer (float32 elements, rounded down to a multiple of the
    world size). Each repeat is barrier, then the timed op; the reported time is the median
    over repeats of the slowest rank, so every rank returns the same numbers.
    """
    import torch

    dist: Any = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return [], [("collectives", NOT_LAUNCHED_REASON)]
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")

    backend = str(dist.get_backend())
    device = _collective_device(torch, backend)
    on_cuda = device.type == "cuda"
    ranks = int(dist.get_world_size())
    results: list[CollectiveResult] = []
    skipped: list[Skip] = []
    dead: dict[str, str] = {}
    total = len(COLLECTIVE_OPS) * len(sizes)
    done = 0

    def timed(fn: Callable[[], object]) -> float:
        for _ in range(warmup):
            fn()
        if on_cuda:
            torch.cuda.synchronize(device)
        times: list[float] = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            if on_cuda:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - t0)
        slowest = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return float(slowest.item())

    for size in sizes:
        elements = max(ranks, (int(size) // 4) // ranks * ranks)
        nbytes = 4.0 * elements
        full = torch.ones(elements, dtype=torch.float32, device=device)
        part = torch.ones(elements // ranks, dtype=torch.float32, device=device)
        for op in COLLECTIVE_OPS:
            done += 1
            label = f"{op} {int(nbytes)} B"
            if op in dead:
                _report(progress, done, total, label)
                continue
            fn = _collective_fn(dist, op, full, part)
            try:
                seconds = timed(fn)
            except (RuntimeError, NotImplementedError, ValueError, AttributeError) as exc:
                dead[op] = f"{backend}: {_reason(exc)}"
                _report(progress, done, total, label)
                continue
            algbw = nbytes / seconds
            results.append(
                CollectiveResult(op, nbytes, ranks, seconds, algbw, bus_bandwidth(op, algbw, ranks))
            )
            _report(progress, done, total, label)
    for op in COLLECTIVE_OPS:
        if op in dead:
            skipped.append((op, dead[op]))
    return results, skipped


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


def _offset(progress: Progress | None, offset: int, grand_total: int) -> Progress | None:
    """Map one stage's (done, total) onto the whole run's."""
    if progress is None:
        return None
    outer = progress

    def stage(done: int, total: int, label: str) -> None:
        outer(offset + done, grand_total, label)

    return stage


def run_benchmarks(
    device: str | None = None, quick: bool = False, progress: Progress | None = None
) -> BenchResults:
    """Run every benchmark on ``device`` (default: ``cuda`` if available, else ``cpu``).

    ``quick`` uses tiny sizes and few repeats (seconds on a CPU; for tests and smoke runs).
    Collectives run only when launched under torchrun; otherwise they are listed as skipped.
    """
    try:
        import torch
    except ImportError:
        return BenchResults(
            device=device or "none",
            gemm=(),
            bandwidth=(),
            collectives=(),
            skipped=(("benchmarks", "torch is not installed; pip install 'gpuarch[probe]'"),),
        )
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    sweep_ks: tuple[int, ...]
    if quick:
        gemm_sizes: tuple[int, ...] = (64, 128)
        sweep_output, sweep_ks = 128, (16, 64)
        mem_size: int | None = 4 * _MIB
        coll_sizes: tuple[int, ...] = (2**12, 2**16)
        warmup, repeats = 1, 3
    else:
        gemm_sizes = (1024, 4096, 8192)
        sweep_output, sweep_ks = K_SWEEP
        mem_size = None
        coll_sizes = (2**20, 2**24, 2**26)
        warmup, repeats = 3, 10
    if not quick and not _is_cuda(device):
        sweep_ks = ()  # minutes on a CPU, and a CPU's GEMMs feed no Tensor Core curve

    dist: Any = torch.distributed
    launched = bool(dist.is_available() and dist.is_initialized())
    n_gemm = len(GEMM_PRECISIONS) * len(gemm_sizes) + len(sweep_ks)
    n_mem = len(BANDWIDTH_KINDS)
    n_coll = len(COLLECTIVE_OPS) * len(coll_sizes) if launched else 0
    grand = n_gemm + n_mem + n_coll

    skipped: list[Skip] = []
    gemm, why = bench_gemm(
        device,
        GEMM_PRECISIONS,
        gemm_sizes,
        _offset(progress, 0, grand),
        warmup=warmup,
        repeats=repeats,
        budget_s=GEMM_BUDGET_S,
    )
    skipped += why
    capability: tuple[int, int] | None = None
    if _is_cuda(device):
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        capability = (int(major), int(minor))
    sweep, why = bench_gemm_k_sweep(
        device, sweep_output, sweep_ks, sweep_precision(capability),
        _offset(progress, n_gemm - len(sweep_ks), grand), warmup=warmup, repeats=repeats,
    )
    gemm += sweep
    skipped += why
    bandwidth, why = bench_memory(
        device, mem_size, _offset(progress, n_gemm, grand), warmup=warmup, repeats=repeats
    )
    skipped += why
    collectives, why = bench_collectives(
        coll_sizes, _offset(progress, n_gemm + n_mem, grand), warmup=warmup, repeats=repeats
    )
    skipped += why
    return BenchResults(
        device=device,
        gemm=tuple(gemm),
        bandwidth=tuple(bandwidth),
        collectives=tuple(collectives),
        skipped=tuple(skipped),
    )


# --------------------------------------------------------------------------------------------
# Progress bar
# --------------------------------------------------------------------------------------------


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def terminal_progress(stream: TextIO = sys.stderr, width: int = 30) -> Progress | None:
    """A one-line progress bar redrawn in place on ``stream``; None if it is not a terminal."""
    if not _isatty(stream):
        return None
    last = [0]

    def show(done: int, total: int, label: str) -> None:
        total = max(total, 1)
        done = min(max(done, 0), total)
        filled = width * done // total
        bar = "#" * filled + "." * (width - filled)
        line = f"[{bar}] {done}/{total} {label}"
        pad = " " * max(0, last[0] - len(line))  # erase leftovers of a longer previous line
        last[0] = len(line)
        stream.write("\r" + line + pad)
        if done >= total:
            stream.write("\n")
            last[0] = 0
        stream.flush()

    return show

