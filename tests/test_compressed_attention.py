"""DeepSeek-V4's compressed attention (CSA and HCA over a sliding window), hyper-connections
and hash-routed layers: shapes, weights, cache, FLOPs and the estimates that price them.

Sources: the deepseek-ai/DeepSeek-V4-Flash and -Pro config.json (models.toml
"hf-deepseek-v4"), DeepSeek's reference inference/model.py (copy Nicooo-Wang/DeepSeek-V4-Pro-
code @0ec3a03c: the module shapes counted below), the model card (Flash 284B total and 13B
activated, Pro 1.6T and 49B; "in the 1M-token context setting, DeepSeek-V4-Pro requires only
27% of single-token inference FLOPs ... compared with DeepSeek-V3.2"), and the engines' FP8
cache (vLLM vllm/models/deepseek_v4/attention.py @0484480b and SGLang
deepseek_v4_memory_pool.py @007bddd4: 584 bytes an entry, the indexer's key 132).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference_memory import compressed_kv_bytes, kv_bytes_per_sequence
from gpuarch.perf.roofline import Attention
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.hf_quant import checkpoint_formats
from gpuarch.workloads.params import count_params, layer_op_shares
from gpuarch.workloads.presets import preset
from gpuarch.workloads.shape import CompressedAttention

FLASH = preset("deepseek-v4-flash").shape
PRO = preset("deepseek-v4-pro").shape
MIB = 2**20
T = 1_048_576  # the model card's "1M-token context"


def _by_hand(d: int, layers: int, heads: int, dq: int, groups: int, experts: int, inner: int,
             csa: int, hca: int) -> int:
    """The reference code's tensors, counted one by one (FP4 experts one weight each)."""
    c, dg, hc, vocab, hi, ci = 512, 1024, 4, 129280, 64, 128
    attention = (d * dq + dq + dq * heads * c + d * c + c  # wq_a, q_norm, wq_b, wkv, kv_norm
                 + groups * dg * (heads * c // groups) + d * groups * dg + heads)  # wo, sinks
    csa_compressor = 2 * (2 * c) * d + 4 * 2 * c + c  # wkv, wgate (overlap: 2c), ape, norm
    hca_compressor = 2 * c * d + 128 * c + c
    indexer = hi * ci * dq + hi * d + 2 * (2 * ci) * d + 4 * 2 * ci + ci
    hyper = 2 * ((2 + hc) * hc * hc * d + (2 + hc) * hc + 3)
    moe = experts * d + experts * 3 * d * inner + 3 * d * inner  # gate, routed, shared
    bias = (layers - 3) * experts  # the learned-routing layers' gate.bias (3 hash layers)
    per_layer = attention + 2 * d + hyper + moe
    return (layers * per_layer + csa * (csa_compressor + indexer) + hca * hca_compressor
            + bias + 2 * vocab * d + d + hc * hc * d + hc + 1)


def test_weights_by_hand_and_published_totals() -> None:
    flash = _by_hand(4096, 43, 64, 1024, 8, 256, 2048, csa=21, hca=20)
    pro = _by_hand(7168, 61, 128, 1536, 16, 384, 3072, csa=30, hca=31)
    assert count_params(FLASH).total == flash == 284_332_240_471
    assert count_params(PRO).total == pro == 1_572_997_201_763
    # the model card's 284B / 13B and 1.6T / 49B (activated counts the LM head, not the
    # input embedding)
    assert round(flash / 1e9) == 284 and round(pro / 1e12, 1) == 1.6
    for shape, active in ((FLASH, 13), (PRO, 49)):
        pc = count_params(shape)
        assert round((pc.active(shape) - pc.embedding) / 1e9) == active


def test_shape_refuses_what_compressed_attention_cannot_be() -> None:
    c = PRO.compressed
    assert c is not None
    with pytest.raises(GpuarchError, match="layers: 61, but compressed attention lists 60"):
        dataclasses.replace(PRO, compressed=dataclasses.replace(c, ratios=c.ratios[:-1]))
    with pytest.raises(GpuarchError, match="ratio of 1 compresses nothing"):
        dataclasses.replace(c, ratios=(1, *c.ratios[1:]))
    with pytest.raises(GpuarchError, match="kv_heads: compressed attention has one"):
        dataclasses.replace(PRO, kv_heads=8)
    with pytest.raises(GpuarchError, match="o_groups: 12 must divide heads 128"):
        dataclasses.replace(PRO, compressed=dataclasses.replace(c, o_groups=12))
    with pytest.raises(GpuarchError, match="hash_layers: 62 exceeds the 61 expert layers"):
        dataclasses.replace(PRO, hash_layers=62)


def _flash_config() -> dict:
    return {"model_type": "deepseek_v4", "vocab_size": 129280, "hidden_size": 4096,
            "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1,
            "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8,
            "o_lora_rank": 1024, "moe_intermediate_size": 2048, "n_routed_experts": 256,
            "n_shared_experts": 1, "num_experts_per_tok": 6, "num_hash_layers": 3,
            "hc_mult": 4, "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128,
            "index_topk": 512, "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
            "max_position_embeddings": 1048576, "swiglu_limit": 10.0, "expert_dtype": "fp4",
            "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                    "scale_fmt": "ue8m0", "activation_scheme": "dynamic",
                                    "weight_block_size": [128, 128]},
            # 43 layers and the MTP layer's entry after them, as the release lists them
            "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0]}


def test_config_json_reads_as_the_preset(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_flash_config()))
    shape = shape_from_hf_config(path, name="deepseek-v4-flash")
    assert shape == FLASH
    formats = checkpoint_formats(path)
    assert formats is not None and formats.expert_weights == "mxfp4" and formats.fp8_blocks
    assert preset("deepseek-v4-flash").checkpoint == dataclasses.replace(
        formats, origin=preset("deepseek-v4-flash").checkpoint.origin)  # type: ignore[union-attr]


def test_a_transformers_5_config_reads_as_the_release(tmp_path: Path) -> None:
    """Transformers 5 saves DeepSeek-V4's compression as ``layer_types`` (0, 4 and 128 as
    sliding, compressed-sparse and heavily compressed attention; DeepseekV4Config) and its
    hash layers as ``mlp_layer_types``: such a config reads as the release's."""
    kinds = {0: "sliding_attention", 4: "compressed_sparse_attention",
             128: "heavily_compressed_attention"}
    release = _flash_config()
    saved = {k: v for k, v in release.items() if k not in ("compress_ratios", "num_hash_layers")}
    saved["layer_types"] = [kinds[r] for r in release["compress_ratios"][:43]]
    saved["mlp_layer_types"] = ["hash_moe"] * 3 + ["moe"] * 40
    path = tmp_path / "config.json"
    path.write_text(json.dumps(saved))
    assert shape_from_hf_config(path, name="deepseek-v4-flash") == FLASH
    saved["compress_rates"] = {"heavily_compressed_attention": 64}
    path.write_text(json.dumps(saved))
    assert shape_from_hf_config(path).compressed.ratios[3] == 64  # type: ignore[union-attr]
    path.write_text(json.dumps({**saved, "layer_types": ["windowed"] * 43}))
    with pytest.raises(GpuarchError, match="layer_types: expected a list of"):
        shape_from_hf_config(path)


@pytest.mark.parametrize(("change", "message"), [
    ({"compress_ratios": [0, 4]}, "compress_ratios: 2 ratios, but num_hidden_layers is 43"),
    ({"compress_ratios": "4,128"}, "compress_ratios: expected a list of integers"),
    ({"compress_ratios": None}, "missing compress_ratios"),
    ({"expert_dtype": "int4"}, "expert_dtype 'int4' is not one gpuarch reads"),
])
def test_config_json_refuses_malformed_keys(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_flash_config(), **change}))
    with pytest.raises(GpuarchError, match=message):
        shape_from_hf_config(path)
        checkpoint_formats(path)


def test_cache_bytes_by_hand() -> None:
    # the engines' FP8 entry: 448 FP8 channels, 64 rotary ones in BF16, 7 scales and a pad
    c = PRO.compressed
    assert c is not None and c.entry_bytes(1.0, 512) == 584 and c.index_key_bytes == 132
    grows, window = compressed_kv_bytes(PRO, 1.0)
    assert grows == 30 * (584 + 132) / 4 + 31 * 584 / 128 == 5_511.4375
    assert window == 61 * 584
    assert kv_bytes_per_sequence(PRO, 1.0, T) == pytest.approx(grows * T + window * 128)
    assert kv_bytes_per_sequence(PRO, 1.0, T) / 2**30 == pytest.approx(5.3865, abs=1e-4)
    # BF16: 1,024 bytes an entry (the indexer's keys stay FP8); vLLM's blog counts them in
    # BF16 as well (256 bytes) and gets 9.62 GiB, which this layout is below by their 124 B
    bf16 = kv_bytes_per_sequence(PRO, 2.0, T)
    assert bf16 == 30 * ((128 + T / 4) * 1024 + T / 4 * 132) + 31 * (128 + T / 128) * 1024
    vllm_blog = bf16 + 30 * T / 4 * (256 - 132)
    assert vllm_blog / 2**30 == pytest.approx(9.62, abs=0.01)
    # Flash's two window-only layers hold 128 positions, whatever the length
    short, long = (kv_bytes_per_sequence(FLASH, 1.0, n) for n in (128, T))
    assert long - short == pytest.approx((T - 128) * compressed_kv_bytes(FLASH, 1.0)[0])


def test_single_token_flops_at_1m_against_v32() -> None:
    """The model card: V4-Pro needs 27% of V3.2's single-token FLOPs at 1M tokens (read off
    DeepSeek's figure, "equivalent FP8 FLOPs"). Counted here (the token at position 1M
    attending to all it may): 26.8%. Flash's 10% reads 12.4% here; DeepSeek's exact
    accounting is not published."""
    v32 = forward_flops_per_token(preset("deepseek-v3.2").shape, T).total
    pro = forward_flops_per_token(PRO, T).total
    flash = forward_flops_per_token(FLASH, T).total
    assert pro / v32 == pytest.approx(0.27, abs=0.005)
    assert flash / v32 == pytest.approx(0.124, abs=0.002)
    # at 4K tokens the window and compressed keys cost little: the layers' GEMMs dominate
    short = forward_flops_per_token(PRO, 4096)
    assert short.attention_core < 0.11 * short.total


def test_attention_keys_by_hand() -> None:
    """The core over the window and the compressed entries, per kind of layer."""
    kinds = ((0.5, 4, 1024), (0.5, 128, 0))
    decode = Attention(1, 1, T, 128, 1, 512, window=128, compressed=kinds)
    keys = 128 + 0.5 * 1024 + 0.5 * T / 128
    assert decode.forward_flops == pytest.approx(4 * 128 * keys * 512, rel=1e-6)
    assert decode.kv_bytes(1.0) == pytest.approx(2 * (128 + 0.5 * 1024 + 0.5 * T / 128) * 512)
    # an indexer scores every entry of its layer, no window
    indexer = Attention(1, 1, T, 64, 1, 128, values=False, compressed=((1.0, 4, 0),))
    assert indexer.forward_flops == pytest.approx(2 * 64 * (T - 0.5) / 4 * 128)


def test_layer_op_shares() -> None:
    shares = layer_op_shares(FLASH)
    assert shares["compress_4"] == shares["indexer"] == pytest.approx(21 / 43)
    assert shares["compress_128"] == pytest.approx(20 / 43)
    shares = layer_op_shares(PRO)
    assert shares["compress_4"] + shares["compress_128"] == pytest.approx(1.0)
    # a schedule of several heavy ratios weights each compressor by its own layers
    c = PRO.compressed
    assert c is not None
    mixed = dataclasses.replace(PRO, compressed=dataclasses.replace(
        c, ratios=(64,) * 20 + (128,) * 11 + c.ratios[31:]))
    shares = layer_op_shares(mixed)
    assert shares["compress_64"] == pytest.approx(20 / 61)
    assert shares["compress_128"] == pytest.approx((11 + 15) / 61)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _infer(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run_cli(capsys, "estimate", "infer", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_serving_decode_grows_slowly_with_context(
        capsys: pytest.CaptureFixture[str]) -> None:
    """V4's decode reads the window, the top-k entries and 1/128 of the positions; V3.2's
    the top-k latents but scores every position with its indexer."""
    def tpot(model: str, length: int) -> float:
        return _infer(capsys, "--model", model, "--gpu", "b200", "--gpus", "8", "--tp", "8",
                      "--input-len", str(length), "--output-len", "256", "--batch", "8",
                      "--kv-precision", "fp8")["tpot_s"]
    v4 = tpot("deepseek-v4-pro", 262_144) / tpot("deepseek-v4-pro", 8192)
    v32 = tpot("deepseek-v3.2", 262_144) / tpot("deepseek-v3.2", 8192)
    assert 1.0 < v4 < v32


def test_serving_reports_its_assumptions_and_memory(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _infer(capsys, "--model", "deepseek-v4-flash", "--gpu", "h200", "--gpus", "4",
                 "--tp", "4", "--input-len", "65536", "--output-len", "1024", "--batch", "4",
                 "--kv-precision", "fp8")
    note = out["assumptions"]["compressed_attention"]
    assert note["layers_by_ratio"] == {"0": 2, "4": 21, "128": 20}
    assert note["entry_bytes"] == 584 and note["indexer_replicated_gpus"] == 4
    per_sequence = kv_bytes_per_sequence(FLASH, 1.0, 65536 + 1024)
    assert out["memory_per_gpu_gib"]["kv_cache"] == pytest.approx(4 * per_sequence / 2**30,
                                                                  rel=1e-3)


def test_layers_flag_must_match_the_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "estimate", "infer", "--model", "deepseek-v4-flash",
                           "--gpu", "b200", "--gpus", "4", "--input-len", "1000",
                           "--output-len", "100", "--batch", "1", "--layers", "20")
    assert code == 2 and "--layers: 20, but compressed attention lists 43 compression ratios" in err


def test_tp_must_divide_the_output_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "estimate", "infer", "--model", "deepseek-v4-flash",
                           "--gpu", "h200", "--gpus", "16", "--tp", "16", "--input-len",
                           "1024", "--output-len", "128", "--batch", "1")
    assert code == 2 and "--tp: 16 does not divide the 8 output groups" in err


def test_training_prices_the_compressed_layers_and_hyper_connections(
        capsys: pytest.CaptureFixture[str]) -> None:
    def train(model: str, seq: int, batch: int) -> dict:
        code, out, err = run_cli(capsys, "estimate", "train", "--model", model, "--gpu",
                                 "h100", "--gpus", "64", "--tp", "1", "--pp", "4", "--ep",
                                 "16", "--seq-len", str(seq), "--global-batch", str(batch),
                                 "--micro-batch", "1", "--json")
        assert code == 0, err
        return json.loads(out)
    long = train("deepseek-v4-flash", 32768, 64)
    assert "compressed_attention" in long["assumptions"]
    short = train("deepseek-v4-flash", 4096, 512)  # the same tokens a step
    # the window and the compressed entries keep a 32K sequence's attention near linear:
    # V4's step grows by less than V3.2's, whose indexer scores every earlier position
    v32_long, v32_short = train("deepseek-v3.2", 32768, 64), train("deepseek-v3.2", 4096, 512)
    assert 1.0 < long["step_time_s"] / short["step_time_s"] \
        < v32_long["step_time_s"] / v32_short["step_time_s"]


def test_hyper_connections_cost_memory_and_time() -> None:
    plain = dataclasses.replace(FLASH, hyper_connections=0)
    assert count_params(plain).total == count_params(FLASH).total - count_params(
        FLASH).hyper_connections
    from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
    with_hc = activation_bytes_per_layer(FLASH, 1, 4096, 1, False, Recompute.NONE)
    without = activation_bytes_per_layer(plain, 1, 4096, 1, False, Recompute.NONE)
    assert with_hc - without == pytest.approx(2 * 4 * 4096 * 4096 * 2)
    full = activation_bytes_per_layer(FLASH, 1, 4096, 1, False, Recompute.FULL)
    assert full == 4 * 4096 * 4096 * 2


def test_models_text_names_the_attention(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "models", "deepseek-v4-pro")
    assert code == 0
    assert "30 of ratio 4, 31 of ratio 128" in out and "4 hyper-connection streams" in out


def test_compressed_attention_rejects_empty_ratios() -> None:
    with pytest.raises(GpuarchError, match=r"compressed\.ratios: expected one ratio a layer"):
        CompressedAttention(q_lora_rank=8, rope_head_dim=4, o_groups=1, o_lora_rank=8,
                            window=4, ratios=(), index_heads=1, index_head_dim=8,
                            index_topk=4)


def test_a_mixed_model_prices_the_mean_of_its_layer_kinds() -> None:
    """One mean layer: a model of half CSA and half HCA layers decodes and prefills in the
    mean of the times of an all-CSA and an all-HCA model of the same shape (every layer
    operator is priced once, its layers' share counted: the compressors', indexer's and the
    core's kinds)."""
    from gpuarch.catalog import load_catalog
    from gpuarch.estimate.inference import InferenceConfig, estimate_inference
    from gpuarch.perf.quant import QuantFormat, QuantScheme

    catalog = load_catalog()
    product = catalog.product("b200")
    c = FLASH.compressed
    assert c is not None

    def run(ratios: tuple[int, ...]) -> tuple[float, float]:
        shape = dataclasses.replace(FLASH, layers=42, hash_layers=0, compressed=(
            dataclasses.replace(c, ratios=ratios)))
        fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
        cfg = InferenceConfig(input_len=65536, output_len=512, batch=4, gpus=4, tp=4,
                              quant=fp8)
        out = estimate_inference(catalog, shape, product, cfg,
                                 system=catalog.system_for(product))
        return out.tpot_s, out.ttft_s

    csa, hca, mixed = run((4,) * 42), run((128,) * 42), run((4, 128) * 21)
    # decode exactly; prefill within 0.1%: the core is one kernel over the mean keys, whose
    # time is the larger of its math and its reads, not the mean of each kind's larger
    assert mixed[0] == pytest.approx((csa[0] + hca[0]) / 2, rel=1e-9)
    assert mixed[1] == pytest.approx((csa[1] + hca[1]) / 2, rel=1e-3)
    assert csa[0] > hca[0]  # the indexer and the top-k entries against 1/128 of them


def test_training_prices_the_mean_of_its_layer_kinds() -> None:
    """The same in training: the compute of a half-CSA, half-HCA model's step is the mean of
    the all-CSA and all-HCA models' (within 0.1%, the core's one kernel again)."""
    from gpuarch.catalog import load_catalog
    from gpuarch.estimate.training import estimate_training
    from gpuarch.estimate.training_config import TrainingConfig

    catalog = load_catalog()
    product = catalog.product("h100-sxm5-80gb")
    c = FLASH.compressed
    assert c is not None

    def compute(ratios: tuple[int, ...]) -> float:
        shape = dataclasses.replace(FLASH, layers=42, hash_layers=0, compressed=(
            dataclasses.replace(c, ratios=ratios)))
        cfg = TrainingConfig(gpus=64, seq_len=16384, global_batch=64, tp=1, pp=1, ep=64)
        out = estimate_training(catalog, shape, product, cfg,
                                system=catalog.system_for(product))
        return out.time_breakdown.compute

    csa, hca, mixed = compute((4,) * 42), compute((128,) * 42), compute((4, 128) * 21)
    assert mixed == pytest.approx((csa + hca) / 2, rel=1e-3)
    assert csa > hca


def test_the_training_advisor_splits_only_whole_output_groups(
        capsys: pytest.CaptureFixture[str]) -> None:
    """GB200's 72-GPU NVLink domain offers TP 16 and 32, which split Flash's 64 heads but
    not its 8 output groups: the advisor leaves them out (it had priced a zero-group GEMM)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's divide-by-zero warnings included
        code, out, err = run_cli(capsys, "advise", "train", "--model", "deepseek-v4-flash",
                                 "--tokens", "1e10", "--max-gpus", "128", "--gpu", "gb200",
                                 "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["top"] and all(8 % row["tp"] == 0 for row in result["top"] + result["pareto"])
    assert FLASH.splits_heads(8) and not FLASH.splits_heads(16)


@settings(max_examples=60, deadline=None)
@given(ratios=st.lists(st.sampled_from([0, 4, 128]), min_size=1, max_size=12),
       tokens=st.integers(1, 2_000_000), more=st.integers(1, 100_000),
       element=st.sampled_from([1.0, 2.0]))
def test_cache_and_keys_grow_with_the_sequence(ratios: list[int], tokens: int, more: int,
                                               element: float) -> None:
    """Any schedule of window-only, CSA and HCA layers: a longer sequence never holds less
    cache nor attends to fewer keys; past the window the cache grows by the compressed
    entries' bytes a position, and a query never sees more keys than the window plus every
    compressed entry."""
    c = FLASH.compressed
    assert c is not None
    shape = dataclasses.replace(FLASH, layers=len(ratios), hash_layers=0,
                                compressed=dataclasses.replace(c, ratios=tuple(ratios)))
    short = kv_bytes_per_sequence(shape, element, tokens)
    long = kv_bytes_per_sequence(shape, element, tokens + more)
    assert long >= short
    if tokens >= c.window:
        assert long - short == pytest.approx(more * compressed_kv_bytes(shape, element)[0])
    kinds = tuple((n / len(ratios), r, c.index_topk if r == 4 else 0)
                  for r, n in ((r, ratios.count(r)) for r in set(ratios)) if r)
    core = Attention(1, 1, tokens, 1, 1, 64, window=c.window, compressed=kinds)
    longer = dataclasses.replace(core, seq_kv=tokens + more)
    assert longer.forward_flops >= core.forward_flops
    assert core.forward_flops <= 4 * 64 * (min(tokens, c.window) + tokens / 4)


def test_the_mtp_block_is_a_window_only_layer(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V4's MTP block (config.json's last compress_ratios entry, 0): a window-only
    layer with learned routing, e_proj and h_proj, its norms and its own last mix of the
    streams. Flash with it: 290.9B, the "291B params" Hugging Face's page shows for the
    checkpoint; and `--mtp-layers` trains it."""
    from gpuarch.workloads.mtp import mtp_block_params

    d, c, hc = 4096, 512, 4
    attention = (d * 1024 + 1024 + 1024 * 64 * c + d * c + c + 8 * 1024 * (64 * c // 8)
                 + d * 8 * 1024 + 64)
    layer = (attention + 2 * d + 2 * ((2 + hc) * hc * hc * d + (2 + hc) * hc + 3)
             + 256 * d + 256 + 256 * 3 * d * 2048 + 3 * d * 2048)
    block = layer + 2 * d * d + 3 * d + hc * hc * d + hc + 1
    assert sum(mtp_block_params(FLASH)) == block == 6_610_048_891
    assert round((count_params(FLASH).total + block) / 1e9) == 291
    assert main(["estimate", "train", "--model", "deepseek-v4-flash", "--gpu", "h100",
                 "--gpus", "64", "--tp", "1", "--pp", "4", "--ep", "16", "--seq-len", "4096",
                 "--global-batch", "256", "--mtp-layers", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] > 0


def test_up_projection_recompute_in_the_compressed_attention(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Megatron-Core builds DeepSeek-V4's attention (``DSv4HybridAttention``) with the same
    ``mla_up_proj`` checkpoint as MLA: it recomputes the query's up-projection and the one
    key-value head's projection, so a layer keeps the query's 1,024-wide latent instead of
    its 64 heads of 512 and no key-value head, and runs those two GEMMs again. Megatron
    Bridge's DeepSeek-V4 Flash performance recipes select it."""
    from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
    from gpuarch.estimate.recompute import check_recompute_modules, recompute_flops_per_token
    seq = 4096

    def kept(modules: tuple[str, ...], fp8: bool) -> float:
        return activation_bytes_per_layer(FLASH, 1, seq, 1, False, Recompute.SELECTIVE,
                                          quantized_inputs=fp8, modules=modules)
    # 16-bit queries (64 x 512) and key and value (2 x 512) a token against the latent,
    # kept in 16 bits, or in 8 as an FP8 GEMM's input
    assert kept(("core_attn",), False) - kept(("mla_up_proj",), False) == pytest.approx(
        seq * 2 * (64 * 512 + 2 * 512 - 1024))
    assert kept(("core_attn",), True) - kept(("mla_up_proj",), True) == pytest.approx(
        seq * (2 * (64 * 512 + 2 * 512) - 1024))
    assert check_recompute_modules(["mla_up_proj"], FLASH) == ("mla_up_proj",)
    # 1,024 -> 64 x 512 and 4,096 -> 512, again in each of the 43 layers
    assert recompute_flops_per_token(FLASH, seq, ("mla_up_proj",)) == pytest.approx(
        2 * 43 * (1024 * 64 * 512 + 4096 * 512))

    def train(*extra: str) -> dict:
        code, out, err = run_cli(capsys, "estimate", "train", "--model", "deepseek-v4-flash",
                                 "--gpu", "gb200", "--gpus", "128", "--ep", "64",
                                 "--seq-len", "4096", "--global-batch", "2048",
                                 "--micro-batch", "1", "--json", *extra)
        assert code == 0, err
        return json.loads(out)
    plain = train()
    up = train("--recompute", "selective", "--recompute-modules", "mla_up_proj")
    assert up["memory_per_gpu_gib"]["activations"] < plain["memory_per_gpu_gib"]["activations"]
    assert plain["compute_breakdown_s"]["recompute"] == 0
    # the two projections are a small part of the layer: between 0 and 5% of the step
    assert 0 < up["compute_breakdown_s"]["recompute"] < 0.05 * up["step_time_s"]
    assert up["step_time_s"] > plain["step_time_s"]


def test_the_attention_core_is_not_a_recompute_module_of_v4(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Megatron-Core refuses to checkpoint the attention core of DeepSeek-V4's attention
    (DSv4HybridAttention asserts on it), so naming it is a usage error that says what the
    recipes recompute instead."""
    from gpuarch.estimate.recompute import check_recompute_modules
    with pytest.raises(GpuarchError, match=r"'core_attn' cannot be recomputed.*mla_up_proj"):
        check_recompute_modules(["mla_up_proj", "core_attn"], FLASH)
    assert check_recompute_modules(["core_attn"], preset("deepseek-v3.2").shape) == (
        "core_attn",)
    code, _, err = run_cli(capsys, "estimate", "train", "--model", "deepseek-v4-flash",
                           "--gpu", "gb200", "--gpus", "128", "--ep", "64", "--seq-len",
                           "4096", "--global-batch", "2048", "--micro-batch", "1",
                           "--recompute", "selective", "--recompute-modules", "core_attn")
    assert code == 2 and "core_attn" in err and "Traceback" not in err


def test_selective_recomputation_of_v4_defaults_to_the_up_projections(
        capsys: pytest.CaptureFixture[str]) -> None:
    """With no module named, selective recomputation recomputes the attention core, which
    V4's attention cannot: there it takes mla_up_proj, as its recipes do, and says so; the
    training advisor's selective variants name it too, so each option's figures are the
    scalar estimate's of its configuration."""
    from gpuarch.advise.prices import load_prices
    from gpuarch.advise.train import TrainingSearch, advise_training, option_config
    from gpuarch.catalog import load_catalog
    from gpuarch.estimate import estimate_training

    def train(*extra: str) -> dict:
        code, out, err = run_cli(capsys, "estimate", "train", "--model", "deepseek-v4-flash",
                                 "--gpu", "gb200", "--gpus", "128", "--ep", "64",
                                 "--seq-len", "4096", "--global-batch", "2048",
                                 "--micro-batch", "1", "--recompute", "selective", "--json",
                                 *extra)
        assert code == 0, err
        return json.loads(out)
    default, named = train(), train("--recompute-modules", "mla_up_proj")
    assert default["parallelism"]["recompute_modules"] == ["mla_up_proj"]
    assert default["step_time_s"] == named["step_time_s"]
    assert default["memory_per_gpu_gib"] == named["memory_per_gpu_gib"]
    code, out, _ = run_cli(capsys, "estimate", "train", "--model", "deepseek-v3.2", "--gpu",
                           "gb200", "--gpus", "128", "--ep", "64", "--seq-len", "4096",
                           "--global-batch", "2048", "--micro-batch", "1", "--recompute",
                           "selective", "--json")
    assert code == 0 and json.loads(out)["parallelism"]["recompute_modules"] == ["core_attn"]

    catalog = load_catalog()
    search = TrainingSearch(tokens=1e10, max_gpus=256, gpus=("a100",), top=40, seq_len=4096)
    advice = advise_training(catalog, FLASH, search, load_prices())
    options = [*advice.top, *advice.pareto]
    assert any(o.recompute == "selective" for o in options), "no selective option to check"
    product = catalog.product("a100")
    system = catalog.system_for(product)
    for o in options:
        cfg = option_config(search, o, system, FLASH)
        if o.recompute == "selective":
            assert cfg.recomputed == ("mla_up_proj",)
        est = estimate_training(catalog, FLASH, product, cfg, system=system)
        assert est.step_time_s == pytest.approx(o.step_time_s, rel=1e-9)
