"""A serving benchmark's saved result as a measured run: ``estimate infer ... --as-point
--measured FILE`` (validation/bench_results.py, docs/your-measurements.md). The files here
are written in the tools' formats (vLLM's ``vllm bench serve --save-result`` JSON, SGLang's
``bench_serving --output-file`` lines, whose infinite rate is JSON's ``Infinity``); their
figures are made up for the test, not measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.validation.bench_results import read_bench_results
from tests.test_cli import run

REQUESTS = "2000"

VLLM_RATE: dict[str, Any] = {
    "date": "20261201-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
    "num_prompts": 1000, "request_rate": 8.0, "burstiness": 1.0, "max_concurrency": None,
    "duration": 126.1, "completed": 1000, "total_input_tokens": 1024000,
    "total_output_tokens": 255870, "request_throughput": 7.93, "output_throughput": 2029.1,
    "mean_ttft_ms": 48.2, "median_ttft_ms": 44.9, "std_ttft_ms": 12.0, "p99_ttft_ms": 101.5,
    "mean_tpot_ms": 11.8, "median_tpot_ms": 11.7, "std_tpot_ms": 0.9, "p99_tpot_ms": 14.2,
    "mean_itl_ms": 11.8, "median_itl_ms": 11.2, "p99_itl_ms": 30.1, "mean_e2el_ms": 3061.0,
    "median_e2el_ms": 3050.2, "p99_e2el_ms": 3420.7, "p99.9_ttft_ms": 140.0,
}

SGLANG_CONCURRENCY = (
    '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"max_concurrency": 64, "random_input_len": 2048, "random_output_len": 512, '
    '"completed": 640, "total_input_tokens": 1310720, "total_output_tokens": 327680, '
    '"output_throughput": 4096.0, "mean_e2e_latency_ms": 8000.0, '
    '"median_e2e_latency_ms": 7990.0, "p99_e2e_latency_ms": 8200.0, "mean_ttft_ms": 350.0, '
    '"median_ttft_ms": 300.0, "p99_ttft_ms": 900.0, "mean_tpot_ms": 15.0, '
    '"median_tpot_ms": 14.8, "p99_tpot_ms": 18.0, "p95_itl_ms": 20.0}\n')

LLAMA_8B = ("--model", "llama-3.1-8b", "--gpu", "h100")


def _write(tmp_path: Path, content: dict[str, Any] | str, name: str = "result.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def _point(capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...],
           measured: str) -> str:
    status, text, err = run(capsys, "estimate", "infer", *flags, "--as-point", "mine",
                            "--measured", measured)
    assert status == 0 and err == "", err
    path = tmp_path / "runs.toml"
    path.write_text(text)
    return str(path)


def test_a_vllm_run_at_a_rate_becomes_a_load_run(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """A Poisson stream's result is a load run at its rate, every mean, median and 90th or
    99th percentile of TTFT, TPOT and end-to-end latency in seconds (the standard
    deviations, the inter-token latency and the 99.9th percentile have no simulated
    counterpart); replayed, it gives what estimate infer --rate --simulate gives with vLLM's
    engine loop (the point's framework names vLLM, whose loop its replay takes)."""
    data = _point(capsys, tmp_path, (*LLAMA_8B, "--input-len", "1024", "--output-len", "256",
                                     "--schedule", "mixed"), _write(tmp_path, VLLM_RATE))
    text = Path(data).read_text()
    assert 'framework = "vLLM bench serve"' in text and "rate_per_s = 8.0" in text
    assert "ttft_p50_s = 0.0449" in text and "latency_p99_s = 3.4207" in text
    assert "itl" not in text and "std" not in text and "mode" not in text
    status, out, err = run(capsys, "validate", "load", "--data", data, "--requests", REQUESTS,
                           "--json")
    assert status == 0 and err == "", err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {f"{f}_{s}_s" for f in ("ttft", "tpot", "latency")
                         for s in ("mean", "p50", "p99")}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--input-len", "1024",
                         "--output-len", "256", "--schedule", "mixed", "--rate", "8",
                         "--simulate", REQUESTS, "--executor", "vllm", "--json")
    sim = json.loads(out)["simulation"]
    assert rows["tpot_p99_s"]["predicted"] == pytest.approx(sim["tpot_s"]["p99"], rel=1e-5)
    assert rows["latency_p50_s"]["predicted"] == pytest.approx(sim["latency_s"]["p50"],
                                                               rel=1e-5)
    assert rows["ttft_mean_s"]["published"] == pytest.approx(0.0482)


def test_an_sglang_run_at_a_concurrency_becomes_a_serving_point(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Requests held at 64 in flight (rate inf, max_concurrency 64) are a continuous batch
    of 64: the point's throughput and mean TTFT, TPOT and latency, compared as estimate
    infer --batch 64 --batching continuous --executor sglang predicts them."""
    data = _point(capsys, tmp_path, (*LLAMA_8B, "--input-len", "2048", "--output-len", "512"),
                  _write(tmp_path, SGLANG_CONCURRENCY, "sglang.jsonl"))
    text = Path(data).read_text()
    assert 'mode = "serving"' in text and "concurrency = 64" in text
    assert 'framework = "SGLang bench_serving"' in text and "request_latency_s = 8.0" in text
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == "", err
    figures = {f["metric"]: f["predicted"] for f in json.loads(out)["figures"]}
    assert set(figures) == {"output_tokens_per_s", "ttft_s", "tpot_s", "request_latency_s"}
    status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--input-len", "2048",
                         "--output-len", "512", "--batch", "64", "--batching", "continuous",
                         "--executor", "sglang", "--json")
    estimated = json.loads(out)
    for key in ("output_tokens_per_s", "tpot_s", "ttft_s"):
        assert figures[key] == pytest.approx(estimated[key], rel=1e-5)


def test_every_request_at_once_is_an_offline_run_with_the_files_spreads(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Rate inf without a cap is an offline run of the requests that completed, compared on
    its throughput; where the file saved each request's lengths (--save-detailed), the
    answers' spread goes to the point as output_len_cv."""
    lengths = {"input_lens": [1000, 1048] * 500, "output_lens": [128, 384] * 500}
    result = {**VLLM_RATE, "request_rate": "inf", **lengths}
    data = _point(capsys, tmp_path, (*LLAMA_8B, "--input-len", "1024", "--output-len", "256"),
                  _write(tmp_path, result))
    text = Path(data).read_text()
    assert 'mode = "max-throughput"' in text and "num_requests = 1000" in text
    assert "output_len_cv = 0.5" in text and "ttft" not in text
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == "", err
    (figure,) = json.loads(out)["figures"]
    assert figure["metric"] == "output_tokens_per_s" and figure["published"] == 2029.1
    # at a rate, the prompts' spread is a load run's input_len_cv
    (bench,) = read_bench_results(Path(_write(tmp_path, {**VLLM_RATE, **lengths})))
    assert bench.input_len_cv == pytest.approx(24 / 1024)
    assert bench.output_len_cv == pytest.approx(0.5)


def test_a_one_token_answers_tpot_of_zero_is_left_out(tmp_path: Path) -> None:
    result = {**VLLM_RATE, "total_output_tokens": 1000, "mean_tpot_ms": 0.0,
              "median_tpot_ms": 0.0, "p99_tpot_ms": 0.0}
    (bench,) = read_bench_results(Path(_write(tmp_path, result)))
    figures = bench.figures()
    assert "ttft_mean_s" in figures and not any(k.startswith("tpot") for k in figures)


@pytest.mark.parametrize(("content", "flags", "message"), [
    (SGLANG_CONCURRENCY + SGLANG_CONCURRENCY.replace('"max_concurrency": 64',
                                                     '"max_concurrency": null'),
     (), "the runs mix result.json line 1 with 64 requests in flight, result.json line 2 all "
     "640 requests at once"),
    (SGLANG_CONCURRENCY * 2, ("--batching", "continuous"), "--batching: with 2 measured runs "
     "each keeps its own rate, concurrency or request count; leave it out"),
    (SGLANG_CONCURRENCY, ("--input-len", "1024"), "--input-len 1024: the requests of "
     "result.json averaged 2,048.0 tokens; give the run's mean (SGLang's random dataset"),
    (SGLANG_CONCURRENCY, ("--batch", "32"), "sent its requests with 64 requests in flight; "
     "give --batch 64 --batching continuous"),
    (SGLANG_CONCURRENCY, ("--rate", "3"), "give --batch 64 --batching continuous"),
    ({**VLLM_RATE, "burstiness": 0.5}, (), "burstiness = 0.5: the simulation sends a Poisson "
     "stream"),
    ({**VLLM_RATE, "max_concurrency": 16}, (), "request_rate 8/s with max_concurrency 16: a "
     "stream capped in flight is not simulated"),
    ({**VLLM_RATE, "request_rate": "trace"}, (), "request_rate = 'trace': expected requests "
     "per second"),
    ({k: v for k, v in VLLM_RATE.items() if k != "completed"}, (), "completed = None"),
    ({k: v for k, v in VLLM_RATE.items() if k != "output_throughput"}, (),
     "no 'output_throughput'"),
    ({**VLLM_RATE, "p99_ttft_ms": -3}, (), "p99_ttft_ms = -3: expected a number above zero"),
    ({**VLLM_RATE, "input_lens": ["x"]}, (), "input_lens: expected a list of token counts"),
    ("{not json", (), "line 1 is not JSON"),
    (SGLANG_CONCURRENCY.replace('{"backend"', '{"server_info": {"tp_size": 0}, "backend"'), (),
     "result.json: server_info.tp_size = 0: expected a whole number >= 1"),
])
def test_a_result_that_is_not_one_run_the_model_can_compare_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, content: Any,
        flags: tuple[str, ...], message: str) -> None:
    """Each refusal is a usage error naming the file and what is wrong, nothing on stdout."""
    base = ["--input-len", "2048" if isinstance(content, str) and "sglang" in content
            else "1024", "--output-len", "512" if isinstance(content, str) else "256"]
    if "--input-len" in flags:
        base = base[2:]
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, *base, *flags,
                           "--as-point", "--measured", _write(tmp_path, content))
    assert status == 2 and out == "" and message in err, err


def test_measured_needs_a_point(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--input-len", "1024",
                           "--output-len", "256", "--rate", "8", "--measured",
                           _write(tmp_path, VLLM_RATE))
    assert status == 2 and out == ""
    assert "--measured: fills the figures of a point; give --as-point" in err


def test_a_sweep_gives_a_point_a_run(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    """SGLang's file of three concurrencies is three serving points named by their
    concurrency, each compared as the estimate at its own batch; two vLLM files at two
    rates are two load runs; two runs sent alike are numbered."""
    lines = "".join(SGLANG_CONCURRENCY.replace('"max_concurrency": 64',
                                               f'"max_concurrency": {n}') for n in (16, 32, 64))
    data = _point(capsys, tmp_path, (*LLAMA_8B, "--input-len", "2048", "--output-len", "512"),
                  _write(tmp_path, lines, "sweep.jsonl"))
    text = Path(data).read_text()
    assert [line for line in text.splitlines() if line.startswith("id = ")] == [
        'id = "mine-c16"', 'id = "mine-c32"', 'id = "mine-c64"']
    assert 'where = "sweep.jsonl line 2"' in text and "concurrency = 32" in text
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == "", err
    rates = {f["id"]: f["predicted"] for f in json.loads(out)["figures"]
             if f["metric"] == "output_tokens_per_s"}
    for n in (16, 32, 64):
        status, out, _ = run(capsys, "estimate", "infer", *LLAMA_8B, "--input-len", "2048",
                             "--output-len", "512", "--batch", str(n), "--batching",
                             "continuous", "--executor", "sglang", "--json")
        assert rates[f"mine-c{n}"] == pytest.approx(json.loads(out)["output_tokens_per_s"],
                                                     rel=1e-5)
    files = [_write(tmp_path, {**VLLM_RATE, "request_rate": r}, f"rate{r}.json")
             for r in (4.0, 8.0, 8.0)]
    status, text, err = run(capsys, "estimate", "infer", *LLAMA_8B, "--input-len", "1024",
                            "--output-len", "256", "--as-point", "mine", "--measured", *files)
    assert status == 0 and err == "", err
    assert [line for line in text.splitlines() if line.startswith(("id = ", "rate_per_s"))] == [
        'id = "mine-r4"', "rate_per_s = 4.0", 'id = "mine-r8-1"', "rate_per_s = 8.0",
        'id = "mine-r8-2"', "rate_per_s = 8.0"]
    data = tmp_path / "load.toml"
    data.write_text(text)
    status, out, err = run(capsys, "validate", "load", "--data", str(data), "--requests",
                           REQUESTS, "--json")
    assert status == 0 and err == "" and json.loads(out)["runs"] == 3


def test_sglangs_saved_server_settings_are_held_to_the_flags(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """SGLang saves its server's arguments with each run (server_info): a server that mixed
    prefill into the decode batch (--enable-mixed-chunk) or kept an FP8 KV cache is refused
    against flags that say otherwise, naming the flag to give."""
    server = ('"server_info": {"tp_size": 1, "enable_mixed_chunk": true, '
              '"kv_cache_dtype": "fp8_e4m3"}, ')
    data = _write(tmp_path, SGLANG_CONCURRENCY.replace('{"backend"', "{" + server + '"backend"'))
    flags = [*LLAMA_8B, "--input-len", "2048", "--output-len", "512", "--as-point",
             "--measured", data]
    status, out, err = run(capsys, "estimate", "infer", *flags)
    assert status == 2 and out == ""
    assert "--schedule separate: the server of result.json ran with enable_mixed_chunk " \
           "true; give --schedule mixed" in err
    status, out, err = run(capsys, "estimate", "infer", *flags, "--schedule", "mixed")
    assert status == 2 and "the server of result.json kept its KV cache in fp8_e4m3; give " \
                           "--kv-precision fp8" in err
    status, out, err = run(capsys, "estimate", "infer", *flags, "--schedule", "mixed",
                           "--kv-precision", "fp8")
    assert status == 0 and 'schedule = "mixed"' in out and 'kv_precision = "fp8"' in out
    quiet = SGLANG_CONCURRENCY.replace('{"backend"', '{"server_info": {"enable_mixed_chunk": '
                                       'false}, "backend"')
    status, out, err = run(capsys, "estimate", "infer", *flags[:-1],
                           _write(tmp_path, quiet), "--schedule", "mixed")
    assert status == 2 and "give --schedule separate" in err


def _sglang_with(tmp_path: Path, server: dict[str, Any], name: str = "result.json") -> str:
    """SGLANG_CONCURRENCY's run with ``server`` as its saved server_info."""
    return _write(tmp_path, SGLANG_CONCURRENCY.replace(
        '{"backend"', '{"server_info": ' + json.dumps(server) + ', "backend"'), name)


DENSE = [*LLAMA_8B, "--input-len", "2048", "--output-len", "512", "--as-point"]
MOE = ["--model", "qwen3-30b-a3b", "--gpu", "h100", "--input-len", "2048", "--output-len",
       "512", "--as-point"]


MOE8 = [*MOE, "--gpus", "8"]
ADP = {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "ep_size": 8}


@pytest.mark.parametrize(("flags", "server", "message", "fixed"), [
    # a dense model's tensor parallelism, replicas and pipeline
    (DENSE, {"tp_size": 2}, "--tp 1: the server of result.json ran with tp_size 2; give --tp 2",
     [*DENSE, "--tp", "2"]),
    ([*DENSE, "--tp", "2"], {"tp_size": 2, "dp_size": 2},
     "--gpus 2: the server of result.json ran on 4 GPUs (tp_size 2 x dp_size 2); give --gpus "
     "4 (or a multiple", [*DENSE, "--tp", "2", "--gpus", "4"]),
    (DENSE, {"tp_size": 1, "pp_size": 2}, "--pp 1: the server of result.json ran with "
     "pp_size 2; give --pp 2", [*DENSE, "--pp", "2", "--gpus", "2"]),
    # the engine's batch cap
    (DENSE, {"tp_size": 1, "max_running_requests": 128}, "--max-batch-size: the server of "
     "result.json ran with max_running_requests 128; give --max-batch-size 128",
     [*DENSE, "--max-batch-size", "128"]),
    # the weights' format from the quantization method; speculative decoding
    (DENSE, {"quantization": "fp8"}, "--weight-precision bf16: the server of result.json ran "
     "with quantization fp8; give --weight-precision fp8",
     [*DENSE, "--weight-precision", "fp8"]),
    (DENSE, {"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4},
     "--speculative-tokens: the server of result.json decoded speculatively (EAGLE3, 4 draft "
     "tokens); give --speculative-tokens K",
     [*DENSE, "--speculative-tokens", "3", "--acceptance-length", "2.5"]),
    ([*DENSE, "--speculative-tokens", "3", "--acceptance-length", "2.5"],
     {"speculative_algorithm": None}, "--speculative-tokens 3: the server of result.json "
     "decoded without speculation; leave it out", DENSE),
    # a MoE server: DP attention with expert parallelism, as --launch sglang writes it
    ([*MOE8, "--tp", "8", "--ep", "8"], ADP,
     "--tp 8 --ep 8: the server of result.json ran with tp_size 8, dp_size 8 with DP "
     "attention, ep_size 8; give --tp 1 --ep 8", [*MOE8, "--tp", "1", "--ep", "8"]),
    ([*MOE8, "--tp", "8", "--ep", "8"], {"tp_size": 8, "ep_size": 1},
     "ran with tp_size 8, ep_size 1; give --tp 8 --ep 1", [*MOE8, "--tp", "8"]),
    ([*MOE8, "--ep", "8"], {**ADP, "max_running_requests": 512},
     "max_running_requests 512; give --max-batch-size 512 / 8 DP attention ranks = 64",
     [*MOE8, "--ep", "8", "--max-batch-size", "64"]),
    ([*MOE8, "--ep", "8"], {**ADP, "moe_a2a_backend": "deepep"},
     "moe_a2a_backend deepep; give --moe-kernels sglang-deepep",
     [*MOE8, "--ep", "8", "--moe-kernels", "sglang-deepep"]),
    ([*MOE8, "--ep", "8", "--moe-kernels", "sglang-deepep"],
     {**ADP, "moe_a2a_backend": "deepep", "enable_two_batch_overlap": True},
     "enable_two_batch_overlap true; give --two-batch-overlap",
     [*MOE8, "--ep", "8", "--moe-kernels", "sglang-deepep", "--two-batch-overlap"]),
    ([*MOE8, "--ep", "8"], {**ADP, "ep_num_redundant_experts": 32},
     "ep_num_redundant_experts 32; give --redundant-experts 32",
     [*MOE8, "--ep", "8", "--redundant-experts", "32"]),
])
def test_a_sglang_servers_settings_are_held_to_the_flags(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str],
        server: dict[str, Any], message: str, fixed: list[str]) -> None:
    """Each saved setting the flags contradict is refused naming the flags that price the
    server; given those, the point is written."""
    data = _sglang_with(tmp_path, server)
    status, out, err = run(capsys, "estimate", "infer", *flags, "--measured", data)
    assert status == 2 and out == "" and message in err, err
    status, out, err = run(capsys, "estimate", "infer", *fixed, "--measured", data)
    assert status == 0 and err == "" and "[[point]]" in out, err


def test_a_dp_attention_server_with_tensor_parallel_experts_is_priced_as_expert_parallel(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An older server with DP attention and ep_size 1 (its experts split by TP) is read as
    expert parallelism over its GPUs, the estimate's DP attention: --tp 1 --ep 8 passes."""
    data = _sglang_with(tmp_path, {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
                                   "ep_size": 1})
    status, out, err = run(capsys, "estimate", "infer", *MOE, "--gpus", "8", "--tp", "1",
                           "--ep", "8", "--measured", data)
    assert status == 0 and err == "" and "ep = 8" in out, err
