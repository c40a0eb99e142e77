"""Public API: explicit __all__ that resolves, and a py.typed marker."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import gpuarch

MODULES = ["gpuarch", "gpuarch.catalog", "gpuarch.report", "gpuarch.units", "gpuarch.errors",
           "gpuarch.workloads", "gpuarch.perf", "gpuarch.estimate", "gpuarch.validation",
           "gpuarch.numerics", "gpuarch.probe"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    """Every name in __all__ is defined."""
    module = importlib.import_module(name)
    assert module.__all__
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.{attr}"


def test_py_typed() -> None:
    """The package ships type information."""
    assert (Path(gpuarch.__file__).parent / "py.typed").is_file()
