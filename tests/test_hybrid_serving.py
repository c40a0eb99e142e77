"""Hybrid Mamba-2 models in the serving model: a KV cache for the attention blocks only, a
fixed Mamba-2 state per sequence, the chunked scan in a prefill and the state update in a
decode step, and blocks that cost what the layers they make up cost."""
from __future__ import annotations

import dataclasses

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.estimate.inference_memory import kv_bytes_per_token, memory_per_gpu
from gpuarch.estimate.mamba import mamba_decode_ops, mamba_state_bytes
from gpuarch.workloads import preset

CATALOG = load_catalog()
NANO = preset("nemotron-3-nano").shape


@pytest.mark.parametrize(("name", "block", "ep"), [("llama-3.1-8b", "-", 1),
                                                    ("qwen3-30b-a3b", "E", 2)])
@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("draft", [0, 3])
def test_blocks_in_pairs_serve_as_their_layers_do(name: str, block: str, ep: int,
                                                  tp: int, draft: int) -> None:
    """Attention blocks each followed by an MLP (or expert) block are the plain model
    written block by block: the same time to first token, time per output token and
    largest batch, with speculative decoding too (the hybrid's draft, its MTP block of an
    attention and an MLP or expert block, is the plain model's one layer)."""
    plain = preset(name).shape
    hybrid = dataclasses.replace(plain, layers=2 * plain.layers,
                                 hybrid_pattern=("*" + block) * plain.layers)
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=32, tp=tp, gpus=tp,
                          ep=min(ep, tp), speculative_tokens=draft,
                          acceptance_length=2.5 if draft else 0.0)
    h100 = CATALOG.product("h100")
    a = estimate_inference(CATALOG, plain, h100, cfg)
    b = estimate_inference(CATALOG, hybrid, h100, cfg)
    assert b.ttft_s == pytest.approx(a.ttft_s, rel=1e-12)
    assert b.tpot_s == pytest.approx(a.tpot_s, rel=1e-12)
    assert b.max_batch == a.max_batch


def test_only_attention_blocks_cache_keys_and_values() -> None:
    """Nemotron 3 Nano's six attention blocks of 2 KV heads of 128 keep 6 x 2 x 2 x 128 x 2
    bytes a token (16-bit cache); its 23 Mamba-2 blocks keep per sequence the last 3 of
    the convolution's 4 inputs over 4,096 + 2 x 8 x 128 channels in 16 bits and the 64 x 64
    x 128 recurrent state in FP32 (the engines' default for it): 46.8 MiB whatever the
    length (23.8 MiB with a 16-bit state). Halved at TP 2."""
    assert kv_bytes_per_token(NANO, 2.0) == 6 * 2 * 2 * 128 * 2
    m = NANO.mamba
    assert m is not None
    one = 3 * 6144 * 2 + 64 * 64 * 128 * 4
    assert mamba_state_bytes(m, 1, 2.0) == one
    assert mamba_state_bytes(m, 2, 2.0) == one / 2
    assert mamba_state_bytes(m, 1, 2.0, 2.0) == 3 * 6144 * 2 + 64 * 64 * 128 * 2
    # the cache grows with the context by the attention blocks' keys and values alone
    h100 = CATALOG.product("h100")
    short, long = (memory_per_gpu(NANO, InferenceConfig(input_len=n, output_len=1, batch=8),
                                  8, h100)["kv_cache"] for n in (1023, 2047))
    assert long - short == pytest.approx(8 * 1024 * kv_bytes_per_token(NANO, 2.0))
    assert short == pytest.approx(8 * (1024 * kv_bytes_per_token(NANO, 2.0) + 23 * one))


def test_a_decode_step_reads_and_writes_each_sequences_state() -> None:
    """One token of each of 64 sequences: the state update reads and writes 64 x 64 x 64 x
    128 state elements (FP32 by default) and moves x, z, y (4,096 each) and B and C (2 x
    1,024); the convolution update reads and writes the last three inputs of 6,144 channels
    and the new one."""
    m = NANO.mamba
    assert m is not None
    conv, scan, norm = mamba_decode_ops(m, 1, 64, 2.0)
    assert scan.bytes_moved == 2 * 64 * (64 * 64 * 128) * 4 + 64 * (3 * 4096 + 2048) * 2
    half = mamba_decode_ops(m, 1, 64, 2.0, 2.0)[1]
    assert half.bytes_moved == 2 * 64 * (64 * 64 * 128) * 2 + 64 * (3 * 4096 + 2048) * 2
    assert conv.bytes_moved == 64 * 6144 * 2 * (2 * 3 + 2)
    assert norm.bytes_moved == 2 * 64 * 4096 * 2


def test_nano_serves_with_its_scan_and_state_in_the_breakdowns() -> None:
    est = estimate_inference(CATALOG, NANO, CATALOG.product("h100"),
                             InferenceConfig(input_len=1024, output_len=1024, batch=64))
    assert est.prefill_parts_s["mamba_scan"] > 0
    assert est.decode_step_parts_s["mamba_scan"] > 0
    assert est.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == pytest.approx(
        23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4))
    assert est.assumptions["ssm_state_precision"] == "fp32"
    # a 16-bit state (vLLM --mamba-ssm-cache-dtype float16) halves the state's share: less
    # memory a sequence, a shorter decode step
    half = estimate_inference(CATALOG, NANO, CATALOG.product("h100"), InferenceConfig(
        input_len=1024, output_len=1024, batch=64, ssm_state_precision="fp16"))
    assert half.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == pytest.approx(
        23 * (3 * 6144 * 2 + 64 * 64 * 128 * 2))
    assert half.tpot_s < est.tpot_s and half.max_batch > est.max_batch
    with pytest.raises(GpuarchError, match=r"--ssm-state-precision: .*'fp8'"):
        estimate_inference(CATALOG, NANO, CATALOG.product("h100"), InferenceConfig(
            input_len=1024, output_len=1024, batch=64, ssm_state_precision="fp8"))
    plain = estimate_inference(CATALOG, preset("qwen3-30b-a3b").shape,
                               CATALOG.product("h100"),
                               InferenceConfig(input_len=1024, output_len=1024, batch=64))
    assert plain.decode_step_parts_s["mamba_scan"] == 0
    assert plain.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == 0


def test_a_tp_that_splits_the_mamba_heads_unevenly_is_refused() -> None:
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=8, tp=16, gpus=16)
    with pytest.raises(GpuarchError, match=r"--tp: 16 must divide the Mamba-2 heads \(64\) "
                                           r"and groups \(8\)"):
        estimate_inference(CATALOG, NANO, CATALOG.product("h100"), cfg)


def test_a_cached_prefix_of_a_hybrid_prefills_the_new_tokens_from_its_state() -> None:
    """A hybrid's cached prefix: the Mamba-2 blocks run the new tokens only (their scan costs
    what a prompt of the new tokens alone costs), the attention blocks attend to the whole
    prompt; the prefix's attention KV is held once, each running sequence keeps one more
    state (vLLM's "align" pages: 2 a request) and the prefix's state is held once."""
    h200 = CATALOG.product("h200")
    base = InferenceConfig(input_len=4096, output_len=256, batch=8)
    full = estimate_inference(CATALOG, NANO, h200, base)
    hit = estimate_inference(CATALOG, NANO, h200, dataclasses.replace(base, cached_prefix=3072))
    short = estimate_inference(CATALOG, NANO, h200, dataclasses.replace(base, input_len=1024))
    assert hit.prefill_parts_s["mamba_scan"] == pytest.approx(short.prefill_parts_s["mamba_scan"],
                                                              rel=1e-12)
    assert hit.prefill_parts_s["mamba_scan"] < full.prefill_parts_s["mamba_scan"] / 3
    # the new tokens attend to the cached ones: more attention than a short prompt's
    assert hit.prefill_parts_s["attention"] > short.prefill_parts_s["attention"]
    assert hit.ttft_s < full.ttft_s
    state = 23 * mamba_state_bytes(NANO.mamba, 1, 2.0, 4.0)  # type: ignore[arg-type]
    per_token = 6 * 2 * 2 * 128 * 2.0  # attention blocks x (K, V) x KV heads x dim x bf16
    assert hit.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == pytest.approx(2 * state)
    assert hit.memory["kv_cache"] - full.memory["kv_cache"] == pytest.approx(
        8 * state + state - 7 * 3072 * per_token)
    assert "hybrid_prefix_reuse" not in {k for k, v in full.assumptions.items() if v}
    assert "Mamba-2" in hit.assumptions["hybrid_prefix_reuse"]


def test_verifying_drafted_tokens_writes_a_state_per_token() -> None:
    """A speculative step's Mamba-2 update over t tokens a sequence reads the state once and
    writes it after every token (the engines keep each for the rollback), and reads t
    tokens' inputs: one token is the plain decode step's traffic."""
    m = NANO.mamba
    assert m is not None
    state = 64 * 64 * 128 * 4.0
    one = {op.name: op.bytes_moved for op in mamba_decode_ops(m, 1, 10, 2.0, 4.0)}
    four = {op.name: op.bytes_moved for op in mamba_decode_ops(m, 1, 10, 2.0, 4.0, 4)}
    io = (3 * m.inner + 2 * m.groups * m.state) * 2.0
    assert one["mamba_scan"] == 10 * (2 * state + io)
    assert four["mamba_scan"] == 10 * (5 * state + 4 * io)
    assert four["mamba_conv"] == 10 * m.conv_width * 2.0 * (2 * (3 + 3) + 2 * 4)
    assert four["mamba_norm"] == 4 * one["mamba_norm"]


def test_speculative_decoding_of_a_hybrid() -> None:
    """Nemotron 3 Super with its MTP draft (3 tokens, 2.7 accepted): each sequence holds 1
    + 3 copies of its Mamba-2 state; the draft's weights are its MTP block's; the step
    verifies 4 tokens a sequence and emits 2.7."""
    from gpuarch.workloads.mtp import mtp_block_params

    shape = preset("nemotron-3-super").shape
    b200 = CATALOG.product("b200")
    base = InferenceConfig(input_len=1024, output_len=1024, batch=64, tp=4, gpus=4)
    plain = estimate_inference(CATALOG, shape, b200, base)
    spec = estimate_inference(CATALOG, shape, b200, dataclasses.replace(
        base, speculative_tokens=3, acceptance_length=2.7))
    assert spec.assumptions["mamba_state_bytes_per_sequence_per_gpu"] == pytest.approx(
        4 * plain.assumptions["mamba_state_bytes_per_sequence_per_gpu"])
    dense, routed = mtp_block_params(shape)
    assert spec.memory["weights"] - plain.memory["weights"] == pytest.approx(
        (dense + routed) * 2.0 / 4, rel=1e-9)
    assert "MTP block" in spec.assumptions["speculative"]["draft"]
    # a step does more than a plain one, and each emits 2.7 tokens a sequence
    assert spec.decode_step_parts_s["mamba_scan"] > plain.decode_step_parts_s["mamba_scan"]
    assert spec.tpot_s < plain.tpot_s


def test_the_serving_advisor_takes_a_hybrids_cached_prefix() -> None:
    """``advise infer --cached-prefix`` for a hybrid: an option's figures are the estimate's
    with the prefix, and the prefix shortens its first token."""
    from gpuarch.advise import load_prices
    from gpuarch.advise.infer import _SCHEMES, InferenceSearch, advise_inference
    from gpuarch.estimate.inference_config import Batching

    h200 = CATALOG.product("h200")
    system = CATALOG.system_for(h200)
    search = InferenceSearch(input_len=4000, output_len=500, concurrency=64, max_gpus=2,
                             gpus=("h200",), cached_prefix=3000)
    adv = advise_inference(CATALOG, NANO, search, load_prices())
    plain = advise_inference(CATALOG, NANO, dataclasses.replace(search, cached_prefix=0),
                             load_prices())
    o = adv.top[0]
    est = estimate_inference(CATALOG, NANO, h200, InferenceConfig(
        input_len=4000, output_len=500, cached_prefix=3000, batch=o.batch,
        gpus=max(o.tp * o.pp, o.ep), tp=o.tp, pp=o.pp, ep=o.ep,
        quant=dict(_SCHEMES)[o.scheme], batching=Batching.CONTINUOUS,
        gpus_per_node=system.gpus_per_node if system else 8), system=system)
    assert o.ttft_ms == pytest.approx(est.ttft_s * 1e3, rel=1e-9)
    assert o.tpot_ms == pytest.approx(est.tpot_s * 1e3, rel=1e-9)
    same = [p for p in plain.top if (p.tp, p.ep, p.scheme, p.batch)
            == (o.tp, o.ep, o.scheme, o.batch)]
    assert same and same[0].ttft_ms > o.ttft_ms
