"""DeepSeek Sparse Attention (DeepSeek-V3.2): the lightning indexer's weights, cache and
work, and what choosing 2,048 positions a query does to the training and serving estimates.

Sources: the indexer's structure (wq_b from the compressed query, wk and weights_proj from
the hidden state, a LayerNorm over the key; one FP8 key of 128 channels and one FP32 scale a
position) is DeepSeek's reference code (deepseek-ai/DeepSeek-V3.2-Exp @6d8cb70d
inference/model.py, ``Indexer``); its sizes (64 heads of 128, top 2,048) and the rest of the
shape are the DeepSeek-V3.2-Exp checkpoint's (Transformers' DeepseekV32Config @008e5743);
vLLM caches the key in head_dim + head_dim / 128 x 4 bytes and runs the indexer whole on every
tensor-parallel GPU (vllm-project/vllm @002d6073 vllm/model_executor/models/deepseek_v2.py,
``Indexer``: "no tensor parallel, just replicated").
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import kv_bytes_per_token
from gpuarch.estimate.inference_passes import ReplicaRunner
from gpuarch.estimate.training import TrainingEstimate, estimate_training
from gpuarch.estimate.training_config import Recompute, TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.perf.roofline import INDEXER, MLA_DECODE, Attention
from gpuarch.workloads import preset
from gpuarch.workloads.flops import forward_flops_per_token, training_flops_per_token
from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MlaShape, TransformerShape

CATALOG = load_catalog()
V3 = preset("deepseek-v3").shape
V32 = preset("deepseek-v3.2").shape

# one indexer, by hand from the reference code's Indexer: wq_b 1,536 x (64 x 128), wk 7,168 x
# 128, weights_proj 7,168 x 64, a LayerNorm of 128 (weight and bias)
INDEXER_WEIGHTS = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128


def test_indexer_weights_by_hand() -> None:
    assert INDEXER_WEIGHTS == 13_959_424
    assert count_params(V32).total - count_params(V3).total == 61 * INDEXER_WEIGHTS
    assert count_params(V32).total == 671_877_929_216


def test_v32_is_v3_with_an_indexer() -> None:
    """The shape beside the indexer is DeepSeek-V3's (V3.2-Exp is V3.1-Terminus with DSA)."""
    assert dataclasses.replace(V32, name=V3.name, mla=V3.mla) == V3
    assert (V32.mla.index_heads, V32.mla.index_head_dim, V32.mla.index_topk) == (64, 128, 2048)


def test_a_position_caches_132_index_bytes_a_layer() -> None:
    """An FP8 key of 128 and one FP32 scale a layer, whatever the latent cache's format."""
    assert V32.mla.index_key_bytes == 132
    for element in (2.0, 1.0):
        assert kv_bytes_per_token(V32, element) == 61 * (576 * element + 132)
        assert kv_bytes_per_token(V3, element) == 61 * 576 * element


def test_config_json(tmp_path: Path) -> None:
    """DeepSeek-V3.2-Exp's config.json (its fields as published) reads as the preset."""
    cfg = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
           "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
           "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
           "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
           "n_group": 8, "topk_group": 4, "first_k_dense_replace": 3, "moe_layer_freq": 1,
           "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
           "qk_rope_head_dim": 64, "v_head_dim": 128, "index_n_heads": 64,
           "index_head_dim": 128, "index_topk": 2048, "vocab_size": 129280,
           "max_position_embeddings": 163840, "tie_word_embeddings": False,
           "num_nextn_predict_layers": 1}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    shape = shape_from_hf_config(path, name="deepseek-v3.2")
    assert shape.mla == V32.mla
    assert count_params(shape).total == count_params(V32).total
    del cfg["index_topk"]
    path.write_text(json.dumps(cfg))
    with pytest.raises(GpuarchError, match="index_topk"):
        shape_from_hf_config(path)


@pytest.mark.parametrize(("fields", "message"), [
    ({"index_heads": 64, "index_head_dim": 128}, "index_topk"),
    ({"index_topk": 2048}, "index_head_dim"),
    ({"index_heads": 64, "index_head_dim": 128, "index_topk": 2048, "q_lora_rank": 0},
     "q_lora_rank"),
    ({"index_heads": -1, "index_head_dim": 128, "index_topk": 2048}, "index_heads"),
])
def test_an_incomplete_indexer_is_refused(fields: dict[str, int], message: str) -> None:
    base = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128}
    with pytest.raises(GpuarchError, match=message):
        MlaShape(**{**base, **fields})


def test_scores_without_values() -> None:
    """The indexer's kernel: QK^T of its heads (2 FLOP a multiply-add, no AV), keys read
    once (no values), FP32 scores written and read back by the top-k."""
    dense = Attention(2, 1, 10_000, 64, 1, 128, kv_element=1.0)
    scores = dataclasses.replace(dense, values=False)
    assert scores.forward_flops == dense.forward_flops / 2
    assert scores.kv_bytes(2.0) == dense.kv_bytes(2.0) / 2 == 2 * 10_000 * 128
    assert scores.bytes(1.0) == 2 * 64 * 128 + 2 * 4.0 * 2 * scores._keys + 2 * 10_000 * 128


def test_model_flops() -> None:
    """Each query attends to at most 2,048 positions (counted as a window of that size
    would be) and the indexer scores every earlier one: 2 x 64 x 128 FLOPs a key."""
    for seq in (1024, 2048):  # within the top-k nothing is skipped: the indexer adds
        extra = 2.0 * 64 * 128 * seq / 2 * 61
        assert forward_flops_per_token(V32, seq, causal=True).attention_core == \
            pytest.approx(forward_flops_per_token(V3, seq, causal=True).attention_core + extra)
    seq = 131_072
    keys = 2048 - 2048**2 / (2 * seq)
    expected = 2.0 * 128 * (192 + 128) * 61 * keys + 2.0 * 64 * 128 * 61 * seq / 2
    assert forward_flops_per_token(V32, seq, causal=True).attention_core == \
        pytest.approx(expected)
    assert training_flops_per_token(V32, seq, causal=True) < \
        0.4 * training_flops_per_token(V3, seq, causal=True)


def _serve(shape: object, input_len: int, tp: int, ep: int, gpus: int = 8,
           batch: int = 8) -> object:
    product = CATALOG.product("h200-sxm-141gb")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    cfg = InferenceConfig(input_len=input_len, output_len=1000, batch=batch, gpus=gpus,
                          tp=tp, ep=ep, quant=fp8)
    return estimate_inference(CATALOG, shape, product, cfg,  # type: ignore[arg-type]
                              system=CATALOG.system_for(product))


@pytest.mark.parametrize(("tp", "ep"), [(8, 1), (1, 8)])
def test_decode_reads_the_chosen_positions(tp: int, ep: int) -> None:
    """A decode step reads 2,048 positions' latent and every position's 132-byte index key,
    not every position's latent: from an 8K to a 120K prompt V3's step grows several times
    as much as V3.2's, and at 120K V3.2's step is the shorter."""
    tpot = {(name, n): _serve(shape, n, tp, ep, batch=2).tpot_s  # type: ignore[attr-defined]
            for name, shape in (("v3", V3), ("v3.2", V32)) for n in (8192, 120_000)}
    assert tpot["v3.2", 120_000] < tpot["v3", 120_000]
    assert tpot["v3.2", 120_000] - tpot["v3.2", 8192] < \
        (tpot["v3", 120_000] - tpot["v3", 8192]) / 3


def test_prefill_with_data_parallel_attention() -> None:
    """With each GPU's attention on its own prompts (attention data parallelism) a 120K
    prompt's first token comes sooner from V3.2 (the indexer's FP8 scores cost a fraction of
    the dense attention's); a short prompt's about as soon (the indexer adds a little)."""
    long3, long32 = (_serve(s, 120_000, 1, 8, batch=1) for s in (V3, V32))
    assert long32.ttft_s < 0.6 * long3.ttft_s  # type: ignore[attr-defined]
    short3, short32 = (_serve(s, 1024, 1, 8, batch=1) for s in (V3, V32))
    assert short3.ttft_s <= short32.ttft_s < 1.1 * short3.ttft_s  # type: ignore[attr-defined]


def _train_32k(shapes: dict[str, TransformerShape]) -> dict[str, TrainingEstimate]:
    """Each shape's training step at 32K tokens on one layout: 512 H100, TP 2 with sequence
    parallelism, PP 8, CP 2, EP 32, full recomputation."""
    product = CATALOG.product("h100-sxm5-80gb")
    cfg = TrainingConfig(gpus=512, seq_len=32_768, global_batch=256, tp=2, pp=8, ep=32,
                         cp=2, sequence_parallel=True, recompute=Recompute.FULL)
    return {name: estimate_training(CATALOG, shape, product, cfg,
                                    system=CATALOG.system_for(product))
            for name, shape in shapes.items()}


def test_training_at_long_sequences() -> None:
    """At 32K tokens a step of V3.2 takes less than V3's on the same layout, and its model
    FLOPs a token are the count's (attention counted in full, as Megatron-LM counts it)."""
    runs = _train_32k({"v3": V3, "v3.2": V32})
    assert runs["v3.2"].step_time_s < 0.85 * runs["v3"].step_time_s
    assert runs["v3.2"].model_flops_per_token == pytest.approx(
        training_flops_per_token(V32, 32_768))
    assert "2,048 positions" in runs["v3.2"].assumptions["sparse_attention"]
    assert "sparse_attention" not in runs["v3"].assumptions


def test_the_commands_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    """`models` prints the indexer and --json gives its sizes; Megatron's launch command says
    it does not emit it."""
    assert main(["models", "deepseek-v3.2"]) == 0
    assert "DeepSeek Sparse Attention: an indexer of 64 heads of 128 picks the 2,048" in \
        capsys.readouterr().out
    assert main(["models", "deepseek-v3.2", "--json"]) == 0
    mla = json.loads(capsys.readouterr().out)["models"][0]["shape"]["mla"]
    assert (mla["index_heads"], mla["index_head_dim"], mla["index_topk"]) == (64, 128, 2048)
    assert main(["estimate", "train", "--model", "deepseek-v3.2", "--gpu", "h100", "--gpus",
                 "256", "--pp", "8", "--ep", "32", "--seq-len", "4096", "--global-batch",
                 "512", "--launch", "megatron"]) == 0
    assert "DeepSeek Sparse Attention's indexer" in capsys.readouterr().out


GLM5_CONFIG = {  # GLM-5's config.json fields (Transformers' GlmMoeDsaConfig defaults)
    "model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"],
    "vocab_size": 154880, "hidden_size": 6144, "intermediate_size": 12288,
    "moe_intermediate_size": 2048, "num_hidden_layers": 78, "num_attention_heads": 64,
    "num_key_value_heads": 64, "n_shared_experts": 1, "n_routed_experts": 256,
    "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "qk_nope_head_dim": 192, "n_group": 1, "topk_group": 1, "num_experts_per_tok": 8,
    "max_position_embeddings": 202752, "tie_word_embeddings": False, "index_topk": 2048,
    "index_head_dim": 128, "index_n_heads": 32, "first_k_dense_replace": 3}


def test_glm5(tmp_path: Path) -> None:
    """GLM-5: the same indexer with 32 heads; its config.json reads as the preset, whose
    count is the technical report's 744B (40B activated, embeddings aside)."""
    glm = preset("glm-5").shape
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GLM5_CONFIG))
    shape = shape_from_hf_config(path, name="glm-5")
    assert shape.mla == glm.mla and count_params(shape).total == count_params(glm).total
    counted = count_params(glm)
    assert round(counted.total / 1e9) == 744
    assert round((counted.active(glm) - counted.embedding - counted.lm_head) / 1e9) == 40
    assert kv_bytes_per_token(glm, 1.0) == 78 * (576 + 132)


# GLM-5.2's schedule as vLLM's check of its configuration spells it: an indexer of their own
# in the first three layers and every fourth after (layer - 2 a multiple of 4), 21 of 78
GLM52_KINDS = ["full" if i < 3 or (i - 2) % 4 == 0 else "shared" for i in range(78)]


@pytest.mark.parametrize("extra", [
    {"index_topk_freq": 4, "index_skip_topk_offset": 3},
    {"indexer_types": GLM52_KINDS},
    {"index_topk_pattern": "".join("F" if k == "full" else "S" for k in GLM52_KINDS)},
])
def test_shared_indexers(tmp_path: Path, extra: dict[str, object],
                         capsys: pytest.CaptureFixture[str]) -> None:
    """Later GLM-5 releases let a layer reuse the choice of the last one before it with an
    indexer: any of the three keys gives the same 21 layers, and only those hold the
    indexer's weights, its cached keys and its work."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GLM5_CONFIG, **extra}))
    shared = shape_from_hf_config(path)
    glm = preset("glm-5").shape
    assert shared.indexer_layers == 21 and glm.indexer_layers == 78
    weights = 2048 * 32 * 128 + 6144 * 128 + 6144 * 32 + 2 * 128  # one indexer, by hand
    assert count_params(glm).total - count_params(shared).total == (78 - 21) * weights
    assert kv_bytes_per_token(shared, 1.0) == 78 * 576 + 21 * 132
    seq = 65_536
    assert forward_flops_per_token(glm, seq, causal=True).attention_core - \
        forward_flops_per_token(shared, seq, causal=True).attention_core == \
        pytest.approx(2.0 * 32 * 128 * seq / 2 * (78 - 21))
    product = CATALOG.product("b300")
    cfg = InferenceConfig(input_len=100_000, output_len=1000, batch=4, gpus=8, tp=8)
    step = {name: estimate_inference(CATALOG, shape, product, cfg).tpot_s
            for name, shape in (("every", glm), ("shared", shared))}
    assert step["shared"] < step["every"]
    assert main(["models", str(path)]) == 0
    assert "in 21 of the 78 layers, the others reusing" in capsys.readouterr().out
    runs = _train_32k({"every": glm, "shared": shared})
    assert runs["shared"].step_time_s < runs["every"].step_time_s
    attention = {name: r.time_breakdown.compute_parts["attention"] for name, r in runs.items()}
    assert attention["shared"] < 0.9 * attention["every"]  # the scores in 21 layers, not 78
    assert runs["shared"].model_flops_per_token == pytest.approx(
        training_flops_per_token(shared, 32_768))
    assert "in 21 of the 78 layers" in runs["shared"].assumptions["sparse_attention"]


@pytest.mark.parametrize(("extra", "key"), [
    ({"indexer_types": ["shared", *GLM52_KINDS[1:]]}, "indexer_types"),
    ({"indexer_types": GLM52_KINDS[:-1]}, "indexer_types"),
    ({"indexer_types": ["full", "sparse"] * 39}, "indexer_types"),
    ({"index_topk_pattern": "FX" * 39}, "index_topk_pattern"),
    ({"index_topk_freq": 0}, "index_topk_freq"),
    ({"index_topk_freq": 4, "num_hidden_layers": 0}, "layers"),  # the layers', not a crash
])
def test_a_bad_indexer_schedule_is_refused(tmp_path: Path, extra: dict[str, object],
                                           key: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GLM5_CONFIG, **extra}))
    with pytest.raises(GpuarchError, match=key):
        shape_from_hf_config(path)


def test_sparse_prefill_runs_absorbed() -> None:
    """Over more held positions than the indexer chooses, a prefill pass's attention runs in
    MLA's absorbed (MQA) mode, as FlashMLA's sparse prefill kernels do: one shared latent
    "head" of 576 against 128 query heads, priced as the absorbed decode kernels; at or
    below 2,048 the dense MHA-mode prefill (heads of 192 and 128)."""
    product = CATALOG.product("h200-sxm-141gb")
    cfg = InferenceConfig(input_len=8192, output_len=512, batch=1, gpus=8, tp=8)
    runner = ReplicaRunner(CATALOG, V32, product, cfg, None, DEFAULT_EFFICIENCY)
    for ctx, absorbed in ((2048, False), (8192, True)):
        ops = runner._attention_ops(V32, float(ctx), 1.0, ctx, ctx, 0, prefill=True)
        core = next(op for op in ops if isinstance(op, Attention) and op.name != INDEXER)
        assert (core.name == MLA_DECODE) is absorbed
        assert (core.kv_heads, core.head_dim) == ((1, (576 + 512) // 2) if absorbed
                                                  else (16, (192 + 128) // 2))
        assert core.window == 2048


def test_short_sequences_skip_the_scores() -> None:
    """Where no more positions are held than the indexer would choose, the engines skip its
    scores and the top-k (TensorRT-LLM's fast path for short sequences, SGLang's dense
    prefill below 2,048 tokens): the layer keeps the indexer's projections (its keys are
    cached) but no scoring kernel; past 2,048 positions the kernel is there, over them all."""
    product = CATALOG.product("h200-sxm-141gb")
    cfg = InferenceConfig(input_len=1024, output_len=512, batch=8, gpus=8, tp=8)
    runner = ReplicaRunner(CATALOG, V32, product, cfg, None, DEFAULT_EFFICIENCY)
    for ctx, scored in ((1024, False), (2048, False), (2049, True), (100_000, True)):
        ops = runner._attention_ops(V32, 8.0, 8.0, 1, ctx, 0, prefill=False)
        names = [op.name for op in ops]
        assert {"index_q", "index_k", "index_weights"} <= set(names)
        assert (INDEXER in names) is scored
        if scored:
            indexer = next(op for op in ops if op.name == INDEXER)
            assert isinstance(indexer, Attention) and indexer.seq_kv == ctx


def test_the_estimate_says_what_it_assumed() -> None:
    """The serving estimate's assumptions name the sparse attention and where the indexer
    runs; a dense model's carry none."""
    sparse = _serve(V32, 8192, 8, 1).assumptions["sparse_attention"]  # type: ignore[attr-defined]
    assert sparse == {"index_topk": 2048, "index_heads": 64, "index_head_dim": 128,
                      "index_key_bytes_per_position_layer": 132, "indexer_layers": 61,
                      "sparse_layers": 61, "attention_layers": 61,
                      "indexer_replicated_gpus": 8, "indexer_math": "fp8",
                      "latent_cache": "tensor", "latent_bytes_per_position_layer": 576}
    assert _serve(V3, 8192, 8, 1).assumptions["sparse_attention"] is None  # type: ignore[attr-defined]


def test_fewer_layers_than_indexers_is_a_usage_error(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """--layers below a shared-indexer schedule's count names the flag, not an internal
    field, and exits 2."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GLM5_CONFIG, "index_topk_freq": 4,
                                "index_skip_topk_offset": 3}))
    code = main(["estimate", "infer", "--model", str(path), "--gpu", "b300", "--gpus", "8",
                 "--tp", "8", "--input-len", "8000", "--output-len", "1000", "--batch", "8",
                 "--layers", "10"])
    assert code == 2
    assert "--layers: 10 is fewer than the 21 layers with a sparse-attention indexer" in \
        capsys.readouterr().err


def test_flashmla_latent_layout(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM and SGLang keep V3.2's FP8 latent in FlashMLA's sparse layout (vLLM's fp8_ds_mla:
    512 FP8 channels, 4 FP32 scales, 64 rotary channels in BF16 = 656 bytes), TensorRT-LLM
    under one scale (576); the indexer's 132-byte key beside either. A 16-bit cache and
    dense latent attention are unaffected."""
    from gpuarch.estimate.inference_memory import mla_entry_bytes

    assert V32.mla is not None and V32.mla.flashmla_fp8_bytes == 656
    assert kv_bytes_per_token(V32, 1.0) == 61 * (576 + 132)
    assert kv_bytes_per_token(V32, 1.0, 1, "flashmla") == 61 * (656 + 132)
    assert kv_bytes_per_token(V32, 2.0, 1, "flashmla") == kv_bytes_per_token(V32, 2.0)
    v3 = preset("deepseek-v3").shape
    assert mla_entry_bytes(v3, 1.0, "flashmla") == 576

    def run(*extra: str) -> dict:
        assert main(["estimate", "infer", "--model", "deepseek-v3.2", "--gpu", "h200",
                     "--gpus", "8", "--tp", "8", "--input-len", "32768", "--output-len",
                     "1024", "--batch", "8", "--kv-precision", "fp8", "--json",
                     *extra]) == 0
        return json.loads(capsys.readouterr().out)

    trtllm, vllm, sglang_tensor = run(), run("--engine", "vllm"), \
        run("--engine", "sglang", "--mla-cache", "tensor")
    assert trtllm["assumptions"]["kv_bytes_per_token_per_gpu"] == 61 * (576 + 132)
    assert vllm["assumptions"]["kv_bytes_per_token_per_gpu"] == 61 * (656 + 132)
    assert vllm["assumptions"]["sparse_attention"]["latent_cache"] == "flashmla"
    assert sglang_tensor["assumptions"]["sparse_attention"]["latent_cache"] == "tensor"
    # more bytes a position: fewer sequences fit, each decode step reads a little more
    assert vllm["max_batch"] < trtllm["max_batch"]
    assert vllm["tpot_s"] > trtllm["tpot_s"]
    # a layout of one's own for a model without sparse attention is refused by name
    assert main(["estimate", "infer", "--model", "deepseek-v3", "--gpu", "h200", "--gpus",
                 "8", "--input-len", "100", "--output-len", "10", "--batch", "1",
                 "--mla-cache", "flashmla"]) == 2
    assert "--mla-cache: sets how a sparse-attention model's FP8 latent" in \
        capsys.readouterr().err
