"""In-process speed of one training-step estimate (goal, issue #3: under 1 ms).

    python benchmarks/bench_estimate.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import time

from gpuarch.catalog import load_catalog
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.workloads import preset

GOAL_S = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    catalog = load_catalog()
    cases = {
        "llama-3.1-70b, 64 x H100, TP4 PP4 SP": (
            preset("llama-3.1-70b").shape, catalog.product("h100"), catalog.system("dgx h100"),
            TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                           sequence_parallel=True, recompute=Recompute.SELECTIVE)),
        "mixtral-8x7b, 64 x H100, TP2 PP2 EP8": (
            preset("mixtral-8x7b").shape, catalog.product("h100"), catalog.system("dgx h100"),
            TrainingConfig(gpus=64, seq_len=4096, global_batch=256, tp=2, pp=2, ep=8)),
    }
    for label, (shape, gpu, system, cfg) in cases.items():
        estimate_training(catalog, shape, gpu, cfg, system=system)
        start = time.perf_counter()
        for _ in range(args.runs):
            estimate_training(catalog, shape, gpu, cfg, system=system)
        per = (time.perf_counter() - start) / args.runs
        print(f"{label:42} {per * 1e6:8.1f} us per estimate  ({per / GOAL_S:.2f} of the 1 ms goal)")


if __name__ == "__main__":
    main()
