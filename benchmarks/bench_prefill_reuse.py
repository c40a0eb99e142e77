"""What reusing a costed prefill pass saves one serving estimate: the runner with its pass
cache against the same runner costing every pass afresh, interleaved in one process (round
by round, so a busy machine slows both alike), as the median ratio of their times.

    python benchmarks/bench_prefill_reuse.py [--rounds 30] [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpuarch.catalog import load_catalog
from gpuarch.estimate.inference import Batching, InferenceConfig, _Runner, estimate_inference
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.workloads import preset


def _afresh(self: _Runner, seqs: Any, q_len: int, ctx: Any, rows: Any = None,
            prefill: bool = False) -> Any:
    return self._forward(seqs, q_len, ctx, seqs if rows is None else rows, prefill)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    catalog = load_catalog()
    h100, dgx = catalog.product("h100"), catalog.system("dgx h100")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    cases: dict[str, Callable[[], object]] = {
        "serve llama-3.1-70b FP8, 2 x H100 TP2, cont.": lambda: estimate_inference(
            catalog, preset("llama-3.1-70b").shape, h100,
            InferenceConfig(input_len=2048, output_len=512, batch=64, gpus=2, tp=2,
                            quant=fp8, batching=Batching.CONTINUOUS), system=dgx),
        "serve mixtral-8x7b, 8 x H100 TP2 EP4, static": lambda: estimate_inference(
            catalog, preset("mixtral-8x7b").shape, h100,
            InferenceConfig(input_len=1024, output_len=256, batch=128, gpus=8, tp=2, ep=2),
            system=dgx),
    }
    reuse = _Runner.forward
    for label, run in cases.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for cached in (True, False):
                _Runner.forward = reuse if cached else _afresh  # type: ignore[method-assign]
                run()
                start = time.perf_counter()
                for _ in range(args.runs):
                    run()
                times[cached].append((time.perf_counter() - start) / args.runs)
        _Runner.forward = reuse  # type: ignore[method-assign]
        ratio = statistics.median(a / b for a, b in zip(times[True], times[False], strict=True))
        print(f"{label:46s} reused/afresh {ratio:.3f} (median of {args.rounds} rounds; "
              f"fastest {min(times[True]) * 1e6:.0f} us against "
              f"{min(times[False]) * 1e6:.0f} us)")


if __name__ == "__main__":
    main()
