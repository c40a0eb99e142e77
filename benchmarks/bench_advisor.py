"""Advisor speed: configurations evaluated per second by the array form of the training
model (issue #7 goal: at least 1,000,000 per second on this 2-core machine), and whole
default searches (training and serving).

    python benchmarks/bench_advisor.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuarch.advise import TrainingSearch, advise_training, load_prices
from gpuarch.advise.infer import InferenceSearch, advise_inference
from gpuarch.catalog import load_catalog
from gpuarch.estimate import Recompute, TrainingConfig
from gpuarch.estimate.training import evaluate_training
from gpuarch.perf import DEFAULT_EFFICIENCY, Device, Precision, link_for
from gpuarch.workloads import preset


def _timed(search: Callable[[], Any]) -> tuple[Any, float]:
    """One search's answer and its wall time in seconds."""
    start = time.perf_counter()
    answer = search()
    return answer, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    args = parser.parse_args()
    catalog = load_catalog()
    shape = preset("llama-2-70b").shape
    product = catalog.product("h100")
    system = catalog.system("dgx h100")
    device = Device.of(product, Precision.BF16, 4)
    intra, inter = link_for(product, system, None)
    rng = np.random.default_rng(0)
    n = args.n
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8], n)
    dp = 64 // (tp * pp)
    dp = np.maximum(dp, 1)
    fields: dict[str, Any] = {
        "gpus": tp * pp * dp, "seq_len": 4096, "global_batch": dp * 32,
        "micro_batch": rng.choice([1, 2, 4], n), "tp": tp, "pp": pp, "cp": np.ones(n, int),
        "ep": np.ones(n, int), "vpp": np.ones(n, int), "sequence_parallel": False, "zero": 1,
        "recompute": Recompute.SELECTIVE, "precision": Precision.BF16, "gpus_per_node": 8}
    cfg = TrainingConfig(**fields)
    evaluate_training(shape, product, device, intra, inter, cfg, DEFAULT_EFFICIENCY)
    start = time.perf_counter()
    evaluate_training(shape, product, device, intra, inter, cfg, DEFAULT_EFFICIENCY)
    per_s = n / (time.perf_counter() - start)
    print(f"array model: {per_s:,.0f} configurations/s ({n:,} Llama-2-70B layouts on 64 x "
          f"H100 in one array; goal 1,000,000/s: {'met' if per_s >= 1e6 else 'NOT met'})")
    # as the search runs it: the five ZeRO variants of those layouts in one call, the stages
    # along a first axis, the layers costed once per layout
    stages = ((0, False), (1, False), (2, False), (3, False), (3, True))
    staged = TrainingConfig(**{**fields, "zero": np.array([z for z, _ in stages])[:, None],
                               "fsdp_prefetch": np.array([p for _, p in stages])[:, None]})
    start = time.perf_counter()
    evaluate_training(shape, product, device, intra, inter, staged, DEFAULT_EFFICIENCY)
    shared = 5 * n / (time.perf_counter() - start)
    print(f"array model over the five ZeRO variants of those layouts in one call, as the "
          f"search does: {shared:,.0f} configurations/s ({shared / per_s:.2f}x)")
    adv, elapsed = _timed(lambda: advise_training(
        catalog, shape, TrainingSearch(tokens=2e12, max_gpus=64, gpus=("h100",)),
        load_prices()))
    print(f"Llama-2-70B on up to 64 x H100, every layout/ZeRO/recompute/micro-batch/SP/"
          f"precision variant: {adv.evaluated:,} configurations in {elapsed:.1f} s "
          f"(Calculon's own space for this case: 8.78 million; goal: under 10 s)")
    adv, elapsed = _timed(lambda: advise_training(
        catalog, shape, TrainingSearch(tokens=2e12, max_gpus=1024, assumed_network_gbit_s=400),
        load_prices()))
    print(f"Llama-2-70B on every datacenter GPU up to 1,024 (400 Gb/s network assumed "
          f"where none is catalogued): {adv.evaluated:,} configurations in {elapsed:.1f} s, "
          f"against Calculon's 8.78 million for its own case (goal: under 10 s: "
          f"{'met' if elapsed < 10 else 'NOT met'})")
    adv, elapsed = _timed(lambda: advise_training(
        catalog, preset("llama-3.1-8b").shape, TrainingSearch(tokens=1e12, max_gpus=1024),
        load_prices()))
    print(f"default search (llama-3.1-8b, 1T tokens, every datacenter GPU up to 1,024): "
          f"{adv.evaluated:,} configurations in {elapsed:.1f} s "
          f"({adv.evaluated / elapsed:,.0f}/s including set-up and explanations)")
    adv, elapsed = _timed(lambda: advise_training(
        catalog, preset("nemotron-3-nano-30b-a3b").shape, TrainingSearch(tokens=1e11),
        load_prices()))
    print(f"hybrid search (nemotron-3-nano-30b-a3b, 100B tokens, every datacenter GPU, its "
          f"even and interleaved pipeline splits): {adv.evaluated:,} configurations in "
          f"{elapsed:.1f} s")
    served, elapsed = _timed(lambda: advise_inference(
        catalog, preset("llama-3.1-8b").shape, InferenceSearch(input_len=2048, output_len=256),
        load_prices()))
    print(f"default serving search (llama-3.1-8b, 2048 in / 256 out, one saturated replica, "
          f"every datacenter GPU): {served.evaluated:,} configurations in {elapsed:.2f} s")
    times = []
    for disaggregated in (False, True):
        search = InferenceSearch(input_len=4096, output_len=512, rate=20.0, ttft_ms=1000,
                                 tpot_ms=50, disaggregated=disaggregated)
        served, elapsed = _timed(lambda s=search: advise_inference(  # type: ignore[misc]
            catalog, preset("llama-3.1-70b").shape, s, load_prices()))
        times.append(elapsed)
        print(f"serving search, llama-3.1-70b at 20 requests/s, 4096 in / 512 out, every "
              f"datacenter GPU{', with disaggregated deployments' if disaggregated else ''}: "
              f"{served.evaluated:,} configurations in {elapsed:.2f} s")
    print(f"disaggregated search over aggregated alone: {times[1] / times[0]:.2f}x the time")
    # caps on the 99th percentiles: the same search's ranking walked and replayed
    mean_capped = InferenceSearch(input_len=4096, output_len=512, rate=20.0, ttft_ms=1000,
                                  tpot_ms=50)
    tail_capped = InferenceSearch(input_len=4096, output_len=512, rate=20.0,
                                  ttft_p99_ms=1000, tpot_p99_ms=50)
    _, plain_s = _timed(lambda: advise_inference(
        catalog, preset("llama-3.1-70b").shape, mean_capped, load_prices()))
    tailed, tail_s = _timed(lambda: advise_inference(
        catalog, preset("llama-3.1-70b").shape, tail_capped, load_prices()))
    tail = tailed.assumptions["tail"]
    print(f"the same search with p99 caps instead of mean caps (2,000 requests a replay): "
          f"{tail['replayed']} deployments replayed, {len(tailed.top)} kept, {tail_s:.2f} s, "
          f"{tail_s / plain_s:.2f}x the mean-capped search ({plain_s:.2f} s)")


if __name__ == "__main__":
    main()
