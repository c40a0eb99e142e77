"""In-process speed of one training-step estimate and one serving estimate (goals, issues #3
and #4: each under 1 ms).

    python benchmarks/bench_estimate.py [--runs 1000]

Each estimate is timed in ten rounds of runs/10 calls; the median round is the figure (a
shared VM's speed swings by up to 2x within a minute), the fastest round is printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.disagg import PrefillPool, estimate_disaggregated
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.load import batch_for_rate
from gpuarch.estimate.sweep import sweep_batches
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, from_si
from gpuarch.workloads import preset

GOAL_S = 1e-3


ROUNDS = 10


def _rounds(run: Callable[[], object], runs: int) -> list[float]:
    """Seconds per call in each of ``ROUNDS`` rounds of ``runs / ROUNDS`` calls."""
    run()
    per_round = max(1, runs // ROUNDS)
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(per_round):
            run()
        times.append((time.perf_counter() - start) / per_round)
    return times


def _time(run: Callable[[], object], runs: int) -> float:
    """Median seconds per call over the rounds."""
    return statistics.median(_rounds(run, runs))


def serving_cases(catalog: Catalog) -> dict[str, Callable[[], object]]:
    """The two serving estimates timed here (bench_prefill_reuse.py times them too)."""
    h100, dgx = catalog.product("h100"), catalog.system("dgx h100")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    return {
        "serve llama-3.1-70b FP8, 2 x H100 TP2, cont.": lambda: estimate_inference(
            catalog, preset("llama-3.1-70b").shape, h100,
            InferenceConfig(input_len=2048, output_len=512, batch=64, gpus=2, tp=2,
                            quant=fp8, batching=Batching.CONTINUOUS), system=dgx),
        "serve mixtral-8x7b, 8 x H100 TP2 EP2, static": lambda: estimate_inference(
            catalog, preset("mixtral-8x7b").shape, h100,
            InferenceConfig(input_len=1024, output_len=256, batch=128, gpus=8, tp=2, ep=2),
            system=dgx),
    }


def estimate_cases(catalog: Catalog) -> dict[str, Callable[[], object]]:
    """The five single estimates timed here: three training steps (one of them with two
    step models), two serving estimates (bench_instructions.py counts their instructions)."""
    h100, dgx = catalog.product("h100"), catalog.system("dgx h100")
    return {
        "train llama-3.1-70b, 64 x H100, TP4 PP4 SP": lambda: estimate_training(
            catalog, preset("llama-3.1-70b").shape, h100,
            TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                           sequence_parallel=True, recompute=Recompute.SELECTIVE),
            system=dgx),
        "train mixtral-8x7b, 64 x H100, TP2 PP2 EP8": lambda: estimate_training(
            catalog, preset("mixtral-8x7b").shape, h100,
            TrainingConfig(gpus=64, seq_len=4096, global_batch=256, tp=2, pp=2, ep=8),
            system=dgx),
        # a dense 16-bit run with userbuffers TP overlap also prices its step with the
        # traffic hidden (assumptions.tp_overlap_16_bit): two step models in one estimate
        "the same 70B step, BF16 --tp-comm-overlap": lambda: estimate_training(
            catalog, preset("llama-3.1-70b").shape, h100,
            TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                           sequence_parallel=True, recompute=Recompute.SELECTIVE,
                           tp_comm_overlap=True),
            system=dgx),
        **serving_cases(catalog),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    catalog = load_catalog()
    h100, dgx = catalog.product("h100"), catalog.system("dgx h100")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    for label, run in estimate_cases(catalog).items():
        rounds = _rounds(run, args.runs)
        per = statistics.median(rounds)
        print(f"{label:46} {from_si(per, Unit.US):8.1f} us per estimate  "
              f"({per / GOAL_S:.2f} of the 1 ms goal; fastest round "
              f"{from_si(min(rounds), Unit.US):.1f} us)")
    # --rate: the whole batch axis evaluated at once, then the estimate at the batch found
    cfg = InferenceConfig(input_len=2048, output_len=512, gpus=2, tp=2, quant=fp8)
    shape = preset("llama-3.1-70b").shape

    def at_rate() -> object:
        load = batch_for_rate(catalog, shape, h100, cfg, 2.0, system=dgx)
        return estimate_inference(catalog, shape, h100,
                                  replace(cfg, batch=load.batch,
                                          batching=Batching.CONTINUOUS), system=dgx)

    per = _time(at_rate, max(1, args.runs // 20))
    print(f"{'serve llama-3.1-70b FP8 at 2 requests/s':46} {from_si(per, Unit.MS):8.2f} ms "
          "per estimate (a search over every batch that fits)")
    pool = PrefillPool(gpus=4, tp=2)
    decode = replace(cfg, gpus=4, tp=4)

    def disaggregated() -> object:
        return estimate_disaggregated(catalog, shape, h100, decode, pool, rate=2.0,
                                      system=dgx)

    per = _time(disaggregated, max(1, args.runs // 20))
    print(f"{'disaggregated, 4 prefill + 4 decode H100, 2 req/s':46} "
          f"{from_si(per, Unit.MS):8.2f} ms per estimate (both pools' batch axes)")

    def closed_loop() -> object:
        return estimate_disaggregated(catalog, shape, h100, decode, pool, concurrency=64,
                                      system=dgx)

    looped = _time(closed_loop, max(1, args.runs // 20))
    print(f"{'the same, a client keeping 64 requests in flight':46} "
          f"{from_si(looped, Unit.MS):8.2f} ms per estimate ({looped / per:.2f}x: the "
          "loop's bisection)")
    swept = replace(cfg, batching=Batching.CONTINUOUS)

    def batch_sweep() -> object:  # --batch sweep: 1, 2, 4, ... and the largest that fits
        return sweep_batches(catalog, shape, h100, swept, [0], system=dgx)

    points = len(batch_sweep().points)  # type: ignore[attr-defined]
    per = _time(batch_sweep, max(1, args.runs // 20))
    print(f"{'serve llama-3.1-70b FP8, --batch sweep':46} {from_si(per, Unit.MS):8.2f} ms "
          f"per sweep ({points} estimates, {from_si(per / points, Unit.US):.0f} us each)")
    from gpuarch.estimate.simulate import simulate_serving

    for schedule in ("separate", "mixed"):
        def simulated(schedule: str = schedule) -> object:  # --rate 2 --simulate 20000
            return simulate_serving(catalog, shape, h100, cfg, 2.0, requests=20_000,
                                    schedule=schedule, system=dgx)

        per = _time(simulated, 3)
        print(f"{'simulate 20,000 requests at 2/s, ' + schedule:46} "
              f"{from_si(per, Unit.MS):8.1f} ms per simulation (pass times and replay)")
    plain = per

    def spread() -> object:  # --input-len-cv 1: prompts of varying length, passes by tokens
        return simulate_serving(catalog, shape, h100, cfg, 2.0, requests=20_000,
                                schedule="mixed", system=dgx, input_len_cv=1.0)

    per = _time(spread, 3)
    print(f"{'the same, mixed, prompts spread 1 (sd / mean)':46} "
          f"{from_si(per, Unit.MS):8.1f} ms per simulation ({per / plain:.2f}x one length: "
          f"the token grid and the budget's cumulative sums)")


if __name__ == "__main__":
    main()
