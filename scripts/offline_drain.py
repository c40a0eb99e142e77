"""How much of an Offline run's steady throughput a finite run keeps when answers vary in length.

An Offline benchmark hands every sample over at once; each rank of an engine keeps ``batch``
sequences in flight and admits the next sample as one finishes, until the queue is empty.
The run then drains: the answers admitted last, some of them the longest, decode at a
shrinking batch while the step time falls only to its floor. This script simulates that for
ranks that step together (attention data parallelism: a step waits for the fullest rank),
with lognormal answer lengths of a given mean and coefficient of variation capped at a
limit, and a decode step linear in the fullest rank's batch. It prints the run's output
tokens/s over the steady state's for several run lengths (samples per rank).

Used for docs/performance-model.md, "How many samples the DeepSeek-R1 runs lasted": not
part of the model.

    python scripts/offline_drain.py                      # the DeepSeek-R1 case of the docs
    python scripts/offline_drain.py --step-floor-ms 25 --samples 2925,8776
"""

from __future__ import annotations

import argparse

import numpy as np


def answer_lengths(rng: np.random.Generator, count: int, mean: float, cv: float,
                   cap: int) -> np.ndarray:
    """Lognormal answer lengths of the given mean and spread, at least 1, at most ``cap``."""
    sigma2 = np.log1p(cv * cv)
    mu = np.log(mean) - sigma2 / 2
    draws = rng.lognormal(mu, np.sqrt(sigma2), count)
    return np.clip(draws, 1, cap).astype(np.int64)


def run_time(lengths: np.ndarray, batch: int, step_floor_s: float, step_per_seq_s: float
             ) -> float:
    """Seconds to decode every answer of ``lengths`` (ranks x samples) through ``batch``
    slots a rank, admitting in order, all ranks stepping together."""
    ranks, samples = lengths.shape
    active = [lengths[r, :batch].copy() for r in range(ranks)]
    admitted = [min(batch, samples)] * ranks
    elapsed = 0.0
    while any(len(a) for a in active):
        # advance to the next completion: the batch is constant until then
        steps = min(int(a.min()) for a in active if len(a))
        fullest = max(len(a) for a in active)
        elapsed += steps * (step_floor_s + step_per_seq_s * fullest)
        for r in range(ranks):
            left = active[r] - steps
            done = int((left <= 0).sum())
            left = left[left > 0]
            take = min(done, samples - admitted[r])
            if take > 0:
                left = np.concatenate([left, lengths[r, admitted[r]:admitted[r] + take]])
                admitted[r] += take
            active[r] = left
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mean", type=float, default=4043.0, help="mean answer length (tokens)")
    ap.add_argument("--cv", type=float, default=1.25, help="answer lengths' spread")
    ap.add_argument("--cap", type=int, default=20000, help="longest answer (tokens)")
    ap.add_argument("--batch", type=int, default=356, help="sequences in flight a rank")
    ap.add_argument("--ranks", type=int, default=8, help="ranks stepping together")
    ap.add_argument("--step-floor-ms", type=float, default=15.0,
                    help="decode step at one sequence a rank (ms)")
    ap.add_argument("--step-full-ms", type=float, default=43.5,
                    help="decode step at --batch sequences a rank (ms)")
    ap.add_argument("--samples", default="2925,5546,8776,13164,21940",
                    help="samples a rank, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    floor = args.step_floor_ms / 1e3
    per_seq = (args.step_full_ms / 1e3 - floor) / args.batch
    steady = args.batch / (args.step_full_ms / 1e3)  # tokens/s a rank with every slot full
    rng = np.random.default_rng(args.seed)
    print(f"answers: mean {args.mean:g}, cv {args.cv:g}, cap {args.cap:,}; {args.ranks} ranks "
          f"of {args.batch} slots; step {args.step_floor_ms:g} ms at 1, "
          f"{args.step_full_ms:g} ms at {args.batch}")
    print(f"{'samples/rank':>12}  {'tokens/s/rank':>13}  {'of steady':>9}")
    for samples in (int(x) for x in args.samples.split(",")):
        lengths = answer_lengths(rng, args.ranks * samples, args.mean, args.cv, args.cap)
        lengths = lengths.reshape(args.ranks, samples)
        rate = lengths.sum() / run_time(lengths, args.batch, floor, per_seq) / args.ranks
        print(f"{samples:>12,}  {rate:>13,.0f}  {rate / steady:>9.3f}")


if __name__ == "__main__":
    main()
