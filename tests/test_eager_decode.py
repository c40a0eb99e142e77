"""Decode steps run without a captured CUDA graph: vLLM before V1 replays its graphs only
while every sequence is within ``max_seq_len_to_capture`` (8,192 tokens by default) and
runs the step eagerly beyond it, its host launching every kernel; an engine that pads
decode batches to captured sizes runs a larger batch eagerly. Such a step lasts at least the
host's launch time (``Efficiency.eager_decode_host_s_per_layer``, from SGLang pull request
#1401's eager Llama-3-8B step: 8.23 ms over 32 layers)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.validation.inference import compare_point, load_inference_points, point_config
from gpuarch.validation.training import point_shape
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")
LLAMA_8B = preset("llama-3.1-8b").shape
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)
# the host's launches for Llama 3.1 8B's 32 layers
LAUNCH = DEFAULT_EFFICIENCY.eager_decode_host_s_per_layer * 32


def _cfg(input_len: int, output_len: int, cap: int = 0, batch: int = 1,
         batching: Batching = Batching.STATIC, **kw: object) -> InferenceConfig:
    return InferenceConfig(input_len=input_len, output_len=output_len, batch=batch, gpus=1,
                           quant=FP8, batching=batching, cuda_graph_max_context=cap,
                           **kw)  # type: ignore[arg-type]


def _est(cfg: InferenceConfig):  # type: ignore[no-untyped-def]
    return estimate_inference(CATALOG, LLAMA_8B, H100, cfg)


def test_the_parameter_is_sglangs_eager_step_over_its_layers() -> None:
    """SGLang #1401: Llama-3-8B, batch 1, FlashInfer backend, --disable-cuda-graph: a decode
    step of 0.00823 s (median), over the model's 32 layers."""
    assert DEFAULT_EFFICIENCY.eager_decode_host_s_per_layer == pytest.approx(8.23e-3 / 32,
                                                                             rel=2e-3)


def test_a_static_batch_past_the_cap_waits_on_the_host_every_step() -> None:
    """One request of 10,240 + 1,536 tokens with graphs up to 8,192: every decode step runs
    eagerly, so it lasts the longer of the GPU's step and the host's launches (an FP8 8B
    step on an H100 is shorter than the launches)."""
    graphed, eager = _est(_cfg(10240, 1536)), _est(_cfg(10240, 1536, cap=8192))
    assert graphed.tpot_s < LAUNCH
    assert eager.tpot_s == pytest.approx(max(graphed.tpot_s, LAUNCH), rel=1e-12)
    assert eager.ttft_s == graphed.ttft_s  # a prompt's pass is not a graphed decode step
    assert eager.decode_step_parts_s["eager_launch"] == pytest.approx(
        LAUNCH - graphed.tpot_s, rel=1e-9)
    assert eager.bottleneck["decode"] == "host"
    assert "without a CUDA graph" in eager.bottleneck_reason["decode"]


def test_a_static_batch_crossing_the_cap_is_eager_for_the_steps_past_it() -> None:
    """8,000 prompt tokens and 1,000 answer tokens: the step making token j + 1 runs over
    8,000 + j tokens, beyond 8,192 for j = 193..999, 807 of the 999 decode steps."""
    graphed, eager = _est(_cfg(8000, 1000)), _est(_cfg(8000, 1000, cap=8192))
    share = 807 / 999
    assert eager.tpot_s == pytest.approx(
        graphed.tpot_s + share * (LAUNCH - graphed.tpot_s), rel=1e-9)


def test_a_cap_the_run_never_reaches_changes_nothing() -> None:
    """8,000 + 193 tokens: the last step runs over 8,192 tokens, which a graph still
    covers."""
    assert _est(_cfg(8000, 193, cap=8192)).tpot_s == _est(_cfg(8000, 193)).tpot_s
    assert _est(_cfg(8000, 194, cap=8192)).tpot_s > _est(_cfg(8000, 194)).tpot_s


def test_a_continuous_batch_is_eager_when_any_sequence_is_past_the_cap() -> None:
    """Four sequences in flight, each past 8,192 for 808 of its 1,000 steps: a step is
    graphed only when all four are within it, 0.192^4 of the steps."""
    cfg = _cfg(8000, 1000, cap=8192, batch=4, batching=Batching.CONTINUOUS)
    parts = _est(cfg).decode_step_parts_s
    graphed = _est(dataclasses.replace(cfg, cuda_graph_max_context=0)).decode_step_parts_s
    step = sum(graphed.values())
    assert parts["eager_launch"] == pytest.approx((1 - 0.192 ** 4) * (LAUNCH - step),
                                                  rel=1e-9)


def test_a_batch_beyond_the_largest_captured_size_runs_eagerly() -> None:
    """Graphs captured at 1, 2 and 4 sequences: a step of 8 runs eagerly whatever the
    context; one of 4 is replayed."""
    sizes = (1, 2, 4)
    eager = _est(_cfg(128, 128, batch=8, cuda_graph_batch_sizes=sizes))
    plain = _est(_cfg(128, 128, batch=8))
    assert eager.tpot_s == pytest.approx(max(plain.tpot_s, LAUNCH), rel=1e-12)
    assert _est(_cfg(128, 128, batch=4, cuda_graph_batch_sizes=sizes)).tpot_s \
        == _est(_cfg(128, 128, batch=4)).tpot_s


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20000), st.integers(2, 4000), st.integers(1, 32768),
       st.integers(1, 64), st.sampled_from(list(Batching)))
def test_eager_steps_never_shorten_decode_and_a_lower_cap_never_helps(
        input_len: int, output_len: int, cap: int, batch: int, batching: Batching) -> None:
    """The decode step. (A continuous batch's TPOT is not monotone in it: a longer step
    gathers more prompts into each prefill pass, and fewer, larger passes can shorten the
    cycle; a static batch's TPOT is its step.)"""
    def step(c: int) -> float:
        e = _est(_cfg(input_len, output_len, cap=c, batch=batch, batching=batching))
        if batching is Batching.STATIC:
            assert e.tpot_s == pytest.approx(sum(e.decode_step_parts_s.values()), rel=1e-9)
        return sum(e.decode_step_parts_s.values())

    none, some, lower = step(0), step(cap), step(max(1, cap // 2))
    assert some >= none * (1 - 1e-12)
    assert lower >= some * (1 - 1e-12)


def test_the_cli_takes_the_cap_and_refuses_a_bad_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100",
            "--input-len", "10240", "--output-len", "1536", "--batch", "1",
            "--weight-precision", "fp8", "--activation-precision", "fp8", "--json"]
    assert main(args) == 0
    graphed = json.loads(capsys.readouterr().out)
    assert main([*args, "--cuda-graph-max-context", "8192"]) == 0
    eager = json.loads(capsys.readouterr().out)
    assert eager["tpot_s"] > graphed["tpot_s"]
    assert eager["bottleneck"]["decode"] == "host"
    assert eager["assumptions"]["eager_decode"]["graph_max_context"] == 8192
    assert eager["assumptions"]["eager_decode"]["share_of_steps"] == 1.0
    assert graphed["assumptions"]["eager_decode"] is None
    assert main([*args, "--cuda-graph-max-context", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--cuda-graph-max-context: expected an integer >= 1, got -1" in err
    assert "Traceback" not in err
    with pytest.raises(GpuarchError, match="--cuda-graph-max-context"):
        _cfg(128, 128, cap=-5).validate(LLAMA_8B)


def test_neural_magics_vllm_072_runs_carry_the_default_cap() -> None:
    """The cards' runs are vLLM 0.7.2 (V0 by default), whose max_seq_len_to_capture is 8,192:
    their 10,240-token prompts decode eagerly. Where the model's graphed step is shorter
    than the host's launches (the quantized 8B and 32B checkpoints on one H100) the long
    column comes in: Llama 8B W4A16 -57% -> -12%, Qwen 32B W4A16 -50% -> -17% (signed
    error on the request's latency)."""
    points = {p.id: p for p in load_inference_points() if p.id.startswith("nm-vllm072")}
    assert len(points) == 144  # four cards
    assert all(p.get("cuda_graph_max_context") == 8192 for p in points.values())
    for pid, low, high in (("nm-vllm072-h100x1-r1-distill-llama-8b-w4a16-10240-1536",
                            -0.15, -0.08),
                           ("nm-vllm072-h100x1-r1-distill-qwen-32b-w4a16-10240-1536",
                            -0.20, -0.13)):
        (row,) = compare_point(CATALOG, points[pid], DEFAULT_EFFICIENCY)
        assert low < row.error < high, (pid, row.error)
    # the 4,096/512 column stays within the graphs' reach: no eager step
    short = points["nm-vllm072-h100x1-r1-distill-llama-8b-w4a16-4096-512"]
    cfg = point_config(short, 8, H100)
    assert cfg.cuda_graph_max_context == 8192
    assert _est_of(short, cfg).tpot_s == _est_of(
        short, dataclasses.replace(cfg, cuda_graph_max_context=0)).tpot_s


def _est_of(point, cfg: InferenceConfig):  # type: ignore[no-untyped-def]
    return estimate_inference(CATALOG, point_shape(point), H100, cfg)


def test_the_advisor_takes_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    """advise infer searches with the same engine setting: its batch-1 option for 10,240 +
    1,536 tokens waits on the host's launches and says so; a bad value is refused."""
    args = ["advise", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "10240", "--output-len", "1536", "--max-gpus", "1", "--json"]

    def batch_one(extra: list[str]) -> dict:  # type: ignore[type-arg]
        assert main([*args, *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        return min((o for o in doc["pareto"] if o["batch"] == 1),
                   key=lambda o: o["tpot_ms"])

    graphed, eager = batch_one([]), batch_one(["--cuda-graph-max-context", "8192"])
    assert eager["tpot_ms"] >= LAUNCH * 1e3 * (1 - 1e-9) > graphed["tpot_ms"]
    assert eager["bottleneck"]["decode"] == "host"
    assert "without a CUDA graph" in eager["reason"]
    assert main([*args, "--cuda-graph-max-context", "-1"]) == 2
    assert "--cuda-graph-max-context: expected an integer >= 1, got -1" \
        in capsys.readouterr().err


def test_a_launch_command_says_the_cap_is_not_its_engines(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The engines --launch writes commands for (vLLM V1, SGLang, TensorRT-LLM) replay graphs
    by batch size at any context, so the command cannot carry the cap: it says so."""
    args = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "10240", "--output-len", "1536", "--batch", "4", "--launch", "sglang", "--json"]
    for extra, expect in (([], False), (["--cuda-graph-max-context", "8192"], True)):
        assert main([*args, *extra]) == 0
        notes = json.loads(capsys.readouterr().out)["launch"]["notes"]
        assert any("without a CUDA graph" in n for n in notes) is expect


def test_the_reported_share_is_that_of_the_micro_batch_the_step_ran() -> None:
    """With two pipeline stages a continuous batch of 8 runs as micro-batches of 4, and the
    eager share the estimate reports is theirs (1 - 0.192^4), as the step charged it, not
    the whole batch's (1 - 0.192^8); the launch floor is one stage's 16 layers."""
    cfg = _cfg(8000, 1000, cap=8192, batch=8, batching=Batching.CONTINUOUS, pp=2)
    cfg = dataclasses.replace(cfg, gpus=2)
    eager = _est(cfg).assumptions["eager_decode"]
    assert eager["share_of_steps"] == pytest.approx(1 - 0.192 ** 4, rel=1e-12)
    assert eager["host_s_per_step"] == pytest.approx(LAUNCH / 2, rel=1e-12)
