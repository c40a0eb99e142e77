"""BLOOM: ALiBi positions (no position parameters) and a layer norm right after the token
embedding, read from its Hugging Face config.json and held by the presets. The model card of
bigscience/bloom gives 176,247,271,424 parameters, 3,596,615,680 of them the embedding;
bigscience/bloom-7b1's gives 7,069,016,064."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from gpuarch.estimate import TrainingConfig
from gpuarch.estimate.pipeline_layout import even_layout, parse_pp_layout
from gpuarch.estimate.training_step import _rank_params
from gpuarch.report.launch import megatron_launch
from gpuarch.workloads import Position, count_params, preset
from gpuarch.workloads.hf import shape_from_hf_config

# bigscience/bloom's config.json, the fields the reader uses
BLOOM_CONFIG = {"model_type": "bloom", "n_layer": 70, "hidden_size": 14336, "n_head": 112,
                "n_inner": None, "vocab_size": 250880, "seq_length": 2048}


def test_the_config_gives_the_model_cards_count(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BLOOM_CONFIG))
    shape = shape_from_hf_config(path)
    pc = count_params(shape)
    assert pc.total == 176_247_271_424
    assert pc.embedding == 3_596_615_680
    assert shape.position is Position.ALIBI and shape.embedding_norm
    assert pc.total == count_params(preset("bloom-176b").shape).total
    # without the embedding's norm it would be 2 x 14,336 fewer
    assert pc.total - count_params(replace(shape, embedding_norm=False)).total == 2 * 14336


def test_the_first_stage_holds_the_embeddings_norm() -> None:
    """Ten stages of seven layers: the ranks' parameters add up to the model's, the
    embedding and its norm on the first, the head (tied: its own copy) and the final norm
    on the last."""
    shape = preset("bloom-176b").shape
    layout = parse_pp_layout(even_layout(70, pp=10, vpp=1), pp=10, vpp=1, layers=70,
                             dense_layers=70)
    dense, expert = _rank_params(shape, layout, 0, 0)
    pc = count_params(shape)
    tied_copy = pc.embedding  # the last stage's copy of the tied embedding
    assert dense.sum() + expert.sum() == pc.total + tied_copy
    assert dense[0] - dense[1] == pc.embedding + 2 * 14336


def test_megatrons_launch_says_what_it_cannot_set() -> None:
    cfg = TrainingConfig(gpus=8, seq_len=2048, global_batch=8, tp=8)
    notes = " ".join(megatron_launch(preset("bloom-176b").shape, cfg).notes)
    assert "ALiBi positions (BLOOM) are not a Megatron-Core position embedding" in notes
    assert "the layer norm after the embedding (BLOOM's) has no Megatron-Core flag" in notes
