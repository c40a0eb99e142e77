"""The web app through Flask's test client: every API endpoint, the pages, the refusals,
and a fuzz of the inputs that must never produce a server error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

flask = pytest.importorskip("flask")

from gpuarch.web.app import MAX_REQUEST_BYTES, create_app  # noqa: E402

APP = create_app()


@pytest.fixture()
def client() -> Any:
    return APP.test_client()


@pytest.mark.parametrize(("url", "key"), [
    ("/api", "endpoints"),
    ("/api/gpus?arch=hopper&sort=bandwidth", "products"),
    ("/api/gpus/h100", "product"),
    ("/api/compare?gpus=a100,h100", "rows"),
    ("/api/systems", "systems"),
    ("/api/models", "models"),
    ("/api/models?name=gpt-oss-120b", "models"),
    ("/api/features", "features"),
    ("/api/evolution?metric=fp16,bandwidth", "rows"),
    ("/api/roofline?gpu=h100&op=gemm:4096,4096,4096", "ops"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096&global_batch=64",
     "step_time_s"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=8",
     "ttft_s"),
    ("/api/estimate/infer?model=gpt-oss-120b&gpu=h100&input_len=512&output_len=64&batch=8"
     "&weight_precision=bf16&expert_weight_precision=mxfp4", "ttft_s"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&rate=4",
     "ttft_s"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&rate=4"
     "&simulate=200", "simulation"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=max"
     "&prefill_gpus=2", "disaggregated"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=max"
     "&batching=continuous&weight_precision=fp8&engine_limits=trtllm-bench-pytorch",
     "ttft_s"),
    ("/api/estimate/train?model=qwen3-30b-a3b&gpu=h100&gpus=8&ep=8&seq_len=4096"
     "&global_batch=64&recompute=selective&recompute_modules=moe_act,layernorm",
     "step_time_s"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&cp=2&cp_comm_type=a2a"
     "&seq_len=8192&global_batch=8", "step_time_s"),
    ("/api/estimate/train?model=qwen3-30b-a3b&gpu=h100&gpus=8&ep=8&seq_len=4096"
     "&global_batch=64&offload_modules=expert_fc1,moe_act", "step_time_s"),
    ("/api/advise/train?gpu=h100&max_gpus=16&tokens=1e10", "top"),
    ("/api/advise/infer?gpu=h100,l40s&rate=2&tpot_ms=60", "pareto"),
    ("/api/advise/infer?gpu=h100&rate=2&max_gpus=8&disaggregated=true", "pareto"),
    ("/api/advise/infer?gpu=h100&rate=2&max_gpus=8&top=2&simulate=200", "simulated"),
    ("/api/validate/training?match=a100&worst=5", "points"),
    ("/api/validate/inference?match=h200&match=fp8", "figures"),
    ("/api/validate/bands", "serving/fine-moe/hopper"),
    ("/api/validate/ops?kind=gemm", "by_kind"),
    ("/api/validate/moe-kernels", "groups"),
    ("/api/validate/moe-kernels?moe_kernels=vllm", "groups"),
    ("/api/estimate/infer?model=qwen3-30b-a3b&gpu=b200&input_len=512&output_len=64&batch=8"
     "&moe_kernels=sglang", "ttft_s"),
    ("/api/estimate/infer?model=qwen3-30b-a3b&gpu=h100&input_len=512&output_len=64&batch=8"
     "&weight_precision=fp8&fp8_scaling=block", "ttft_s"),
    ("/api/estimate/infer?model=mixtral-8x7b&gpu=h100&gpus=2&tp=2&input_len=512"
     "&output_len=64&batch=8&moe_gemm_kernel=ampere", "ttft_s"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64"
     "&batch=1,8,max&batching=continuous", "frontier_batches"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=8"
     "&launch=sglang", "launch"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096&global_batch=16"
     "&launch=megatron", "launch"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096&global_batch=16"
     "&lora_rank=16&lora_modules=linear_qkv&packed_doc_len=512&precision=fp8"
     "&fp8_attention=true", "compute_breakdown_s"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=b200&gpus=8&seq_len=8192&global_batch=16"
     "&precision=fp8&fp8_recipe=mxfp8&fp8_attention=true&fp8_attention_scaling=mxfp8",
     "compute_breakdown_s"),
    ("/api/validate/gemm-kernels", "groups"),
    ("/api/validate/gemm-ridge", "groups"),
    ("/api/validate/load", "summary"),
    ("/api/validate/load?prompts=mean", "prompts"),
    ("/api/validate/attention-kernels", "groups"),
    ("/api/validate/gdn-kernels", "groups"),
    ("/api/validate/collectives", "groups"),
    ("/api/validate/power", "runs"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096&global_batch=16"
     "&tokens=1e9&node_overhead=0.2&pue=1.1", "total"),
    ("/api/validate/power?match=b200", "mean_abs_error"),
])
def test_every_endpoint_answers_with_the_cli_json(client: Any, url: str, key: str) -> None:
    response = client.get(url)
    assert response.status_code == 200, response.data
    assert key in response.get_json()


def test_the_training_forms_take_the_offloaded_modules(client: Any) -> None:
    response = client.get("/api/estimate/train?model=qwen3-30b-a3b&gpu=h100&gpus=8&ep=8"
                          "&seq_len=4096&global_batch=64&offload_modules=expert_fc1,moe_act")
    assert response.get_json()["parallelism"]["offload_modules"] == ["expert_fc1", "moe_act"]
    for form in ("/estimate/train", "/advise/train"):
        assert 'name="offload_modules"' in client.get(form).get_data(as_text=True)


def test_the_forms_take_the_engine_and_the_framework(client: Any) -> None:
    """The serving form's engine and the training form's framework reach the band."""
    response = client.get("/api/estimate/infer?model=llama-3.1-8b&gpu=b200&input_len=2048"
                          "&output_len=256&batch=64&engine=trtllm")
    assert response.status_code == 200, response.data
    assert response.get_json()["validation"]["engine"] == "trtllm"
    response = client.get("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8"
                          "&seq_len=4096&global_batch=64&framework=fsdp&zero=3")
    assert response.status_code == 200, response.data
    assert response.get_json()["validation"]["engine"] == "fsdp"


def test_the_simulation_form_takes_the_length_spreads(client: Any) -> None:
    """The serving form's length spreads and objectives reach --simulate."""
    response = client.get("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512"
                          "&output_len=64&rate=4&simulate=200&input_len_cv=0.5"
                          "&output_len_cv=0.5&slo_ttft_ms=300&slo_tpot_ms=20")
    assert response.status_code == 200, response.data
    doc = response.get_json()
    assert doc["simulation"]["prompts"]["drawn_from"] == "gamma"
    assert doc["assumptions"]["output_len_cv"] == 0.5
    assert doc["simulation"]["slo"]["tpot_s"] == 0.02


def test_api_matches_the_command_line(client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Same keys and values as ``gpuarch ... --json`` (the API runs the CLI)."""
    import json

    from gpuarch.cli.main import main

    main(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
          "512", "--output-len", "64", "--batch", "8", "--json"])
    cli = json.loads(capsys.readouterr().out)
    api = client.post("/api/estimate/infer", json={
        "model": "llama-3.1-8b", "gpu": "h100", "input_len": 512, "output_len": 64,
        "batch": 8}).get_json()
    assert api == cli


@pytest.mark.parametrize(("url", "status", "message"), [
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h10&gpus=8&seq_len=4096&global_batch=64",
     400, "did you mean 'h100'"),
    ("/api/estimate/train?plot=/tmp/x.png", 400, "plot: not available over the web"),
    ("/api/estimate/train?model=/etc/passwd", 400, "model: only built-in presets"),
    ("/api/advise/train?max_gpus=5000", 400, "max_gpus: at most 1024"),
    ("/api/gpus?BAD=1", 400, "not a parameter name"),
    ("/api/gpus?sort=speed", 400, "--sort"),
    ("/api/nope", 404, "no endpoint"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096&global_batch=64"
     "&recompute=full&recompute_modules=mlp", 400, "needs --recompute selective"),
    ("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=16&cp=16&cp_comm_type=a2a"
     "&seq_len=8192&global_batch=1&gpus_per_node=16", 400, "KV heads on each tensor-parallel"),
    ("/api/validate/bands?fresh=1", 400, "fresh: not available over the web"),
    ("/api/validate/ops?file=/etc/passwd", 400, "file: not available over the web"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=8"
     "&engine_limits=vllm", 400, "--engine-limits: unknown 'vllm'"),
    ("/api/estimate/infer?model=llama-3.1-8b&gpu=h100&input_len=512&output_len=64&batch=8"
     "&expert_weight_precision=fp8", 400, "--expert-weight-precision: llama-3.1-8b has no "
     "routed experts"),
])
def test_bad_requests_name_the_field(client: Any, url: str, status: int, message: str) -> None:
    response = client.get(url)
    assert response.status_code == status and message in response.get_json()["error"]


def test_request_size_limits(client: Any) -> None:
    big = client.post("/api/gpus", data="x" * (MAX_REQUEST_BYTES + 1),
                      content_type="application/json")
    assert big.status_code == 413
    long_query = client.get("/api/gpus?arch=" + "a" * (MAX_REQUEST_BYTES + 1))
    assert long_query.status_code == 414
    not_object = client.post("/api/gpus", data="[1]", content_type="application/json")
    assert not_object.status_code == 400


def test_pages_render_forms_results_and_the_comparison_chart(client: Any) -> None:
    assert b"<form" in client.get("/estimate/train").data
    page = client.get("/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096"
                      "&global_batch=64").data
    assert b'id="result"' in page and b"step time" in page and b"MFU" in page
    chart = client.get("/compare?gpus=a100+h100+b200").data
    assert b"<svg" in chart and b"<rect" in chart and b"H100 SXM5 80GB" in chart
    error = client.get("/compare?gpus=a100+h1000")
    assert error.status_code == 400 and b"did you mean" in error.data
    assert client.get("/").status_code == 200 and client.get("/gpus").status_code == 200
    one = client.get("/gpu?name=h100").data
    assert b"H100 SXM5 80GB" in one and b"[hopper-whitepaper]" in one
    evolution = client.get("/evolution").data
    assert b"<svg" in evolution and b"Hopper" in evolution
    bands = client.get("/validate/bands").data
    assert b"serving/fine-moe/hopper" in bands and b"median" in bands
    ops = client.get("/validate/ops").data
    assert b"NVIDIA H200" in ops and b"grouped_gemm" in ops
    short_k = client.get("/validate/gemm-kernels").data
    assert b"aiconfigurator" in short_k and b"Unscaled K" in short_k
    ridge = client.get("/validate/gemm-ridge").data
    assert b"aiconfigurator" in ridge and b"Ridge, max" in ridge
    attention = client.get("/validate/attention-kernels").data
    assert b"Head dim 64 over 128" in attention and b"gb300" in attention
    # the headline validations: the table and the errors' strip per GPU, over what the
    # match keeps; a match nothing has draws no chart and says so
    training = client.get("/validate/training?match=a100-sxm4-40gb").data
    assert b'id="result"' in training and b"<svg" in training and b"within 20%" in training
    assert b"a100-sxm4-40gb" in training and b"h100-sxm5-80gb" not in training
    missing = client.get("/validate/inference?match=h1000")
    assert b"<svg" not in missing.data and b"no compared point" in missing.data


_FAST = ["gpus", "compare", "systems", "features", "evolution", "roofline", "estimate/train",
         "estimate/infer"]
_KEYS = ["model", "gpu", "gpus", "tp", "pp", "cp", "ep", "seq_len", "global_batch", "batch",
         "input_len", "output_len", "precision", "arch", "tier", "sort", "op", "metric",
         "weight_precision", "kv_precision", "activation_precision", "max_batch_size",
         "executor",
         "batching", "zero", "recompute", "name", "x-y", "plot", ""]
_VALUES = st.one_of(st.integers(-5, 10**7), st.floats(allow_nan=True), st.booleans(),
                    st.text(max_size=30), st.sampled_from(["h100", "llama-3.1-8b", "bf16",
                                                            "max", "gemm:1,2,3", "fp8"]))


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(_FAST),
       params=st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6))
def test_fuzzed_inputs_never_cause_a_server_error(client: Any, endpoint: str,
                                                  params: dict[str, Any]) -> None:
    """Whatever arrives, the answer is 2xx or a 4xx with an error message, never a 5xx."""
    response = client.post(f"/api/{endpoint}", json=params)
    assert response.status_code < 500, (endpoint, params, response.data[:300])
    if response.status_code >= 400:
        assert response.get_json()["error"]


def test_no_option_that_reads_or_writes_a_file_is_open_to_the_web() -> None:
    """Every command-line option whose value is a path (argparse type Path) is refused as
    a web parameter, so a request cannot make the server read or write a file of its
    choosing; a new file option must join the list (validate's --data did not)."""
    import argparse
    from pathlib import Path

    from gpuarch.cli.main import build_parser
    from gpuarch.web.app import _FORBIDDEN

    def walk(parser: argparse.ArgumentParser) -> set[str]:
        found = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found |= walk(sub)
            elif action.type is Path:
                found |= {opt.lstrip("-").replace("-", "_") for opt in action.option_strings}
        return found

    # an output switch the app cannot answer in JSON is refused by name as well
    client = create_app().test_client()
    answer = client.get("/api/estimate/train?model=llama-3.1-8b&gpu=h100&gpus=8&seq_len=4096"
                        "&global_batch=64&as_point=x")
    assert answer.status_code == 400
    assert answer.get_json()["error"] == "as_point: not available over the web"
    paths = walk(build_parser())
    assert {"data", "file", "calibration", "prices", "out", "plot"} <= paths
    assert paths <= _FORBIDDEN, sorted(paths - _FORBIDDEN)
