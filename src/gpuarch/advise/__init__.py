"""The advisor: search GPU type x count x parallelism x precision with the estimate's own
formulas over arrays, filter by constraints, rank by time, cost or energy, keep the Pareto
front and explain the choice."""

from gpuarch.advise.prices import PriceBook, load_prices
from gpuarch.advise.train import (
    Objective,
    TrainingAdvice,
    TrainingOption,
    TrainingSearch,
    advise_training,
)

__all__ = [
    "Objective",
    "PriceBook",
    "TrainingAdvice",
    "TrainingOption",
    "TrainingSearch",
    "advise_training",
    "load_prices",
]
