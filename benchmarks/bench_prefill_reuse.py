"""What reusing a costed prefill pass saves one serving estimate: the runner with its pass
cache against the same runner costing every pass afresh, interleaved in one process (round
by round, so a busy machine slows both alike), as the median ratio of their times.

    python benchmarks/bench_prefill_reuse.py [--rounds 30] [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench_estimate import serving_cases
from gpuarch.catalog import load_catalog
from gpuarch.estimate.inference_passes import ReplicaRunner
from gpuarch.units import Unit, from_si


def _afresh(self: ReplicaRunner, seqs: Any, q_len: int, ctx: Any, rows: Any = None,
            prefill: bool = False) -> Any:
    return self._forward(seqs, q_len, ctx, seqs if rows is None else rows, prefill)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    cases = serving_cases(load_catalog())
    reuse = ReplicaRunner.forward
    for label, run in cases.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for cached in (True, False):
                ReplicaRunner.forward = reuse if cached else _afresh  # type: ignore[method-assign]
                run()
                start = time.perf_counter()
                for _ in range(args.runs):
                    run()
                times[cached].append((time.perf_counter() - start) / args.runs)
        ReplicaRunner.forward = reuse  # type: ignore[method-assign]
        ratio = statistics.median(a / b for a, b in zip(times[True], times[False], strict=True))
        print(f"{label:46s} reused/afresh {ratio:.3f} (median of {args.rounds} rounds; "
              f"fastest {from_si(min(times[True]), Unit.US):.0f} us against "
              f"{from_si(min(times[False]), Unit.US):.0f} us)")


if __name__ == "__main__":
    main()
