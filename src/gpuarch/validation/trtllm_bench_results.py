"""TensorRT-LLM's ``trtllm-bench throughput --report_json FILE`` read as a measured run
(``estimate infer ... --as-point --measured FILE``, beside vLLM's, SGLang's and AIPerf's saved
results in ``validation/bench_results.py``).

The report (``ReportUtility.get_statistics_dict`` in tensorrt_llm/bench/dataclasses/
reporting.py) holds the engine (``engine``: backend, quantization, KV-cache format), its
layout and limits (``world_info``: ``tp_size``, ``pp_size``, ``ep_size``, ``max_batch_size``,
``max_num_tokens``, ``issue_rate``), the requests (``request_info``: ``num_requests``, mean
input and output lengths, the mean number in flight), the throughput and request latency
(``performance``, in ms and tokens/s), with ``--streaming`` the TTFT and TPOT
(``streaming_metrics``) and with speculative decoding its acceptance (``decoding_stats``).

It does not keep the ``--concurrency`` a run was given: a run that sent every request at
once (trtllm-bench's default; its measured issue rate is then effectively infinite) is an
offline run of its requests, and a run at a concurrency needs that concurrency as
``--batch N`` (checked against the requests it measured in flight). Neither does it say
whether attention ran data-parallel, so its ``tp_size`` is held to the estimate's GPUs a
stage (max(TP, EP)), as ``--launch trtllm`` writes it.
"""

from __future__ import annotations

from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.perf.quant import QuantFormat
from gpuarch.units import Unit, to_si
from gpuarch.validation.bench_results import BenchResult
from gpuarch.validation.saved_fields import saved_count, saved_figure
from gpuarch.validation.server_settings import TrtllmEngine

__all__ = ["is_trtllm_report", "read_trtllm_report"]

TOOL = "trtllm-bench"

OFFLINE_ISSUE_RATE = 1e6
"""Requests per second above which the report's measured issue rate says every request was
sent at once (trtllm-bench without --concurrency issues them all in microseconds; NVIDIA's
documented reports print rates of 10^14)."""

_WEIGHTS = {"FP8": QuantFormat.FP8, "FP8_PER_CHANNEL_PER_TOKEN": QuantFormat.FP8,
            "FP8_BLOCK_SCALES": QuantFormat.FP8, "NVFP4": QuantFormat.FP4,
            "W4A16_AWQ": QuantFormat.INT4, "W4A16_GPTQ": QuantFormat.INT4,
            "W4A16": QuantFormat.INT4, "W8A16": QuantFormat.INT8,
            "W8A8_SQ_PER_CHANNEL": QuantFormat.INT8}
"""TensorRT-LLM's ``quant_algo`` values whose weight format is one of the estimate's; a
mixed method (W4A8, MIXED_PRECISION) is not held to --weight-precision."""

_KV = {"FP8": QuantFormat.FP8, "NVFP4": QuantFormat.FP4, "INT8": QuantFormat.INT8}

_STATS = {"average": "mean", "p50": "p50", "p90": "p90", "p99": "p99"}


def is_trtllm_report(doc: dict[str, Any]) -> bool:
    """Whether a saved JSON object is trtllm-bench's report (its engine and world or
    request sections, whatever they hold: a malformed one is refused naming the key)."""
    return "engine" in doc and ("world_info" in doc or "request_info" in doc)


def _section(name: str, doc: dict[str, Any], key: str) -> dict[str, Any]:
    section = doc.get(key)
    if not isinstance(section, dict):
        raise GpuarchError(f"--measured: {name}: {key} = {section!r}: expected trtllm-bench's "
                           f"{key} section")
    return section


def _number(name: str, section: dict[str, Any], where: str, key: str,
            required: bool = True) -> float | None:
    value = section.get(key)
    if value is None and not required:
        return None
    if key not in section:
        raise GpuarchError(f"--measured: {name}: no {where}.{key}: expected trtllm-bench "
                           "throughput's --report_json file")
    return saved_figure(name, f"{where}.{key}", value)


def _count(name: str, section: dict[str, Any], where: str, key: str) -> int | None:
    value = section.get(key)
    return None if value is None else saved_count(name, f"{where}.{key}", value)


def _percentiles(name: str, section: dict[str, Any], where: str, key: str, figure: str
                 ) -> dict[str, float]:
    """A percentile block's mean, median, p90 and p99 (in ms) as a point's figures."""
    block = section.get(key)
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise GpuarchError(f"--measured: {name}: {where}.{key} = {block!r}: expected a block "
                           "of percentiles")
    return {f"{figure}_{point}_s": to_si(value, Unit.MS)
            for stat, point in _STATS.items()
            if (value := _number(name, block, f"{where}.{key}", stat, required=False))}


def read_trtllm_report(name: str, doc: dict[str, Any], concurrency: int | None
                       ) -> BenchResult:
    """One trtllm-bench run (``name`` for messages and the point) and its engine. A run
    that did not send every request at once is a run at ``concurrency`` (the ``--batch``
    given: the report does not keep it), refused without one or with one below what the
    run measured in flight."""
    engine, world, requests, perf = (_section(name, doc, key) for key in (
        "engine", "world_info", "request_info", "performance"))
    completed = _count(name, requests, "request_info", "num_requests")
    if completed is None:
        raise GpuarchError(f"--measured: {name}: no request_info.num_requests: expected "
                           "trtllm-bench throughput's --report_json file")
    issue_rate = _number(name, world, "world_info", "issue_rate", required=False)
    in_flight = _number(name, requests, "request_info", "avg_num_concurrent_requests",
                        required=False)
    offline = issue_rate is None or issue_rate > OFFLINE_ISSUE_RATE
    if offline:
        concurrency = None
    elif concurrency is None:
        measured = f" (it measured {in_flight:,.1f} in flight on average)" if in_flight else ""
        raise GpuarchError(f"--batch: {name} was sent at a concurrency, which trtllm-bench's "
                           f"report does not keep{measured}; give --batch N --batching "
                           "continuous, N the --concurrency the run was given (one such "
                           "report a command)")
    elif in_flight is not None and in_flight > concurrency * 1.001:
        raise GpuarchError(f"--batch {concurrency}: {name} measured {in_flight:,.1f} requests "
                           "in flight on average, more than that; give the --concurrency the "
                           "run was given")
    latencies: dict[str, float] = {}
    streaming = doc.get("streaming_metrics")
    if streaming is not None:
        if not isinstance(streaming, dict):
            raise GpuarchError(f"--measured: {name}: streaming_metrics = {streaming!r}: "
                               "expected a section")
        for key, figure in (("ttft", "ttft"), ("tpot", "tpot")):
            latencies |= _percentiles(name, streaming, "streaming_metrics",
                                      f"{key}_percentiles", figure)
            mean = _number(name, streaming, "streaming_metrics", f"avg_{key}_ms",
                           required=False)
            if mean is not None:
                latencies[f"{figure}_mean_s"] = to_si(mean, Unit.MS)
    latencies |= _percentiles(name, perf, "performance", "request_latency_percentiles_ms",
                              "latency")
    mean_latency = _number(name, perf, "performance", "avg_request_latency_ms", required=False)
    if mean_latency is not None:
        latencies["latency_mean_s"] = to_si(mean_latency, Unit.MS)
    return BenchResult(
        tool=TOOL, where=name, rate_per_s=None, max_concurrency=concurrency,
        completed=completed,
        input_len=float(_number(name, requests, "request_info", "avg_input_length") or 0),
        output_len=float(_number(name, requests, "request_info", "avg_output_length") or 0),
        input_len_cv=None, output_len_cv=None,
        output_tokens_per_s=float(_number(name, perf, "performance",
                                          "system_output_throughput_tok_s") or 0),
        latencies=latencies, engine=_engine(name, engine, world, doc.get("decoding_stats")))


def _engine(name: str, engine: dict[str, Any], world: dict[str, Any], decoding: Any
            ) -> TrtllmEngine:
    sizes = [_count(name, world, "world_info", key) or 1
             for key in ("tp_size", "pp_size", "ep_size")]
    speculative = None
    if isinstance(decoding, dict):
        drafts = decoding.get("num_draft_tokens_percentiles")
        accepted = decoding.get("acceptance_length_percentiles")
        if isinstance(drafts, dict) and isinstance(accepted, dict):
            speculative = (
                _number(name, drafts, "decoding_stats.num_draft_tokens_percentiles",
                        "average") or 0.0,
                _number(name, accepted, "decoding_stats.acceptance_length_percentiles",
                        "average") or 0.0)
    quant, kv = engine.get("quantization"), engine.get("kv_cache_dtype")
    # no quant_algo (saved as null): a 16-bit engine
    unquantized = "quantization" in engine and quant is None
    return TrtllmEngine(
        backend=str(engine.get("backend", "")),
        weights=QuantFormat.BF16 if unquantized else
        _WEIGHTS.get(quant) if isinstance(quant, str) else None,
        kv=_KV.get(kv) if isinstance(kv, str) else None,
        tp_size=sizes[0], pp_size=sizes[1], ep_size=sizes[2],
        max_batch_size=_count(name, world, "world_info", "max_batch_size"),
        max_num_tokens=_count(name, world, "world_info", "max_num_tokens"),
        speculative=speculative)
