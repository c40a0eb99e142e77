"""The serving validation's total throughput: prompt and output tokens a second together."""

from __future__ import annotations

import dataclasses

import pytest

from gpuarch.catalog.loader import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import compare_point, load_inference_points


def _point(point_id: str):  # type: ignore[no-untyped-def]
    return next(p for p in load_inference_points() if p.id == point_id)


def test_total_is_the_output_rate_with_each_prompt_beside_its_answer() -> None:
    """A point that gives both figures compares the model's output rate x (input + output) /
    output against the total."""
    point = _point("gpumode-paris-8xh200-qwen3.5-35b-a3b-bf16-tp8-c1")
    both = dataclasses.replace(point, raw={**point.raw, "output_tokens_per_s": 236.5})
    rows = {r.metric: r for r in compare_point(load_catalog(), both, DEFAULT_EFFICIENCY)}
    out, total = rows["output_tokens_per_s"], rows["total_tokens_per_s"]
    assert total.predicted == pytest.approx(out.predicted * (1036 + 319) / 319)


# The README's table (gpu-mode/paris-hackathon-2026-inference, 'Baseline Numbers'): tok/s
# (prompt+completion) and wall time at each concurrency, 64 requests a level
README = {1: (984, 86.1), 2: (1753, 47.5)}


@pytest.mark.parametrize("concurrency", sorted(README))
def test_the_hackathon_rows_answer_lengths_follow_from_their_totals(concurrency: int) -> None:
    """Each row's mean answer is the level's tokens (tok/s x wall time) less its prompts (62
    random prompts of about 1,036 tokens in the chat template, two short spot checks), over
    its 64 requests; the row's figure is the table's."""
    point = _point(f"gpumode-paris-8xh200-qwen3.5-35b-a3b-bf16-tp8-c{concurrency}")
    rate, wall = README[concurrency]
    prompts = 62 * point.raw["input_len"] + 2 * 35
    assert point.raw["output_len"] == round((rate * wall - prompts) / 64)
    assert point.raw["total_tokens_per_s"] == rate
    assert point.raw["num_requests"] == 64 and point.raw["concurrency"] == concurrency
