"""Whole-job estimates: a training step or an inference request, with the reasons."""

from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.training import TrainingConfig, TrainingEstimate, estimate_training

__all__ = ["Recompute", "TrainingConfig", "TrainingEstimate", "estimate_training"]
