"""rednote's dots3-note (``dots3_note``, its published config with the text model's keys at
the top level; ``dots3_note_text``; a ``dots3_note`` wrapper's text_config): latent attention
of two sizes, the sliding-window layers' (64 heads, KV rank 1,024, no indexer) and the full
layers' (128 heads, KV rank 512, DeepSeek Sparse Attention's indexer), a norm over the
rotary key and a gate a head in every layer. Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the
cache, the kinds of layer and the attention's FLOPs are also worked out by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import kv_bytes_per_sequence, kv_bytes_per_token
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.report.serialize import to_json
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import attention_params, count_params, indexer_params
from gpuarch.workloads.presets import shape_from_mapping
from gpuarch.workloads.shape import FullAttention, MlaShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")
H200 = CATALOG.product("h200-sxm-141gb")

# a small dots3-note in the released config's layout (swa_* keys, use_sliding_window,
# sliding_window_size): 6 layers, the first two and the sixth full (with an indexer)
SMALL: dict[str, Any] = {
    "model_type": "dots3_note", "vocab_size": 1000, "hidden_size": 512,
    "intermediate_size": 1024, "num_hidden_layers": 6, "num_attention_heads": 8,
    "num_key_value_heads": 8, "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16, "v_head_dim": 32, "head_dim": 48, "swa_num_attention_heads": 4,
    "swa_num_key_value_heads": 4, "swa_q_lora_rank": 128, "swa_kv_lora_rank": 128,
    "swa_head_dim": 64, "swa_qk_nope_head_dim": 48, "swa_v_head_dim": 32,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 2,
    "moe_intermediate_size": 128, "moe_shared_expert_intermediate_size": 128,
    "first_k_dense_replace": 1, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 64,
    "sliding_window_size": 128, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "tie_word_embeddings": False, "use_sliding_window": True,
    "vision_config": {"adapter_out_dim": 512}, "audio_config": {"adapter_out_dim": 512}}
TEXT = {k: v for k, v in SMALL.items() if k not in ("vision_config", "audio_config")}
# the same model as Transformers writes it back (Dots3NoteTextConfig.to_dict): its kinds
# named, the window layers' sizes as per_layer_config overrides
CANONICAL = {**{k: v for k, v in TEXT.items() if not k.startswith("swa_")},
             "model_type": "dots3_note_text", "layer_types": [
                 "indexed_attention", "indexed_attention", "sliding_attention",
                 "sliding_attention", "sliding_attention", "indexed_attention"],
             "sliding_window": 128, "mlp_layer_types": ["dense"] + ["sparse"] * 5,
             "per_layer_config": {str(i): {"num_attention_heads": 4, "num_key_value_heads": 4,
                                           "kv_lora_rank": 128, "head_dim": 64,
                                           "qk_nope_head_dim": 48} for i in (2, 3, 4)}}


@pytest.mark.parametrize(("cfg", "total"), [
    ({"model_type": "dots3_note"}, 279_551_718_016),  # Dots3NoteTextConfig's defaults
    ({"model_type": "dots3_note_text"}, 279_551_718_016),
    (SMALL, 14_372_960),
    ({**TEXT, "model_type": "dots3_note_text"}, 14_372_960),
    (CANONICAL, 14_372_960),
    ({"model_type": "dots3_note", "text_config": {**TEXT, "model_type": "dots3_note_text"},
      "vision_config": {"adapter_out_dim": 512}}, 14_372_960),
    ({**SMALL, "use_dsa": False}, 14_268_320),  # full layers without the indexer
    ({**SMALL, "use_sliding_window": False}, 14_606_432),  # every layer full, indexed
    ({**SMALL, "layer_types": ["sliding_attention"] * 6}, 14_139_488),
    ({**SMALL, "swa_num_attention_heads": 8, "swa_num_key_value_heads": 8,
      "swa_kv_lora_rank": 32, "swa_qk_rope_head_dim": 8, "swa_head_dim": 40,
      "swa_qk_nope_head_dim": 32, "swa_v_head_dim": 16}, 14_157_608),
    # biases, tied embeddings, a wider shared MLP, dense layers not all leading (counted),
    # group-limited routing
    ({**SMALL, "attention_bias": True, "tie_word_embeddings": True,
      "moe_shared_expert_intermediate_size": 256, "n_shared_experts": 1,
      "mlp_layer_types": ["dense", "sparse", "dense", "sparse", "sparse", "sparse"],
      "n_group": 4, "topk_group": 2}, 13_468_160),
    ({**SMALL, "num_hidden_layers": 1}, 2_957_072),
    ({**SMALL, "num_hidden_layers": 10, "sliding_window": 64}, 23_458_976),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_two_kinds_of_latent_attention_by_hand(tmp_path: Path) -> None:
    """The published sizes: of 46 layers the first two and every fourth from the second
    (13) are full, with 128 heads, KV rank 512 and an indexer of 64 heads of 128 picking
    2,048 positions; the other 33 attend to 512 positions with 64 heads, KV rank 1,024 and
    query-key heads of 192 + 64. Every layer norms its 64-wide rotary key and gates each head
    from the hidden state (5,120 x heads)."""
    s = _read(tmp_path, {"model_type": "dots3_note"})
    f = s.full_attention
    assert f is not None and f.mla is not None and s.mla is not None
    assert (s.heads, s.full_heads, s.windowed_layers, s.sliding_window) == (64, 128, 33, 512)
    assert (s.mla.kv_lora_rank, s.mla.qk_nope_head_dim, s.mla.sparse) == (1024, 192, False)
    assert (f.mla.kv_lora_rank, f.mla.qk_nope_head_dim, f.mla.index_topk) == (512, 128, 2048)
    assert s.indexer_mla is f.mla and (s.indexer_layers, s.indexer_share) == (13, 1.0)
    full = s.attention_kind(0)
    for view, heads in ((s.attention_kind(512), 64), (full, 128)):
        assert view.mla is not None and view.heads == heads
        no_norm = dataclasses.replace(view, mla=dataclasses.replace(view.mla,
                                                                    rope_key_norm=False))
        assert attention_params(view) - attention_params(no_norm) == 64
        assert attention_params(view) - attention_params(
            dataclasses.replace(view, head_gate=False)) == 5120 * heads
    # the indexer: wq_b (1,024 to 64 x 128), wk (5,120 to 128), its key's LayerNorm and
    # weights_proj (5,120 to 64), in the 13 full layers only
    assert indexer_params(s) == 1024 * 64 * 128 + 5120 * 128 + 2 * 128 + 5120 * 64
    # a BF16 cache a position: each window layer's latent (1,024 + 64), each full layer's
    # (512 + 64) and the indexer's FP8 key and scale (128 + 4)
    per_token = 33 * 1088 * 2 + 13 * 576 * 2 + 13 * 132
    assert kv_bytes_per_token(s, 2.0) == per_token == 88_500
    # a sequence of 8,192 positions: the window layers' ring holds the last 512
    window = 33 * 1088 * 2
    assert kv_bytes_per_sequence(s, 2.0, 8192) == pytest.approx(
        (per_token - window) * 8192 + window * 512, rel=1e-12)
    assert kv_bytes_per_sequence(s, 2.0, 8192, window_kv_cache="full") == per_token * 8192


def test_attention_flops_by_kind(tmp_path: Path) -> None:
    """The attention core at 8,192 tokens (causal): a full layer's query attends to the
    2,048 positions its indexer picks (2,048 - 2,048^2 / (2 x 8,192) on average), with 128
    heads of 192 (query-key) + 128 (value); a window layer's to its 512 with 64 heads of
    256 + 128; and the indexer scores every earlier position (4,096 on average) with 64 heads
    of 128."""
    s = _read(tmp_path, {"model_type": "dots3_note"})
    seq = 8192

    def reach(window: int) -> float:
        return window - window * window / (2 * seq)
    core = 2.0 * (13 * 128 * reach(2048) * (192 + 128) + 33 * 64 * reach(512) * (256 + 128)) \
        + 2.0 * 64 * 128 * seq / 2 * 13
    assert forward_flops_per_token(s, seq, causal=True).attention_core == \
        pytest.approx(core, rel=1e-12)


def test_read_choices_and_refusals(tmp_path: Path) -> None:
    s = _read(tmp_path, {**SMALL, "use_dsa": False})
    assert s.full_attention is not None and s.full_attention.mla is not None
    assert not s.full_attention.mla.sparse and s.indexer_layers == 0
    # one kind of layer: no full_attention; every layer full takes the full layers' sizes
    every = _read(tmp_path, {**SMALL, "use_sliding_window": False})
    assert every.full_attention is None and every.heads == 8 and every.indexer_layers == 6
    assert every.mla is not None and every.mla.sparse and not every.sliding_window
    cases = {
        "q_lora_rank: dots3-note's latent attention always has a query LoRA":
            {**SMALL, "q_lora_rank": None},
        "swa_num_key_value_heads: latent attention's heads are their own":
            {**SMALL, "swa_num_key_value_heads": 2},
        "hidden_act: only \"silu\" is read": {**SMALL, "hidden_act": "gelu"},
        "full layers with an indexer .* beside full layers without one":
            {**CANONICAL, "layer_types": ["indexed_attention", "full_attention"]
             + ["sliding_attention"] * 4},
        "the sliding-window layers differ":
            {**CANONICAL, "per_layer_config": {"2": {"kv_lora_rank": 96}}},
        "per_layer_config.2.intermediate_size: only the latent attention's sizes":
            {**CANONICAL, "per_layer_config": {"2": {"intermediate_size": 7}}},
        "per_layer_config: '9' is not a layer index":
            {**CANONICAL, "per_layer_config": {"9": {"kv_lora_rank": 96}}},
        "use_dsa: expected true, false or null": {**SMALL, "use_dsa": "yes"},
        "n_shared_experts: dots3-note has at least one shared expert":
            {**SMALL, "n_shared_experts": 0},
    }
    for message, cfg in cases.items():
        with pytest.raises(GpuarchError, match=message):
            _read(tmp_path, cfg)


def test_shape_checks(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    f = s.full_attention
    assert f is not None and f.mla is not None and s.mla is not None
    with pytest.raises(GpuarchError, match=r"full_attention\.mla: the full layers' latent "
                                           "attention"):
        dataclasses.replace(s, mla=dataclasses.replace(s.mla, index_heads=2,
                                                       index_head_dim=8, index_topk=16))
    with pytest.raises(GpuarchError, match=r"full_attention\.head_dim: latent attention's "
                                           "query-key width is 48, got 64"):
        FullAttention(kv_heads=8, heads=8, head_dim=64, mla=f.mla)
    with pytest.raises(GpuarchError, match=r"full_attention\.kv_heads"):
        FullAttention(kv_heads=4, heads=8, head_dim=48, mla=f.mla)
    with pytest.raises(GpuarchError, match="layers: 6 has 3 full-attention layers, fewer "
                                           "than the 4"):
        dataclasses.replace(s, full_attention=dataclasses.replace(
            f, mla=dataclasses.replace(f.mla, index_layers=4)))
    with pytest.raises(GpuarchError, match="q_gate / rope_key_norm: expected true or false"):
        MlaShape(q_lora_rank=8, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=8,
                 v_head_dim=8, rope_key_norm=1)  # type: ignore[arg-type]


def test_the_shape_reads_back_from_its_json(tmp_path: Path) -> None:
    """A shape written as JSON (``models --json``) reads back the same, the full layers'
    latent attention a table inside ``full_attention`` (as a measured-runs file may give
    it); an unknown key there is named."""
    s = _read(tmp_path, SMALL)
    raw = {k: v for k, v in json.loads(to_json(s)).items() if v is not None}
    assert shape_from_mapping(raw, "model") == s
    raw["full_attention"]["mla"]["kv_rank"] = 3
    with pytest.raises(GpuarchError, match=r"model\.full_attention\.mla: unknown key "
                                           r"'kv_rank'"):
        shape_from_mapping(raw, "model")


def test_models_listing_names_both_kinds(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", str(write_config(tmp_path, {"model_type": "dots3_note"}))]) == 0
    out = capsys.readouterr().out
    assert "multi-head latent (window layers): KV rank 1024, query rank 1024, heads of " \
           "192+64 (query, key) and 128 (value); a norm over the rotary key" in out
    assert "full layers   13 layers of 128 heads, multi-head latent: KV rank 512" in out
    assert "in the 13 full-attention layers" in out and "33 layers attend to 512" in out


def test_estimates_run_and_say_what_they_assumed(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "dots3_note"})
    cfg = InferenceConfig(input_len=8192, output_len=1024, batch=16, tp=8, gpus=8)
    served = estimate_inference(CATALOG, s, H200, cfg)
    assert served.fits_in_memory and served.tpot_s > 0
    sparse = served.assumptions["sparse_attention"]
    assert (sparse["indexer_layers"], sparse["index_topk"]) == (13, 2048)
    assert (sparse["sparse_layers"], sparse["attention_layers"]) == (13, 46)
    # the full layers' latent, 512 + 64 channels in BF16, the one the sparse kernels read
    assert sparse["latent_bytes_per_position_layer"] == 1152
    # the window layers' ring: at a long context the cache grows by the full layers' share
    longer = estimate_inference(CATALOG, s, H200, dataclasses.replace(cfg, input_len=32768))
    grown = longer.memory["kv_cache"] / served.memory["kv_cache"]
    assert 1.5 < grown < (32768 + 1024) / (8192 + 1024)
    trained = estimate_training(CATALOG, s, H100, TrainingConfig(
        gpus=8, seq_len=4096, global_batch=64, ep=8, zero=2))
    assert trained.step_time_s > 0
    assert "each query of a full-attention layer attends to at most 2,048" in \
        trained.assumptions["sparse_attention"]


def test_the_serving_report_says_which_layers_attend_sparsely(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, SMALL)
    assert main(["estimate", "infer", "--model", str(path), "--gpu", "h100",
                 "--input-len", "1024", "--output-len", "128", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "sparse attn   in 3 layers each query attends to the 64 positions" in out
