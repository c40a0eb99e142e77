"""Validation of the models against published measurements (data files with citations)."""

from gpuarch.validation.training import (
    TrainingComparison,
    TrainingPoint,
    ValidationSummary,
    load_training_points,
    validate_training,
)

__all__ = [
    "TrainingComparison",
    "TrainingPoint",
    "ValidationSummary",
    "load_training_points",
    "validate_training",
]
