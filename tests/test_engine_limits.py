"""trtllm-bench's own choice of max_batch_size and max_num_tokens (gpuarch.estimate.
engine_limits): golden values worked by hand from its heuristic (TensorRT-LLM,
tensorrt_llm/bench/build/tuning.py calc_engine_setting and finetune_setting;
tensorrt_llm/bench/benchmark/utils/general.py get_settings), its rounding as properties,
and how the validation's points take the limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.engine_limits import EngineLimits, round_limits, trtllm_bench_limits
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.validation.inference import point_config
from gpuarch.validation.training import TrainingPoint
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
BF16 = QuantScheme()


@pytest.mark.parametrize(
    ("requests", "isl", "osl", "pp", "expected"),
    [
        # 965 requests: a batch of 128 x ceil(965 / 128) = 1,024; 965 x (1 + 128/2048) =
        # 1,025 tokens, below 4,096, so the 2,048 floor
        (965, 128, 2048, 1, (1024, 2048)),
        # 300: 128 x 3 = 384; 600 tokens -> 2,048
        (300, 1000, 1000, 1, (384, 2048)),
        # 2,000: 256 x 8 = 2,048; 4,000 tokens -> 256 x 16 = 4,096
        (2000, 1000, 1000, 1, (2048, 4096)),
        # 3,000: 256 x 12 = 3,072; 6,000 tokens -> 512 x 12 = 6,144
        (3000, 1000, 1000, 1, (3072, 6144)),
        # 3,000 at 2048/128: 3,000 x 17 = 51,000 tokens, capped at 32,768
        (3000, 2048, 128, 1, (3072, 32768)),
        # 100 over two stages: 50 a stage, the floor of 64; 50 x 11 = 550 tokens -> 2,048
        (100, 5000, 500, 2, (64, 2048)),
        # more than 4,096 requests are capped: 4,096 and 8,192 tokens (1,024 x 8)
        (10_000, 128, 128, 1, (4096, 8192)),
    ],
)
def test_rounding_matches_the_heuristic(requests: float, isl: int, osl: int, pp: int,
                                        expected: tuple[int, int]) -> None:
    assert round_limits(requests, isl, osl, pp) == EngineLimits(*expected)


@given(st.floats(1, 10_000), st.floats(1, 10_000), st.integers(1, 32_768),
       st.integers(1, 32_768), st.sampled_from([1, 2, 4]))
def test_rounding_is_optimistic_and_monotone(a: float, b: float, isl: int, osl: int,
                                             pp: int) -> None:
    """At least 64 sequences and 2,048 tokens, on the heuristic's steps, never below the
    raw figures (up to the caps), and never fewer for more requests."""
    lo, hi = sorted((a, b))
    small, large = round_limits(lo, isl, osl, pp), round_limits(hi, isl, osl, pp)
    for limits, requests in ((small, lo), (large, hi)):
        raw = min(requests, 4096) / pp
        assert limits.max_batch_size >= max(64, raw) and limits.max_batch_size % 32 == 0
        assert limits.max_num_tokens >= max(2048, min(raw * (1 + isl / osl), 32768))
        assert limits.max_num_tokens % 256 == 0
    assert large.max_batch_size >= small.max_batch_size
    assert large.max_num_tokens >= small.max_num_tokens


def test_llama_70b_fp8_on_one_h100() -> None:
    """Llama-3.1-70B FP8 on one 80 GiB H100, 1000/1000, built by trtllm-bench build: the
    weights are 70,553,706,496 x 1 byte = 65.71 GiB, leaving 14.29 GiB, x 0.95 = 13.58 GiB
    of KV cache at 2 x 80 layers x 8 KV heads x 128 x 1 byte = 160 KiB a token, 0.305 GiB a
    request of 2,000 tokens: 44.5 requests, so a batch of 64 (the floor) and 2,048 tokens
    (the floor over 89). The PyTorch path (0.90) lands on the same, its raise to the prompt
    plus a token per sequence (1,064) being below 2,048."""
    shape = preset("llama-3.1-70b").shape
    for path in ("build", "pytorch"):
        assert trtllm_bench_limits(shape, FP8, 1, 1, 1000, 1000, H100.memory_bytes,
                                   path) == EngineLimits(64, 2048)


def test_llama_8b_fp8_on_one_h100_short_requests() -> None:
    """Llama-3.1-8B FP8, 128/128: 8,030,261,248 bytes = 7.48 GiB of weights leave 72.52 GiB,
    x 0.90 = 65.27 GiB at 64 KiB a token x 256 tokens: 4,177 requests, capped at 4,096, so
    a batch of 4,096 and 4,096 x 2 = 8,192 tokens; 128 + 4,096 is less."""
    assert trtllm_bench_limits(preset("llama-3.1-8b").shape, FP8, 1, 1, 128, 128,
                               H100.memory_bytes) == EngineLimits(4096, 8192)


def test_pytorch_path_without_chunking_holds_the_prompt_and_a_token_per_sequence() -> None:
    """Without chunked prefill the PyTorch path raises max_num_tokens to the longest prompt
    plus max_batch_size; with chunking (or at build) the heuristic's figure stands."""
    shape = preset("llama-3.1-8b").shape
    plain = trtllm_bench_limits(shape, FP8, 1, 1, 20000, 2000, H100.memory_bytes)
    chunked = trtllm_bench_limits(shape, FP8, 1, 1, 20000, 2000, H100.memory_bytes,
                                  chunked_prefill=True)
    assert plain is not None and chunked is not None
    assert plain.max_num_tokens == 20000 + plain.max_batch_size > chunked.max_num_tokens


def test_a_packed_nvfp4_checkpoint_counts_fewer_elements() -> None:
    """On the PyTorch backend an NVFP4 checkpoint's linear layers count 1/2 + 1/16 of an
    element per weight, so trtllm-bench takes the model for smaller and holds more
    requests than when the engine quantizes at build time (same KV fraction)."""
    from gpuarch.estimate import engine_limits

    shape = preset("llama-3.1-405b").shape
    fp4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)
    b200 = CATALOG.product("b200")
    counts = {path: engine_limits._checkpoint_elements(shape, QuantFormat.FP4, path)
              for path in ("build", "pytorch")}
    assert counts["pytorch"] < 0.6 * counts["build"]
    assert trtllm_bench_limits(shape, fp4, 4, 1, 1000, 1000, b200.memory_bytes, "pytorch") \
        is not None


NVFP4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)


def test_2026_heuristic_sizes_mla_and_attention_dp_ranks_apart() -> None:
    """DeepSeek-V3 NVFP4 (FP8 cache) on four 180 GiB B200 (193,273,528,320 bytes) with
    attention DP, 1,024/8,192. TensorRT-LLM 1.x: 2 x 61 layers x 128 heads x 56 (its head
    size, hidden / heads) = 874,496 bytes a token, the whole engine's memory: 96 a rank. The
    July 2026 rule: checkpoint 1,960,670,208 x 2 + 669,065,734,144 x 0.5625 =
    380,270,815,872 bytes, a quarter of it on a rank (95,067,703,968), leaving
    98,205,824,352 x 0.90 = 88,385,241,917 bytes at 61 x (512 + 64) = 35,136 bytes a token,
    323,813,376 a request of 9,216 tokens: 272.96 requests, a batch of 384 (a multiple of 128
    at and above 256) and 2,048 tokens (the floor over 307, and over 1,024 + 384)."""
    shape = preset("deepseek-v3").shape
    b200 = CATALOG.product("b200")
    old = trtllm_bench_limits(shape, NVFP4, 4, 1, 1024, 8192, b200.memory_bytes, "pytorch",
                              attention_dp=True)
    new = trtllm_bench_limits(shape, NVFP4, 4, 1, 1024, 8192, b200.memory_bytes,
                              "pytorch-2026-07", attention_dp=True)
    assert old == EngineLimits(96, 2048)
    assert new == EngineLimits(384, 2048)


def test_2026_heuristic_without_attention_dp_sizes_the_whole_engine() -> None:
    """Without attention DP the new rule keeps the whole engine's memory; for a dense GQA
    model in FP8 it differs from 1.x only in the checkpoint's 16-bit embeddings and LM head
    (Llama-3.1-8B on one H100 at 1000/1000: 1,050,673,152 of its 8,030,261,248 weights in
    16 bits, 1.0 GiB more than 1.x counts), so never more sequences."""
    shape = preset("llama-3.1-8b").shape
    for isl, osl in ((1000, 1000), (128, 2048), (5000, 500)):
        old = trtllm_bench_limits(shape, FP8, 1, 1, isl, osl, H100.memory_bytes)
        new = trtllm_bench_limits(shape, FP8, 1, 1, isl, osl, H100.memory_bytes,
                                  "pytorch-2026-07")
        assert old is not None and new is not None
        assert new.max_batch_size <= old.max_batch_size


def test_the_2026_source_is_offered_and_named_in_estimates(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    import json

    from gpuarch.cli.main import main

    args = ["estimate", "infer", "--model", "deepseek-v3", "--gpu", "b200", "--gpus", "4",
            "--tp", "1", "--ep", "4", "--input-len", "1024", "--output-len", "8192",
            "--weight-precision", "fp4", "--activation-precision", "fp4",
            "--kv-precision", "fp8", "--batch", "max", "--json"]
    docs = {}
    for source in ("trtllm-bench-pytorch", "trtllm-bench-pytorch-2026-07"):
        assert main([*args, "--engine-limits", source]) == 0
        docs[source] = json.loads(capsys.readouterr().out)
    old, new = (docs[k]["assumptions"] for k in docs)
    assert old["max_batch_size"] == 96 and new["max_batch_size"] == 384
    assert new["engine_limits"] == "trtllm-bench-pytorch-2026-07"
    assert main([*args, "--engine-limits", "trtllm-bench-pytorch-2025"]) == 2
    assert "did you mean 'trtllm-bench-pytorch-2026-07'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("quant", "expert_weights"),
    [
        (QuantScheme(QuantFormat.INT4, QuantFormat.FP16), None),  # weight-only INT4
        (QuantScheme(QuantFormat.FP8, QuantFormat.FP16), None),  # FP8 weight-only
        (BF16, QuantFormat.MXFP4),  # GPT-OSS: MXFP4 experts, 16-bit elsewhere
    ],
)
def test_untuned_quantizations_keep_the_engine_defaults(
        quant: QuantScheme, expert_weights: QuantFormat | None) -> None:
    shape = preset("gpt-oss-120b").shape
    experts = QuantScheme(expert_weights, quant.activations, quant.kv_cache) \
        if expert_weights else None
    assert trtllm_bench_limits(shape, quant, 1, 1, 1000, 1000, H100.memory_bytes,
                               expert_quant=experts) is None


def test_bad_paths_and_models_that_do_not_fit_are_refused() -> None:
    shape = preset("llama-3.1-70b").shape
    with pytest.raises(GpuarchError, match="unknown trtllm-bench path 'cpp'"):
        trtllm_bench_limits(shape, FP8, 1, 1, 1000, 1000, H100.memory_bytes, "cpp")
    with pytest.raises(GpuarchError, match="leaves no room for a request's KV cache"):
        trtllm_bench_limits(shape, BF16, 1, 1, 1000, 1000, H100.memory_bytes)


def _point(**raw: object) -> TrainingPoint:
    base = {"preset": "llama-3.1-70b", "gpu": "h100", "gpus": 1, "tp": 1,
            "weight_precision": "fp8", "activation_precision": "fp8", "kv_precision": "fp8",
            "input_len": 1000, "output_len": 1000, "mode": "max-throughput"}
    return TrainingPoint("p", "s", "t", "u", "w", {**base, **raw})


def test_points_take_the_limits_their_benchmark_chose() -> None:
    """A point whose source says trtllm-bench chose the limits gets them; a limit the point
    gives itself wins; without ``limits`` the engine defaults stay; an unknown name is an
    error that suggests the right one."""
    chosen = point_config(_point(limits="trtllm-bench-build"), 8, H100)
    assert (chosen.max_batch_size, chosen.max_num_tokens) == (64, 2048)
    own = point_config(_point(limits="trtllm-bench-build", max_num_tokens=4096), 8, H100)
    assert (own.max_batch_size, own.max_num_tokens) == (64, 4096)
    plain = point_config(_point(), 8, H100)
    assert (plain.max_batch_size, plain.max_num_tokens) == (0, 8192)
    with pytest.raises(GpuarchError, match="did you mean 'trtllm-bench-build'"):
        point_config(_point(limits="trtllm-bench-biuld"), 8, H100)


def test_validation_explains_the_limits_a_row_ran_with() -> None:
    """validate inference --explain names the limits trtllm-bench chose for a row (the v0.17
    Llama-3.1-70B FP8 row on one H100 at 1000/1000: 64 and 2,048, as worked above)."""
    from gpuarch.report.validation_text import render_inference_validation
    from gpuarch.validation.inference import load_inference_points, validate_inference

    point = [p for p in load_inference_points()
             if p.id == "trtllm017-h100-llama-3.1-70b-fp8-tp1-1000-1000"]
    s = validate_inference(CATALOG, points=point)
    assert s.rows[0].explain["engine_limits"] == {
        "source": "trtllm-bench-build", "max_batch_size": 64, "max_num_tokens": 2048}
    assert "(limits 64 sequences, 2,048 tokens: trtllm-bench-build)" in \
        render_inference_validation(s, explain=True)
