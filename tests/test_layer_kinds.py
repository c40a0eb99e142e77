"""Models whose full-attention layers have heads of their own (``TransformerShape.
full_attention``): Gemma 4 (window layers of 8 or 16 KV heads of 256, global ones of 2 or 4
KV heads of 512 whose keys are also the values) and MiMo-V2-Flash (8 KV heads in its window
layers, 4 in its full ones, keys of 192 and values of 128 in both). Parameter counts are
pinned to the models Hugging Face Transformers 5.25 builds from the published configs
(``scripts/params_vs_transformers.py``, docs/models.md); everything else is checked against
counts worked out by hand from the shapes, and against the same model with one kind of
heads."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import kv_bytes_per_sequence, kv_bytes_per_token
from gpuarch.estimate.inference_passes import ReplicaRunner
from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.roofline import Attention
from gpuarch.report.launch import megatron_launch
from gpuarch.workloads import preset
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.mtp import mtp_layer_shape
from gpuarch.workloads.params import attention_params, count_params
from gpuarch.workloads.shape import BlockSparseAttention, FullAttention, TransformerShape
from tests.hf_configs import assert_same_estimates
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

# the text models of the published configs (google/gemma-4-31B-it's as nvidia/Gemma-4-31B-IT-
# NVFP4 copies it, google/gemma-4-26B-A4B, XiaomiMiMo/MiMo-V2-Flash, as NVIDIA
# aiconfigurator-core 0.12.0 ships them), the keys that shape them
GEMMA4_31B = {"model_type": "gemma4_text", "attention_bias": False, "attention_k_eq_v": True,
              "enable_moe_block": False, "global_head_dim": 512, "head_dim": 256,
              "hidden_size": 5376, "hidden_size_per_layer_input": 0,
              "intermediate_size": 21504, "num_attention_heads": 32,
              "num_global_key_value_heads": 4, "num_hidden_layers": 60,
              "num_key_value_heads": 16, "num_kv_shared_layers": 0, "sliding_window": 1024,
              "tie_word_embeddings": True, "vocab_size": 262144,
              "max_position_embeddings": 262144}
GEMMA4_26B = {**GEMMA4_31B, "enable_moe_block": True, "hidden_size": 2816,
              "intermediate_size": 2112, "moe_intermediate_size": 704,
              "num_attention_heads": 16, "num_experts": 128, "num_global_key_value_heads": 2,
              "num_hidden_layers": 30, "num_key_value_heads": 8, "top_k_experts": 8}
MIMO_V2_FLASH = {"model_type": "mimo_v2_flash", "num_hidden_layers": 48, "hidden_size": 4096,
                 "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192,
                 "v_head_dim": 128, "intermediate_size": 16384, "vocab_size": 152576,
                 "max_position_embeddings": 262144, "sliding_window": 128,
                 "sliding_window_size": 128, "swa_num_attention_heads": 64,
                 "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
                 "hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1
                                          for i in range(48)],
                 "moe_layer_freq": [0] + [1] * 47, "moe_intermediate_size": 2048,
                 "n_routed_experts": 256, "n_shared_experts": None,
                 "num_experts_per_tok": 8, "n_group": 1, "topk_group": 1,
                 "attention_bias": False, "add_swa_attention_sink_bias": True,
                 "add_full_attention_sink_bias": False, "tie_word_embeddings": False}



@pytest.mark.parametrize(("cfg", "total", "name"), [
    # Transformers 5.25.0 on the meta device (scripts/params_vs_transformers.py)
    (GEMMA4_31B, 30_697_345_280, "gemma-4-31b"),
    (GEMMA4_26B, 25_233_141_760, "gemma-4-26b-a4b"),
    (MIMO_V2_FLASH, 308_778_768_832, "mimo-v2-flash"),
])
def test_counts_match_transformers_and_the_presets(tmp_path: Path, cfg: dict[str, Any],
                                                   total: int, name: str) -> None:
    shape = _read(tmp_path, cfg)
    assert count_params(shape).total == total
    assert dataclasses.replace(preset(name).shape, name=shape.name) == \
        dataclasses.replace(shape, context_window=preset(name).shape.context_window)


def test_mimo_active_count_is_the_model_cards() -> None:
    """MiMo-V2-Flash's model card: 309B total, 15B active."""
    shape = preset("mimo-v2-flash").shape
    counted = count_params(shape)
    assert round(counted.total / 1e9) == 309
    assert round(counted.active(shape) / 1e9) == 15


def test_gemma4_reads_each_kind_of_layer(tmp_path: Path) -> None:
    """The 31B's 50 window layers keep their 16 KV heads of 256; the 10 global layers take
    4 of 512 whose keys are the values (no value projection). A wrapper's text_config reads
    the same, and an explicit layer_types list as Transformers' default pattern."""
    shape = _read(tmp_path, GEMMA4_31B)
    assert (shape.windowed_layers, shape.n_kv_heads, shape.d_head) == (50, 16, 256)
    assert shape.full_attention == FullAttention(kv_heads=4, head_dim=512,
                                                 keys_are_values=True)
    full = shape.attention_kind(0)
    h = 5376
    assert attention_params(full) == h * 32 * 512 + h * 4 * 512 + 32 * 512 * h
    assert attention_params(shape.attention_kind(1024)) == \
        h * 32 * 256 + 2 * h * 16 * 256 + 32 * 256 * h
    wrapped = {"model_type": "gemma4", "tie_word_embeddings": True,
               "text_config": GEMMA4_31B}
    assert _read(tmp_path, wrapped) == shape
    listed = {**GEMMA4_31B, "layer_types": ["sliding_attention" if (i + 1) % 6 else
                                            "full_attention" for i in range(60)]}
    assert _read(tmp_path, listed) == shape
    # without keys as values the global layers keep the window layers' KV heads
    plain = _read(tmp_path, {**GEMMA4_31B, "attention_k_eq_v": False})
    assert plain.full_attention == FullAttention(kv_heads=16, head_dim=512)
    # as Transformers 5.25 writes the config: the global layers' heads in per_layer_config,
    # global_head_dim and num_global_key_value_heads left out (and ignored where given)
    saved = {k: v for k, v in GEMMA4_31B.items()
             if k not in ("global_head_dim", "num_global_key_value_heads")}
    saved["per_layer_config"] = {f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 4}
                                 for i in range(5, 60, 6)}
    assert _read(tmp_path, saved) == shape
    assert _read(tmp_path, {**saved, "global_head_dim": 128}) == shape
    assert _read(tmp_path, {**saved, "per_layer_config": {}}).full_attention == \
        FullAttention(kv_heads=16, head_dim=256, keys_are_values=True)


def test_gemma4_unified_reads_gemma4_layers(tmp_path: Path) -> None:
    """Gemma 4 12B (google/gemma-4-12B's text_config, gemma4_unified_text): 40 window layers
    of 8 KV heads of 256 and 8 global ones of 1 of 512, keys as values; 11,907,350,272
    parameters, as Transformers 5.25 builds it (scripts/params_vs_transformers.py). The
    per-layer input and expert keys its config class drops are not read."""
    text = {"model_type": "gemma4_unified_text", "attention_k_eq_v": True,
            "global_head_dim": 512, "head_dim": 256, "hidden_size": 3840,
            "intermediate_size": 15360, "num_attention_heads": 16,
            "num_global_key_value_heads": 1, "num_hidden_layers": 48,
            "num_key_value_heads": 8, "vocab_size": 262144}
    shape = _read(tmp_path, {"model_type": "gemma4_unified", "text_config": text})
    assert count_params(shape).total == 11_907_350_272
    assert (shape.windowed_layers, shape.sliding_window, shape.context_window) == \
        (40, 1024, 262144)
    assert shape.full_attention == FullAttention(kv_heads=1, head_dim=512,
                                                 keys_are_values=True)
    ignored = {**text, "hidden_size_per_layer_input": 256, "enable_moe_block": True,
               "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 3840}
    assert _read(tmp_path, ignored) == _read(tmp_path, text)


def test_gemma4_moe_block(tmp_path: Path) -> None:
    """26B-A4B: the dense MLP of 2,112 beside the experts reads as three shared experts of
    704, and each layer has three more hidden-wide norms and the router's two scales."""
    shape = _read(tmp_path, GEMMA4_26B)
    assert (shape.experts, shape.experts_per_token, shape.d_expert) == (128, 8, 704)
    assert shape.shared_experts == 3 and shape.moe_layers == 30
    counted = count_params(shape)
    assert counted.router == 30 * (2816 * 128 + 2816 + 128)
    no_extras = dataclasses.replace(shape, expert_layer_norms=0, router_scales=False)
    assert counted.total - count_params(no_extras).total == 30 * (3 * 2816 + 2816 + 128)


def test_mimo_reads_its_pattern_and_sinks(tmp_path: Path) -> None:
    """MiMo-V2-Flash: 39 window layers (129 positions: the window and the query) with 8 KV
    heads and sinks, 9 full ones with 4 and none; Transformers' default pattern and
    mlp_layer_types read the same as the published lists."""
    shape = _read(tmp_path, MIMO_V2_FLASH)
    assert (shape.sliding_window, shape.windowed_layers) == (129, 39)
    assert (shape.n_kv_heads, shape.d_head, shape.d_value) == (8, 192, 128)
    assert shape.attention_sinks and shape.dense_layers == 1
    full = shape.attention_kind(0)
    assert (full.n_kv_heads, full.d_head, full.d_value, full.attention_sinks) == \
        (4, 192, 128, False)
    defaults = {k: v for k, v in MIMO_V2_FLASH.items()
                if k not in ("hybrid_layer_pattern", "moe_layer_freq")}
    assert _read(tmp_path, defaults) == shape
    typed = {**defaults, "layer_types": ["full_attention" if i == 0 or (i + 1) % 6 == 0
                                         else "sliding_attention" for i in range(48)],
             "mlp_layer_types": ["dense"] + ["sparse"] * 47}
    assert _read(tmp_path, typed) == shape


@pytest.mark.parametrize(("change", "message"), [
    ({"num_kv_shared_layers": 60}, "num_kv_shared_layers: 60 of 60 layers leaves none"),
    ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
    ({"per_layer_config": {"5": {"intermediate_size": 1}}}, "per_layer_config"),
    ({"per_layer_config": {"5": {"head_dim": 128}}}, "per_layer_config: layers of one kind"),
    ({"layer_types": ["full_attention"] * 3}, "layer_types: expected 60 entries"),
    ({"layer_types": [["sliding_attention"]] * 60}, "layer_types: expected 60 entries"),
    ({"enable_moe_block": True, "num_experts": 8, "top_k_experts": 2,
      "moe_intermediate_size": 1000}, "must be a multiple of it, got 21504"),
    ({"num_global_key_value_heads": 5},
     "full_attention.kv_heads: 5 must divide the full layers' heads 32"),
])
def test_gemma4_refusals_name_the_key(tmp_path: Path, change: dict[str, Any],
                                      message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**GEMMA4_31B, **change})


@pytest.mark.parametrize(("change", "message"), [
    ({"swa_num_attention_heads": 32}, "swa_num_attention_heads: 32 query heads"),
    ({"hybrid_layer_pattern": [0, 1]}, "hybrid_layer_pattern: expected 48 entries"),
    ({"moe_layer_freq": [True] * 48}, "moe_layer_freq: expected 48 entries"),
    ({"mlp_layer_types": ["dense"] * 47 + ["x"]}, "mlp_layer_types"),
])
def test_mimo_refusals_name_the_key(tmp_path: Path, change: dict[str, Any],
                                    message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**MIMO_V2_FLASH, **change})


@pytest.mark.parametrize(("fields", "message"), [
    ({"full_attention": FullAttention(kv_heads=2, head_dim=64)},
     "full_attention: the full layers' own heads need sliding-window layers"),
    ({"sliding_window": 128, "full_attention": FullAttention(kv_heads=2, head_dim=64)},
     "full_attention: the full layers' own heads need"),
    ({"sliding_window": 128, "sliding_layers": 2,
      "full_attention": FullAttention(kv_heads=3, head_dim=64)},
     "full_attention.kv_heads: 3 must divide the full layers' heads 8"),
    ({"keys_are_values": True, "v_head_dim": 32}, "v_head_dim: keys that are also values"),
    ({"v_head_dim": -1}, "v_head_dim: expected an integer"),
])
def test_shape_checks(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        TransformerShape(name="t", layers=4, hidden=512, heads=8, kv_heads=2, vocab=1000,
                         **fields)


def test_full_attention_table_checks() -> None:
    with pytest.raises(GpuarchError, match=r"full_attention\.v_head_dim: keys that are also"):
        FullAttention(kv_heads=1, head_dim=64, v_head_dim=32, keys_are_values=True)
    with pytest.raises(GpuarchError, match=r"full_attention\.sinks: expected true or false"):
        FullAttention(kv_heads=1, head_dim=64, sinks="yes")  # type: ignore[arg-type]


def test_kv_cache_holds_each_kind() -> None:
    """Gemma 4 31B in a 16-bit cache: a window layer holds its last 1,024 positions of 16
    KV heads x (key + value) x 256, a global one every position of 4 heads x 512 (keys are
    values: one vector); on 8 GPUs 2 window heads each and one global head (replicated)."""
    shape = preset("gemma-4-31b").shape
    for tokens in (512, 1024, 50_000):
        window = 50 * 16 * 2 * 256 * min(tokens, 1024)
        full = 10 * 4 * 512 * tokens
        assert kv_bytes_per_sequence(shape, 2.0, tokens) == pytest.approx(2 * (window + full))
        per_gpu = 50 * 2 * 2 * 256 * min(tokens, 1024) + 10 * 1 * 512 * tokens
        assert kv_bytes_per_sequence(shape, 2.0, tokens, tp=8) == pytest.approx(2 * per_gpu)
    assert kv_bytes_per_token(shape, 1.0) == 50 * 16 * 512 + 10 * 4 * 512
    # with every layer keeping every position
    assert kv_bytes_per_sequence(shape, 2.0, 50_000, window_kv_cache="full") == \
        pytest.approx(2 * 50_000 * (50 * 16 * 512 + 10 * 4 * 512))


def test_flops_by_kind() -> None:
    """Attention core per token at 8,192 (counted in full): the window layers' 1,024 keys at
    256 + 256 wide, the global ones' 8,192 at 512 + 512 (keys as values still take both
    products); MiMo's at 192 + 128. Projections: 2 FLOP a weight, sinks apart."""
    seq = 8192
    g = preset("gemma-4-31b").shape
    f = forward_flops_per_token(g, seq)
    assert f.attention_core == pytest.approx(2 * 32 * (50 * 1024 * 512 + 10 * seq * 1024))
    assert f.attention_proj == pytest.approx(2 * count_params(g).attention)
    m = preset("mimo-v2-flash").shape
    fm = forward_flops_per_token(m, seq)
    assert fm.attention_core == pytest.approx(2 * 64 * 320 * (39 * 129 + 9 * seq))
    assert fm.attention_proj == pytest.approx(2 * (count_params(m).attention - 39 * 64))


def test_decode_reads_each_kinds_cache() -> None:
    """A decode step's attention on one H200 (TP 1) reads, in a global layer of Gemma 4 31B,
    every position of its 4 KV heads once (keys are values: one vector of 512), and in a
    window layer the last 1,024 positions' keys and values of 16 heads of 256."""
    shape = preset("gemma-4-31b").shape
    cfg = InferenceConfig(input_len=8192, output_len=64, batch=4)
    runner = ReplicaRunner(CATALOG, shape, CATALOG.product("h200"), cfg, None,
                           DEFAULT_EFFICIENCY)
    ctx = 8192
    for window, expected in ((0, 4 * ctx * 4 * 512 * 2.0),
                             (1024, 4 * 1024 * 16 * 2 * 256 * 2.0)):
        ops = runner._attention_ops(shape.attention_kind(window), 4.0, 4.0, 1, ctx, window,
                                    prefill=False)
        core = next(op for op in ops if isinstance(op, Attention))
        assert core.kv_bytes(2.0) == pytest.approx(expected)


def _shapes(window: int, layers: int, windowed: int, kv: int, head: int, v_head: int
            ) -> tuple[TransformerShape, TransformerShape]:
    base = TransformerShape(name="m", layers=layers, hidden=1024, heads=8, kv_heads=kv,
                            head_dim=head, v_head_dim=v_head, vocab=32000,
                            sliding_window=window, sliding_layers=windowed)
    same = dataclasses.replace(base, full_attention=FullAttention(
        kv_heads=kv, head_dim=head, v_head_dim=v_head))
    return base, same


@settings(max_examples=40, deadline=None)
@given(window=st.integers(1, 4096), layers=st.integers(2, 48), share=st.floats(0.05, 0.95),
       kv=st.sampled_from([1, 2, 4, 8]), head=st.sampled_from([64, 128, 192]),
       v_head=st.sampled_from([0, 64, 128]), seq=st.integers(1, 100_000),
       tp=st.sampled_from([1, 2, 4, 8, 16]))
def test_full_layers_with_the_same_heads_change_nothing(
        window: int, layers: int, share: float, kv: int, head: int, v_head: int, seq: int,
        tp: int) -> None:
    """Full layers given heads of their own that equal the window layers' count, cost and
    cache exactly what the model without them does."""
    windowed = min(layers - 1, max(1, round(share * layers)))
    base, same = _shapes(window, layers, windowed, kv, head, v_head)
    assert count_params(same) == count_params(base)
    assert forward_flops_per_token(same, seq, causal=True) == \
        forward_flops_per_token(base, seq, causal=True)
    assert kv_bytes_per_sequence(same, 2.0, seq, tp) == \
        pytest.approx(kv_bytes_per_sequence(base, 2.0, seq, tp))
    for recompute in (Recompute.NONE, Recompute.SELECTIVE):
        assert activation_bytes_per_layer(same, 1, seq, tp, True, recompute) == \
            pytest.approx(activation_bytes_per_layer(base, 1, seq, tp, True, recompute))


def test_estimates_with_the_same_heads_change_nothing() -> None:
    """The same through the serving and training estimates: Gemma 3 27B with its global
    layers given the window layers' heads as their own."""
    base = preset("gemma-3-27b").shape
    same = dataclasses.replace(base, full_attention=FullAttention(
        kv_heads=base.n_kv_heads, head_dim=base.d_head))
    product = CATALOG.product("h100")
    ta, tb = assert_same_estimates(
        CATALOG, base, same,
        (product, InferenceConfig(input_len=4000, output_len=400, batch=16, gpus=2, tp=2)),
        (product, TrainingConfig(gpus=8, seq_len=8192, global_batch=32, tp=2)))
    assert ta.memory.weights == tb.memory.weights


def test_global_layers_cost_their_own_heads() -> None:
    """Gemma 4 31B against the same model with the window layers' heads in its global
    layers too: the global layers' keys-as-values cache of 4 x 512 is smaller than 16 x 2 x
    256, so long decodes hold less and run faster; its wider query and output projections
    cost more FLOPs."""
    g4 = preset("gemma-4-31b").shape
    uniform = dataclasses.replace(g4, full_attention=None)
    assert kv_bytes_per_token(g4, 2.0) < kv_bytes_per_token(uniform, 2.0)
    assert forward_flops_per_token(g4, 4096).attention_proj > \
        forward_flops_per_token(uniform, 4096).attention_proj
    product = CATALOG.product("h100")
    cfg = InferenceConfig(input_len=32_000, output_len=1000, batch=8)
    assert estimate_inference(CATALOG, g4, product, cfg).tpot_s < \
        estimate_inference(CATALOG, uniform, product, cfg).tpot_s


def test_mtp_layer_takes_the_full_layers_heads() -> None:
    shape = mtp_layer_shape(preset("mimo-v2-flash").shape)
    assert (shape.n_kv_heads, shape.attention_sinks, shape.full_attention,
            shape.sliding_window) == (4, False, None, 0)


def test_models_and_launch_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "gemma-4-26b-a4b"]) == 0
    out = capsys.readouterr().out
    assert "full layers   5 layers of 2 KV heads of 512, keys as values" in out
    assert main(["models", "mimo-v2-flash"]) == 0
    out = capsys.readouterr().out
    assert "64 heads (8 KV) of 192 (values 128)" in out
    assert "the window layers with sinks" in out and "the first layer dense" in out
    launch = megatron_launch(preset("gemma-4-31b").shape,
                             TrainingConfig(gpus=8, seq_len=4096, global_batch=8, tp=8))
    assert any("full-attention layers' own heads (4 KV heads of 512, keys as values)" in n
               for n in launch.notes)


def test_no_window_left_gives_every_layer_the_full_heads(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--sliding-window 0``: every layer attends in full, with the full layers' heads
    where they have their own (Gemma 4 31B: 60 layers x 4 KV heads of 512, keys as values,
    in 16 bits), and a window model's window layers count goes with its window (Gemma 3
    27B: 62 layers x 16 x 2 x 128)."""
    for model, per_token in (("gemma-4-31b", 60 * 4 * 512 * 2),
                             ("gemma-3-27b", 62 * 16 * 2 * 128 * 2)):
        assert main(["estimate", "infer", "--model", model, "--sliding-window", "0", "--gpu",
                     "h100", "--input-len", "1000", "--output-len", "100", "--batch", "1",
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["assumptions"]["kv_bytes_per_token_per_gpu"] == per_token
    assert main(["estimate", "infer", "--model", "gemma-4-31b", "--sliding-layers", "60",
                 "--gpu", "h100", "--input-len", "1000", "--output-len", "100",
                 "--batch", "1"]) == 2
    assert "--full-attention: the full layers' own heads need" in capsys.readouterr().err


# Llama-3.3-Nemotron-Super-49B's block_configs (nvidia/Llama-3_3-Nemotron-Super-49B-v1
# config.json, as aiconfigurator-core 0.12.0 ships it), as (keeps attention, ffn_mult) and
# how many layers have each
SUPER_49B_LAYERS = {(True, 5.25): 48, (False, 1.3125): 10, (False, 1.0): 8, (False, 0.5): 6,
                    (False, 2.625): 5, (True, 2.625): 1, (False, 3.28125): 1,
                    (False, 5.25): 1}


def _nas_config(layers: list[tuple[bool, float]], **extra: Any) -> dict[str, Any]:
    return {"model_type": "nemotron-nas", "architectures": ["DeciLMForCausalLM"],
            "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": len(layers),
            "vocab_size": 128256, "tie_word_embeddings": False,
            "max_position_embeddings": 131072, "intermediate_size": None,
            "num_key_value_heads": None,
            "block_configs": [{"attention": {"no_op": not attention, "n_heads_in_group":
                                             8 if attention else None,
                                             "replace_with_linear": False},
                               "ffn": {"ffn_mult": mult, "no_op": False,
                                       "replace_with_linear": False}}
                              for attention, mult in layers], **extra}


def test_nemotron_nas_count_by_hand(tmp_path: Path) -> None:
    """Each NAS layer's MLP is 2/3 x ffn_mult x hidden, rounded up to a multiple of 256
    (DeciLM's _ffn_mult_to_intermediate_size: 5.25 -> 28,672, 3.28125 -> 17,920, 2.625 ->
    14,336, 1.3125 -> 7,168, 1.0 -> 5,632 from 5,461, 0.5 -> 2,816 from 2,730), a gated
    MLP's three matrices; an attention layer Llama's (64 heads of 128, 8 KV); one norm a
    present part, the final norm, untied embeddings: 49,867,145,216 for Super-49B."""
    layers = [key for key, n in SUPER_49B_LAYERS.items() for _ in range(n)]
    shape = _read(tmp_path, _nas_config(layers))
    h = 8192
    width = {5.25: 28672, 3.28125: 17920, 2.625: 14336, 1.3125: 7168, 1.0: 5632, 0.5: 2816}
    mlp = sum(n * 3 * h * width[mult] for (_, mult), n in SUPER_49B_LAYERS.items())
    attention = 49 * (2 * h * h + 2 * h * 8 * 128)
    total = 2 * 128256 * h + attention + mlp + (49 + 80 + 1) * h
    assert total == 49_867_145_216
    assert count_params(shape).total == total
    assert (shape.attention_layers, shape.mlp_layers, shape.layers) == (49, 80, 129)
    assert sorted(set(shape.mlp_widths)) == sorted(width.values())
    # the preset holds the published config's layers in their order
    assert count_params(preset("llama-3.3-nemotron-super-49b").shape).total == total


def test_nemotron_nas_widths_cost_their_own() -> None:
    """MLP blocks of several widths: a model whose widths are all one costs what the model
    with that ffn_hidden does, and one of two widths costs between its narrow and its wide
    copies, its FLOPs the sum of its blocks'."""
    base = TransformerShape(name="nas", layers=4, hidden=2048, heads=16, kv_heads=4,
                            vocab=32000, hybrid_pattern="*-*-", ffn_hidden=8192)
    same = dataclasses.replace(base, mlp_widths=(8192, 8192))
    assert count_params(same) == count_params(base)
    assert forward_flops_per_token(same, 2048) == forward_flops_per_token(base, 2048)
    mixed = dataclasses.replace(base, mlp_widths=(2048, 8192))
    narrow = dataclasses.replace(base, ffn_hidden=2048)
    f = forward_flops_per_token(mixed, 2048).mlp
    assert f == pytest.approx((forward_flops_per_token(narrow, 2048).mlp
                               + forward_flops_per_token(base, 2048).mlp) / 2)
    product = CATALOG.product("h100")
    serve = InferenceConfig(input_len=2000, output_len=200, batch=8)
    tpot = {name: estimate_inference(CATALOG, s, product, serve).tpot_s
            for name, s in (("same", same), ("base", base), ("mixed", mixed),
                            ("narrow", narrow))}
    assert tpot["same"] == pytest.approx(tpot["base"], rel=1e-12)
    assert tpot["narrow"] < tpot["mixed"] < tpot["base"]
    train = TrainingConfig(gpus=8, seq_len=4096, global_batch=16, tp=2)
    step = {name: estimate_training(CATALOG, s, product, train).step_time_s
            for name, s in (("same", same), ("base", base), ("mixed", mixed),
                            ("narrow", narrow))}
    assert step["same"] == pytest.approx(step["base"], rel=1e-12)
    assert step["narrow"] < step["mixed"] < step["base"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c["block_configs"][3]["attention"].update(replace_with_linear=True),
     r"block_configs\[3\]\.attention\.replace_with_linear: True is not read yet"),
    (lambda c: c["block_configs"][0]["attention"].update(window_length=4096),
     r"block_configs\[0\]\.attention\.window_length"),
    (lambda c: c["block_configs"][0]["attention"].update(n_heads_in_group=4),
     "n_heads_in_group give \\[8, 16\\] KV heads"),
    (lambda c: c["block_configs"][1]["attention"].update(n_heads_in_group=7),
     r"block_configs\[1\]\.attention\.n_heads_in_group: expected a divisor"),
    (lambda c: c["block_configs"][2]["ffn"].update(ffn_mult="big"),
     r"block_configs\[2\]\.ffn\.ffn_mult: expected a positive number"),
    (lambda c: c["block_configs"][2]["ffn"].update(no_op="yes"),
     r"block_configs\[2\]\.ffn\.no_op: expected true or false"),
    (lambda c: c.update(num_hidden_layers=5), "block_configs: expected 5 entries"),
    (lambda c: c["block_configs"].__setitem__(0, ["x"]),
     r"block_configs\[0\]\.attention: expected an object"),
])
def test_nemotron_nas_refusals_name_the_key(tmp_path: Path, change: Any,
                                            message: str) -> None:
    cfg = _nas_config([(True, 5.25), (True, 2.625), (False, 1.0), (True, 0.5)])
    change(cfg)
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_mlp_widths_checks() -> None:
    base = dict(name="t", layers=4, hidden=512, heads=8, vocab=1000, hybrid_pattern="*-*-")
    with pytest.raises(GpuarchError, match="mlp_widths: 3 widths, but hybrid_pattern has 2"):
        TransformerShape(**base, mlp_widths=(1024, 512, 256))  # type: ignore[arg-type]
    with pytest.raises(GpuarchError, match="mlp_widths: MLP blocks of their own widths need"):
        TransformerShape(name="t", layers=4, hidden=512, heads=8, vocab=1000,
                         mlp_widths=(1024, 512))
    with pytest.raises(GpuarchError, match="ffn_hidden: 2048, but the widest of mlp_widths "
                                           "is 1024"):
        TransformerShape(**base, ffn_hidden=2048, mlp_widths=(1024, 512))  # type: ignore[arg-type]
    shape = TransformerShape(**base, mlp_widths=(1024, 768))  # type: ignore[arg-type]
    assert shape.d_ffn == 1024 and shape.mean_mlp_width == 896
    with pytest.raises(GpuarchError, match="--tp: 512 does not divide the MLP's 768 hidden"):
        shape.check_mlp_split(512)


def test_nemotron_nas_is_dense_and_says_what_launch_leaves_out() -> None:
    from gpuarch.validation.bands import model_kind

    shape = preset("llama-3.3-nemotron-super-49b").shape
    assert model_kind(shape) == "dense"
    launch = megatron_launch(shape, TrainingConfig(gpus=8, seq_len=4096, global_batch=8,
                                                   tp=8))
    assert "pretrain_mamba.py" not in launch.command
    assert "--num-layers 80 " in launch.command  # the checkpoint's layers, not its blocks
    assert any("49 attention and 80 MLP blocks in 80 layers" in n
               and "--heterogeneous-layers-config-path" in n for n in launch.notes)


def test_nemotron_nas_mtp_layer_is_a_plain_layer() -> None:
    """A multi-token prediction block on a NAS model (``--mtp-layers``) is one plain layer:
    attention and the widest MLP, no pattern."""
    shape = mtp_layer_shape(preset("llama-3.3-nemotron-super-49b").shape)
    assert (shape.layers, shape.hybrid_pattern, shape.mlp_widths, shape.d_ffn) == \
        (1, "", (), 28672)


# MiniMax-M3's config.json (MiniMaxAI/MiniMax-M3, as aiconfigurator-core 0.12.0 ships it):
# the keys that shape its text model
MINIMAX_M3 = {"model_type": "minimax_m3", "architectures": ["MiniMaxM3ForCausalLM"],
              "attention_output_gate": False, "dense_intermediate_size": 12288,
              "first_k_dense_replace": 3, "head_dim": 128, "hidden_act": "swigluoai",
              "hidden_size": 6144, "intermediate_size": 3072, "max_position_embeddings": 1048576,
              "moe_intermediate_size": 3072, "moe_layer_freq": [0] * 3 + [1] * 57,
              "n_shared_experts": 1, "num_attention_heads": 64, "num_experts_per_tok": 4,
              "num_hidden_layers": 60, "num_key_value_heads": 4, "num_local_experts": 128,
              "num_mtp_modules": 7, "qk_norm_type": "per_head",
              "shared_intermediate_size": 3072, "sparse_attention_config": {
                  "sparse_attention_freq": [0] * 3 + [1] * 57, "sparse_block_size": 128,
                  "sparse_disable_index_value": [0] * 3 + [1] * 57, "sparse_index_dim": 128,
                  "sparse_init_block": 0, "sparse_local_block": 1,
                  "sparse_num_index_heads": 4, "sparse_score_type": "max",
                  "sparse_topk_blocks": 16, "use_sparse_attention": True},
              "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "tie_word_embeddings": False,
              "use_qk_norm": True, "use_routing_bias": True, "vocab_size": 200064}


def test_minimax_m3_count_matches_transformers(tmp_path: Path) -> None:
    """426,174,565,632: what Transformers 5.25 builds from NVIDIA's MiniMax-M3-NVFP4 config
    (the same text model; scripts/params_vs_transformers.py), and by hand: untied
    embeddings, 60 attention layers (64 heads and 4 KV heads of 128, a norm a head width for
    queries and keys), 57 indexers (4 heads of 128 and one key from the hidden state, their
    norms), 3 dense MLPs of 12,288, 57 expert layers of 128 experts and one shared MLP of
    3,072 and a router, two norms a layer and the final one. The multimodal wrapper reads
    the same, and the flat keys Transformers 5 saves as the nested ones."""
    shape = _read(tmp_path, MINIMAX_M3)
    h = 6144
    attention = 60 * (2 * h * 64 * 128 + 2 * h * 4 * 128 + 2 * 128)
    indexer = 57 * (h * 4 * 128 + h * 128 + 2 * 128)
    mlp = 3 * 3 * h * 12288 + 57 * (129 * 3 * h * 3072 + 128 * h)
    total = 2 * 200064 * h + attention + indexer + mlp + (2 * 60 + 1) * h
    assert total == 426_174_565_632 == count_params(shape).total
    assert shape.block_sparse is not None and shape.indexer_layers == 57
    assert shape.block_sparse.positions == 2048
    wrapped = {"model_type": "minimax_m3_vl", "text_config": {
        k: v for k, v in MINIMAX_M3.items() if k not in ("model_type", "architectures")}}
    assert _read(tmp_path, wrapped).block_sparse == shape.block_sparse
    assert count_params(_read(tmp_path, wrapped)).total == total
    flat = {k: v for k, v in MINIMAX_M3.items()
            if k not in ("sparse_attention_config", "moe_layer_freq")}
    flat |= {"index_n_heads": 4, "index_head_dim": 128, "index_block_size": 128,
             "index_topk_blocks": 16, "index_local_blocks": 1,
             "layer_types": ["full_attention"] * 3 + ["minimax_m3_sparse"] * 57,
             "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 57}
    assert _read(tmp_path, flat) == shape
    # MiniMax-M3 VL's text model reads as minimax_m3; where a config gives both, the nested
    # keys decide, as MiniMaxM3VLTextConfig sets the flat ones from them
    assert _read(tmp_path, {**flat, "model_type": "minimax_m3_vl_text"}) == shape
    assert _read(tmp_path, {**MINIMAX_M3, "index_n_heads": 8, "index_head_dim": 64}) == shape
    assert count_params(preset("minimax-m3").shape).total == total


def test_block_sparse_costs() -> None:
    """The sparse layers' attention reads and computes over their blocks' 2,048 positions
    (as a window of that many) and their indexer scores every earlier position (4 heads of
    128, QK only); the 3 dense layers attend to all; the cache holds every position's keys
    and values in every layer and the indexer's key in the sparse ones."""
    shape = preset("minimax-m3").shape
    seq = 32768
    f = forward_flops_per_token(shape, seq)
    window = 2048  # counted in full: min(seq, window) keys
    core = 2 * 64 * 256 * (3 * seq + 57 * window) + 2 * 4 * 128 * seq * 57
    assert f.attention_core == pytest.approx(core)
    assert kv_bytes_per_token(shape, 2.0) == 60 * 4 * 256 * 2 + 57 * 128 * 2
    assert kv_bytes_per_sequence(shape, 2.0, seq) == pytest.approx(
        seq * (60 * 4 * 256 * 2 + 57 * 128 * 2))
    cfg = InferenceConfig(input_len=seq, output_len=64, batch=4)
    runner = ReplicaRunner(CATALOG, shape, CATALOG.product("h200"), cfg, None,
                           DEFAULT_EFFICIENCY)
    sparse = runner._attention_ops(shape.attention_kind(window), 4.0, 4.0, 1, seq, window,
                                   prefill=False)
    dense = runner._attention_ops(shape.attention_kind(0), 4.0, 4.0, 1, seq, 0,
                                  prefill=False)
    core_sparse = next(op for op in sparse if isinstance(op, Attention) and op.values)
    core_dense = next(op for op in dense if isinstance(op, Attention) and op.values)
    assert core_sparse.kv_bytes(2.0) == pytest.approx(4 * window * 4 * 256 * 2.0)
    assert core_dense.kv_bytes(2.0) == pytest.approx(4 * seq * 4 * 256 * 2.0)
    scores = next(op for op in sparse if isinstance(op, Attention) and not op.values)
    assert scores.kv_bytes(2.0) == pytest.approx(4 * seq * 128 * 2.0)
    assert not any(isinstance(op, Attention) and not op.values for op in dense)


def test_block_sparse_beyond_the_sequence_changes_nothing() -> None:
    """Where every layer's blocks cover the whole sequence, block-sparse attention costs
    what dense attention does plus its indexer's projections and scores: the same
    attention core, more projections; the same KV cache but the indexer's keys."""
    base = TransformerShape(name="m", layers=8, hidden=2048, heads=16, kv_heads=4,
                            vocab=32000)
    sparse = dataclasses.replace(base, block_sparse=BlockSparseAttention(
        index_heads=4, index_head_dim=64, block=128, topk_blocks=64))
    seq = 4096  # = 64 blocks of 128
    fb, fs = forward_flops_per_token(base, seq), forward_flops_per_token(sparse, seq)
    assert fs.attention_core == pytest.approx(fb.attention_core + 2 * 4 * 64 * seq * 8)
    indexer = 2048 * 4 * 64 + 2048 * 64 + 2 * 64
    assert fs.attention_proj == pytest.approx(fb.attention_proj + 2 * 8 * indexer)
    assert count_params(sparse).total == count_params(base).total + 8 * indexer
    assert kv_bytes_per_token(sparse, 2.0) == kv_bytes_per_token(base, 2.0) + 8 * 64 * 2.0


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c["sparse_attention_config"].update(sparse_init_block=1),
     "sparse_init_block: 1 initial blocks"),
    (lambda c: c["sparse_attention_config"].update(sparse_local_block=20),
     "index_local_blocks: 20 local blocks do not fit the top 16"),
    (lambda c: c["sparse_attention_config"].update(
        sparse_disable_index_value=[0] * 60), "the indexer's value path is not read"),
    (lambda c: c["sparse_attention_config"].update(sparse_attention_freq=[1] * 59),
     "sparse_attention_freq: expected 60 entries"),
    (lambda c: c.update(attention_output_gate=True), "attention_output_gate"),
    (lambda c: c.update(qk_norm_type="per_layer"), "qk_norm_type: 'per_layer' is not read"),
    (lambda c: c.update(shared_intermediate_size=4000),
     "shared_intermediate_size: .* must be a multiple of it, got 4000"),
    (lambda c: c.update(moe_layer_freq=[2] * 60), "moe_layer_freq: expected 60 entries"),
])
def test_minimax_m3_refusals_name_the_key(tmp_path: Path, change: Any, message: str) -> None:
    cfg = json.loads(json.dumps(MINIMAX_M3))
    change(cfg)
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, cfg)


def test_block_sparse_checks() -> None:
    with pytest.raises(GpuarchError, match="sliding_window: not with block_sparse"):
        TransformerShape(name="t", layers=4, hidden=512, heads=8, vocab=1000,
                         sliding_window=128, block_sparse=BlockSparseAttention(
                             index_heads=1, index_head_dim=64, block=64, topk_blocks=4))
    with pytest.raises(GpuarchError, match=r"block_sparse\.layers: 9 exceeds layers 4"):
        TransformerShape(name="t", layers=4, hidden=512, heads=8, vocab=1000,
                         block_sparse=BlockSparseAttention(
                             index_heads=1, index_head_dim=64, block=64, topk_blocks=4,
                             layers=9))
    with pytest.raises(GpuarchError, match=r"block_sparse\.block: expected an integer"):
        BlockSparseAttention(index_heads=1, index_head_dim=64, block=0, topk_blocks=4)


def test_minimax_m3_estimates_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "infer", "--model", "minimax-m3", "--gpu", "h200", "--gpus", "8",
                 "--tp", "8", "--ep", "8", "--input-len", "8000", "--output-len", "500",
                 "--batch", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    note = out["assumptions"]["block_sparse_attention"]
    assert (note["positions"], note["sparse_layers"]) == (2048, 57)
    assert main(["estimate", "infer", "--model", "minimax-m3", "--gpu", "h200", "--gpus", "8",
                 "--tp", "8", "--ep", "8", "--input-len", "8000", "--output-len", "500",
                 "--batch", "8"]) == 0
    assert "sparse attn   in 57 layers each query attends to the 16 blocks of 128 " \
        "positions (2,048)" in capsys.readouterr().out
    assert main(["models", "minimax-m3"]) == 0
    assert "block-sparse in 57 of 60 layers" in capsys.readouterr().out
    assert main(["estimate", "train", "--model", "minimax-m3", "--gpu", "h100", "--gpus",
                 "256", "--tp", "2", "--pp", "4", "--ep", "16", "--seq-len", "8192",
                 "--global-batch", "512", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "block-sparse attention" in out["assumptions"]["sparse_attention"]
