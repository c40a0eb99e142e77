"""Machine instructions per estimate, counted by valgrind's callgrind: a figure that does not
swing with a shared machine's load the way wall-clock time does (on this project's 2-core
VM the same code's median time per estimate varies by up to 2x from one hour to the next),
so it compares two versions of the code reliably.

    python benchmarks/bench_instructions.py [--calls 20]

Each of bench_estimate.py's five single estimates runs in its own Python under callgrind,
once warmed up and then ``--calls`` times more; the difference against a run with the warm
up only, over ``--calls``, is the count per estimate (imports and catalog loading cancel).
PYTHONHASHSEED is fixed so that both runs hash alike, NumPy's BLAS runs one thread (its
waiting threads spin), and the cyclic garbage collector is
off while the estimates run (a collection costs as much as many estimates and would fall in
one run and not the other). About three minutes on two cores;
prints a note and does nothing where valgrind is not installed.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from bench_estimate import estimate_cases
from gpuarch.catalog import load_catalog

COLLECTED = re.compile(r"Collected : (\d+)")


def _child(case: int, calls: int) -> None:
    """Run one case once to warm up, then ``calls`` more times."""
    run = list(estimate_cases(load_catalog()).values())[case]
    run()
    # a cyclic collection over the loaded catalog costs as much as many estimates and falls
    # in one run and not the other: the count leaves the collector out
    gc.collect()
    gc.disable()
    for _ in range(calls):
        run()


def _instructions(case: int, calls: int) -> int:
    """Instructions callgrind counts for a child running ``case`` ``calls`` times."""
    # one BLAS thread: NumPy's pool spins while it waits, for as many instructions as the
    # scheduler happens to give it
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", str(case), "--calls", str(calls)],
        capture_output=True, text=True, env=env, check=True)
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, args.calls)
        return
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: no instruction counts (apt install valgrind)")
        return
    labels = list(estimate_cases(load_catalog()))
    jobs = [(case, calls) for case in range(len(labels)) for calls in (0, args.calls)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _instructions(*job), jobs), strict=True))
    for case, label in enumerate(labels):
        per = (counts[(case, args.calls)] - counts[(case, 0)]) / args.calls
        print(f"{label:46} {per / 1e6:6.2f} million instructions per estimate")


if __name__ == "__main__":
    main()
