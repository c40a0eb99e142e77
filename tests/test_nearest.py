"""The published runs an estimate lists as nearest: the shipped figures match the model,
every validation run finds itself first, closeness behaves, and the CLI prints them."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.validation import inference as vi
from gpuarch.validation import training as vt
from gpuarch.validation.bands import engine_family
from gpuarch.validation.nearest import (
    DISTANCE_WEIGHTS,
    LATENCY_AS_THROUGHPUT,
    Setup,
    compute_figures,
    distance,
    figures_as_json,
    load_figures,
    nearest,
    serving_setup,
    training_setup,
)

CATALOG = load_catalog()


def test_shipped_figures_match_the_model() -> None:
    """data/error_bands.json's figures are what the validation gives today (rerun
    scripts/error_bands.py after a change to the model or the data)."""
    assert figures_as_json(load_figures()) == figures_as_json(compute_figures(CATALOG))


def test_the_figures_are_the_bands_figures() -> None:
    """One figure per training point and per serving throughput figure, as the bands
    count them."""
    from gpuarch.validation.bands import load_bands

    figures = load_figures()
    bands = load_bands()
    for task in ("training", "serving"):
        assert sum(f.setup.task == task for f in figures) == bands[task].figures


def test_every_training_run_finds_itself_first() -> None:
    """An estimate of a validation point's own setup lists that point (or one with the
    same setup) first, at distance 0, with the point's own error."""
    by_id = {f.id: f for f in load_figures() if f.setup.task == "training"}
    for point in vt.load_training_points():
        if point.id not in by_id:
            continue  # not compared (no global batch, or excluded)
        product = CATALOG.product(point.get("gpu"))
        system = CATALOG.system_for(product)
        query = training_setup(vt.point_shape(point), product, vt.point_config(point, system))
        d, first = nearest(query)[0]
        assert d == 0.0, point.id
        assert first.setup == by_id[point.id].setup, point.id


def test_every_serving_run_finds_itself_first() -> None:
    by_id = {f.id: f for f in load_figures() if f.setup.task == "serving"}
    for point in vi.load_inference_points():
        if point.id not in by_id:
            continue  # a TTFT or TPOT figure: not one of the bands'
        product = CATALOG.product(point.get("gpu"))
        query = serving_setup(vt.point_shape(point), product, vi.point_config(point, 8),
                              engine_family(str(point.get("framework"))))
        d, first = nearest(query)[0]
        assert d == 0.0, point.id
        assert first.setup == by_id[point.id].setup, point.id


def test_disaggregated_runs_stay_out_of_the_bands_and_the_neighbours() -> None:
    """A disaggregated run is compared in the validation but is no figure of the bands or
    the nearest runs, which hold aggregated serving."""
    points = vi.load_inference_points()
    disaggregated = {p.id for p in points if p.get("prefill_gpus") is not None}
    assert len(disaggregated) >= 34
    compared = {r.id for r in vi.validate_inference(CATALOG).rows}
    assert disaggregated <= compared
    assert not disaggregated & {f.id for f in load_figures()}


def test_a_static_batch_latency_counts_as_the_rate_it_implies() -> None:
    """A published request latency of a static batch is a figure: the output rate it
    implies (batch x output length / latency), so the model's error there is published /
    predicted - 1 on the latency; latencies of nothing else (TTFT, TPOT) are not."""
    rows = {r.id: r for r in vi.validate_inference(CATALOG).rows}
    figures = {f.id: f for f in load_figures() if f.setup.task == "serving"}
    points = {p.id: p for p in vi.load_inference_points()}
    latency = [i for i, r in rows.items() if r.metric == "request_latency_s"]
    assert len(latency) >= 100
    for pid in latency:
        row, figure = rows[pid], figures[pid]
        cfg = vi.point_config(points[pid], 8)
        assert figure.metric == LATENCY_AS_THROUGHPUT
        tokens = cfg.batch * cfg.output_len
        assert figure.published == pytest.approx(tokens / row.published, rel=1e-12)
        # (the file keeps six digits of the prediction)
        assert figure.error == pytest.approx(row.published / row.predicted - 1, abs=1e-5)
    # Llama 3.1 8B in INT4 on one H100 at 1,024/1,024 tokens, one request at a time: the
    # card's 5.7 s (Neural Magic's DeepSeek-R1-Distill-Llama-8B-quantized.w4a16 model card,
    # vLLM 0.7.2 single-stream table) is 1,024 / 5.7 = 179.6 output tokens/s
    card = figures["nm-vllm072-h100x1-r1-distill-llama-8b-w4a16-1024-1024"]
    assert card.published == pytest.approx(1024 / 5.7, rel=1e-9)
    assert not any(f.metric in ("ttft_s", "tpot_s") for f in figures.values())


def _setup(**kw: object) -> Setup:
    base = dict(task="training", model="llama-3.1-8b", params=8_030_261_248, kind="dense",
                gpu="h100-sxm5-80gb", architecture="hopper", gpus=64, precision="bf16",
                tp=1, pp=1, cp=1, ep=1, seq_len=8192)
    base.update(kw)
    return Setup(**base)  # type: ignore[arg-type]


_GPUS = st.sampled_from([("h100-sxm5-80gb", "hopper"), ("h200-sxm-141gb", "hopper"),
                         ("b200", "blackwell"), ("gb200", "blackwell"),
                         ("a100-sxm4-80gb", "ampere")])
_SETUPS = st.builds(
    lambda gpu, model, gpus, tp, prec, seq: _setup(gpu=gpu[0], architecture=gpu[1],
                                                  model=model[0], params=model[1],
                                                  gpus=gpus, tp=tp, precision=prec,
                                                  seq_len=seq),
    _GPUS, st.sampled_from([("llama-3.1-8b", 8_030_261_248), ("llama-3.1-70b", 70_553_706_496),
                            ("llama-3.1-405b", 405_853_388_800)]),
    st.sampled_from([8, 64, 512, 4096]), st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["bf16", "fp8"]), st.sampled_from([2048, 4096, 8192]))


@given(_SETUPS, _SETUPS)
def test_distance_is_a_symmetric_penalty(a: Setup, b: Setup) -> None:
    assert distance(a, a) == 0.0
    assert distance(a, b) == distance(b, a) >= 0.0
    assert (distance(a, b) == 0.0) == (a == b)


def test_distance_ranks_what_differs() -> None:
    """Another GPU of the same architecture is closer than one of another architecture;
    another model is farther than either; a different task is never close."""
    q = _setup()
    same_arch = _setup(gpu="h200-sxm-141gb")
    other_arch = _setup(gpu="b200", architecture="blackwell")
    other_model = _setup(model="llama-3.1-70b", params=70_553_706_496)
    assert 0 < distance(q, same_arch) < distance(q, other_arch) < distance(q, other_model)
    assert distance(q, dataclasses.replace(q, task="serving")) == math.inf
    assert distance(q, _setup(gpus=128)) == DISTANCE_WEIGHTS["scale"]
    assert distance(q, _setup(tp=2, cp=2)) == 2 * DISTANCE_WEIGHTS["parallel"]
    # another engine counts only where both setups name one
    trt, vllm = _setup(engine="trtllm"), _setup(engine="vllm")
    assert distance(trt, vllm) == DISTANCE_WEIGHTS["engine"]
    assert distance(trt, _setup(engine="trtllm")) == distance(q, vllm) == 0.0


def test_nothing_close_lists_nothing() -> None:
    """A setup far from every published one (a model of a thousand parameters) gets no
    list rather than the least bad of the far ones."""
    tiny = _setup(model="tiny", params=1_000, task="serving", input_len=128, output_len=128)
    assert nearest(tiny) == []
    assert len(nearest(_setup(), k=5)) == 5


def test_one_entry_per_setup() -> None:
    """A layout republished by several releases of a table is listed once."""
    near = nearest(_setup(model="llama-3.1-70b", params=70_553_706_496, tp=4, pp=8,
                          precision="fp8", seq_len=8192), k=5)
    setups = [f.setup for _, f in near]
    assert len(setups) == len(set(setups)) == 5


def test_estimate_prints_the_published_run_of_its_setup(capsys) -> None:
    """The MLPerf v6.0 Llama 3.1 8B run on 1,024 GB200 (TP 4, CP 4): an estimate of that
    setup names it first, with the model's error there, in text and JSON."""
    run = next(f for f in load_figures() if f.id == "mlperf60-gb200-llama31-8b-1024-fp8")
    argv = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "gb200", "--gpus",
            "1024", "--tp", "4", "--cp", "4", "--seq-len", "8192", "--global-batch", "64",
            "--micro-batch", "1", "--precision", "fp8", "--sequence-parallel"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"{run.error:+.0%}  {run.id}: llama-3.1-8b, 1,024 x gb200" in text
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    first = doc["nearest_published"][0]
    assert first["id"] == run.id
    assert first["distance"] == 0.0
    assert first["error"] == pytest.approx(run.error, rel=1e-5)


def test_serving_estimate_lists_runs(capsys) -> None:
    assert main(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100",
                 "--input-len", "128", "--output-len", "128", "--batch", "64",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    near = doc["nearest_published"]
    assert 1 <= len(near) <= 3
    assert all(n["model"] for n in near)
    assert [n["distance"] for n in near] == sorted(n["distance"] for n in near)


def test_advice_lists_the_runs_nearest_its_best_plan(capsys) -> None:
    """advise train / advise infer carry the measured runs nearest their best plan under
    assumptions.nearest_published, nearest first, each on the plan's task."""
    assert main(["advise", "train", "--model", "llama-3.1-8b", "--tokens", "1e11",
                 "--max-gpus", "64", "--gpu", "h100,b200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    near = doc["assumptions"]["nearest_published"]
    assert near and [n["distance"] for n in near] == sorted(n["distance"] for n in near)
    ids = {f.id for f in load_figures() if f.setup.task == "training"}
    assert {n["id"] for n in near} <= ids
    assert main(["advise", "infer", "--model", "llama-3.1-8b", "--input-len", "1000",
                 "--output-len", "1000", "--rate", "5", "--gpu", "h100"]) == 0
    text = capsys.readouterr().out
    assert "measured runs nearest the best plan" in text


def test_a_run_with_its_own_shape_is_named_by_its_size() -> None:
    """Points that give their own shape carry a model name (the same for each run of that
    model: GPT-J 6B on H100, H200, L40S and A100, in two sources); one with none is named
    after itself, and the summary then says the model's size instead of repeating the id."""
    gptj = [f for f in load_figures() if f.setup.model == "gpt-j-6b"]
    assert len({f.source for f in gptj}) == 2
    assert all(f.summary.startswith(f"{f.id}: gpt-j-6b, ") for f in gptj)
    assert not [f.id for f in load_figures() if f.setup.model == f.id]
    own = dataclasses.replace(gptj[0], setup=dataclasses.replace(gptj[0].setup,
                                                                 model=gptj[0].id))
    # GPT-J's model card: 6,053,381,344 parameters
    assert own.summary.startswith(f"{own.id}: a 6.05B-parameter model")
    named = next(f for f in load_figures() if f.setup.model == "llama-3.1-8b")
    assert named.summary.startswith(f"{named.id}: llama-3.1-8b, ")
