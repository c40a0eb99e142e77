"""How requests go through a serving replica: a static batch, the steady state of continuous
batching with its prefill passes between decode steps, and offline runs of a fixed number of
requests with their admission and drain."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from gpuarch.catalog.model import Product
from gpuarch.estimate.inference_config import (
    MAX_PREFILL_LOAD,
    STREAM_PASS_ROUNDS,
    Batching,
    InferenceConfig,
)
from gpuarch.estimate.inference_memory import memory_parts
from gpuarch.estimate.inference_passes import PhaseSeconds, ReplicaRunner, stage_lanes
from gpuarch.perf.collectives import Num
from gpuarch.perf.num import any_of, ceil, floor, maximum, minimum, where

__all__ = [
    "ANSWER_DRAWS",
    "DRAIN_POINTS",
    "InferenceCore",
    "admission_starts",
    "drain_shares",
    "evaluate_core",
    "gamma_lengths",
    "offline_run",
]


@dataclass(frozen=True)
class InferenceCore:
    """The estimate's numbers for one batch or an array of batches (same formulas)."""

    batch: Num  # sequences decoded together (requested, capped at what fits when continuous)
    ttft: Num
    tpot: Num
    latency: Num
    per_replica: Num  # output tokens/s of one replica
    queue: Num
    prefill: PhaseSeconds
    step: PhaseSeconds
    memory_total: Num
    max_batch: int
    # prompts one prefill pass holds: a continuous batch's (its TTFT's pass), else the batch
    pass_prompts: Num = 1.0

    def decode_limiter(self) -> Num:
        """What bounds decode: one name, or an array of names."""
        return self.step.limiters() if np.ndim(self.step.total) else self.step.limiter()


def evaluate_core(runner: ReplicaRunner, cfg: InferenceConfig, product: Product, max_batch: int,
              requested: Num, parts: dict[str, dict[str, float]] | None = None
              ) -> InferenceCore:
    """The model for ``requested`` sequences (a number or an array of them); with ``parts``
    (scalars only), the decode step's and the first-token prefill's seconds by kind are
    left under "decode" and "prefill"."""
    batch = requested
    stages = cfg.micro_batches
    if cfg.batching is Batching.CONTINUOUS and max_batch >= 1:
        batch = minimum(batch, max_batch)  # a serving engine admits only what fits
    if cfg.batching is Batching.CONTINUOUS and cfg.max_batch_size:
        # and no more than its cap, which bounds each micro-batch of a pipeline
        batch = minimum(batch, cfg.max_batch_size * stages)
    if cfg.batching is Batching.CONTINUOUS and cfg.num_requests:
        # an offline run of num_requests: a replica never holds more than its share, nor
        # has more than that in flight (a client's concurrency above the run's requests
        # sends them all at once and leaves nothing to queue)
        share = math.ceil(cfg.num_requests / cfg.replicas)
        batch = minimum(batch, share)
        requested = minimum(requested, share)
    mean_ctx = cfg.mean_decode_context
    runner.parts = {} if parts is not None else None
    # with pipeline stages the sequences in flight are split into one micro-batch per stage:
    # each step below is one micro-batch through every stage, and while it moves through
    # one stage the others run the other micro-batches (fewer sequences than stages leave
    # stages idle: a micro-batch holds at least one)
    lanes = stage_lanes(batch, stages)
    step = runner.decode_step(batch / lanes, mean_ctx)
    if parts is not None and runner.parts is not None:
        parts["decode"] = runner.parts
    runner.parts = None
    queue: Num = 0.0
    per_step = runner.tokens_per_step
    if cfg.batching is Batching.STATIC:
        # the prefill pass produces the first token; with pipeline stages the micro-batches'
        # passes follow each other through the stages, the last done after (micro-batches +
        # stages - 1) stage times of one micro-batch's pass
        runner.parts = {} if parts is not None else None
        pass_prompts = batch / lanes
        prefill = runner.prefill(pass_prompts)
        ttft = prefill.total * (lanes + cfg.pp - 1) / cfg.pp
        tpot = step.total / per_step
        latency = ttft + (cfg.output_len - 1) * tpot
        per_replica = batch * cfg.output_len / latency
    else:
        # every output_len / per_step steps, `batch` new prompts are prefilled between decode
        # steps (pipelined, the micro-batches' passes overlap across the stages): in passes
        # of the prompts that arrived during a step and the pass before it (a request
        # arrives every cycle / batch seconds), at least one and at most what a pass takes
        # and what is in flight; an offline run of num_requests has its prompts waiting
        # from the start and fills passes of whole budgets (estimate.simulate replays
        # both: tests/test_serving_simulation.py holds the two together)
        cycle, passes, pass_prompts = _prefill_cycle(runner, cfg, batch, lanes, step.total)
        tpot = cycle / cfg.output_len
        per_replica = batch * cfg.output_len / cycle
        if cfg.num_requests:
            per_replica = _offline_rate(runner, cfg, batch, cycle, mean_ctx, per_step,
                                        step.total)
        # a new prompt is prefilled in such a pass, after waiting for the pass in progress:
        # M/D/1 waiting time at the prefill load rho; passes start at decode-step boundaries
        runner.parts = {} if parts is not None else None
        prefill = runner.prefill(pass_prompts)
        service = prefill.total
        if cfg.schedule == "mixed":
            # mixed into the decode iteration, a prompt's pass also runs the running
            # sequences' step (none run beside a lone request), and so does the pass in
            # progress it waits for
            service = service + where(batch > 1, step.total, 0.0)
        rho = minimum(MAX_PREFILL_LOAD, passes / lanes / cycle)
        wait = rho / (2 * (1 - rho)) * service + step.total / 2
        ttft = service + wait
        latency = ttft + (cfg.output_len - 1) * tpot
        # more requests in flight than fit wait for a slot (Little's law: `batch` slots
        # each free up once per request latency)
        queue = where(requested > batch, (requested - batch) * latency / batch, 0.0)
        ttft = ttft + queue
        latency = latency + queue
    if parts is not None and runner.parts is not None:
        parts["prefill"] = runner.parts
    runner.parts = None
    memory_total = sum(memory_parts(runner.s, cfg, batch, product).values())
    return InferenceCore(batch, ttft, tpot, latency, per_replica, queue, prefill, step,
                         memory_total, max_batch, pass_prompts)


COUNT_TOLERANCE = 1e-9
"""How far above a whole number a count of prompts may come out of floating-point arithmetic
and still be that number (``_whole``)."""


def _whole(count: Num) -> Num:
    """The prompts a pass holds for ``count`` arrivals: its ceiling, but a count that is a
    whole number up to rounding stays it. At the stream's fixed point (one-token answers:
    the cycle is one step and one pass) the count is exactly batch / lanes, which NumPy's
    and Python's arithmetic can land on either side of: the array path (the advisor's) and
    a single estimate must agree."""
    return ceil(count - COUNT_TOLERANCE)


def _prefill_cycle(runner: ReplicaRunner, cfg: InferenceConfig, batch: Num, lanes: Num,
                   step_s: Num) -> tuple[Num, Num, Num]:
    """One continuous batch's answer cycle (``output_len`` tokens of decode steps and the
    prefill passes of ``batch`` new prompts), the seconds of those passes and the prompts
    one pass holds. Requests arrive every ``cycle / batch`` seconds, a pipeline's spread over
    its micro-batches (``lanes``), each admitting to its own slots, and passes start at step
    boundaries, so a stream's pass holds the prompts that arrived during the decode step and
    the pass before it (at least one, at most ``prompts_per_pass`` and ``batch``): small
    passes, each with its weight reads and fixed time, lengthen the cycle, and a longer pass
    gathers more prompts, so the pass and the cycle are found together, from whole-budget
    passes, in at most ``STREAM_PASS_ROUNDS`` rounds. An offline run of ``num_requests`` has
    every prompt waiting: answers of one length end together, in waves, and the waiting
    prompts go in whole budgets; answers of varying length (``output_len_cv``) free their
    slots one by one, and the waiting prompts go in as a stream's arrive."""
    decoding = cfg.output_len / runner.tokens_per_step * step_s
    passes = runner.prefill(batch).total
    cycle = decoding + passes / lanes
    most = minimum(batch, cfg.prompts_per_pass)
    # each micro-batch of a pipeline admits to its own slots, between its own steps
    prompts = maximum(1.0, minimum(_whole(batch / lanes / cycle * step_s), most))
    if cfg.num_requests and not cfg.output_len_cv:
        return cycle, passes, prompts
    before = prompts
    for round_ in range(STREAM_PASS_ROUNDS):
        one = runner.prefill(prompts).total
        passes = batch / prompts * one
        cycle = decoding + passes / lanes
        gathered = maximum(1.0, minimum(_whole(batch / lanes / cycle * (step_s + one)),
                                        most))
        moving = gathered != prompts
        # settled, or swinging back to the size before (the last round keeps the cycle of
        # the pass it costed)
        if not any_of(moving & (gathered != before)) or round_ == STREAM_PASS_ROUNDS - 1:
            break
        before, prompts = prompts, gathered
    return cycle, passes, prompts


def _offline_rate(runner: ReplicaRunner, cfg: InferenceConfig, batch: Num, cycle: Num,
                  mean_ctx: float, per_step: float, step_s: Num) -> Num:
    """Output tokens/s of one replica over an offline run of ``cfg.num_requests`` (shared
    evenly by the replicas): fixed-length requests move through ``batch`` slots in waves,
    each lasting a steady-state cycle, and the last wave runs only the remainder, at the
    shorter cycle of its smaller batch; the run ends with the last request. Where the engine
    admits whole prompts within its token budget, the waves start staggered
    (``_staggered_offline_rate``). With answers that vary in length and the engine's cap on
    them (``output_len_cv``, ``max_output_len``) the run ends with a drain instead
    (``_drained_offline_rate``)."""
    share = cfg.num_requests / cfg.replicas
    if cfg.drains_offline:
        return _drained_offline_rate(runner, cfg, share, batch, cycle, mean_ctx, per_step)
    if np.ndim(batch):  # several batches at once: each on its own (the staggered start)
        return np.array([_offline_rate(runner, cfg, b, c, mean_ctx, per_step, s)
                         for b, c, s in np.broadcast(batch, cycle, step_s)])
    staggered = _staggered_offline_rate(runner, cfg, int(batch), share, mean_ctx, per_step)
    if staggered is not None:
        return staggered
    full = floor(share / batch)
    rest = ceil(share - full * batch)
    tail = maximum(rest, 1)
    lanes = stage_lanes(tail, cfg.micro_batches)
    tail_cycle = cfg.output_len / per_step * runner.decode_step(tail / lanes, mean_ctx).total \
        + runner.prefill(tail).total / lanes
    total = full * cycle + where(rest > 0, tail_cycle, 0.0)
    return share * cfg.output_len / total


def admission_starts(cfg: InferenceConfig, batch: int, answer_steps: float
                     ) -> np.ndarray | None:
    """The iteration (from 0) at which each of ``batch`` slots takes its first request when
    an offline run starts with every request waiting and the engine admits whole prompts
    within its token budget after the tokens of the sequences already running: TensorRT-LLM's
    micro-batch scheduler without chunked context schedules the generation requests first,
    then context requests while the batch's tokens plus the next prompt stay within
    max_num_tokens, and stops at the first that does not fit
    (``MicroBatchScheduler::operator()``, cpp/tensorrt_llm/batch_manager/
    microBatchScheduler.cpp; the PyTorch backend binds the same scheduler). A budget of
    2,048 tokens and prompts of 1,024 so admit two prompts in the first iteration and one in
    each after. None where this rule does not fill the batch before the first answers end
    (``answer_steps`` decode steps): with chunked prefill or pipeline stages (not modelled
    this way), where a prompt no longer fits beside the running sequences (trtllm-bench
    raises the budget to the longest prompt plus the batch when chunking is off,
    tensorrt_llm/bench/benchmark/utils/general.py, so its runs never stop there), or where
    admission outlasts an answer."""
    if cfg.chunk or cfg.micro_batches > 1:
        return None
    prompt = cfg.new_prompt_tokens
    per_seq = cfg.speculative_tokens + 1  # tokens a running sequence adds to an iteration
    starts: list[int] = []
    iteration = 0
    while len(starts) < batch:
        room = cfg.max_num_tokens - len(starts) * per_seq
        admitted = min(batch - len(starts), room // prompt)
        if admitted < 1 or iteration >= answer_steps:
            return None
        starts.extend([iteration] * admitted)
        iteration += 1
    return np.asarray(starts, dtype=float)


def _staggered_offline_rate(runner: ReplicaRunner, cfg: InferenceConfig, batch: int,
                            share: float, mean_ctx: float, per_step: float) -> float | None:
    """Output tokens/s of one replica over an offline run of ``share`` fixed-length requests
    whose first ``batch`` are admitted a few prompts an iteration (``admission_starts``);
    None where that rule does not apply. Each slot keeps the stagger it started with: its
    request holds it for an answer's decode steps, the next waiting request takes it as it
    frees (one for one), and once the queue is empty the slots go idle in the order they
    started. The run is so many stretches of a constant number of sequences in flight,
    each decode step priced at that number, plus every request's prefill at the steady
    cycle's cost. Admitting everything at once (a budget that holds every prompt) gives
    back the waves of ``_offline_rate``; a stagger of F iterations adds about F decode steps
    at the small batches of the start and the end, which matters where an answer is not
    much longer than the batch's admission: a share that fits in one batch of 1,024-token
    answers admitted one prompt an iteration runs about a third longer than all at once."""
    answer = cfg.output_len / per_step
    starts = admission_starts(cfg, batch, answer)
    if starts is None:
        return None
    waves = math.ceil(share / batch)
    rounds = np.full(batch, waves - 1.0)
    rounds[: math.ceil(share - (waves - 1) * batch)] += 1.0  # the last wave's slots
    events = np.concatenate([starts, starts + rounds * answer])
    change = np.concatenate([np.ones(batch), -np.ones(batch)])
    order = np.argsort(events, kind="stable")
    held = np.cumsum(change[order])[:-1]  # sequences in flight after each event
    length = np.diff(events[order])  # decode steps until the next event
    busy = (length > 0) & (held > 0)
    steps = runner.decode_step(held[busy], mean_ctx).total
    decode = float(np.sum(length[busy] * steps))
    prefill = share / batch * float(runner.prefill(batch).total)
    return share * cfg.output_len / (decode + prefill)


DRAIN_POINTS = 48
"""Slices of the answer lengths (0 to ``max_output_len``) a drain's steps are costed in:
narrow at the start, where most sequences are still running, wider towards the cap (the
k-th slice ends at cap x (k / DRAIN_POINTS)^2)."""


ANSWER_DRAWS = 65536
"""Answers drawn (a fixed seed: the same every estimate) for the shares of a batch still
decoding as a drain goes on."""


def gamma_lengths(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    """``n`` lengths drawn from the gamma distribution of this ``mean`` and spread ``cv``
    (standard deviation over mean: shape 1 / cv^2, scale mean x cv^2), unrounded: the one
    shape every varying prompt or answer length here is drawn with."""
    shape = 1.0 / cv ** 2
    return rng.gamma(shape, mean / shape, n)


@lru_cache(maxsize=64)
def drain_shares(mean: float, cv: float, longest: int, residual: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The tokens in each of ``DRAIN_POINTS`` slices of 0 to ``longest`` and the share of a
    batch still decoding at the middle of each: answers of gamma-distributed length
    (``mean``, ``cv``; at least 1, at most ``longest``), either started together (whole
    answers, whose survival at k tokens is P(L > k)) or caught in flight when the queue
    empties (``residual``: a length-biased answer's remaining part, E[max(L - k, 0)] /
    E[L]). The tokens a sequence still generates are the sum of the slices' tokens times
    their shares."""
    answers = np.sort(np.clip(gamma_lengths(np.random.default_rng(0), mean, cv, ANSWER_DRAWS),
                              1.0, float(longest)))
    edges = longest * (np.arange(DRAIN_POINTS + 1) / DRAIN_POINTS) ** 2
    middles = (edges[1:] + edges[:-1]) / 2
    first = np.searchsorted(answers, middles, side="right")  # the first answer beyond k
    longer = ANSWER_DRAWS - first
    if residual:
        # the tokens beyond k of the answers longer than k, from the sorted answers' sums
        beyond = np.concatenate([np.cumsum(answers[::-1])[::-1], [0.0]])[first]
        shares = (beyond - middles * longer) / answers.sum()
    else:
        shares = longer / ANSWER_DRAWS
    return np.diff(edges), shares


def _drain_seconds(runner: ReplicaRunner, cfg: InferenceConfig, start: Num, mean_ctx: float,
                   per_step: float, residual: bool) -> tuple[Num, Num]:
    """Seconds for ``start`` sequences to drain (``drain_shares``: each slice of the
    answer lengths costs its steps at the decode step of the sequences still running, at
    least one, for as long as any of the ``start`` still runs in it: the chance 1 - (1 -
    s)^start that one of them outlives the slice, s its share) and the tokens they generate
    meanwhile."""
    widths, shares = drain_shares(float(cfg.output_len), float(cfg.output_len_cv),
                                  int(cfg.max_output_len), residual)
    # every slice's batch at once: (slices,) for one start, (starts, slices) for several;
    # a slice's steps run while any of the ``start`` sequences is still decoding
    running = maximum(np.multiply.outer(start, shares), 1.0)
    lanes = stage_lanes(running, cfg.micro_batches)
    steps = runner.decode_step(running / lanes, mean_ctx).total
    anyone = 1.0 - (1.0 - shares) ** np.expand_dims(start, -1)
    seconds = np.sum(widths * steps * anyone, axis=-1) / per_step
    return seconds, start * float(np.dot(widths, shares))


def _drained_offline_rate(runner: ReplicaRunner, cfg: InferenceConfig, share: float, batch: Num,
                          cycle: Num, mean_ctx: float, per_step: float) -> Num:
    """Output tokens/s of one replica over an offline run of ``share`` requests whose
    answers vary in length, at most ``cfg.max_output_len``. While requests wait, every slot
    is busy and the run goes at the steady cycle's rate. Once the last is admitted, the
    ``batch`` in flight drain, each with the rest of a length-biased answer left (the
    renewal residual), and the run lasts until the longest of them finishes (nearly the cap
    for a large batch, the expected remainder for one sequence): the drain's steps are
    costed at the batch still
    running as it thins (``_drain_seconds``), so a step whose weight reads or fixed costs do
    not shrink with the batch (a MoE layer touches every expert until few sequences are
    left) costs what it costs. A share within one batch starts together: its prefill, then
    the same drain over whole answers."""
    work = share * cfg.output_len
    drain_s, left = _drain_seconds(runner, cfg, batch, mean_ctx, per_step, residual=True)
    queued = maximum(0.0, work - left) * cycle / (batch * cfg.output_len) + drain_s
    lanes = stage_lanes(batch, cfg.micro_batches)
    alone_s, _ = _drain_seconds(runner, cfg, share, mean_ctx, per_step, residual=False)
    together = runner.prefill(batch).total / lanes + alone_s
    return work / where(share > batch, queued, together)


def offline_run(cfg: InferenceConfig, batch: int, tpot: float, throughput: float
                 ) -> dict[str, Any]:
    """An offline run's length: its requests' output over the run's rate, and how much of it
    is beyond the steady state's rate (``batch`` / ``tpot`` a replica): the part-full last
    wave of fixed-length requests ("last wave"), the same with the waves' prompts admitted a
    few an iteration ("staggered"), or the drain of varying answers ("drain")."""
    tokens = cfg.num_requests * cfg.output_len
    run_s = tokens / throughput
    steady_s = tokens / (batch / tpot * cfg.replicas)
    ends = "drain" if cfg.drains_offline else "staggered" \
        if admission_starts(cfg, batch, cfg.output_len / cfg.tokens_per_step) is not None \
        else "last wave"
    return {"requests": cfg.num_requests, "run_s": run_s,
            "beyond_steady_s": max(0.0, run_s - steady_s), "ends_with": ends}
