"""trtllm-bench's ``--report_json`` as a measured run: ``estimate infer ... --as-point
--measured FILE`` (validation/trtllm_bench_results.py, validation/server_settings.py,
docs/your-measurements.md). The reports are written in the layout of TensorRT-LLM's
ReportUtility.get_statistics_dict (engine, world_info, request_info, performance,
streaming_metrics, decoding_stats); their figures are made up for the test, not
measurements."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.validation.bench_results import read_bench_results
from tests.test_aiperf_results import _with
from tests.test_cli import run

LLAMA_8B = ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
            "--output-len", "256", "--weight-precision", "fp8", "--kv-precision", "fp8",
            "--max-batch-size", "512", "--max-num-tokens", "2048", "--as-point", "mine"]


def _percentiles(avg: float) -> dict[str, float]:
    return {"p50": avg * 0.97, "p90": avg * 1.2, "p95": avg * 1.3, "p99": avg * 1.5,
            "minimum": avg * 0.5, "maximum": avg * 2.0, "average": avg}


OFFLINE: dict[str, Any] = {
    "engine": {"model": "meta-llama/Llama-3.1-8B-Instruct", "model_path": None,
               "engine_dir": None, "version": "1.2.0", "backend": "Pytorch",
               "dtype": "bfloat16", "kv_cache_dtype": "FP8", "quantization": "FP8"},
    "machine": None,
    "world_info": {"tp_size": 1, "pp_size": 1, "ep_size": 1, "world_size": 1,
                   "max_batch_size": 512, "max_num_tokens": 2048,
                   "scheduling_policy": "GUARANTEED_NO_EVICT", "kv_cache_percentage": 0.9,
                   "issue_rate": 5.0689e14},
    "request_info": {"num_requests": 3000, "avg_num_concurrent_requests": 498.2,
                     "avg_input_length": 1024.0, "avg_output_length": 256.0},
    "performance": {"total_latency_ms": 52000.0, "avg_request_latency_ms": 8400.0,
                    "request_throughput_req_s": 57.7, "system_output_throughput_tok_s": 14770.0,
                    "system_total_throughput_tok_s": 73850.0,
                    "output_throughput_per_user_tok_s": 30.5,
                    "output_throughput_per_gpu_tok_s": 14770.0,
                    "request_latency_percentiles_ms": _percentiles(8400.0)},
    "dataset": {"num_requests": 3000, "avg_isl": 1024, "avg_osl": 256},
}

STREAMING_CONCURRENCY = copy.deepcopy(OFFLINE)
STREAMING_CONCURRENCY["world_info"]["issue_rate"] = 11.9
STREAMING_CONCURRENCY["request_info"]["avg_num_concurrent_requests"] = 63.4
STREAMING_CONCURRENCY["performance"] |= {
    "system_output_throughput_tok_s": 3050.0, "avg_request_latency_ms": 5300.0,
    "request_latency_percentiles_ms": _percentiles(5300.0)}
STREAMING_CONCURRENCY["streaming_metrics"] = {
    "token_output_speed_tok_s": 49.0, "avg_ttft_ms": 61.0, "avg_tpot_ms": 20.5,
    "ttft_percentiles": _percentiles(61.0), "tpot_percentiles": _percentiles(20.5),
    "gen_tps_percentiles": _percentiles(49.0)}


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "report.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_run_of_every_request_at_once_is_an_offline_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Without --concurrency trtllm-bench issues every request at once (an issue rate of
    10^14): an offline run of its requests, compared on the output throughput as estimate
    infer --batch max --num-requests 3000 predicts it."""
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured",
                           _write(tmp_path, OFFLINE))
    assert status == 0 and err == "", err
    assert 'framework = "trtllm-bench"' in out and 'mode = "max-throughput"' in out
    assert "num_requests = 3000" in out and "output_tokens_per_s = 14770.0" in out
    assert "ttft" not in out
    data = tmp_path / "runs.toml"
    data.write_text(out)
    status, out, err = run(capsys, "validate", "inference", "--data", str(data), "--json")
    assert status == 0 and err == "", err
    (figure,) = json.loads(out)["figures"]
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B[:-2], "--batch", "max",
                         "--batching", "continuous", "--num-requests", "3000", "--json")
    assert figure["predicted"] == pytest.approx(json.loads(out)["output_tokens_per_s"],
                                                rel=1e-5)


def test_a_streaming_run_at_a_concurrency_takes_the_concurrency_given(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The report keeps no --concurrency: a run that was not sent all at once needs it as
    --batch N (at least what it measured in flight), and becomes a serving point with the
    throughput and the mean TTFT, TPOT and request latency (ms to s)."""
    data = _write(tmp_path, STREAMING_CONCURRENCY)
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--measured", data)
    assert status == 2 and out == ""
    assert "--batch: report.json was sent at a concurrency, which trtllm-bench's report does " \
           "not keep (it measured 63.4 in flight on average); give --batch N" in err
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--batch", "32",
                           "--measured", data)
    assert status == 2 and "--batch 32: report.json measured 63.4 requests in flight" in err
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--batch", "64",
                           "--batching", "continuous", "--measured", data)
    assert status == 0 and err == "", err
    assert 'mode = "serving"' in out and "concurrency = 64" in out
    assert "ttft_s = 0.061" in out and "tpot_s = 0.0205" in out
    assert "request_latency_s = 5.3" in out and "output_tokens_per_s = 3050.0" in out


def test_the_percentile_blocks_are_read_in_milliseconds(tmp_path: Path) -> None:
    (bench,) = read_bench_results(Path(_write(tmp_path, STREAMING_CONCURRENCY)), 64)
    assert bench.latencies["ttft_p99_s"] == pytest.approx(0.0915)
    assert bench.latencies["tpot_p50_s"] == pytest.approx(0.019885)
    assert bench.latencies["latency_p90_s"] == pytest.approx(6.36)
    assert "ttft_p95_s" not in bench.latencies


@pytest.mark.parametrize(("doc", "flags", "message"), [
    (_with(OFFLINE, "engine.backend", "TRT"), [],
     "--executor python: report.json ran the TRT backend; give --executor cpp"),
    (OFFLINE, ["--weight-precision", "bf16"],
     "--weight-precision bf16: report.json ran fp8 weights; give --weight-precision fp8"),
    # (a null quant_algo: an unquantized engine)
    ({**OFFLINE, "engine": {**OFFLINE["engine"], "quantization": None}}, [],
     "--weight-precision fp8: report.json ran 16-bit weights; give --weight-precision bf16"),
    (_with(OFFLINE, "engine.kv_cache_dtype", None), [],
     "--kv-precision fp8: report.json kept its KV cache in 16 bits; give --kv-precision bf16"),
    (_with(OFFLINE, "world_info.tp_size", 2), [],
     "--tp 1 --pp 1: report.json ran tp_size 2, pp_size 1, ep_size 1; give --tp 2 --pp 1"),
    (_with(OFFLINE, "world_info.max_batch_size", 256), [],
     "--max-batch-size: report.json's engine ran with max_batch_size 256; give "
     "--max-batch-size 256"),
    (_with(OFFLINE, "world_info.max_num_tokens", 8192), [],
     "--max-num-tokens: report.json's engine ran with max_num_tokens 8192"),
    (_with(OFFLINE, "decoding_stats", {
        "mode": "eagle3", "num_draft_tokens_percentiles": _percentiles(3.0),
        "acceptance_length_percentiles": _percentiles(2.4)}), [],
     "--speculative-tokens: report.json decoded speculatively (3 draft tokens and an "
     "acceptance length of 2.4 on average); give --speculative-tokens 3 --acceptance-length "
     "2.4"),
    (_with(OFFLINE, "request_info.num_requests", 0),
     [], "request_info.num_requests = 0: expected a whole number >= 1"),
    (_with(OFFLINE, "performance.system_output_throughput_tok_s", None), [],
     "no performance.system_output_throughput_tok_s: expected trtllm-bench throughput's "
     "--report_json file"),
    (_with(OFFLINE, "performance.request_latency_percentiles_ms", 3), [],
     "performance.request_latency_percentiles_ms = 3: expected a block of percentiles"),
    (_with(OFFLINE, "world_info", []), [], "world_info = []: expected trtllm-bench's "
     "world_info section"),
])
def test_a_report_the_flags_contradict_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any],
        flags: list[str], message: str) -> None:
    """The engine's backend, formats, layout, limits and speculative decoding are held to the
    flags (naming what to give), and a malformed report is refused naming the key."""
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, *flags, "--measured",
                           _write(tmp_path, doc))
    assert status == 2 and out == "" and message in err, err
    assert "Traceback" not in err


def test_a_moe_engines_layout_names_attention_data_parallel(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The report does not say whether attention ran data-parallel: tp_size is held to the
    GPUs of a stage, max(TP, EP), so --tp 1 --ep 4 and --tp 4 --ep 4 both describe tp_size 4
    with ep_size 4, and a mismatch names both."""
    doc = _with(_with(OFFLINE, "world_info.tp_size", 4), "world_info.ep_size", 4)
    doc["world_info"]["world_size"] = 4
    moe = ["--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "4", "--input-len", "1024",
           "--output-len", "256", "--weight-precision", "fp8", "--kv-precision", "fp8",
           "--max-batch-size", "512", "--max-num-tokens", "2048", "--as-point"]
    for layout in (["--tp", "1", "--ep", "4"], ["--tp", "4", "--ep", "4"]):
        status, out, err = run(capsys, "estimate", "infer", *moe, *layout, "--measured",
                               _write(tmp_path, doc))
        assert status == 0 and err == "", err
    status, out, err = run(capsys, "estimate", "infer", *moe, "--tp", "4", "--ep", "2",
                           "--measured", _write(tmp_path, doc))
    assert status == 2 and out == "" and "give --tp 4 --pp 1 --ep 4 (or --tp 1 --ep 4 where " \
                                         "attention ran data-parallel)" in err, err
