"""The per-operator check: single operators timed on this machine's GPU beside the
per-operator roofline's times for its catalog product.

The training and serving models are sums of per-operator times (perf/roofline.py) with
efficiencies fitted to published end-to-end measurements; this checks the operators
themselves: GEMMs at transformer training shapes (whole and tensor-parallel shards, short K,
partial waves, the small forward and backward GEMMs of a latency-bound run in BF16 and FP8),
weight-streaming decode GEMMs, FP8 scaled GEMMs, grouped expert GEMMs at training and serving
sizes (FP8 ones too, grouped and per expert), weight-only INT4 GEMMs at 1-16 rows (a kernel
that converts its weights), INT8 and 2:4 sparse GEMMs and INT8 weight-only ones (measured only),
fused attention forward and backward through torch's FlashAttention-2 and cuDNN backends (and
the latency-bound run's ring-attention steps), decode attention over a long KV cache (and a
grouped-query model's, its cache read once a group, once a query head, or copied),
elementwise adds large and small, and what a kernel costs beyond its work (an eager launch, a
kernel inside a replayed CUDA graph). Each row carries the operator's dimensions, the measured
median time, the model's time with the shipped efficiencies, and their ratio.

Timing: CUDA events around a run of back-to-back calls long enough (>= ~2 ms) that launch
gaps do not count, median of several such runs (operators shorter than their launch from
Python are captured 50 at a time in a CUDA graph and replayed); operands are cycled over
enough copies that a memory-bound operator cannot be served from L2. Without CUDA it runs
tiny shapes on the CPU, so it can be tested anywhere torch is installed; those figures mean
nothing. torch is imported inside the functions. ``gpuarch probe --ops FILE`` and
``scripts/device_op_check.py`` run it.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpuarch.catalog import load_catalog
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Attention, Elementwise, Gemm, Op
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.ops import SCHEMA, VERSION, OpRow, model_time, op_spec, ratio_summary

__all__ = ["run_op_check"]

L2_MULTIPLE = 4  # operands cycled until one cycle moves at least this many L2s
L2_BYTES = to_si(60, Unit.MIB)  # the H200's L2 as torch reports it (62,914,560 bytes)
TARGET_RUN_S = to_si(2, Unit.MS)


def _timer(torch: Any, cuda: bool) -> Callable[[Callable[[int], object], int], float]:
    """Median seconds per call of ``fn(i)`` (i cycles over operand copies)."""

    def measure(fn: Callable[[int], object], copies: int) -> float:
        def run(calls: int) -> float:
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for i in range(calls):
                    fn(i % copies)
                end.record()
                end.synchronize()
                return to_si(start.elapsed_time(end), Unit.MS) / calls
            t0 = time.perf_counter()
            for i in range(calls):
                fn(i % copies)
            return (time.perf_counter() - t0) / calls

        for i in range(3):
            fn(i % copies)
        if cuda:
            torch.cuda.synchronize()
        one = run(1)
        calls = max(copies, min(2000, int(TARGET_RUN_S / max(one, 1e-7)) + 1))
        return statistics.median(run(calls) for _ in range(7))

    return measure


GRAPH_CALLS = 50
"""Calls captured in one CUDA graph when a case is timed by graph replay."""


def _graphed(torch: Any, fn: Callable[[int], object], copies: int
             ) -> tuple[Callable[[int], object], int]:
    """``fn`` called over its copies GRAPH_CALLS (or ``copies``) times in one captured CUDA
    graph: a replay and how many calls it makes. A kernel shorter than its own launch from
    Python (an eager FP8 GEMM cost the lent H200s' hosts 16-28 us) is otherwise timed at the
    host's pace; replayed from a graph it is timed at the GPU's."""
    calls = max(GRAPH_CALLS, copies)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(i % copies)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i % copies)
    return (lambda i: graph.replay()), calls


@dataclasses.dataclass
class Case:
    kind: str
    label: str
    op: Op
    precision: Precision | None  # None: measured only, no model time
    run: Callable[[int], object]
    copies: int
    attention_kernel: str = "native"  # or "ampere": FlashAttention-2 (torch's flash backend)
    note: str = ""
    kernels: int = 1  # kernels one call runs (a replayed CUDA graph runs many)
    graph: bool = False  # timed by replaying GRAPH_CALLS calls captured in a CUDA graph

    @property
    def forward_backward(self) -> bool:
        return self.kind.endswith("fwd_bwd")


def _copies(bytes_per_copy: float, quick: bool) -> int:
    if quick:
        return 1
    return max(1, int(L2_MULTIPLE * L2_BYTES // max(bytes_per_copy, 1.0)) + 1)


def gemm_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """BF16 GEMMs: Llama-3-8B layer at 8,192 tokens, Llama-3-70B TP 8 shards, squares, short
    K, partial waves, and decode (1-512 rows streaming a weight matrix)."""
    dt = torch.bfloat16
    shapes: list[tuple[str, int, int, int]] = [
        ("8B qkv", 8192, 6144, 4096), ("8B out", 8192, 4096, 4096),
        ("8B gate_up", 8192, 28672, 4096), ("8B down", 8192, 4096, 14336),
        ("70B/TP8 qkv", 8192, 1280, 8192), ("70B/TP8 out", 8192, 8192, 1024),
        ("70B/TP8 gate_up", 8192, 7168, 8192), ("70B/TP8 down", 8192, 8192, 3584),
        ("square", 4096, 4096, 4096), ("square", 8192, 8192, 8192),
        ("square", 16384, 16384, 16384),
        ("short K", 8192, 8192, 256), ("short K", 8192, 8192, 512),
        ("short K", 8192, 8192, 1024),
        ("waves 121 tiles", 1408, 1408, 8192), ("waves 144 tiles", 1536, 1536, 8192),
        ("waves 264 tiles", 2048, 2112, 8192),
    ]
    for rows in (1, 8, 32, 128, 512):
        shapes += [("decode 8B gate_up", rows, 28672, 4096), ("decode 8B down", rows, 4096,
                                                                 14336),
                   ("decode 8B qkv", rows, 6144, 4096)]
    if quick:
        shapes = [("square", 64, 64, 64), ("decode", 1, 256, 128), ("short K", 128, 128, 32)]
    cases = []
    for label, m, n, k in shapes:
        copies = _copies(2.0 * (m * k + k * n + m * n), quick)
        a = [torch.randn(m, k, device=dev, dtype=dt) for _ in range(copies)]
        b = [torch.randn(k, n, device=dev, dtype=dt) for _ in range(copies)]

        def run(i: int, a: list[Any] = a, b: list[Any] = b) -> object:
            return torch.matmul(a[i], b[i])

        kind = "gemm_decode" if m <= 512 and label.startswith("decode") else "gemm"
        cases.append(Case(kind, f"{label} {m}x{n}x{k}", Gemm(m, n, k), Precision.BF16, run,
                          copies))
    return cases


def fp8_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """FP8 E4M3 GEMMs through torch._scaled_mm (per-tensor scales, BF16 output)."""
    if dev != "cuda" or quick:
        return []
    shapes = [("8B qkv", 8192, 6144, 4096), ("8B gate_up", 8192, 28672, 4096),
              ("8B down", 8192, 4096, 14336), ("square", 8192, 8192, 8192),
              ("70B/TP8 out", 8192, 8192, 1024), ("decode 8B gate_up", 32, 28672, 4096)]
    cases = []
    one = torch.tensor(1.0, device=dev)
    for label, m, n, k in shapes:
        copies = _copies(1.0 * (m * k + k * n) + 2.0 * m * n, quick)
        a = [torch.randn(m, k, device=dev).to(torch.float8_e4m3fn) for _ in range(copies)]
        b = [torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t() for _ in range(copies)]

        def run(i: int, a: list[Any] = a, b: list[Any] = b) -> object:
            return torch._scaled_mm(a[i], b[i], scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)

        kind = "fp8_gemm_decode" if m <= 512 else "fp8_gemm"
        cases.append(Case(kind, f"fp8 {label} {m}x{n}x{k}", Gemm(m, n, k), Precision.FP8, run,
                          copies, note="BF16 output; the model counts 1-byte outputs"))
    return cases


SHARD_SHAPES: tuple[tuple[str, int, int, int], ...] = (
    ("qkv", 2048, 1536, 4096), ("out", 2048, 4096, 1024), ("gate_up", 2048, 7168, 4096),
    ("down", 2048, 4096, 3584))
"""Llama-3.1-8B's forward GEMMs on one GPU of MLPerf's 512- and 1,024-GPU runs (TP 4, CP 4,
sequence 8,192: 2,048 tokens per context rank, each weight split four ways), the runs the
training model reads 35-98% fast (docs/performance-model.md, "Tiny steps are the model's
blind spot")."""


def shard_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Small GEMMs of a latency-bound training run (SHARD_SHAPES, each forward GEMM with its
    two backward ones: input gradient M x K x N, weight gradient N x K x M), in BF16 through
    torch.matmul and in FP8 E4M3 through torch._scaled_mm (per-tensor scales, BF16 out),
    timed by CUDA graph replay: the FP8 ones run shorter than their launch from Python."""
    shapes = []
    for label, m, n, k in SHARD_SHAPES if not quick else (("tiny", 32, 48, 64),):
        shapes += [(f"{label} fwd", m, n, k), (f"{label} dgrad", m, k, n),
                   (f"{label} wgrad", n, k, m)]
    fp8 = dev == "cuda" and not quick
    cases = []
    one = torch.tensor(1.0, device=dev)
    for label, m, n, k in shapes:
        copies = _copies(2.0 * (m * k + k * n + m * n), quick)
        a = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        b = [torch.randn(k, n, device=dev, dtype=torch.bfloat16) for _ in range(copies)]

        def run(i: int, a: list[Any] = a, b: list[Any] = b) -> object:
            return torch.matmul(a[i], b[i])

        name = f"8B/TP4CP4 {label} {m}x{n}x{k}"
        cases.append(Case("gemm_shard", name, Gemm(m, n, k), Precision.BF16, run, copies,
                          graph=True))
        if not fp8:
            continue
        a8 = [x.to(torch.float8_e4m3fn) for x in a]
        b8 = [x.t().contiguous().to(torch.float8_e4m3fn).t() for x in b]

        def run8(i: int, a: list[Any] = a8, b: list[Any] = b8) -> object:
            return torch._scaled_mm(a[i], b[i], scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)

        cases.append(Case("fp8_gemm_shard", f"fp8 {name}", Gemm(m, n, k), Precision.FP8,
                          run8, copies, note="BF16 output; the model counts 1-byte outputs",
                          graph=True))
    return cases


def fp8_grouped_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """FP8 grouped expert GEMMs through torch._scaled_grouped_mm (E4M3, row-wise scales, BF16
    out; Hopper's kernel) at Qwen3-30B-A3B's expert shapes, evenly routed, beside the model
    as a plain batched FP8 GEMM: whether FP8 buys a fine-grained expert GEMM on Hopper what
    it buys a dense one."""
    if dev != "cuda" or quick:
        return []
    cases = []
    for experts, tokens, n, k in ((128, 1024, 1536, 2048), (128, 1024, 2048, 768),
                                  (16, 4096, 1536, 2048), (16, 4096, 2048, 768),
                                  (16, 1024, 1536, 2048)):
        a = torch.randn(experts * tokens, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(experts, n, k, device=dev).to(torch.float8_e4m3fn).transpose(-2, -1)
        scale_a = torch.ones(experts * tokens, device=dev)
        scale_b = torch.ones(experts, n, device=dev)
        offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * tokens

        def run(i: int, a: Any = a, b: Any = b, sa: Any = scale_a, sb: Any = scale_b,
                offs: Any = offs) -> object:
            return torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)

        cases.append(Case("fp8_grouped_plain", f"fp8 {experts} experts x {tokens} tok {n}x{k}",
                          Gemm(tokens, n, k, batch=experts), Precision.FP8, run, 1,
                          note="model as a plain batched FP8 GEMM"))
        one = torch.tensor(1.0, device=dev)
        parts = [(a[e * tokens:(e + 1) * tokens], b[e]) for e in range(experts)]

        def loop(i: int, parts: list[Any] = parts, one: Any = one) -> object:
            return [torch._scaled_mm(x, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                    for x, w in parts]

        cases.append(Case("fp8_expert_loop", f"fp8 {experts} experts x {tokens} tok {n}x{k}",
                          Gemm(tokens, n, k, batch=experts), Precision.FP8, loop, 1,
                          kernels=experts,
                          note="one torch._scaled_mm per expert, launched back to back"))
        cases.append(Case("fp8_expert_graph", f"fp8 {experts} experts x {tokens} tok {n}x{k}",
                          Gemm(tokens, n, k, batch=experts), Precision.FP8, loop, 1,
                          kernels=experts, graph=True,
                          note="the same per-expert GEMMs replayed from a CUDA graph"))
    return cases


def grouped_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Grouped expert GEMMs through torch._grouped_mm at Qwen3-30B-A3B's expert shapes
    (hidden 2,048, expert FFN 768, SwiGLU), evenly routed: 128 experts (EP 1) or 16 (EP 8),
    1,024-4,096 tokens each. The model's row uses training's grouped-GEMM multiplier
    (moe_grouped_gemm), which also carries the expert layer's costs the model does not
    itemise (scoring, top-k, token bookkeeping), so the kernel alone should beat it; the
    plain-GEMM row shows the kernel's own efficiency."""
    dt = torch.bfloat16
    shapes = [(128, 1024, 1536, 2048), (128, 1024, 2048, 768), (16, 4096, 1536, 2048),
              (16, 4096, 2048, 768), (16, 1024, 1536, 2048)]
    if quick:
        shapes = [(4, 16, 48, 32)]
    cases = []
    for experts, tokens, n, k in shapes:
        a = torch.randn(experts * tokens, k, device=dev, dtype=dt)
        b = torch.randn(experts, n, k, device=dev, dtype=dt).transpose(-2, -1)
        offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * tokens

        def run(i: int, a: Any = a, b: Any = b, offs: Any = offs) -> object:
            return torch._grouped_mm(a, b, offs=offs)

        label = f"{experts} experts x {tokens} tok {n}x{k}"
        cases.append(Case("grouped_gemm", label,
                          Gemm(tokens, n, k, batch=experts, name="grouped_expert_fc"),
                          Precision.BF16, run, 1, note="model with moe_grouped_gemm"))
        cases.append(Case("grouped_gemm_plain", label, Gemm(tokens, n, k, batch=experts),
                          Precision.BF16, run, 1, note="model as a plain batched GEMM"))
    return cases


def serving_grouped_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Grouped expert GEMMs as a serving step runs them: Qwen3-30B-A3B's 128 experts (BF16,
    hidden 2,048, expert FFN 768) with 1-512 tokens each, through torch._grouped_mm, beside
    the serving model's expert GEMM cost (named expert_*: ``moe_gemm`` applies, M padded to
    ``gemm_min_tile``). Whether a small-M grouped GEMM costs more per expert than streaming
    its weights is what the serving misses of fine-grained MoE models ask."""
    dt = torch.bfloat16
    experts = 128 if not quick else 4
    dims = [("expert_up", 1536, 2048), ("expert_down", 2048, 768)] if not quick \
        else [("expert_up", 48, 32)]
    cases = []
    for name, n, k in dims:
        b = torch.randn(experts, n, k, device=dev, dtype=dt).transpose(-2, -1)
        for tokens in ((1, 4, 16, 64, 128, 512) if not quick else (1, 16)):
            a = torch.randn(experts * tokens, k, device=dev, dtype=dt)
            offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * tokens

            def run(i: int, a: Any = a, b: Any = b, offs: Any = offs) -> object:
                return torch._grouped_mm(a, b, offs=offs)

            cases.append(Case("serve_grouped", f"{name} {experts} x {tokens} tok {n}x{k}",
                              Gemm(tokens, n, k, batch=experts, name=name), Precision.BF16,
                              run, 1, note="serving's expert GEMM cost (moe_gemm)"))
    return cases


MIXED_INPUT_SHAPES: tuple[tuple[str, int, int], ...] = (
    ("square", 8192, 8192), ("8B gate_up", 28672, 4096), ("8B down", 4096, 14336))
"""Weight matrices (N, K) of the weight-only GEMMs: the 8,192^2 square Marlin's one-row
timing was published at (``Efficiency.mixed_input_4bit_weights_s``), and Llama-3-8B's
largest two."""

MIXED_INPUT_ROWS = (1, 4, 16)
"""Rows (tokens) of the weight-only GEMMs: a decode step's, below and at
``roofline.SPREAD_ROWS``, where the model's conversion floor stops applying."""

INT4_GROUP = 128
INT4_INNER_K_TILES = 8


def _int4_weights(torch: Any, dev: str, n: int, k: int, group: int) -> tuple[Any, Any]:
    """A random INT4 weight matrix packed for torch's tinygemm kernel (``[N, K]``, two 4-bit
    values a byte on CUDA, INT32 on the CPU) and its BF16 scales and zero points, one pair a
    ``group`` of K."""
    w = torch.randint(0, 16, (n, k), device=dev, dtype=torch.int32)
    if dev == "cuda":
        pairs = (w[:, ::2] << 4 | w[:, 1::2]).to(torch.uint8)
        packed = torch._convert_weight_to_int4pack(pairs, INT4_INNER_K_TILES)
    else:
        packed = torch._convert_weight_to_int4pack_for_cpu(w, 2)
    scales = torch.empty(k // group, n, 2, device=dev, dtype=torch.bfloat16)
    scales[..., 0] = 0.01
    scales[..., 1] = 0.0
    return packed, scales


def mixed_input_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Weight-only GEMMs whose kernel converts its weights to BF16 as it goes, at 1-16 rows:
    INT4 (group 128, a BF16 scale and zero point a group) through torch's tinygemm kernel
    (``torch._weight_int4pack_mm``, torchao's and gpt-fast's INT4 weight-only path), beside
    the model's conversion floor (``roofline.mixed_input_floor``: at most
    ``mixed_input_4bit_weights_s`` weights a second below SPREAD_ROWS rows, however fast the
    memory delivers them), which was read off another kernel (Marlin) on another GPU (an
    H100). Whether that rate is a property of dequantizing, or of one kernel, is what these
    rows ask. And INT8 weight-only (a BF16 scale a channel) through
    ``torch._weight_int8pack_mm``, measured only: torch's CUDA path for it is no serving
    kernel (0.03-0.16 TB/s on the lent H200, 2026-12-04)."""
    from gpuarch.perf.quant import QuantFormat

    shapes = MIXED_INPUT_SHAPES if not quick else (("tiny", 64, 256),)
    rows_list = MIXED_INPUT_ROWS if not quick else (1, 4)
    group = INT4_GROUP if not quick else 32
    cases = []
    for label, n, k in shapes:
        copies = _copies(QuantFormat.INT4.bytes * n * k, quick)
        weights = [_int4_weights(torch, dev, n, k, group) for _ in range(copies)]
        mm = torch._weight_int4pack_mm if dev == "cuda" else torch._weight_int4pack_mm_for_cpu
        for rows in rows_list:
            x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)

            def run(i: int, x: Any = x, weights: list[Any] = weights, mm: Any = mm) -> object:
                packed, scales = weights[i]
                return mm(x, packed, group, scales)

            op = Gemm(rows, n, k, weight_element=QuantFormat.INT4.bytes, spread=True,
                      weight_bits=4)
            cases.append(Case("mixed_input", f"int4 tinygemm {label} {rows}x{n}x{k}", op,
                              Precision.BF16, run, copies, graph=True,
                              note="INT4 group 128 weight-only (torch._weight_int4pack_mm)"))
    if quick:
        return cases
    for label, n, k in shapes:
        copies = _copies(1.0 * n * k, quick)
        w8 = [torch.randint(-128, 128, (n, k), device=dev, dtype=torch.int8)
              for _ in range(copies)]
        scales = torch.full((n,), 0.01, device=dev, dtype=torch.bfloat16)
        for rows in rows_list:
            x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)

            def run8(i: int, x: Any = x, w8: list[Any] = w8, scales: Any = scales) -> object:
                return torch._weight_int8pack_mm(x, w8[i], scales)

            op = Gemm(rows, n, k, weight_element=QuantFormat.INT8.bytes, spread=True,
                      weight_bits=8)
            cases.append(Case("weight_only_int8", f"int8 weight-only {label} {rows}x{n}x{k}",
                              op, None, run8, copies, graph=True,
                              note="measured only: torch's path for this op is no serving "
                                   "kernel (docs/measured/h200-2026-12-04)"))
    return cases


def unmodelled_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Measured only (the serving model prices these through its quantization schemes, not
    a per-operator precision): INT8 GEMMs through torch._int_mm with B row- and
    column-major, and 2:4 sparse FP16 GEMMs through torch's semi-structured sparse tensor."""
    if dev != "cuda" or quick:
        return []
    cases = []
    for m, n, k in ((8192, 8192, 8192), (8192, 28672, 4096)):
        a = torch.randint(-64, 64, (m, k), device=dev, dtype=torch.int8)
        row = torch.randint(-64, 64, (k, n), device=dev, dtype=torch.int8)
        col = row.t().contiguous().t()
        for layout, b in (("B row-major", row), ("B column-major", col)):
            def run(i: int, a: Any = a, b: Any = b) -> object:
                return torch._int_mm(a, b)

            cases.append(Case("int8_gemm", f"int8 {layout} {m}x{n}x{k}", Gemm(m, n, k),
                              None, run, 1))
    from torch.sparse import to_sparse_semi_structured

    for size in (8192, 16384):
        keep = torch.tensor([1, 1, 0, 0], dtype=torch.float16, device=dev)
        dense = torch.randn(size, size, device=dev, dtype=torch.float16)
        sparse = to_sparse_semi_structured(dense * keep.repeat(size // 4))
        b16 = torch.randn(size, size, device=dev, dtype=torch.float16)

        def run_sparse(i: int, a: Any = sparse, b: Any = b16) -> object:
            return torch.mm(a, b)

        def run_dense(i: int, a: Any = dense, b: Any = b16) -> object:
            return torch.mm(a, b)

        cases.append(Case("sparse_gemm", f"fp16 2:4 sparse {size}^3", Gemm(size, size, size),
                          None, run_sparse, 1, note="FLOPs counted dense"))
        cases.append(Case("sparse_gemm", f"fp16 dense {size}^3", Gemm(size, size, size),
                          None, run_dense, 1))
    return cases


def _attention_runs(torch: Any, backend: Any, q: Any, k: Any, v: Any, grad: Any,
                    causal: bool) -> tuple[Callable[[int], object], Callable[[int], object]]:
    """Fused attention through torch's SDPA on ``backend``: forward alone (no autograd), and
    forward with its backward (gradients returned, never accumulated in ``.grad``)."""
    from torch.nn.attention import sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    def fwd(i: int) -> object:
        with sdpa_kernel(backend), torch.no_grad():
            return sdpa(q, k, v, is_causal=causal)

    def fwd_bwd(i: int) -> object:
        with sdpa_kernel(backend):
            out = sdpa(q, k, v, is_causal=causal)
        return torch.autograd.grad(out, (q, k, v), grad)

    return fwd, fwd_bwd


def attention_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Causal fused attention (MHA, head dim 128), forward and forward + backward, through
    torch's FlashAttention-2 backend (modelled as the Ampere-kernel fraction of native speed)
    and the cuDNN backend (modelled as the native kernel); and decode (one query per
    sequence) over a long KV cache."""
    from torch.nn.attention import SDPBackend
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    dt = torch.bfloat16
    train = [(2, 4096, 32), (1, 8192, 32), (1, 16384, 32)] if not quick else [(1, 64, 2)]
    backends = [("flash", SDPBackend.FLASH_ATTENTION, "ampere")]
    if dev == "cuda":
        backends.append(("cudnn", SDPBackend.CUDNN_ATTENTION, "native"))
    else:
        backends = [("math", SDPBackend.MATH, "ampere")]
    d = 128 if not quick else 16
    cases = []
    for name, backend, kernel in backends:
        for batch, seq, heads in train:
            q, k, v = (torch.randn(batch, heads, seq, d, device=dev, dtype=dt,
                                   requires_grad=True) for _ in range(3))
            grad = torch.randn(batch, heads, seq, d, device=dev, dtype=dt)

            fwd, fwd_bwd = _attention_runs(torch, backend, q, k, v, grad, True)
            shape = f"{name} b{batch} s{seq} h{heads} d{d}"
            cases.append(Case("attention_fwd", shape,
                              Attention(batch, seq, seq, heads, heads, d), Precision.BF16, fwd,
                              1, kernel))
            cases.append(Case("attention_fwd_bwd", shape,
                              Attention(batch, seq, seq, heads, heads, d), Precision.BF16,
                              fwd_bwd, 1, kernel,
                              note="model: forward + backward (2.5x forward FLOPs)"))
    decode = [(64, 4096, 32), (16, 32768, 32)] if not quick else [(2, 128, 2)]
    for batch, ctx, heads in decode:
        per_copy = 2.0 * 2 * batch * heads * ctx * d
        copies = _copies(per_copy, quick)
        qs = [torch.randn(batch, heads, 1, d, device=dev, dtype=dt) for _ in range(copies)]
        ks = [torch.randn(batch, heads, ctx, d, device=dev, dtype=dt) for _ in range(copies)]
        vs = [torch.randn(batch, heads, ctx, d, device=dev, dtype=dt) for _ in range(copies)]

        def dec(i: int, qs: list[Any] = qs, ks: list[Any] = ks, vs: list[Any] = vs) -> object:
            with torch.no_grad():
                return sdpa(qs[i], ks[i], vs[i])

        cases.append(Case("attention_decode", f"decode b{batch} ctx{ctx} h{heads} d{d}",
                          Attention(batch, 1, ctx, heads, heads, d), Precision.BF16, dec,
                          copies, note="torch's SDPA, not a paged decode kernel"))
    return cases


GQA_DECODE_SHAPES = ((32, 4096), (8, 16384))
"""Sequences and cached positions of the grouped-query decode cases (Llama-3.1-70B's
attention at TP 1: 64 query heads over 8 KV heads, head dim 128, a 16-bit cache)."""

GQA_DROPOUT = 0.01
"""Dropout that keeps FlashAttention-2 from packing a group's query heads (its forward swaps
them into the query rows for one query a sequence only without dropout: mha_fwd's
``seqlenq_ngroups_swapped``), so that each query head runs as its own block."""


def gqa_decode_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Decode attention of a grouped-query model through torch's SDPA (FlashAttention-2 on
    CUDA): each KV head's cache read once for all the query heads it serves, the group's
    queries packed as one query of several rows, by hand and by FlashAttention-2 itself
    (``enable_gqa``: for one query a sequence its forward swaps the group into the query
    rows), as GQA-aware decode kernels do (the model's ``shared`` reads); every query head
    its own block over its KV head's cache (``enable_gqa`` with dropout, which turns the swap
    off: the per-query-head reads of a multi-head decode kernel, the repeats from L2); and
    the cache copied to every query head (multi-head attention over eight times the bytes),
    with and without the same dropout, whose difference is what the dropout itself costs.
    Where CUDA runs it, the GQA rows' notes give the memory a call allocated beyond its
    inputs (a copy of the cache would show)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    dt = torch.bfloat16
    heads, kv, d = (64, 8, 128) if not quick else (4, 2, 16)
    group = heads // kv
    backend = SDPBackend.FLASH_ATTENTION if dev == "cuda" else SDPBackend.MATH
    cases = []
    for batch, ctx in GQA_DECODE_SHAPES if not quick else ((2, 128),):
        per_copy = 2.0 * 2 * batch * kv * ctx * d
        copies = _copies(per_copy, quick)
        qs = [torch.randn(batch, heads, 1, d, device=dev, dtype=dt) for _ in range(copies)]
        ks = [torch.randn(batch, kv, ctx, d, device=dev, dtype=dt) for _ in range(copies)]
        vs = [torch.randn(batch, kv, ctx, d, device=dev, dtype=dt) for _ in range(copies)]
        kr = [k.repeat_interleave(group, dim=1) for k in ks[:2]]
        vr = [v.repeat_interleave(group, dim=1) for v in vs[:2]]

        def packed(i: int, qs: list[Any] = qs, ks: list[Any] = ks, vs: list[Any] = vs,
                   shape: tuple[int, ...] = (batch, kv, group, d)) -> object:
            # query head h serves KV head h // group: consecutive heads form a group
            with sdpa_kernel(backend), torch.no_grad():
                return sdpa(qs[i].view(shape), ks[i], vs[i])

        def gqa(dropout: float, qs: list[Any] = qs, ks: list[Any] = ks, vs: list[Any] = vs
                ) -> Callable[[int], object]:
            def run(i: int) -> object:
                with sdpa_kernel(backend), torch.no_grad():
                    return sdpa(qs[i], ks[i], vs[i], dropout_p=dropout, enable_gqa=True)
            return run

        def repeated(dropout: float, qs: list[Any] = qs, kr: list[Any] = kr,
                     vr: list[Any] = vr) -> Callable[[int], object]:
            def run(i: int) -> object:
                with sdpa_kernel(backend), torch.no_grad():
                    return sdpa(qs[i], kr[i], vr[i], dropout_p=dropout)
            return run

        def allocated(fn: Callable[[int], object], cache: float = per_copy * group) -> str:
            if dev != "cuda":
                return "one call's allocations not measured (no CUDA)"
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn(0)
            torch.cuda.synchronize()
            extra = torch.cuda.max_memory_allocated() - before
            return (f"one call allocated {from_si(extra, Unit.MB):.0f} MB beyond its inputs "
                    f"(a copy of the cache: {from_si(cache, Unit.MB):.0f})")

        shape = f"b{batch} ctx{ctx} h{heads}/{kv} d{d}"
        shared = Attention(batch, 1, ctx, heads, kv, d)
        mha = Attention(batch, 1, ctx, heads, heads, d)
        swapped, per_head = gqa(0.0), gqa(GQA_DROPOUT)
        cases += [
            Case("gqa_decode", f"decode {shape} shared (packed by hand)", shared,
                 Precision.BF16, packed, copies,
                 note=f"the group's query heads as one query of {group} rows, unmasked"),
            Case("gqa_decode", f"decode {shape} shared (enable_gqa)", shared, Precision.BF16,
                 swapped, copies, note="FlashAttention-2 packs the group itself for one query "
                 "a sequence; " + allocated(swapped)),
            Case("gqa_decode", f"decode {shape} per query head (enable_gqa, dropout)",
                 dataclasses.replace(shared, kv_head_reads=group), Precision.BF16, per_head,
                 copies, note=f"dropout {GQA_DROPOUT} keeps the group unpacked: a block per "
                 "query head; " + allocated(per_head)),
            Case("gqa_decode", f"decode {shape} cache repeated", mha, Precision.BF16,
                 repeated(0.0), len(kr),
                 note=f"multi-head attention over the cache copied to each of {heads} heads"),
            Case("gqa_decode", f"decode {shape} cache repeated, dropout", mha,
                 Precision.BF16, repeated(GQA_DROPOUT), len(kr),
                 note="the same with the dropout: the difference is the dropout's cost"),
        ]
    return cases


CP_RING_STEPS: tuple[tuple[str, int, int, bool], ...] = (
    ("diagonal", 2048, 2048, True), ("half keys", 2048, 1024, False),
    ("half queries", 1024, 2048, False))
"""One context-parallel rank's attention calls in the latency-bound runs (SHARD_SHAPES):
Llama-3.1-8B at TP 4 (8 query heads; its 2 KV heads repeated to 8) and CP 4 with
load-balanced causal chunks, each rank holding 2 of 8 chunks of 1,024 tokens: its own
causal block, then blocks of half the keys or half the queries, unmasked."""


def cp_attention_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """The latency-bound runs' ring-attention steps (CP_RING_STEPS) through cuDNN's fused
    attention (FlashAttention-2 without CUDA), forward and forward + backward, timed by CUDA
    graph replay where capture works; and a small elementwise add (the size of one of these
    runs' activations), to see whether a small memory-bound kernel keeps the model's rate."""
    from torch.nn.attention import SDPBackend

    dt = torch.bfloat16
    backend = SDPBackend.CUDNN_ATTENTION if dev == "cuda" else SDPBackend.MATH
    heads, d = (8, 128) if not quick else (2, 16)
    steps = CP_RING_STEPS if not quick else (("diagonal", 64, 64, True),)
    cases = []
    for label, sq, skv, causal in steps:
        q = torch.randn(1, heads, sq, d, device=dev, dtype=dt, requires_grad=True)
        k, v = (torch.randn(1, heads, skv, d, device=dev, dtype=dt, requires_grad=True)
                for _ in range(2))
        grad = torch.randn(1, heads, sq, d, device=dev, dtype=dt)

        fwd, fwd_bwd = _attention_runs(torch, backend, q, k, v, grad, causal)
        op = Attention(1, sq, skv, heads, heads, d, causal)
        name = f"cp ring {label} q{sq} kv{skv} h{heads} d{d}"
        kernel = "native" if dev == "cuda" else "ampere"
        cases.append(Case("attention_cp_fwd", name, op, Precision.BF16, fwd, 1, kernel,
                          graph=True))
        cases.append(Case("attention_cp_fwd_bwd", name, op, Precision.BF16, fwd_bwd, 1, kernel,
                          note="model: forward + backward (2.5x forward FLOPs)", graph=True))
    for rows, cols in ((2048, 4096), (2048, 1024)) if not quick else ((8, 16),):
        n = rows * cols
        copies = _copies(3 * 2.0 * n, quick)
        a, b, c = ([torch.randn(n, device=dev, dtype=dt) for _ in range(copies)]
                   for _ in range(3))

        def add(i: int, a: list[Any] = a, b: list[Any] = b, c: list[Any] = c) -> object:
            return torch.add(a[i], b[i], out=c[i])

        cases.append(Case("elementwise_small", f"add 3x{rows}x{cols} bf16",
                          Elementwise(3 * 2.0 * n), Precision.BF16, add, copies, graph=True))
    return cases


GRAPH_KERNELS = 100


def launch_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """Measured only: what a kernel costs beyond its work. Eager: back-to-back adds on
    one-element tensors, so the GPU waits on the host and the time per call is the host's
    to launch one kernel through torch (the training model's host floor on an expert
    section, ``moe_expert_launch_s``, is fitted at 15 us per launch with Transformer
    Engine's Python around it). Graph: GRAPH_KERNELS such adds captured in one CUDA graph
    and replayed, the time per kernel the GPU's own gap between dependent kernels (the
    model's ``kernel_overhead_s``, fitted to zero; about 1 us on the lent H200). And an
    eager FP8 GEMM of 16^3, the host's time to launch one from Python."""
    if dev != "cuda" or quick:
        return []
    a = torch.zeros(1, device=dev)
    b = torch.ones(1, device=dev)

    def eager(i: int) -> object:
        return a.add_(b)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            a.add_(b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_KERNELS):
            a.add_(b)

    def replay(i: int) -> object:
        graph.replay()
        return None

    tiny = Elementwise(3 * 4.0)  # read two one-element FP32 tensors, write one
    x8 = torch.zeros(16, 16, device=dev).to(torch.float8_e4m3fn)
    w8 = torch.zeros(16, 16, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=dev)

    def eager_fp8(i: int) -> object:
        return torch._scaled_mm(x8, w8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    return [Case("launch", "eager add of one element (host launch)", tiny, None, eager, 1,
                 note="host time per kernel launch (moe_expert_launch_s)"),
            Case("launch", "eager 16x16x16 FP8 torch._scaled_mm (host launch)",
                 Gemm(16, 16, 16), None, eager_fp8, 1,
                 note="host time per FP8 GEMM launch"),
            Case("launch_graph", f"{GRAPH_KERNELS} one-element adds in one CUDA graph",
                 Elementwise(tiny.bytes_moved * GRAPH_KERNELS), None, replay, 1,
                 kernels=GRAPH_KERNELS,
                 note="GPU time per kernel in a graph (kernel_overhead_s)")]


def elementwise_cases(torch: Any, dev: str, quick: bool) -> list[Case]:
    """c = a + b on BF16 tensors of 1 GiB each (reads two, writes one)."""
    n = int(to_si(1, Unit.GIB) // 2) if not quick else 4096
    a, b, c = (torch.randn(n, device=dev, dtype=torch.bfloat16) for _ in range(3))

    def run(i: int) -> object:
        return torch.add(a, b, out=c)

    return [Case("elementwise", f"add 3x{from_si(2.0 * n, Unit.GIB):.3g} GiB",
                 Elementwise(3 * 2.0 * n), Precision.BF16, run, 1)]


def run_op_check(gpu: str, quick: bool = False) -> dict[str, Any]:
    """Time every operator on this machine's GPU (tiny shapes on the CPU, or with ``quick``)
    and model each on catalog product ``gpu``: a ``gpuarch-op-check`` document, which
    ``gpuarch validate ops --file`` reads. Needs torch."""
    import torch

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    quick = quick or not cuda
    catalog = load_catalog()
    product = catalog.product(gpu)
    measure = _timer(torch, cuda)
    rows: list[dict[str, Any]] = []
    builders = (gemm_cases, shard_cases, fp8_cases, grouped_cases, fp8_grouped_cases,
                serving_grouped_cases, mixed_input_cases, unmodelled_cases, attention_cases,
                gqa_decode_cases, cp_attention_cases, elementwise_cases, launch_cases)
    for build in builders:
        try:
            cases = build(torch, dev, quick)
        except Exception as exc:  # a backend this torch lacks: say so, keep going
            rows.append({"kind": build.__name__, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for case in cases:
            row: dict[str, Any] = {"kind": case.kind, "label": case.label,
                                   "op": op_spec(case.op),
                                   "precision": case.precision.value if case.precision
                                   else None, "attention_kernel": case.attention_kernel,
                                   "forward_backward": case.forward_backward,
                                   "note": case.note}
            try:
                graphed = None
                if case.graph and cuda:
                    try:
                        graphed = _graphed(torch, case.run, case.copies)
                    except Exception as exc:  # capture unsupported here: time it eagerly
                        row["timed_by"] = f"eager calls (graph capture failed: {exc})"[:300]
                if graphed:
                    replay, calls = graphed
                    measured = measure(replay, 1) / calls
                    row["timed_by"] = f"CUDA graph replay of {calls} calls"
                else:
                    measured = measure(case.run, case.copies)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
                rows.append(row)
                continue
            flops = case.op.flops if isinstance(case.op, Gemm) else None
            if isinstance(case.op, Attention):
                flops = case.op.forward_flops * (3.5 if case.forward_backward
                                                 else 1.0)
            row["measured_us"] = from_si(measured, Unit.US)
            if case.kernels > 1:
                row["measured_us_per_kernel"] = from_si(measured / case.kernels, Unit.US)
            modelled = model_time(OpRow(case.kind, case.label, case.op, case.precision,
                                        case.attention_kernel, case.forward_backward,
                                        measured), catalog, product)
            if modelled is not None:
                row.update({"model_us": from_si(modelled, Unit.US),
                            "model_over_measured": modelled / measured})
            if flops:
                row["measured_tflops"] = from_si(flops / measured, Unit.TFLOPS)
            if case.precision and (case.kind.endswith("decode") or case.kind in (
                    "elementwise", "elementwise_small", "serve_grouped", "mixed_input")):
                moved = (case.op.bytes_moved if isinstance(case.op, Elementwise)
                         else case.op.bytes(case.precision.bytes))
                row["measured_tb_s"] = from_si(moved / measured, Unit.TB_S)
            if case.kind == "mixed_input" and isinstance(case.op, Gemm):
                # the rate the model's conversion floor is stated in
                row["measured_weights_per_s"] = case.op.n * case.op.k * case.op.batch \
                    / measured
            rows.append(row)
        if cuda:
            torch.cuda.empty_cache()
    summary = {kind: ratio_summary([r["model_over_measured"] for r in rows
                                    if r["kind"] == kind and "model_over_measured" in r])
               for kind in sorted({r["kind"] for r in rows if "model_over_measured" in r})}
    props = torch.cuda.get_device_properties(0) if cuda else None
    return {"schema": SCHEMA, "version": VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": dev, "gpu": torch.cuda.get_device_name() if cuda else None,
            "sms": props.multi_processor_count if props else None,
            "l2_bytes": getattr(props, "L2_cache_size", None) if props else None,
            "torch": torch.__version__, "catalog_product": product.key, "quick": quick,
            "rows": rows, "summary": summary}
