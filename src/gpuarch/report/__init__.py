"""Rendering of results: JSON, text tables, plots. Renders; never computes model results."""

from gpuarch.report.serialize import to_json, to_jsonable

__all__ = ["to_json", "to_jsonable"]
