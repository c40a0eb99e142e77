"""Chunked attention (Llama 4's attention_chunk_size): a query of a chunked layer sees its own
chunk's positions up to itself, not the last ``chunk`` positions.

The mask is the one TensorRT-LLM documents for its attention ("[Chunked Attention]",
tensorrt_llm/_torch/modules/attention.py @c6d3bb2a: tokens attend only to tokens of their own
chunk), and its generation kernels apply it in decode (chunked_attention_size,
cpp/tensorrt_llm/common/attentionOp.cpp @eea41b73). Hand counts below: Llama 4 Maverick has
48 layers, 36 of them chunked at 8,192 positions (the model's config.json).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.roofline import Attention, chunk_span, mean_keys
from gpuarch.workloads import preset
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.mtp import mtp_layer_shape

CATALOG = load_catalog()
MAVERICK = preset("llama-4-maverick").shape
AS_WINDOW = dataclasses.replace(MAVERICK, attention_chunked=False)


def _discrete_mean_keys(seq_q: int, seq_kv: int, chunk: int) -> float:
    """Keys per query, counted one query at a time: the query at 0-based position p sees
    positions chunk * (p // chunk) .. p."""
    return sum(p % chunk + 1 for p in range(seq_kv - seq_q, seq_kv)) / seq_q


@given(st.integers(1, 40), st.integers(0, 60), st.integers(1, 16))
def test_mean_keys_of_a_chunked_layer_match_a_count_by_query(
        seq_q: int, before: int, chunk: int) -> None:
    """The continuous mean is within one key of counting query by query (the count includes
    the query itself, the integral half of it), and never above the sliding window's."""
    seq_kv = before + seq_q
    keys = mean_keys(seq_q, seq_kv, chunk, chunked=True)
    assert keys == pytest.approx(_discrete_mean_keys(seq_q, seq_kv, chunk), abs=1.0)
    assert keys <= mean_keys(seq_q, seq_kv, chunk) + 1e-9


def test_chunked_keys_by_hand() -> None:
    # a whole prompt of two chunks: half a chunk on average
    assert mean_keys(16384, 16384, 8192, chunked=True) == pytest.approx(4096)
    # a prompt within one chunk is plain causal attention
    assert mean_keys(5000, 5000, 8192, chunked=True) == pytest.approx(mean_keys(5000, 5000))
    # the 1,024 decode positions after an 8,192-token prompt start a new chunk
    assert mean_keys(1024, 8192 + 1024, 8192, chunked=True) == pytest.approx(512)


def test_a_pass_reads_from_its_first_querys_chunk() -> None:
    assert chunk_span(1, 8193, 8192) == 1  # the first position of the second chunk
    assert chunk_span(1, 8192, 8192) == 8192  # the last of the first
    assert chunk_span(2048, 10000, 8192) == 10000 - 0  # queries from 7,952: both chunks
    assert chunk_span(1000, 10000, 8192) == 10000 - 8192
    op = Attention(4, 1, 8193, 8, 8, 128, window=8192, chunked=True)
    assert op.kv_bytes(2.0) == 2.0 * 2 * 4 * 1 * 8 * 128


def test_model_flops_count_the_chunk() -> None:
    """At 16,384 tokens a chunked layer's causal queries see 4,096 keys on average where a
    sliding window of 8,192 would see 8,192 - 8,192^2 / (2 x 16,384) = 6,144."""
    chunked = forward_flops_per_token(MAVERICK, 16384, causal=True).attention_core
    window = forward_flops_per_token(AS_WINDOW, 16384, causal=True).attention_core
    # 4 x heads x head_dim per key per layer (QK^T and AV): 12 full layers at 8,192 keys
    per_key = 4.0 * 40 * 128
    assert chunked == pytest.approx(per_key * (12 * 8192 + 36 * 4096))
    assert window == pytest.approx(per_key * (12 * 8192 + 36 * 6144))


@pytest.mark.parametrize("input_len, output_len, decode_ratio", [
    # decode reads (12 x 8,704.5 + 36 x 512.5) / (12 x 8,704.5 + 36 x 8,192) positions of
    # the sliding-window reading: the 1,024 outputs after an 8,192-token prompt are in a new
    # chunk
    (8192, 1024, (12 * 8704.5 + 36 * 512.5) / (12 * 8704.5 + 36 * 8192)),
    (32768, 1024, (12 * 33280.5 + 36 * 512.5) / (12 * 33280.5 + 36 * 8192)),
    (1000, 1000, 1.0),  # within the first chunk nothing changes
])
def test_a_decode_step_reads_only_the_current_chunk(input_len: int, output_len: int,
                                                    decode_ratio: float) -> None:
    h200 = CATALOG.product("h200-sxm-141gb")

    def attention_s(shape):  # type: ignore[no-untyped-def]
        cfg = InferenceConfig(input_len=input_len, output_len=output_len, batch=16, tp=8,
                              gpus=8)
        return estimate_inference(CATALOG, shape, h200, cfg).as_json()[
            "decode_step_parts_s"]["attention"]

    assert attention_s(MAVERICK) / attention_s(AS_WINDOW) == pytest.approx(decode_ratio,
                                                                           rel=0.01)


def test_a_chunked_shape_needs_its_chunk() -> None:
    with pytest.raises(GpuarchError, match="attention_chunked: needs sliding_window"):
        dataclasses.replace(MAVERICK, sliding_window=0, sliding_layers=0)
    assert not mtp_layer_shape(MAVERICK).attention_chunked


def test_the_chunked_flag_overrides_a_preset(capsys: pytest.CaptureFixture[str]) -> None:
    """--no-attention-chunked turns Maverick's chunks back into a sliding window, which reads
    more of the cache at 8192/1024 (a longer TPOT); --attention-chunked on a model without a
    window is a usage error that names the flag."""
    import json

    from gpuarch.cli.estimate_cmds import resolve_model
    from gpuarch.cli.main import build_parser, main

    base = ["estimate", "infer", "--model", "llama-4-maverick", "--gpu", "h200", "--gpus",
            "8", "--tp", "8", "--input-len", "8192", "--output-len", "1024", "--batch", "16",
            "--json"]
    assert resolve_model(build_parser().parse_args(base)).attention_chunked
    assert not resolve_model(build_parser().parse_args(
        [*base, "--no-attention-chunked"])).attention_chunked
    tpot = []
    for extra in ([], ["--no-attention-chunked"]):
        assert main([*base, *extra]) == 0
        tpot.append(json.loads(capsys.readouterr().out)["tpot_s"])
    assert tpot[0] < tpot[1]
    status = main(["estimate", "infer", "--model", "llama-3.1-8b", "--attention-chunked",
                   "--gpu", "h200", "--input-len", "100", "--output-len", "10", "--batch",
                   "1"])
    err = capsys.readouterr().err
    assert status == 2 and "--attention-chunked: needs sliding-window > 0" in err
