"""The request-level serving simulation (``estimate infer --rate R --simulate N``): requests
arriving at random replayed through one replica's continuous batching, pass by pass, at
the estimate's own pass times."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import PassTimes, estimate_inference, pass_times
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.load import batch_for_rate
from gpuarch.estimate.simulate import (
    RequestLengths,
    quantile_mean,
    read_lengths,
    replay,
    simulate_serving,
)
from gpuarch.workloads import preset
from tests.test_cli import run

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
LLAMA_8B = preset("llama-3.1-8b").shape
SERVE = InferenceConfig(input_len=2048, output_len=256)


@pytest.mark.parametrize(("rho", "tolerance"), [(0.5, 0.03), (0.8, 0.05)])
def test_one_prompt_at_a_time_is_an_md1_queue(rho: float, tolerance: float) -> None:
    """One-token answers and one prompt per prefill pass make the engine a single server of
    constant service time S under Poisson arrivals: the mean wait is the
    Pollaczek-Khinchine value rho / (2 (1 - rho)) x S, so the mean TTFT is S times
    1 + rho / (2 (1 - rho)) (1.5 at rho 0.5, 3 at 0.8; 50,000 requests, the tolerance
    several standard errors of the simulated mean)."""
    cfg = InferenceConfig(input_len=1024, output_len=1, max_num_tokens=1024)
    service = float(pass_times(CATALOG, LLAMA_8B, H100, cfg).prefill_s[0])
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, cfg, rho / service, requests=50_000,
                           seed=1)
    assert sim.ttft_s.mean / service == pytest.approx(1 + rho / (2 * (1 - rho)),
                                                      rel=tolerance)
    assert sim.tpot_s is None  # no answer has a second token


def test_a_lone_request_sees_one_prefill_pass_and_one_sequence_steps() -> None:
    """At a rate far below what one request takes, most requests find the engine idle:
    their TTFT is exactly the one-prompt prefill pass and their TPOT the one-sequence
    decode step (the medians)."""
    times = pass_times(CATALOG, LLAMA_8B, H100, SERVE)
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 0.01, requests=500)
    assert sim.ttft_s.p50 == pytest.approx(float(times.prefill_s[0]), rel=1e-9)
    assert sim.tpot_s is not None
    assert sim.tpot_s.p50 == pytest.approx(float(times.decode_s[0]), rel=1e-9)


@pytest.mark.parametrize("schedule", ["separate", "mixed"])
@pytest.mark.parametrize("share", [0.1, 0.4, 0.8, 0.9])
def test_evenly_spaced_arrivals_give_the_steady_states_tpot(share: float,
                                                            schedule: str) -> None:
    """Arrivals evenly spaced are the steady state's own view: from a tenth to 90% of the
    deployment's capacity the simulated mean TPOT is the estimate's at the batch the rate
    settles at, within 6% (the simulation 2-5% below: the estimate takes the whole batch the
    rate settles at, the simulated requests in flight average a fraction under it; 6% since
    TensorRT-LLM's PyTorch backend took its measured step, its 40% point 5.1% below), whether
    prompts are prefilled in passes of their own or beside
    the decode steps (both prefill a pass of the prompts that arrived during the step and
    the pass before it). (While the steady state prefilled a cycle's prompts in
    whole-budget passes, it held only to 40%: at 80% and 90% its TPOT read 5-36% under.)"""
    capacity = batch_for_rate(CATALOG, LLAMA_8B, H100, SERVE, 0.01).capacity_per_s
    rate = share * capacity
    load = batch_for_rate(CATALOG, LLAMA_8B, H100, SERVE, rate)
    est = estimate_inference(CATALOG, LLAMA_8B, H100, dataclasses.replace(
        SERVE, batch=load.batch, batching=Batching.CONTINUOUS))
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, rate, arrivals="uniform",
                           schedule=schedule)
    assert sim.tpot_s is not None
    assert sim.tpot_s.mean == pytest.approx(est.tpot_s, rel=0.06)
    # and the deployment delivers what arrives: the rate's output tokens
    assert sim.output_tokens_per_s == pytest.approx(rate * SERVE.output_len, rel=0.05)


@pytest.mark.parametrize("schedule", ["separate", "mixed"])
@pytest.mark.parametrize(("model", "gpu", "cfg"), [
    ("llama-3.1-8b", "h100", SERVE),
    ("llama-3.1-8b", "h100", InferenceConfig(input_len=512, output_len=512)),
    ("llama-3.1-70b", "h100", InferenceConfig(input_len=2048, output_len=512, gpus=4, tp=4)),
])
def test_the_steady_states_ttft_is_the_simulated_mean(model: str, gpu: str,
                                                      cfg: InferenceConfig,
                                                      schedule: str) -> None:
    """The steady state's TTFT at a rate (its pass holding the prompts that arrive during
    about one decode step, plus the M/D/1 wait) is the mean TTFT of a Poisson stream
    replayed through its own schedule within 20% from a fifth of capacity to 80% (at 90%
    the stream's bursts queue more than the M/D/1 wait carries: 13-21% under). (Before
    the pass was sized so, it held min(batch, prompts a pass) prompts and read 3-30 times
    the simulated mean: 1.3 s for Llama 2 70B on H200 at MLPerf's Server rate, whose log
    measures a mean of 198 ms.) So too with prompts mixed into the decode iteration, whose
    first tokens also wait for the running sequences' step."""
    shape, product = preset(model).shape, CATALOG.product(gpu)
    cfg = dataclasses.replace(cfg, schedule=schedule)
    capacity = batch_for_rate(CATALOG, shape, product, cfg, 0.001).capacity_per_s
    for share in (0.2, 0.5, 0.8):
        rate = share * capacity
        load = batch_for_rate(CATALOG, shape, product, cfg, rate)
        est = estimate_inference(CATALOG, shape, product, dataclasses.replace(
            cfg, batch=load.batch, batching=Batching.CONTINUOUS))
        sim = simulate_serving(CATALOG, shape, product, cfg, rate)
        assert est.ttft_s == pytest.approx(sim.ttft_s.mean, rel=0.2), share


def test_bursts_cost_percentiles_the_steady_state_does_not_show() -> None:
    """The same rate as a Poisson stream queues in its bursts: the 99th-percentile TTFT is
    well above the evenly spaced one, and a higher rate raises the mean TTFT."""
    capacity = batch_for_rate(CATALOG, LLAMA_8B, H100, SERVE, 0.01).capacity_per_s
    even = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 0.6 * capacity,
                            arrivals="uniform")
    bursty = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 0.6 * capacity)
    busier = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 0.85 * capacity)
    assert bursty.ttft_s.p99 > 1.5 * even.ttft_s.p99
    assert busier.ttft_s.mean > bursty.ttft_s.mean
    # evenly spaced, a request waits only for the pass in progress to end
    assert bursty.queue_s.p99 > 2 * even.queue_s.p99


@settings(max_examples=60, deadline=None)
@given(slots=st.integers(1, 64), per_pass=st.integers(1, 16),
       prefill=st.floats(1e-3, 1.0), decode=st.floats(1e-4, 0.1),
       growth=st.floats(0.0, 0.05), rate=st.floats(0.1, 1000.0),
       outputs=st.lists(st.integers(1, 300), min_size=10, max_size=120),
       per_step=st.sampled_from([1.0, 1.7, 3.0]), seed=st.integers(0, 2**31),
       arrivals=st.sampled_from(["poisson", "uniform"]),
       schedule=st.sampled_from(["separate", "mixed"]))
def test_every_request_is_served_in_order_and_every_token_decoded(
        slots: int, per_pass: int, prefill: float, decode: float, growth: float,
        rate: float, outputs: list[int], per_step: float, seed: int, arrivals: str,
        schedule: str) -> None:
    """Any pass times, rate and answer lengths: every request is admitted no earlier than
    it arrives and in arrival order, gets its first token a prefill pass later and its last
    no earlier; no decode step holds more than the slots; the steps decode every token after
    the first (and less than a step's worth more per request)."""
    passes = min(per_pass, slots)
    times = PassTimes(prefill * np.arange(1, passes + 1) ** 0.5,
                      decode * (1 + growth * np.arange(slots)), passes, slots, per_step)
    out = np.array(outputs, dtype=float)
    run = replay(times, rate, out, arrivals=arrivals, seed=seed, schedule=schedule)
    assert np.all(np.isfinite(run.finish))
    assert np.all(run.admitted >= run.arrival - 1e-12)
    assert np.all(np.diff(run.admitted) >= -1e-12)  # first come, first served
    assert np.all(run.first - run.admitted >= float(times.prefill_s[0]) - 1e-9)
    assert np.all(run.finish >= run.first)
    assert np.array_equal(run.finish == run.first, out == 1)
    needed = float(np.sum(out - 1))
    assert run.decoded_sequences <= run.decode_steps * slots
    assert needed <= run.decoded_sequences * per_step + 1e-6
    assert run.decoded_sequences * per_step < needed + len(out) * per_step + 1e-6


@pytest.mark.parametrize(("schedule", "first_b"), [("separate", 5.15), ("mixed", 5.25)])
def test_a_prompt_arriving_mid_decode_waits_for_the_step_and_then_its_iteration(
        schedule: str, first_b: float) -> None:
    """Hand-worked: prefill passes of 1 s, decode steps of 0.1 s (one sequence), requests
    every 2.05 s. A arrives at 2.05, has its first token at 3.05 and decodes from there; B
    arrives at 4.1, during A's 11th step, and is admitted at its end (4.15): its first token
    comes after its own pass (5.15), or, mixed, after a pass that also runs A's step
    (5.25)."""
    times = PassTimes(np.array([1.0, 1.5]), np.array([0.1, 0.15]), 2, 2, 1.0)
    run = replay(times, 1 / 2.05, np.array([30.0, 30.0]), arrivals="uniform",
                 schedule=schedule)
    assert run.first[0] == pytest.approx(3.05, abs=1e-9)
    assert run.admitted[1] == pytest.approx(4.15, abs=1e-9)
    assert run.first[1] == pytest.approx(first_b, abs=1e-9)


def test_answers_of_varying_length_keep_their_mean() -> None:
    """With --output-len-cv the answers are drawn around the mean output length (a gamma
    of that mean and spread): the run delivers about the mean per request, and the
    latency spreads with the answers (its p99 several times its median)."""
    cfg = dataclasses.replace(SERVE, output_len_cv=0.8)
    plain = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 1.0, requests=5_000)
    varied = simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 1.0, requests=5_000)
    assert varied.output_tokens_per_s == pytest.approx(256.0, rel=0.05)
    assert varied.latency_s.p99 > 3 * varied.latency_s.p50
    assert plain.latency_s.p99 < 1.5 * plain.latency_s.p50


def _linear_times(budget: int, per_token_s: float = 1e-3) -> PassTimes:
    """Pass times linear in tokens (no fixed part), whole prompts of 100 tokens, so that a
    pass by tokens and a pass of whole prompts cost the same."""
    per_pass = budget // 100
    return PassTimes(per_token_s * 100 * np.arange(1, per_pass + 1), np.array([0.01] * 8),
                     per_pass, 8, 1.0, budget, np.array([1.0, 1e6]),
                     np.array([per_token_s, per_token_s * 1e6]))


@pytest.mark.parametrize("schedule", ["separate", "mixed"])
def test_prompts_of_the_configured_length_replay_as_whole_prompts(schedule: str) -> None:
    """Prompts given one by one, each of the configured 100 tokens, fill a pass of 1,000
    tokens with ten of them, as whole prompts do: the same replay, request for request."""
    times = _linear_times(1000)
    out = np.random.default_rng(3).integers(1, 40, 400).astype(float)
    plain = replay(times, 40.0, out, seed=5, schedule=schedule)
    given = replay(times, 40.0, out, seed=5, schedule=schedule, prompts=np.full(400, 100.0))
    for a, b in ((plain.first, given.first), (plain.finish, given.finish),
                 (plain.admitted, given.admitted)):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_a_pass_takes_waiting_prompts_while_their_tokens_fit_its_budget() -> None:
    """Hand-worked, one-token answers, every request arriving at once, a pass of 1,000
    tokens at a millisecond a token: prompts of 600, 600, 200, 900 and 1,500 tokens run as
    passes of 600 (the second would not fit), 600 + 200, 900, and 1,500 (longer than the
    budget, alone): first tokens at 0.6, 1.4, 1.4, 2.3 and 3.8 s."""
    run = replay(_linear_times(1000), 1e9, np.ones(5), arrivals="uniform",
                 prompts=np.array([600.0, 600, 200, 900, 1500]))
    assert run.first == pytest.approx([0.6, 1.4, 1.4, 2.3, 3.8], abs=1e-6)


def test_a_pass_by_tokens_is_the_whole_prompt_pass_within_a_few_percent() -> None:
    """The grid of a pass's seconds by its tokens (``pass_times(max_prompt_tokens=...)``)
    holds each whole-prompt pass exactly, falls between them within 3% of the passes of
    whole prompts the tokens lie between (the teeth of wave quantization), rises with the
    tokens (never 15% below a shorter pass) and reaches past the budget to the longest
    prompt."""
    for cfg in (SERVE, InferenceConfig(input_len=222, output_len=256, max_num_tokens=4096)):
        times = pass_times(CATALOG, LLAMA_8B, H100, cfg, max_prompt_tokens=9000)
        whole = cfg.new_prompt_tokens * np.arange(1, times.prompts_per_pass + 1)
        by_tokens = np.array([times.prefill_for_tokens(t) for t in whole])
        assert by_tokens == pytest.approx(times.prefill_s, rel=1e-9)
        middle = np.array([times.prefill_for_tokens(t) for t in whole[:-1] + whole[0] / 2])
        assert np.all(middle >= times.prefill_s[:-1] * 0.97)
        assert np.all(middle <= times.prefill_s[1:] * 1.03)
        # rising, but for teeth: the deepest, 12%, where a pass passes 128 rows and its
        # GEMMs leave the few-row path
        grid_s = times.prefill_tokens_s
        assert np.all(grid_s >= 0.85 * np.maximum.accumulate(grid_s))
        assert grid_s[-1] > 10 * grid_s[0]
        assert times.prefill_tokens[-1] == 9000 and times.token_budget == cfg.max_num_tokens
    with pytest.raises(ValueError, match="token grid"):
        pass_times(CATALOG, LLAMA_8B, H100, SERVE).prefill_for_tokens(100)


def test_prompts_that_vary_in_length_keep_their_mean_and_lengthen_the_tail() -> None:
    """--input-len-cv: prompts drawn around --input-len (a gamma of that mean and spread)
    keep the mean and leave the mean TPOT within a few percent, while the long prompts'
    passes lengthen the TTFT's tail: its p99 grows with the spread."""
    plain = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, requests=3_000)
    assert plain.prompts is None
    runs = [simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, requests=3_000,
                             input_len_cv=cv) for cv in (0.5, 1.0)]
    for sim, cv in zip(runs, (0.5, 1.0), strict=True):
        assert sim.prompts is not None and sim.prompts["input_len_cv"] == cv
        assert sim.prompts["mean"] == pytest.approx(2048, rel=0.05)
        assert sim.tpot_s is not None and plain.tpot_s is not None
        assert sim.tpot_s.mean == pytest.approx(plain.tpot_s.mean, rel=0.05)
    assert plain.ttft_s.p99 < runs[0].ttft_s.p99 < runs[1].ttft_s.p99


def test_prompts_drawn_from_a_datasets_quantiles() -> None:
    """input_quantiles: whole prompts drawn linearly between evenly spaced quantiles keep
    the distribution's mean (``quantile_mean``: the midpoint of each span on average) and
    stay within its range; --input-len must be that mean within 5%."""
    quantiles = [20.0, 80.0, 150.0, 300.0, 1000.0]
    mean = quantile_mean(quantiles)
    assert mean == pytest.approx((100 + 230 + 450 + 1300) / 8)
    assert quantile_mean([1, 3]) == 2
    cfg = InferenceConfig(input_len=round(mean), output_len=64)
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 5.0, requests=20_000,
                           input_quantiles=quantiles)
    assert sim.prompts is not None and sim.prompts["drawn_from"] == "quantiles"
    assert sim.prompts["mean"] == pytest.approx(mean, rel=0.02)
    assert sim.prompts["max"] <= 1000
    with pytest.raises(GpuarchError, match=r"--input-len: expected the prompts' mean"):
        simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, input_quantiles=quantiles)
    with pytest.raises(GpuarchError, match=r"--input-len-cv: the prompts' lengths"):
        simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 5.0, input_quantiles=quantiles,
                         input_len_cv=0.5)
    for bad in ([300.0, 200.0], [0.0, 10.0], [5.0], "many"):
        with pytest.raises(GpuarchError, match=r"input_quantiles: expected two or more"):
            simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 5.0, input_quantiles=bad)
    with pytest.raises(GpuarchError, match=r"--cached-prefix: the shortest prompt"):
        simulate_serving(CATALOG, LLAMA_8B, H100, dataclasses.replace(cfg, cached_prefix=30),
                         5.0, input_quantiles=quantiles)


def _lengths_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lengths.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_lengths_file_is_read_by_its_header(tmp_path: Path) -> None:
    """--lengths: the columns named input_len and output_len (any case, any order, other
    columns ignored, blank lines skipped), one request a row."""
    lengths = read_lengths(_lengths_file(
        tmp_path, "id,Output_Len,input_len\n1,10,100\n\n2,30,300\n"))
    assert lengths.rows == 2
    assert lengths.input is not None and lengths.output is not None
    assert list(lengths.input) == [100, 300] and list(lengths.output) == [10, 30]
    only = read_lengths(_lengths_file(tmp_path, "input_len\n5\n"))
    assert only.output is None and only.as_json()["input_len"]["mean"] == 5


@pytest.mark.parametrize(("text", "message"), [
    ("", "is empty; expected a header naming input_len, output_len, arrival_s (any of"),
    ("prompt,answer\n1,2\n", "has no column input_len or output_len or arrival_s in its"),
    ("input_length\n5\n", "; did you mean 'input_len'?"),
    ("input_len\n", "has a header but no request rows"),
    ("input_len,output_len\n5,7\n6,x\n", "row 3, output_len: expected a whole number of "
                                            "tokens >= 1, got 'x'"),
    ("input_len\n0\n", "row 2, input_len: expected a whole number of tokens >= 1, got '0'"),
    ("arrival_s\n1.5\n0.5\n", "row 3, arrival_s: 0.5 s is earlier than the row before's 1.5"),
    ("arrival_s\nnoon\n", "row 2, arrival_s: expected seconds (a number), got 'noon'"),
    ("arrival_s\ninf\n", "row 2, arrival_s: expected seconds"),
    ("input_len,output_len\n5\n", "row 2, output_len: expected a whole number"),
    ("input_len\n5\n\n0\n", "row 4, input_len: expected a whole number"),  # blank row 3
])
def test_a_bad_lengths_file_is_named_with_its_row(tmp_path: Path, text: str,
                                                  message: str) -> None:
    with pytest.raises(GpuarchError, match=r"^--lengths: ") as caught:
        read_lengths(_lengths_file(tmp_path, text))
    assert message in str(caught.value)
    with pytest.raises(GpuarchError, match=r"--lengths: cannot read .*missing.csv"):
        read_lengths(tmp_path / "missing.csv")


def test_requests_drawn_from_a_file_of_one_row_replay_the_configured_lengths(
        tmp_path: Path) -> None:
    """A lengths file whose every row is the configured prompt and answer replays exactly
    what the configured lengths do (the pass by tokens is exact at whole prompts), and
    a file's rows give the drawn prompts' mean and the answers' spread."""
    one = read_lengths(_lengths_file(tmp_path, "input_len,output_len\n" + "2048,256\n" * 3))
    plain = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=1_000)
    drawn = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=1_000,
                             lengths=one)
    assert drawn.ttft_s == plain.ttft_s and drawn.latency_s == plain.latency_s
    assert drawn.prompts is not None and drawn.prompts["drawn_from"] == "lengths"
    assert drawn.lengths is not None and drawn.lengths["rows"] == 3
    rows = "".join(f"{1000 + 2 * i},{100 + i}\n" for i in range(200))  # means 1,199 and 199.5
    mixed = read_lengths(_lengths_file(tmp_path, "input_len,output_len\n" + rows))
    cfg = InferenceConfig(input_len=1199, output_len=200)
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 4.0, requests=4_000, lengths=mixed)
    assert sim.prompts is not None
    assert sim.prompts["mean"] == pytest.approx(1199, rel=0.01)
    assert 1000 <= sim.prompts["p50"] <= 1398 and sim.prompts["max"] <= 1398
    assert sim.output_tokens_per_s == pytest.approx(4.0 * 199.5, rel=0.05)


def test_a_lengths_file_must_match_the_configured_means(tmp_path: Path) -> None:
    lengths = read_lengths(_lengths_file(tmp_path, "input_len,output_len\n1000,100\n"))
    with pytest.raises(GpuarchError, match=r"--input-len: expected the mean of --lengths' "
                                           r"column, 1,000.0 tokens \(within 5%\), got 2048"):
        simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, lengths=lengths)
    cfg = InferenceConfig(input_len=1000, output_len=256)
    with pytest.raises(GpuarchError, match=r"--output-len: expected the mean"):
        simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 4.0, lengths=lengths)
    cfg = InferenceConfig(input_len=1000, output_len=100)
    with pytest.raises(GpuarchError, match=r"--lengths: the file gives the prompts"):
        simulate_serving(CATALOG, LLAMA_8B, H100, cfg, 4.0, lengths=lengths, input_len_cv=0.5)
    spread = read_lengths(_lengths_file(tmp_path, "input_len\n500\n1500\n"))
    with pytest.raises(GpuarchError, match=r"--cached-prefix: the shortest prompt in"):
        simulate_serving(CATALOG, LLAMA_8B, H100, dataclasses.replace(cfg, cached_prefix=600),
                         4.0, lengths=spread)


def _trace(tmp_path: Path, times: list[float]) -> RequestLengths:
    rows = "".join(f"{t:.6f},2048,256\n" for t in times)
    return read_lengths(_lengths_file(tmp_path, "arrival_s,input_len,output_len\n" + rows))


def test_a_trace_of_even_arrivals_replays_as_evenly_spaced_arrivals(tmp_path: Path) -> None:
    """--arrivals trace: a trace whose requests come every 3 s, scaled to 4 requests a
    second, is the evenly spaced stream at 4 a second, request for request; the trace's
    own rate is reported."""
    trace = _trace(tmp_path, [100 + 3.0 * i for i in range(2_000)])
    assert trace.arrival_rate == pytest.approx(1 / 3)
    even = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=2_000,
                            arrivals="uniform")
    replayed = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=2_000,
                                arrivals="trace", lengths=trace)
    for a, b in ((even.ttft_s, replayed.ttft_s), (even.latency_s, replayed.latency_s)):
        assert b.mean == pytest.approx(a.mean, rel=1e-9) and b.p99 == pytest.approx(a.p99,
                                                                                  rel=1e-9)
    assert replayed.arrivals == "trace" and replayed.lengths is not None
    assert replayed.lengths["arrival_rate_per_s"] == pytest.approx(1 / 3)


def test_bursts_in_a_trace_cost_the_tail(tmp_path: Path) -> None:
    """Requests in bursts of 20 within half a second every 10 s, scaled to 4 a second: the
    same mean load as a Poisson stream, a far longer TTFT tail (its p99 more than three
    times the stream's); with two replicas each takes about half the trace, and asking for
    more requests than a replica's share is an error naming --simulate."""
    rng = np.random.default_rng(0)
    times = sorted(10.0 * b + 0.5 * float(rng.random()) for b in range(200) for _ in range(20))
    trace = _trace(tmp_path, times)
    poisson = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=3_000)
    bursts = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, requests=3_000,
                              arrivals="trace", lengths=trace)
    assert bursts.ttft_s.p99 > 3 * poisson.ttft_s.p99
    two = dataclasses.replace(SERVE, gpus=2)
    simulate_serving(CATALOG, LLAMA_8B, H100, two, 8.0, requests=1_900, arrivals="trace",
                     lengths=trace)
    with pytest.raises(GpuarchError, match=r"--simulate: --lengths holds 4,000 arrivals, "
                                           r"[0-9,]+ of them for one replica of 2"):
        simulate_serving(CATALOG, LLAMA_8B, H100, two, 8.0, requests=2_100, arrivals="trace",
                         lengths=trace)
    with pytest.raises(GpuarchError, match=r"--arrivals trace: replays the arrival_s column"):
        simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 4.0, arrivals="trace")


def test_cli_lengths_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--lengths FILE reaches the simulation, and its answers' spread the steady state's
    output_len_cv; --output-len-cv beside a file of answers, or --lengths without
    --simulate, is a usage error."""
    rows = "".join(f"{2048 + (i % 3 - 1) * 512},{256 + (i % 2) * 128 - 64}\n"
                   for i in range(60))
    path = _lengths_file(tmp_path, "input_len,output_len\n" + rows)
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--lengths", str(path),
                          "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["simulation"]["lengths"]["rows"] == 60
    assert doc["simulation"]["prompts"]["drawn_from"] == "lengths"
    assert doc["assumptions"]["output_len_cv"] == pytest.approx(0.25)
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--lengths", str(path))
    assert status == 0 and "lengths       each request a row of" in out
    for extra, message in ((("--simulate", "300", "--output-len-cv", "0.5"),
                            "--output-len-cv: the answers' lengths come from --lengths"),
                           ((), "--arrivals/--seed/--input-len-cv/--lengths")):
        status, out, err = _run(capsys, "--rate", "4", "--lengths", str(path), *extra)
        assert status == 2 and out == "" and message in err and "Traceback" not in err


def test_the_share_of_requests_within_the_objectives() -> None:
    """--slo-ttft-ms/--slo-tpot-ms: the share of the counted requests that met every
    objective, and the goodput (that share of the rate): all of them under generous
    objectives, none under one below the shortest TTFT, about half at the median TTFT,
    never more with a second objective; one-token answers meet any TPOT objective."""
    def share(**slo: float) -> float:
        sim = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, requests=2_000, **slo)
        assert sim.slo is not None
        assert sim.slo["goodput_requests_per_s"] == pytest.approx(5.0 * sim.slo["attained"])
        return float(sim.slo["attained"])

    plain = simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, requests=2_000)
    assert plain.slo is None and plain.tpot_s is not None
    assert share(ttft_slo_s=60.0, tpot_slo_s=1.0) == 1.0
    assert share(ttft_slo_s=1e-6) == 0.0
    assert share(ttft_slo_s=plain.ttft_s.p50) == pytest.approx(0.5, abs=0.01)
    both = share(ttft_slo_s=plain.ttft_s.p90, tpot_slo_s=plain.tpot_s.p90)
    assert both <= share(ttft_slo_s=plain.ttft_s.p90) and both < 0.9
    one_token = InferenceConfig(input_len=1024, output_len=1)
    sim = simulate_serving(CATALOG, LLAMA_8B, H100, one_token, 5.0, requests=500,
                           tpot_slo_s=1e-9)
    assert sim.slo is not None and sim.slo["attained"] == 1.0
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(GpuarchError, match=r"--slo-ttft-ms: expected a time over 0"):
            simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 5.0, ttft_slo_s=bad)


def test_cli_objectives(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--slo-ttft-ms", "200",
                          "--slo-tpot-ms", "15", "--json")
    assert status == 0
    slo = json.loads(out)["simulation"]["slo"]
    assert slo["ttft_s"] == pytest.approx(0.2) and slo["tpot_s"] == pytest.approx(0.015)
    assert 0 <= slo["attained"] <= 1
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--slo-ttft-ms", "200")
    assert status == 0 and "objectives    TTFT <= 200 ms: " in out and "goodput" in out


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100",
               "--input-len", "2048", "--output-len", "256", *extra)


def test_cli_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--seed", "7",
                          "--json")
    assert status == 0
    sim = json.loads(out)["simulation"]
    assert sim["requests_per_replica"] == 300 and sim["measured"] == 270
    assert sim["seed"] == 7 and sim["arrivals"] == "poisson"
    for key in ("ttft_s", "tpot_s", "latency_s", "queue_s"):
        assert set(sim[key]) == {"mean", "p50", "p90", "p99"}
        assert sim[key]["p50"] <= sim[key]["p90"] <= sim[key]["p99"]
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300")
    assert status == 0 and "simulated: 300 requests per replica" in out and "TTFT" in out


def test_cli_prompt_spread(capsys: pytest.CaptureFixture[str]) -> None:
    """--input-len-cv reaches the simulation: the JSON's simulation says how the prompts
    were drawn, the text prints their mean, median and longest."""
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--input-len-cv", "0.7",
                          "--json")
    assert status == 0
    prompts = json.loads(out)["simulation"]["prompts"]
    assert prompts["drawn_from"] == "gamma" and prompts["input_len_cv"] == 0.7
    assert prompts["max"] > 2048 > prompts["p50"]
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--input-len-cv", "0.7")
    assert status == 0 and "prompts       spread 0.7 (sd / mean, gamma): mean " in out
    status, out, _ = _run(capsys, "--rate", "4", "--simulate", "300", "--json")
    assert json.loads(out)["simulation"]["prompts"] is None


@pytest.mark.parametrize(("extra", "message"), [
    (("--batch", "8", "--simulate", "100"), "--simulate: replays requests arriving at a rate"),
    (("--rate", "4", "--arrivals", "uniform"), "--arrivals/--seed"),
    (("--batch", "8", "--batching", "static", "--schedule", "mixed"),
     "--schedule mixed: how a continuous-batching engine"),
    (("--rate", "4", "--simulate", "100", "--schedule", "chunked"),
     "--schedule: expected one of separate, mixed"),
    (("--rate", "4", "--simulate", "5"), "--simulate: expected a number of requests"),
    (("--rate", "4", "--simulate", "100", "--arrivals", "bursts"),
     "--arrivals: expected one of poisson, uniform, trace"),
    (("--rate", "4", "--simulate", "100", "--arrivals", "trace"),
     "--arrivals trace: replays the arrival_s column of --lengths"),
    (("--rate", "4", "--simulate", "100", "--gpus", "2", "--pp", "2"), "give --pp 1"),
    (("--rate", "4", "--simulate", "100", "--prefill-gpus", "1"), "disaggregated"),
    (("--rate", "4", "--simulate", "100", "--seed", "-1"), "--seed"),
    (("--rate", "4", "--input-len-cv", "0.5"), "--arrivals/--seed/--input-len-cv/--lengths"),
    (("--rate", "4", "--slo-tpot-ms", "20"), "--lengths/--slo-*: they shape the simulation"),
    (("--rate", "4", "--simulate", "100", "--slo-ttft-ms", "0"), "--slo-ttft-ms"),
    (("--rate", "4", "--simulate", "100", "--input-len-cv", "11"), "--input-len-cv: expected"),
])
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], extra: tuple[str, ...],
                          message: str) -> None:
    status, out, err = _run(capsys, *extra)
    assert status == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_library_errors_name_the_flag() -> None:
    with pytest.raises(GpuarchError, match=r"--rate"):
        simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, float("nan"))
    with pytest.raises(GpuarchError, match=r"--seed"):
        simulate_serving(CATALOG, LLAMA_8B, H100, SERVE, 1.0, seed=True)  # type: ignore[arg-type]


def test_the_serving_advisor_prices_the_schedule_it_is_given() -> None:
    """advise infer --schedule mixed: each deployment's TTFT is estimate infer's with the
    same schedule (its option_config carries it), and no lower than the same deployment's
    with prompts in passes of their own; TPOT does not move."""
    from gpuarch.advise import load_prices
    from gpuarch.advise.infer import InferenceSearch, advise_inference, option_config

    shape = preset("llama-3.1-8b").shape
    base = InferenceSearch(input_len=1024, output_len=128, rate=4.0, max_gpus=8,
                           gpus=("h100",), top=5)
    mixed = dataclasses.replace(base, schedule="mixed")
    adv = advise_inference(CATALOG, shape, mixed, load_prices())
    assert adv.top and adv.assumptions["schedule"] == "mixed"
    for o in adv.top:
        cfg = option_config(mixed, o)
        assert cfg.schedule == "mixed"
        est = estimate_inference(CATALOG, shape, CATALOG.product(o.gpu), cfg,
                                 system=CATALOG.system_for(CATALOG.product(o.gpu)))
        assert o.ttft_ms == pytest.approx(est.ttft_s * 1e3, rel=1e-9)
        apart = estimate_inference(CATALOG, shape, CATALOG.product(o.gpu),
                                   dataclasses.replace(cfg, schedule="separate"),
                                   system=CATALOG.system_for(CATALOG.product(o.gpu)))
        assert est.ttft_s >= apart.ttft_s and est.tpot_s == apart.tpot_s
    with pytest.raises(GpuarchError, match=r"--schedule"):
        advise_inference(CATALOG, shape, dataclasses.replace(base, schedule="chunked"),
                         load_prices())
