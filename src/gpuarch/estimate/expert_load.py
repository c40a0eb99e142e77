"""How many of its experts the busiest rank of an expert-parallel group runs in one pass.

With expert parallelism every rank holds ``experts / EP`` of a layer's experts and the layer
ends when the last rank has run its share: a decode step's expert block waits for the rank
whose local experts the step's tokens touched most, not for the average rank. At a small
batch the difference is large (one token's top-8 of 256 experts over 8 ranks puts about three
on the busiest rank where the average is one); at a batch whose tokens touch nearly every
expert it vanishes. Each expert is taken as touched independently with the probability
uniform routing gives it (the share of experts a layer's tokens touch), so a rank's count
is binomial over its experts and the busiest of the ranks' counts is the largest of EP such
draws; the slight negative correlation of a token's distinct choices is left out (it makes
the ranks' counts a little more even than independent draws, so the figure errs a little
high at small batches).
"""

from __future__ import annotations

import numpy as np

from gpuarch.perf.num import Num

__all__ = ["busiest_rank_experts", "expected_experts_touched"]

_CERTAIN = 1.0 - 1e-12
"""A touch probability this close to 1 counts as every expert touched (the binomial's
recursion divides by 1 - p)."""


def expected_experts_touched(experts: int, per_token: float, tokens: Num) -> Num:
    """Expected distinct experts, of ``experts``, that ``tokens`` tokens choosing
    ``per_token`` each touch under uniform routing (each expert missed by a token with
    probability 1 - per_token / experts)."""
    return experts * (1 - (1 - per_token / experts) ** tokens)


def busiest_rank_experts(local: int, touched_share: Num, ranks: int) -> Num:
    """Expected experts touched on the busiest of ``ranks`` ranks holding ``local`` experts
    each, when each expert is touched with probability ``touched_share`` (a float or an
    array of them): the mean of the largest of ``ranks`` Binomial(local, share) counts,
    sum over m < local of 1 - F(m)^ranks. One rank: the mean, local x share."""
    if ranks <= 1 or local <= 0:
        return local * touched_share
    if isinstance(touched_share, np.ndarray):
        return _busiest_of_array(local, touched_share, ranks)
    return _busiest_of_one(local, float(touched_share), ranks)


def _busiest_of_one(local: int, share: float, ranks: int) -> float:
    p = min(max(share, 0.0), 1.0)
    if p >= _CERTAIN:
        return float(local)
    if p <= 0.0:
        return 0.0
    odds = p / (1.0 - p)
    pmf = (1.0 - p) ** local
    cdf = pmf
    total = 1.0 - cdf ** ranks
    for m in range(1, local):
        pmf *= (local - m + 1) / m * odds
        cdf = min(cdf + pmf, 1.0)
        left = 1.0 - cdf ** ranks
        if left < 1e-12:  # past the bulk: F only grows, so every later term is smaller
            break
        total += left
    return total


def _busiest_of_array(local: int, share: np.ndarray, ranks: int) -> np.ndarray:
    p = np.clip(share.astype(np.float64), 0.0, 1.0)
    safe = np.minimum(p, _CERTAIN)
    odds = safe / (1.0 - safe)
    pmf = (1.0 - safe) ** local
    cdf = pmf.copy()
    total = 1.0 - cdf ** ranks
    for m in range(1, local):
        pmf = pmf * ((local - m + 1) / m) * odds
        cdf = np.minimum(cdf + pmf, 1.0)
        total = total + (1.0 - cdf ** ranks)
    result: np.ndarray = np.where(p >= _CERTAIN, float(local), total)
    return result
