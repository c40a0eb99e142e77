"""Whole-job estimates: a training step or an inference request, with the reasons."""

from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.training import TrainingEstimate, estimate_training
from gpuarch.estimate.training_config import TrainingConfig

__all__ = ["Recompute", "TrainingConfig", "TrainingEstimate", "estimate_training"]
