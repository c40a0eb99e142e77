"""Cold start of ``gpuarch show h100 --json`` and in-process catalog figures.

Prints the median wall time of a fresh interpreter running the command, the bare
interpreter's start-up for comparison, and the in-process cost of loading the catalog and of
one lookup. Goal (issue #2): cold start under 0.3 s on a 2-core machine.

The package is byte-compiled first and the fresh interpreters may read and write bytecode, as
after ``pip install`` (which compiles): with PYTHONDONTWRITEBYTECODE set and no bytecode, as
on this project's development machine, every start compiles every module it imports again
(about 0.15 s more there).

    python benchmarks/bench_cold_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gpuarch

GOAL_S = 0.3


def wall(cmd: list[str], runs: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    compileall.compile_dir(Path(gpuarch.__file__).parent, quiet=1)

    bare = wall([sys.executable, "-c", "pass"], args.runs)
    show = wall([sys.executable, "-m", "gpuarch", "show", "h100", "--json"], args.runs)

    from gpuarch.catalog import load_catalog

    reps = 20
    start = time.perf_counter()
    for _ in range(reps):
        load_catalog.cache_clear()
        catalog = load_catalog()
    load = (time.perf_counter() - start) / reps
    start = time.perf_counter()
    for _ in range(1000):
        catalog.product("h100 sxm")
    lookup = (time.perf_counter() - start) / 1000

    print(f"python -c pass (interpreter start)   {bare * 1e3:8.1f} ms")
    print(f"gpuarch show h100 --json (cold)      {show * 1e3:8.1f} ms   "
          f"goal {GOAL_S * 1e3:.0f} ms: {'met' if show < GOAL_S else 'NOT met'} "
          f"({show / GOAL_S:.2f} of goal)")
    print(f"  of which above interpreter start   {(show - bare) * 1e3:8.1f} ms")
    print(f"load_catalog() in-process            {load * 1e3:8.1f} ms  "
          f"({len(catalog.products)} products, {len(catalog.sources)} sources)")
    print(f"catalog.product('h100 sxm')          {lookup * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
