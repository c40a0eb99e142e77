"""Transformer workloads: shapes, presets, Hugging Face config import, parameter and FLOP
accounting. Knows nothing about hardware."""

from gpuarch.workloads.flops import ForwardFlops, forward_flops_per_token, training_flops_per_token
from gpuarch.workloads.params import ParamCount, count_params
from gpuarch.workloads.presets import Preset, load_presets, preset, shape_from_mapping
from gpuarch.workloads.shape import (
    FfnKind,
    MlaShape,
    NormKind,
    Position,
    QkNorm,
    TransformerShape,
)

__all__ = [
    "FfnKind",
    "ForwardFlops",
    "MlaShape",
    "NormKind",
    "ParamCount",
    "Position",
    "Preset",
    "QkNorm",
    "TransformerShape",
    "count_params",
    "forward_flops_per_token",
    "load_presets",
    "preset",
    "shape_from_mapping",
    "training_flops_per_token",
]
