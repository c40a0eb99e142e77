"""gpuarch: NVIDIA GPU architectures as a sourced catalog and performance models."""

__version__ = "0.1.0"

__all__ = ["__version__"]
