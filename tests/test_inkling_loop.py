"""Inkling 2 Mini (``inkling2_loop_text``; an ``inkling2_loop`` checkpoint's language model):
Inkling 2's layers, some of them looped (``loop_layers``, run ``loop_passes`` times a token,
each run its own KV cache and state, the weights held once), with message gates in the runs
after the first (``loop_gate_rank``). Counts are pinned to the models Hugging Face
Transformers 5.25.0 builds on the meta device (``scripts/params_vs_transformers.py``); the
looped parts are also worked out by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_memory import memory_parts
from gpuarch.estimate.inkling_ops import loop_message_ops
from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.roofline import Elementwise, Gemm
from gpuarch.workloads.flops import forward_flops_per_token, loop_gate_gemms
from gpuarch.workloads.mtp import mtp_layer_shape
from gpuarch.workloads.params import count_params, layer_op_shares, loop_message_params
from gpuarch.workloads.shape import TransformerShape
from tests.hf_configs import read_config as _read
from tests.hf_configs import write_config
from tests.test_inkling import SMALL2

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")

D: dict[str, Any] = {"model_type": "inkling2_loop_text"}
# Inkling 2's small test model (12 layers, every sixth full, blocks of 4) with layers 4 to 7
# run twice, message gates of rank 16
SMALL: dict[str, Any] = {
    **SMALL2, **D, "loop_layer_index_start": 4, "loop_layer_index_end": 8,
    "loop_num_passes": 2, "loop_gate_rank": 16}
INKLING2_SMALL = 89_516_800  # SMALL without the loop, as Inkling 2 (tests/test_inkling.py)


@pytest.mark.parametrize(("cfg", "total"), [
    (D, 26_068_156_416),  # Inkling2LoopTextConfig's defaults (24 layers, 6-17 run 3 times)
    (SMALL, 90_049_280),
    ({**SMALL, "loop_num_passes": 4, "loop_layer_index_end": 12}, 90_581_760),
    # one pass: the gates are built but never run
    ({**SMALL, "loop_num_passes": 1}, 90_049_280),
    # a checkpoint's loop_config, read over the flat keys as Transformers reads it
    ({**SMALL, "loop_config": {"core_start": 4, "core_end": 12, "num_passes": 3,
                               "gate_rank": 8}}, 90_057_472),
    # no looped layers: Inkling 2's model
    ({**SMALL, "loop_layer_index_end": 4}, INKLING2_SMALL),
    ({**SMALL, "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid",
                               "hybrid_sliding", "hybrid", "hybrid", "hybrid_sliding",
                               "hybrid", "hybrid_sliding", "hybrid_sliding",
                               "hybrid_sliding", "hybrid"]}, 89_686_784),
    ({"model_type": "inkling2_loop", "text_config": SMALL,
      "vision_config": {"text_hidden_size": 512}}, 90_049_280),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_loop_by_hand(tmp_path: Path) -> None:
    """SMALL: 12 layers of hidden 512 (full at 5 and 11), layers 4-7 run twice: 16 runs,
    13 of them window layers (10 + the loop's 3). Weights: Inkling 2's, and in each looped
    layer four gates (2 x 512 x 16 down, 16 x 512 twice up) and four queries of 512."""
    s = _read(tmp_path, SMALL)
    assert (s.layers, s.sliding_layers, s.full_layers) == (16, 13, 3)
    assert (s.loop_layers, s.loop_passes, s.loop_start, s.loop_window_layers) == (4, 2, 4, 3)
    assert s.run_order() == [*range(8), *range(4, 12)]
    w = s.weight_view()
    assert (w.layers, w.sliding_layers, w.loop_layers) == (12, 10, 0)
    assert loop_message_params(s) == 4 * (4 * (2 * 512 * 16 + 2 * 16 * 512) + 4 * 512)
    assert count_params(s).total == INKLING2_SMALL + loop_message_params(s)
    # each run applies its layer's weights; the gates run once, in the second pass
    runs = s.unrolled_view()
    assert count_params(s).active(s) == count_params(runs).active(runs) \
        + loop_message_params(s)
    # the messages attend over the first pass's blocks after the loop's input (layers 4-7
    # are one block of 4: none) and its running sum: one state
    assert s.loop_message_sources == 1
    # block residuals: layers 0-3 read 2 summaries, 4-7 (twice: each pass starts again) 3,
    # 8-11 4
    assert s.attention_residual_reads == (4 * 2 + 8 * 3 + 4 * 4) / 16
    gates = 4 * (16 * 1024) + 4 * (1024 * 16)
    assert sum(n * k for _, n, k in loop_gate_gemms(s)) == gates
    assert forward_flops_per_token(s, 2048).total \
        - forward_flops_per_token(runs, 2048).total == 2.0 * 4 * (gates + 2 * 4 * 1 * 512)
    # the message operators count the share of runs that are second passes
    shares = layer_op_shares(s)
    assert shares["loop_gate_down"] == shares["loop_messages"] == 4 / 16
    ops = loop_message_ops(s, 100, lambda m, n, k, name: Gemm(m, n, k, name=name))
    assert [op.name for op in ops] == ["loop_gate_down"] * 4 + ["loop_gate_up"] * 4 \
        + ["loop_messages"]
    up = ops[4]
    assert isinstance(up, Gemm) and (up.element, up.weight_element) == (4.0, 4.0)
    assert isinstance(ops[-1], Elementwise)
    # Transformers' defaults: two states a message (blocks of 6 from layer 6: the one from
    # 12, and the running sum); 48 runs
    d = _read(tmp_path, D)
    assert (d.layers, d.loop_message_sources, d.weight_view().layers) == (48, 2, 24)


def test_each_run_caches_and_computes(tmp_path: Path) -> None:
    """Serving: every run keeps its own KV cache and convolution state (as the unrolled
    model, layer for layer), the weights are held once (gates and queries beside), and the
    gates' work makes the model slower than the unrolled one."""
    s = _read(tmp_path, SMALL)
    runs, weights = s.unrolled_view(), s.weight_view()
    cfg = InferenceConfig(input_len=2048, output_len=128, batch=8)
    parts, unrolled = (memory_parts(x, cfg, 8, H100) for x in (s, runs))
    assert parts["kv_cache"] == unrolled["kv_cache"] > memory_parts(weights, cfg, 8,
                                                                   H100)["kv_cache"]
    assert parts["weights"] == pytest.approx(memory_parts(weights, cfg, 8, H100)["weights"]
                                             + 2 * loop_message_params(s))
    looped, plain, once = (estimate_inference(CATALOG, x, H100, cfg)
                           for x in (s, runs, weights))
    assert looped.ttft_s > plain.ttft_s > once.ttft_s
    assert looped.tpot_s > once.tpot_s


def test_training_runs_and_refusals(tmp_path: Path) -> None:
    """Training keeps each run's activations and the gates' in the later runs; the
    gradients and optimizer cover the weights once; pipelines and LoRA over looped layers
    are refused, and MTP's block is a plain Inkling 2 layer."""
    s = _read(tmp_path, SMALL)
    runs = s.unrolled_view()
    act = {x: activation_bytes_per_layer(x, 1, 4096, 1, False, Recompute.NONE)
           for x in (s, runs)}
    assert act[s] > act[runs]
    cfg = TrainingConfig(gpus=8, ep=8, seq_len=4096, global_batch=64)
    r, u = (estimate_training(CATALOG, x, H100, cfg) for x in (s, runs))
    assert r.memory.optimizer < u.memory.optimizer
    assert r.step_time_s > u.step_time_s
    with pytest.raises(GpuarchError, match=r"--pp: 2 is not priced for looped layers"):
        estimate_training(CATALOG, s, H100, dataclasses.replace(cfg, gpus=16, pp=2))
    with pytest.raises(GpuarchError, match=r"--lora-rank: LoRA over looped layers"):
        estimate_training(CATALOG, s, H100, dataclasses.replace(cfg, lora_rank=8))
    m = mtp_layer_shape(s)
    assert (m.layers, m.loop_layers, m.loop_gate_rank) == (1, 0, 0)
    assert estimate_training(CATALOG, s, H100, dataclasses.replace(
        cfg, mtp_layers=1)).step_time_s > r.step_time_s


@pytest.mark.parametrize(("change", "message"), [
    ({"loop_layer_index_start": 2}, "loop_layer_index_start: 2 is not a multiple of "
                                    "n_layers_per_attn_res_block"),
    ({"loop_layer_index_start": 0}, "loop_layer_index_start: expected a layer after the first"),
    ({"loop_layer_index_end": 16}, "loop_layer_index_end: expected 4 .* to 12"),
    ({"loop_num_passes": 0}, "loop_num_passes: expected at least 1, got 0"),
    ({"loop_config": [4, 8]}, "loop_config: expected an object"),
    ({"loop_gate_rank": -1}, "loop_gate_rank"),
])
def test_reader_refusals(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **change})


def test_shape_checks(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="loop_layers / loop_passes: looped layers need"):
        dataclasses.replace(s, loop_passes=0)
    with pytest.raises(GpuarchError, match=r"layers: 8 of the model's own \(16 runs\) are "
                                           r"too few for layers 4 to 11 looped 2 times"):
        dataclasses.replace(s, loop_layers=8)
    with pytest.raises(GpuarchError, match="loop_window_layers: 5 exceeds"):
        dataclasses.replace(s, loop_window_layers=5)
    with pytest.raises(GpuarchError, match="loop_gate_rank: the message gates read"):
        dataclasses.replace(s, attention_residual_block=0, lean_attention_residuals=False,
                            split_attention_inputs=False)
    dense = TransformerShape(name="looped", layers=6, hidden=256, heads=4, vocab=100,
                             experts=4, experts_per_token=1, dense_layers=2, loop_layers=2,
                             loop_passes=2, loop_start=2)
    assert count_params(dense).total == count_params(dense.weight_view()).total
    with pytest.raises(GpuarchError, match="loop_start: the leading dense and hash-routed"):
        dataclasses.replace(dense, loop_start=1)


@settings(max_examples=40, deadline=None)
@given(passes=st.integers(1, 5), start=st.integers(1, 6), looped=st.integers(1, 6),
       rank=st.sampled_from([0, 8, 64]))
def test_more_passes_add_work_not_weights(passes: int, start: int, looped: int,
                                          rank: int) -> None:
    """However the loop is set: the weights are the model's once (and the gates'), one
    more pass adds the looped layers' work and never their weights."""
    own = 12
    looped = min(looped, own - start)

    def shape(p: int) -> TransformerShape:
        return TransformerShape(name="looped", layers=own + (p - 1) * looped, hidden=256,
                                heads=4, vocab=100, attention_residual_block=2,
                                loop_layers=looped, loop_passes=p, loop_start=start,
                                loop_gate_rank=rank)

    s, more = shape(passes), shape(passes + 1)
    assert count_params(s).total == count_params(more).total \
        == count_params(s.weight_view()).total + loop_message_params(s)
    assert count_params(more).active(more) > count_params(s).active(s)
    assert forward_flops_per_token(more, 1024).total > forward_flops_per_token(s, 1024).total
    assert len(s.run_order()) == s.layers


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write_config(tmp_path, D))
    assert main(["models", path]) == 0
    out = capsys.readouterr().out
    assert "24 layers (48 runs a token)" in out
    assert "loop          layers 6 to 17 run 3 times a token" in out
    assert "message gates of rank 64" in out
    assert main(["estimate", "train", "--model", path, "--gpu", "h100", "--gpus", "16",
                 "--pp", "2", "--ep", "8", "--seq-len", "4096", "--global-batch", "64"]) == 2
    assert "--pp: 2 is not priced for looped layers" in capsys.readouterr().err
    # --layers counts the model's own layers, each once (the runs follow)
    infer = ["estimate", "infer", "--model", path, "--gpu", "h200", "--input-len", "2048",
             "--output-len", "256", "--batch", "8", "--json"]
    assert main(infer) == 0
    plain = capsys.readouterr().out
    assert main([*infer, "--layers", "24"]) == 0
    assert capsys.readouterr().out == plain
    assert main([*infer, "--layers", "30"]) == 0
    assert capsys.readouterr().out != plain
    assert main([*infer, "--layers", "12"]) == 2
    assert "--layers: 12 of the model's own (36 runs) are too few" in capsys.readouterr().err
